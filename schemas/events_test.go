package schemas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
)

func TestRequestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Request)
		want []string
	}{
		{"valid", func(*Request) {}, nil},
		{"empty ids", func(r *Request) { r.RequestID, r.TenantID = "", "" }, []string{"request_id is empty", "tenant_id is empty"}},
		{"both rulesets", func(r *Request) { r.InlineRuleset = new("{}") }, []string{"both ruleset_ref and inline_ruleset are set; set exactly one"}},
		{"no ruleset", func(r *Request) { r.RulesetRef = nil }, []string{"neither ruleset_ref nor inline_ruleset is set; set exactly one"}},
		{"empty ruleset id", func(r *Request) { r.RulesetRef.ID = "" }, []string{"ruleset_ref.id is empty"}},
		{"content and pages", func(r *Request) { r.PrimaryDocs[0].Content = new("x") }, []string{`primary_docs[0] ("agreement.pdf"): both content and pages given; give one`}},
		{"nothing to read", func(r *Request) { r.AuxiliaryDocs[0].Content, r.AuxiliaryDocs[0].ContentType = nil, nil }, []string{`auxiliary_docs[0] ("policy.md"): no content, pages or uri given`}},
		{"unnamed doc", func(r *Request) { r.PrimaryDocs[1].Name = "" }, []string{"primary_docs[1]: name is empty"}},
		{"bad named input", func(r *Request) { r.NamedInputs[1] = NamedInput{ValueJSON: "{"} }, []string{"named_inputs[1]: name is empty", "named_inputs[1]: value_json is not valid JSON"}},
		{"no submitted_at", func(r *Request) { r.SubmittedAt = time.Time{} }, []string{"submitted_at is not set"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fullRequest()
			tc.edit(r)
			err := r.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var re *RequestError
			if !errors.As(err, &re) || !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("got %v, want a *RequestError", err)
			}
			assertEqual(t, re.Problems, tc.want)
			if !strings.HasPrefix(err.Error(), "invalid request") {
				t.Errorf("message %q", err)
			}
		})
	}
}

func TestRequestJSONSample(t *testing.T) {
	data, err := os.ReadFile("testdata/request.json")
	if err != nil {
		t.Fatal(err)
	}
	req, err := RequestFromJSON(data)
	if err != nil {
		t.Fatalf("RequestFromJSON: %v", err)
	}
	if req.RequestID != "req-2025-03-01-0001" || req.RulesetRef == nil || *req.RulesetRef.Version != "3" {
		t.Errorf("ids or ruleset_ref read wrong: %+v", req)
	}
	if got := req.PrimaryDocs[1]; *got.URI != "s3://rulevalidator-inbox/acme/2025/03/01/insurance-certificate.pdf" || got.Pages != nil || got.Content != nil {
		t.Errorf("claim-check document read wrong: %+v", got)
	}
	assertEqual(t, []string{req.NamedInputs[0].ValueJSON, req.NamedInputs[1].ValueJSON},
		[]string{"250000", `[{"email":"vertrieb@mueller-soehne.example","role":"sales"}]`})
	if want := time.Date(2025, 3, 1, 9, 30, 0, 250_000_000, time.UTC); !req.SubmittedAt.Equal(want) {
		t.Errorf("submitted_at %v, want %v", req.SubmittedAt, want)
	}

	// JSON form → Request → JSON form → Request, and through Avro.
	again, err := req.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := RequestFromJSON(again)
	if err != nil {
		t.Fatalf("reading JSON() output: %v", err)
	}
	assertEqual(t, back, req)
	c := newTestCodecs(t)
	body, err := c.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := c.Unmarshal(RequestSchema, body)
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, decoded, req)
}

func TestRequestJSONRoundTrip(t *testing.T) {
	for _, tc := range sampleEvents() {
		req, ok := tc.ev.(*Request)
		if !ok {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			data, err := req.JSON()
			if err != nil {
				t.Fatal(err)
			}
			got, err := RequestFromJSON(data)
			if err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			assertEqual(t, got, req)
		})
	}
}

