package judging

import (
	"context"
	"time"

	"rulevalidator/engine"
	"rulevalidator/internal/clone"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// This file is where the engine's result meets the contracts: the result as events. The
// request's way into the engine is evaluate.go; the failure table is failures.go.

// Events is what judging one request produced: its verdict events (none
// when it failed) and its summary.
type Events struct {
	Verdicts []schemas.VerdictEvent
	Summary  schemas.SummaryEvent
	// Material is what was judged, the documents' text as read, and Ruleset
	// the ruleset it was judged on, for the result store to keep beside the
	// result (reviewers cite the material's passages; reviewed validations
	// become evaluation cases); nil for a request that failed. Serve drops
	// them once the result is stored, so results kept for redeliveries hold
	// no document text.
	Material *engine.Inputs
	Ruleset  *engine.Ruleset
	// Files are the PDF files that were read, as they came, for the pages
	// a reviewer is shown (rendered as a reader sees them); dropped with
	// Material.
	Files []File
}

// File is a document file as it came in a request.
type File struct {
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	Data      []byte `json:"data"`
}

// EventOutcome is engine.VerdictOutcome of a verdict event.
func EventOutcome(v schemas.VerdictEvent) engine.Outcome {
	return engine.VerdictOutcome(v.RuleType, v.NotApplicable, v.BooleanOutput, v.NumericalOutput)
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
			ev.Cached = &verdict.CachedFrom{JudgedAt: schemas.EventTime(c.JudgedAt), RequestID: c.RequestID}
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
func evidences(in []verdict.Evidence) []verdict.Evidence {
	out := clone.OrNil(in)
	for i := range out {
		e := &out[i]
		e.StartOffset, e.EndOffset, e.Differences = clone.Ptr(e.StartOffset), clone.Ptr(e.EndOffset), clone.OrNil(e.Differences)
	}
	return out
}

// pagesConsidered copies the pages a split request judged a rule on; nil when
// it saw every page, as decoding gives.
func pagesConsidered(in []verdict.DocumentPages) []verdict.DocumentPages {
	out := clone.OrNil(in)
	for i := range out {
		out[i].Pages = clone.OrNil(out[i].Pages)
	}
	return out
}

// groups copies the nested rulesets' results for the summary, sharing no
// memory with the result; nil when there are none.
func groups(in []verdict.GroupResult) []verdict.GroupResult {
	out := clone.OrNil(in)
	for i := range out {
		g := &out[i]
		g.GatedBy, g.RuleIDs, g.Aggregate = clone.OrNil(g.GatedBy), clone.OrNil(g.RuleIDs), aggregate(g.Aggregate)
	}
	return out
}

func aggregate(a verdict.Aggregate) verdict.Aggregate {
	out := verdict.Aggregate{Boolean: clone.Ptr(a.Boolean), Numerical: clone.Ptr(a.Numerical)}
	if out.Numerical != nil {
		out.Numerical.Score = clone.Ptr(out.Numerical.Score)
	}
	return out
}

// ResultStore keeps the final result of a request where job status is read
// (a *jobs.ObjectStore). Storing is idempotent: the same request may be
// stored again after a redelivery.
type ResultStore interface {
	StoreResult(ctx context.Context, req *schemas.Request, out Events) error
}
