package pipeline

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"rulevalidator/engine"
	"rulevalidator/internal/clone"
	"rulevalidator/schemas"
)

// This file is where the engine's side meets the contracts: a request's inputs for the
// engine and the engine's result as events. The failure table is failures.go.

// EngineInputs converts the request's inputs for the engine, which applies its own checks
// (engine.InputsFromMap). A document with a uri and neither content nor pages gives an error
// wrapping schemas.ErrUnresolvedURI, and so does one given as a file (data): read it first
// (Request.ResolveDocuments). Other problems
// wrap engine.ErrInvalidInput.
func EngineInputs(r *schemas.Request) (*engine.Inputs, error) {
	m := map[string]any{}
	for _, group := range []struct {
		field string
		docs  []schemas.Document
	}{{"primary_docs", r.PrimaryDocs}, {"auxiliary_docs", r.AuxiliaryDocs}} {
		if len(group.docs) == 0 {
			continue
		}
		docs := make([]any, len(group.docs))
		for i, d := range group.docs {
			where := docField(group.field, i, d.Name)
			doc := map[string]any{"name": d.Name}
			switch {
			case d.Content != nil && d.Pages != nil:
				return nil, &engine.InputError{Field: where, Problem: "both content and pages given; give one"}
			case d.Content != nil:
				doc["content"] = *d.Content
			case d.Pages != nil:
				doc["pages"] = d.Pages
			case d.URI != nil:
				return nil, fmt.Errorf("%s: %w: %s has not been fetched", where, schemas.ErrUnresolvedURI, *d.URI)
			case d.Data != nil:
				return nil, fmt.Errorf("%s: %w: its file (%d bytes) has not been read", where, schemas.ErrUnresolvedURI, len(d.Data))
			default:
				return nil, &engine.InputError{Field: where, Problem: "no content, pages, data or uri given"}
			}
			docs[i] = doc
		}
		m[group.field] = docs
	}
	if r.TextInput != nil {
		m["text_input"] = *r.TextInput
	}
	if r.Message != nil {
		m["message"] = *r.Message
	}
	if len(r.NamedInputs) > 0 {
		inputs := make([]any, len(r.NamedInputs))
		for i, in := range r.NamedInputs {
			value, err := decodeJSONValue(in.ValueJSON)
			if err != nil {
				return nil, &engine.InputError{Field: docField("named_inputs", i, in.Name) + ".value_json", Problem: err.Error()}
			}
			item := map[string]any{"name": in.Name, "value": value}
			if in.Description != nil {
				item["description"] = *in.Description
			}
			inputs[i] = item
		}
		m["named_inputs"] = inputs
	}
	return engine.InputsFromMap(m)
}

// RequestFacts are what the ruleset's filters and checks read of req besides
// its inputs: its tenant, its documents' media types (read, as sniffed when
// a file was read, by document name; else as given; inline text is
// text/plain) and the options it set.
func RequestFacts(req *schemas.Request, read map[string]string) engine.RequestFacts {
	f := engine.RequestFacts{Tenant: req.TenantID, MediaTypes: map[string]string{}, Options: map[string]any{}}
	for _, docs := range [][]schemas.Document{req.PrimaryDocs, req.AuxiliaryDocs} {
		for _, d := range docs {
			switch {
			case read[d.Name] != "":
				f.MediaTypes[d.Name] = read[d.Name]
			case d.ContentType != nil:
				f.MediaTypes[d.Name] = *d.ContentType
			case d.Content != nil || (d.Pages != nil && d.URI == nil):
				f.MediaTypes[d.Name] = "text/plain"
			}
		}
	}
	o := req.Options
	if o.GenerateReport != nil {
		f.Options["generate_report"] = *o.GenerateReport
	}
	if o.Model != nil {
		f.Options["model"] = *o.Model
	}
	if o.Cache != nil {
		f.Options["cache"] = *o.Cache
	}
	if o.CallbackURL != nil {
		f.Options["callback_url"] = *o.CallbackURL
	}
	return f
}

// docField names an array element for error messages: primary_docs[1] ("a.pdf").
func docField(field string, i int, name string) string {
	if name == "" {
		return fmt.Sprintf("%s[%d]", field, i)
	}
	return fmt.Sprintf("%s[%d] (%q)", field, i, name)
}

// decodeJSONValue reads one JSON value, keeping numbers exact as the engine does.
func decodeJSONValue(text string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("not valid JSON: data after the value at byte offset %d", dec.InputOffset())
	}
	return v, nil
}