func TestRequestJSONInlineRuleset(t *testing.T) {
	const object = `{"rules":[{"rule_id":"r1","rule_text":"Signed?"}]}`
	for _, tc := range []struct {
		name, inline, want string
	}{
		{"object", "{\n  \"rules\": [{\"rule_id\": \"r1\", \"rule_text\": \"Signed?\"}]\n}", object},
		{"string holding an object", fmt.Sprintf("%q", object), object},
		{"string holding anything", `"rules: yaml?"`, "rules: yaml?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := RequestFromJSON([]byte(`{"request_id":"r","tenant_id":"t","inline_ruleset":` + tc.inline + `}`))
			if err != nil {
				t.Fatal(err)
			}
			if req.InlineRuleset == nil || *req.InlineRuleset != tc.want {
				t.Fatalf("inline_ruleset read as %v, want %q", req.InlineRuleset, tc.want)
			}
			out, err := req.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var shape map[string]json.RawMessage
			if err := json.Unmarshal(out, &shape); err != nil {
				t.Fatal(err)
			}
			wantFirst := byte('{')
			if !strings.HasPrefix(tc.want, "{") {
				wantFirst = '"'
			}
			if got := shape["inline_ruleset"]; len(got) == 0 || got[0] != wantFirst {
				t.Errorf("JSON() wrote inline_ruleset as %s", got)
			}
		})
	}
}

func TestRequestJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		name, json, want string
	}{
		{"not an object", `[1]`, "not a request in JSON form"},
		{"unknown field next to named_inputs", `{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"x"},"named_inputs":[],"primary_doc":[]}`, `primary_doc: unknown field: with named_inputs given`},
		{"unknown option", `{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"x"},"options":{"generate_reprot":true}}`, `options: unknown field "generate_reprot" (known: generate_report, model, callback_url)`},
		{"unknown ruleset_ref field", `{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"x","versoin":"1"}}`, `ruleset_ref: unknown field "versoin"`},
		{"request_id not a string", `{"request_id":7,"tenant_id":"t","ruleset_ref":{"id":"x"}}`, `request_id: must be a string (got a number)`},
		{"trailing data", `{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"x"}} {}`, "unexpected data after the document"},
		{"inline ruleset array", `{"request_id":"r","tenant_id":"t","inline_ruleset":[1]}`, "inline_ruleset: must be a JSON object or a string holding one (got an array)"},
		{"named input without value", `{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"x"},"named_inputs":[{"name":"n"}]}`, `named_inputs[0].value: missing (use null for no value)`},
		{"bad time", `{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"x"},"submitted_at":"yesterday"}`, `submitted_at: want an RFC 3339 timestamp, got "yesterday"`},
		{"both rulesets", `{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"x"},"inline_ruleset":{}}`, "both ruleset_ref and inline_ruleset are set"},
		{"doc with content and pages", `{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"x"},"primary_docs":[{"name":"a","content":"x","pages":["y"]}]}`, `primary_docs[0]: ambiguous: the document's text is given as both pages and content`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RequestFromJSON([]byte(tc.json))
			if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an invalid request error containing %q", err, tc.want)
			}
		})
	}
}

