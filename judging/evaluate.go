package judging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"rulevalidator/engine"
	"rulevalidator/request"
	"rulevalidator/schemas"
)

// This file is the one road from a decoded request into the engine, taken by the service
// (Judge), validate and eval alike: the engine's task is built from the request here, once,
// and the engine is asked with it (the ruleset given inline is parsed by
// request.InlineRuleset, for the API as well).

// Evaluate judges req against rs: the engine's inputs built from the request (its documents
// already read, see schemas.Request.ResolveDocuments), its options applied (the model, the
// verdict cache), under its tenant and id, with the facts its filters and checks read
// (RequestFacts; mediaTypes are those of the documents read from files, by name, nil when
// none was). Errors are EngineInputs' and the engine's.
func Evaluate(ctx context.Context, eng Evaluator, rs *engine.Ruleset, req *schemas.Request, mediaTypes map[string]string) (*engine.Result, error) {
	task, err := newTask(req, rs, mediaTypes)
	if err != nil {
		return nil, err
	}
	return eng.Evaluate(ctx, task)
}

// Recheck asks eng's verify check again of verdicts judged before on req against rs
// (engine.Engine.Recheck), the task built as Evaluate builds it.
func Recheck(ctx context.Context, eng *engine.Engine, rs *engine.Ruleset, req *schemas.Request, verdicts []engine.Verdict) (*engine.Result, error) {
	task, err := newTask(req, rs, nil)
	if err != nil {
		return nil, err
	}
	return eng.Recheck(ctx, task, verdicts)
}

// newTask is what the engine is asked to judge of req against rs (see Evaluate); its inputs
// are what was judged, kept beside the result (Events.Material).
func newTask(req *schemas.Request, rs *engine.Ruleset, mediaTypes map[string]string) (engine.Task, error) {
	in, err := EngineInputs(req)
	if err != nil {
		return engine.Task{}, err
	}
	task := engine.Task{Ruleset: rs, Inputs: in, Tenant: req.TenantID, RequestID: req.RequestID,
		Facts: RequestFacts(req, mediaTypes)}
	if req.Options.Model != nil {
		task.Model = *req.Options.Model
	}
	task.NoCache = req.Options.Cache != nil && !*req.Options.Cache
	return task, nil
}

// CheckRequest makes the checks Evaluate would make of a request's content before any
// document is read or the model asked: its inline ruleset parses and its inputs are
// well formed (a document still to be fetched or read is not a problem here). For a
// client that wants to refuse a request before sending it.
func CheckRequest(req *schemas.Request) error {
	_, rerr := request.InlineRuleset(req)
	_, ierr := EngineInputs(req)
	if errors.Is(ierr, schemas.ErrUnresolvedURI) {
		ierr = nil
	}
	return errors.Join(rerr, ierr)
}

// EngineInputs builds the engine's inputs from the decoded request, field by field, and
// applies the engine's own checks (engine.Inputs.Validate). A document without a name takes
// the name the JSON form gives it (primary_doc_N, auxiliary_doc_N). A document with a uri and
// neither content nor pages gives an error wrapping schemas.ErrUnresolvedURI, and so does one
// given as a file (data): read it first (Request.ResolveDocuments). Other problems wrap
// engine.ErrInvalidInput.
func EngineInputs(r *schemas.Request) (*engine.Inputs, error) {
	in := &engine.Inputs{}
	for _, group := range []struct {
		field, defaultName string
		docs               []schemas.Document
		into               *[]engine.Document
	}{
		{"primary_docs", "primary_doc", r.PrimaryDocs, &in.PrimaryDocs},
		{"auxiliary_docs", "auxiliary_doc", r.AuxiliaryDocs, &in.AuxiliaryDocs},
	} {
		for i, d := range group.docs {
			where := schemas.DocField(group.field, i, d.Name)
			doc := engine.Document{Name: d.Name}
			if strings.TrimSpace(doc.Name) == "" {
				doc.Name = fmt.Sprintf("%s_%d", group.defaultName, i+1)
			}
			switch {
			case d.Content != nil && d.Pages != nil:
				return nil, &engine.InputError{Field: where, Problem: "both content and pages given; give one"}
			case d.Content != nil:
				doc.Pages = strings.Split(*d.Content, "\f")
			case d.Pages != nil:
				doc.Pages = d.Pages
			case d.URI != nil:
				return nil, fmt.Errorf("%s: %w: %s has not been fetched", where, schemas.ErrUnresolvedURI, *d.URI)
			case d.Data != nil:
				return nil, fmt.Errorf("%s: %w: its file (%d bytes) has not been read", where, schemas.ErrUnresolvedURI, len(d.Data))
			default:
				return nil, &engine.InputError{Field: where, Problem: "no content, pages, data or uri given"}
			}
			*group.into = append(*group.into, doc)
		}
	}
	if r.TextInput != nil {
		in.TextInput = *r.TextInput
	}
	if r.Message != nil {
		in.Message = *r.Message
	}
	for i, n := range r.NamedInputs {
		value, err := decodeJSONValue(n.ValueJSON)
		if err != nil {
			return nil, &engine.InputError{Field: schemas.DocField("named_inputs", i, n.Name) + ".value_json", Problem: err.Error()}
		}
		named := engine.NamedInput{Name: n.Name, Value: value}
		if n.Description != nil {
			named.Description = *n.Description
		}
		in.NamedInputs = append(in.NamedInputs, named)
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	return in, nil
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