// NewVerdictEvents builds one event per verdict of res, in res's order. rs gives each rule's
// position, display name and allowed scores; it may be nil, in which case positions follow
// res. model falls back to res.Model. Times are kept to the millisecond, in UTC, as the
// events carry them.
func NewVerdictEvents(req *schemas.Request, rs *engine.Ruleset, res *engine.Result, model string, started, completed time.Time) []schemas.VerdictEvent {
	rulesetID, rulesetVersion := rulesetIdentity(rs, res)
	if model == "" {
		model = res.Model
	}
	count := len(res.Rules)
	position := map[string]int{}
	var rules []engine.Rule
	if rs != nil {
		rules = rs.AllRules()
		count = len(rules)
		for i, rule := range rules {
			position[rule.RuleID] = i
		}
	}
	events := make([]schemas.VerdictEvent, 0, len(res.Rules))
	for i, v := range res.Rules {
		ev := schemas.VerdictEvent{
			EventID:         schemas.VerdictEventID(req.TenantID, req.RequestID, v.RuleID),
			RequestID:       req.RequestID,
			TenantID:        req.TenantID,
			RulesetID:       rulesetID,
			RulesetVersion:  rulesetVersion,
			Model:           model,
			RuleID:          v.RuleID,
			RuleType:        v.Type,
			DataSufficiency: v.DataSufficiency,
			Rationale:       v.Rationale,
			BooleanOutput:   clone.Ptr(v.BooleanOutput),
			NumericalOutput: clone.Ptr(v.NumericalOutput),
			NotApplicable:   v.NotApplicable,
			Problems:        clone.OrNil(v.Problems),
			Evidences:       evidences(v.Evidences),
			PagesConsidered: pagesConsidered(v.PagesConsidered),
			StartedAt:       schemas.EventTime(started),
			CompletedAt:     schemas.EventTime(completed),
			RuleIndex:       i,
			RuleCount:       count,
			Confidence:      clone.Ptr(v.Confidence),
			NeedsReview:     v.NeedsReview,
		}
		for _, r := range v.ReviewReasons {
			ev.ReviewReasons = append(ev.ReviewReasons, string(r))
		}
		if c := v.Cached; c != nil {
			ev.Cached = &schemas.CachedFrom{JudgedAt: schemas.EventTime(c.JudgedAt), RequestID: c.RequestID}
		}
		name := v.Name
		if idx, ok := position[v.RuleID]; ok {
			rule := rules[idx]
			ev.RuleIndex = idx
			ev.AllowedScores = clone.OrNil(rule.AllowedScores())
			weight := rule.WeightOrDefault()
			ev.RuleWeight = &weight
			if name == "" {
				name = rule.Name
			}
			if ev.RuleType == "" {
				ev.RuleType = rule.Type
			}
		}
		if name != "" {
			ev.RuleName = &name
		}
		if v.SufficiencyNote != "" {
			note := v.SufficiencyNote
			ev.SufficiencyNote = &note
		}
		events = append(events, ev)
	}
	return events
}

// NewSummary builds the summary of a judged request. rs may be nil; model falls back to
// res.Model; report is nil when no report was written.
func NewSummary(req *schemas.Request, rs *engine.Ruleset, res *engine.Result, model string, report *schemas.ReportDescriptor, started, completed time.Time) schemas.SummaryEvent {
	rulesetID, rulesetVersion := rulesetIdentity(rs, res)
	if model == "" {
		model = res.Model
	}
	return schemas.SummaryEvent{
		EventID:        schemas.SummaryEventID(req.TenantID, req.RequestID),
		RequestID:      req.RequestID,
		TenantID:       req.TenantID,
		RulesetID:      rulesetID,
		RulesetVersion: rulesetVersion,
		Model:          model,
		Status:         schemas.StatusCompleted,
		Counts:         schemas.Counts(engine.CountVerdicts(res.Rules)),
		Aggregate:      aggregate(res.Aggregate),
		Groups:         groups(res.Groups),
		Sources:        clone.OrNil(res.Sources),
		Usage:          res.Usage,
		Report:         clone.Ptr(report),
		StartedAt:      schemas.EventTime(started),
		CompletedAt:    schemas.EventTime(completed),
	}
}

func rulesetIdentity(rs *engine.Ruleset, res *engine.Result) (id string, version *string) {
	id, v := res.RulesetID, res.RulesetVersion
	if rs != nil {
		if id == "" {
			id = rs.ID
		}
		if v == "" {
			v = rs.Version
		}
	}
	if v == "" {
		return id, nil
	}
	return id, &v
}

// evidences copies a verdict's evidence for its event, sharing no memory
// with the result; nil when there is none, as decoding gives.
func evidences(in []engine.Evidence) []schemas.Evidence {
	out := clone.OrNil(in)
	for i := range out {
		e := &out[i]
		e.StartOffset, e.EndOffset, e.Differences = clone.Ptr(e.StartOffset), clone.Ptr(e.EndOffset), clone.OrNil(e.Differences)
	}
	return out
}

// pagesConsidered copies the pages a split request judged a rule on; nil when
// it saw every page, as decoding gives.
func pagesConsidered(in []engine.DocumentPages) []schemas.DocumentPages {
	out := clone.OrNil(in)
	for i := range out {
		out[i].Pages = clone.OrNil(out[i].Pages)
	}
	return out
}

// groups copies the nested rulesets' results for the summary, sharing no
// memory with the result; nil when there are none.
func groups(in []engine.GroupResult) []schemas.GroupResult {
	out := clone.OrNil(in)
	for i := range out {
		g := &out[i]
		g.GatedBy, g.RuleIDs, g.Aggregate = clone.OrNil(g.GatedBy), clone.OrNil(g.RuleIDs), aggregate(g.Aggregate)
	}
	return out
}

func aggregate(a engine.Aggregate) schemas.Aggregate {
	out := schemas.Aggregate{Boolean: clone.Ptr(a.Boolean), Numerical: clone.Ptr(a.Numerical)}
	if out.Numerical != nil {
		out.Numerical.Score = clone.Ptr(out.Numerical.Score)
	}
	return out
}