// TestRequestJSONWithoutSubmittedAt: the JSON form may leave submitted_at
// for the caller to stamp; encoding refuses a request that still lacks it.
func TestRequestJSONWithoutSubmittedAt(t *testing.T) {
	req, err := RequestFromJSON([]byte(`{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCodecs(t)
	if _, err := c.Marshal(req); !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "submitted_at is not set") {
		t.Fatalf("Marshal without submitted_at: %v", err)
	}
	req.SubmittedAt = t0
	if _, err := c.Marshal(req); err != nil {
		t.Fatal(err)
	}
}

func TestRequestEngineInputs(t *testing.T) {
	req := fullRequest()
	req.PrimaryDocs = req.PrimaryDocs[:1]
	in, err := req.EngineInputs()
	if err != nil {
		t.Fatalf("EngineInputs: %v", err)
	}
	assertEqual(t, in.PrimaryDocs, []engine.Document{{Name: "agreement.pdf", Pages: []string{"page one", unicodeText}}})
	assertEqual(t, in.AuxiliaryDocs, []engine.Document{{Name: "policy.md", Pages: []string{"first", "second"}}})
	if in.TextInput != unicodeText || in.Message != "Flag blockers." {
		t.Errorf("text_input %q, message %q", in.TextInput, in.Message)
	}
	if len(in.NamedInputs) != 2 {
		t.Fatalf("named inputs: %+v", in.NamedInputs)
	}
	// Numbers stay exact, as the engine reads JSON.
	if v, ok := in.NamedInputs[0].Value.(json.Number); !ok || v.String() != "12345678901234567890" {
		t.Errorf("volume is %#v", in.NamedInputs[0].Value)
	}
	if in.NamedInputs[0].Description != "yearly volume" {
		t.Errorf("description %q", in.NamedInputs[0].Description)
	}
}

func TestRequestEngineInputsErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*Request)
		target error
		want   string
	}{
		{"unresolved uri", func(*Request) {}, ErrUnresolvedURI, `primary_docs[1] ("scan.pdf"): document uri not resolved: s3://inbox/acme/scan.pdf has not been fetched`},
		{"content and pages", func(r *Request) { r.PrimaryDocs[1].Content, r.PrimaryDocs[1].Pages = new("a"), []string{"b"} }, engine.ErrInvalidInput, `primary_docs[1] ("scan.pdf"): both content and pages given`},
		{"engine checks apply", func(r *Request) { r.PrimaryDocs[1] = Document{Name: "policy.md", Content: new("dup")} }, engine.ErrInvalidInput, `duplicate document name "policy.md"`},
		{"bad value", func(r *Request) { r.PrimaryDocs = r.PrimaryDocs[:1]; r.NamedInputs[0].ValueJSON = "1 2" }, engine.ErrInvalidInput, `named_inputs[0] ("volume").value_json: not valid JSON: data after the value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fullRequest()
			tc.edit(r)
			_, err := r.EngineInputs()
			if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %v containing %q", err, tc.target, tc.want)
			}
		})
	}
}

func TestRequestResolveURIs(t *testing.T) {
	req := fullRequest()
	var fetched []string
	err := req.ResolveURIs(context.Background(), func(_ context.Context, d Document) ([]string, error) {
		fetched = append(fetched, *d.URI)
		return []string{"Insured for EUR 2,000,000."}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, fetched, []string{"s3://inbox/acme/scan.pdf"})
	assertEqual(t, req.PrimaryDocs[1].Pages, []string{"Insured for EUR 2,000,000."})
	if _, err := req.EngineInputs(); err != nil {
		t.Errorf("EngineInputs after resolving: %v", err)
	}

	req = fullRequest()
	boom := errors.New("no such key")
	err = req.ResolveURIs(context.Background(), func(context.Context, Document) ([]string, error) { return nil, boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), `primary_docs[1] ("scan.pdf"): resolving uri s3://inbox/acme/scan.pdf`) {
		t.Errorf("got %v", err)
	}
}

func testRuleset() *engine.Ruleset {
	return &engine.Ruleset{
		ID:      "onboarding",
		Version: "7",
		Rules: []engine.Rule{
			{RuleID: "signed", RuleText: "Is it signed?", Type: engine.Boolean, Name: "Signature"},
			{RuleID: "risk", RuleText: "Rate the risk.", Type: engine.Numerical, NumericalRuleConfig: &engine.NumericalRuleConfig{PossibleScores: []int{1, 2, 3}}},
			{RuleID: "insured", RuleText: "Is it insured?", Type: engine.Boolean},
			{RuleID: "export", RuleText: "Export licence?", Type: engine.Boolean},
		},
	}
}

func testResult() *engine.Result {
	return &engine.Result{
		RulesetID: "onboarding",
		Model:     "served-model",
		Rules: []engine.Verdict{
			{RuleID: "signed", Type: engine.Boolean, DataSufficiency: true, Rationale: "Signed on page 2.", BooleanOutput: new(true),
				Evidences: []engine.Evidence{{Text: "Signed: J. Müller", SourceOrigin: "agreement.pdf", SourcePageNumber: 2, Anchored: true, Match: engine.MatchExact, StartOffset: new(10), EndOffset: new(27)}}},
			{RuleID: "risk", Type: engine.Numerical, DataSufficiency: true, Rationale: "Low risk.", NumericalOutput: new(1)},
			{RuleID: "insured", Type: engine.Boolean, DataSufficiency: false, Rationale: "No certificate.", BooleanOutput: new(false)},
			{RuleID: "export", Type: engine.Boolean, DataSufficiency: true, Rationale: "Domestic supplier.", NotApplicable: true},
		},
		Aggregate: engine.Aggregate{
			Boolean:   &engine.BooleanAggregate{Mode: engine.AggregateAll, Passed: false, Applicable: 2, PassedCount: 1},
			Numerical: &engine.NumericalAggregate{Mode: engine.AggregateMean, Score: new(1.0), Counted: 1},
		},
		Sources: []engine.Source{{SourceOrigin: "agreement.pdf", Text: "Signed: J. Müller", SourcePageNumber: 2}},
		Usage:   engine.Usage{PromptTokens: 900, CompletionTokens: 120, LLMCalls: 1},
	}
}

func TestEventNewVerdictEvents(t *testing.T) {
	req := fullRequest()
	started := time.Date(2025, 3, 1, 10, 0, 0, 123_456_789, time.FixedZone("CET", 3600))
	completed := time.Now() // carries a monotonic reading
	events := NewVerdictEvents(req, testRuleset(), testResult(), "", started, completed)
	if len(events) != 4 {
		t.Fatalf("%d events, want 4", len(events))
	}
	want := VerdictEvent{
		EventID: "req-1/signed", RequestID: "req-1", TenantID: "acme",
		RulesetID: "onboarding", RulesetVersion: new("7"), Model: "served-model",
		RuleID: "signed", RuleName: new("Signature"), RuleType: engine.Boolean,
		DataSufficiency: true, Rationale: "Signed on page 2.", BooleanOutput: new(true),
		Evidences:   testResult().Rules[0].Evidences,
		StartedAt:   time.Date(2025, 3, 1, 9, 0, 0, 123_000_000, time.UTC),
		CompletedAt: completed.UTC().Truncate(time.Millisecond),
		RuleIndex:   0, RuleCount: 4,
	}
	assertEqual(t, events[0], want)
	if risk := events[1]; risk.RuleIndex != 1 || risk.RuleName != nil || *risk.NumericalOutput != 1 {
		t.Errorf("risk event: %+v", risk)
	}
	assertEqual(t, events[1].AllowedScores, []int{1, 2, 3})
	if events[3].EventID != "req-1/export" || !events[3].NotApplicable || events[3].RuleIndex != 3 {
		t.Errorf("export event: %+v", events[3])
	}
	// Built events round-trip unchanged.
	c := newTestCodecs(t)
	for i := range events {
		body, err := c.Marshal(&events[i])
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Unmarshal(VerdictSchema, body)
		if err != nil {
			t.Fatal(err)
		}
		assertEqual(t, got, &events[i])
	}
	// The events do not share memory with the result.
	res := testResult()
	events = NewVerdictEvents(req, testRuleset(), res, "m", started, completed)
	*res.Rules[0].BooleanOutput = false
	res.Rules[0].Evidences[0].Text = "changed"
	if !*events[0].BooleanOutput || events[0].Evidences[0].Text == "changed" || events[0].Model != "m" {
		t.Errorf("event aliases the result: %+v", events[0])
	}
}

func TestEventNewVerdictEventsWithoutRuleset(t *testing.T) {
	events := NewVerdictEvents(fullRequest(), nil, testResult(), "", t1, t2)
	for i, ev := range events {
		if ev.RuleIndex != i || ev.RuleCount != 4 || ev.AllowedScores != nil {
			t.Errorf("event %d: index %d, count %d, scores %v", i, ev.RuleIndex, ev.RuleCount, ev.AllowedScores)
		}
	}
	if events[0].RulesetVersion != nil {
		t.Errorf("version %v, want none (the result has none)", *events[0].RulesetVersion)
	}
}

func TestEventNewSummary(t *testing.T) {
	res := testResult()
	report := &ReportDescriptor{FileName: "req-1.xlsx", URI: "s3://reports/acme/req-1.xlsx", MIMEType: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", ReferenceID: "acme/req-1.xlsx"}
	s := NewSummary(fullRequest(), testRuleset(), res, "", report, t1, t2)
	want := SummaryEvent{
		EventID: "req-1", RequestID: "req-1", TenantID: "acme",
		RulesetID: "onboarding", RulesetVersion: new("7"), Model: "served-model",
		Status:    StatusCompleted,
		Counts:    Counts{Rules: 4, Passed: 1, Failed: 1, NotApplicable: 1, InsufficientData: 1},
		Aggregate: testResult().Aggregate,
		Sources:   testResult().Sources,
		Usage:     testResult().Usage,
		Report:    report,
		StartedAt: t1, CompletedAt: t2,
	}
	assertEqual(t, s, want)
	if s.Counts.Passed != res.Aggregate.Boolean.PassedCount || s.Counts.Passed+s.Counts.Failed != res.Aggregate.Boolean.Applicable {
		t.Errorf("counts %+v disagree with the boolean aggregate %+v", s.Counts, *res.Aggregate.Boolean)
	}
	*res.Aggregate.Numerical.Score = 99
	if *s.Aggregate.Numerical.Score != 1 {
		t.Error("summary aliases the result's aggregate")
	}
}

func TestEventCountVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		verdicts []engine.Verdict
		want     Counts
	}{
		{"none", nil, Counts{}},
		{"boolean without output fails", []engine.Verdict{{Type: engine.Boolean, DataSufficiency: true}}, Counts{Rules: 1, Failed: 1}},
		{"numerical is neither", []engine.Verdict{{Type: engine.Numerical, DataSufficiency: true, NumericalOutput: new(3)}}, Counts{Rules: 1}},
		{"not applicable", []engine.Verdict{{Type: engine.Boolean, NotApplicable: true, DataSufficiency: true, BooleanOutput: new(true)}}, Counts{Rules: 1, NotApplicable: 1}},
		{"insufficient overlaps", []engine.Verdict{{Type: engine.Boolean, BooleanOutput: new(false)}, {Type: engine.Numerical}}, Counts{Rules: 2, Failed: 1, InsufficientData: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertEqual(t, CountVerdicts(tc.verdicts), tc.want)
		})
	}
}

func TestEventNewFailedSummary(t *testing.T) {
	s := NewFailedSummary(fullRequest(), ReasonUnknownRuleset, `ruleset "supplier-onboarding" version 3 not found`, t1, t2)
	want := SummaryEvent{
		EventID: "req-1", RequestID: "req-1", TenantID: "acme",
		RulesetID: "supplier-onboarding", RulesetVersion: new("3"),
		Status:    StatusFailed,
		Error:     &SummaryError{Code: ReasonUnknownRuleset, Message: `ruleset "supplier-onboarding" version 3 not found`},
		StartedAt: t1, CompletedAt: t2,
	}
	assertEqual(t, s, want)
	c := newTestCodecs(t)
	body, err := c.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Unmarshal(SummarySchema, body)
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, got, &s)
}

func TestEventReasonFor(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Reason
	}{
		{&DecodeError{Problem: "x"}, ReasonUndecodable},
		{&RequestError{Problems: []string{"x"}}, ReasonInvalidRequest},
		{fmt.Errorf("resolve: %w", engine.ErrInvalidRuleset), ReasonInvalidRuleset},
		{&engine.InputError{Problem: "x"}, ReasonInvalidInput},
		{fmt.Errorf("x: %w", ErrUnresolvedURI), ReasonInvalidInput},
		{fmt.Errorf("x: %w", engine.ErrLLMRejected), ReasonModelRejected},
		{fmt.Errorf("x: %w", engine.ErrInvalidOutput), ReasonInvalidOutput},
		{errors.New("disk on fire"), ReasonInternal},
	} {
		if got := ReasonFor(tc.err); got != tc.want {
			t.Errorf("ReasonFor(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
