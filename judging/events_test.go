package judging

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// Times as events carry them: UTC, whole milliseconds.
var (
	t0 = time.Date(2025, 3, 1, 9, 30, 0, 250_000_000, time.UTC)
	t1 = t0.Add(1500 * time.Millisecond)
	t2 = t1.Add(42 * time.Second)
)

const unicodeText = "Vertrag für Müller & Söhne — 契約書 🚀 \u200b ‘quotes’ \u0000 end"

func fullRequest() *schemas.Request {
	return &schemas.Request{
		RequestID:  "req-1",
		TenantID:   "acme",
		RulesetRef: &schemas.RulesetRef{ID: "supplier-onboarding", Version: new("3")},
		PrimaryDocs: []schemas.Document{
			{Name: "agreement.pdf", Pages: []string{"page one", unicodeText}},
			{Name: "scan.pdf", URI: new("s3://inbox/acme/scan.pdf"), ContentType: new("application/pdf")},
		},
		AuxiliaryDocs: []schemas.Document{{Name: "policy.md", Content: new("first\fsecond"), ContentType: new("text/markdown")}},
		TextInput:     new(unicodeText),
		NamedInputs: []schemas.NamedInput{
			{Name: "volume", Description: new("yearly volume"), ValueJSON: "12345678901234567890"},
			{Name: "contacts", ValueJSON: `[{"role":"sales","email":"a@b.example"}]`},
		},
		Message:     new("Flag blockers."),
		Options:     schemas.Options{GenerateReport: new(true), Model: new("gemma-3-270m"), CallbackURL: new("https://hooks.example/x")},
		SubmittedAt: t0,
	}
}

func newCodecs(t testing.TB) *schemas.Codecs {
	t.Helper()
	c, err := schemas.NewCodecs()
	if err != nil {
		t.Fatalf("NewCodecs: %v", err)
	}
	return c
}

// assertEqual compares deeply and shows both sides as JSON when they differ.
func assertEqual(t *testing.T, got, want any) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	g, _ := json.MarshalIndent(got, "", "  ")
	w, _ := json.MarshalIndent(want, "", "  ")
	t.Errorf("values differ\n got: %s\nwant: %s", g, w)
}

func TestRequestEngineInputs(t *testing.T) {
	req := fullRequest()
	req.PrimaryDocs = req.PrimaryDocs[:1]
	in, err := EngineInputs(req)
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
		edit   func(*schemas.Request)
		target error
		want   string
	}{
		{"unresolved uri", func(*schemas.Request) {}, schemas.ErrUnresolvedURI, `primary_docs[1] ("scan.pdf"): document uri not resolved: s3://inbox/acme/scan.pdf has not been fetched`},
		{"content and pages", func(r *schemas.Request) { r.PrimaryDocs[1].Content, r.PrimaryDocs[1].Pages = new("a"), []string{"b"} }, engine.ErrInvalidInput, `primary_docs[1] ("scan.pdf"): both content and pages given`},
		{"engine checks apply", func(r *schemas.Request) { r.PrimaryDocs[1] = schemas.Document{Name: "policy.md", Content: new("dup")} }, engine.ErrInvalidInput, `duplicate document name "policy.md"`},
		{"bad value", func(r *schemas.Request) { r.PrimaryDocs = r.PrimaryDocs[:1]; r.NamedInputs[0].ValueJSON = "1 2" }, engine.ErrInvalidInput, `named_inputs[0] ("volume").value_json: not valid JSON: data after the value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fullRequest()
			tc.edit(r)
			_, err := EngineInputs(r)
			if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %v containing %q", err, tc.target, tc.want)
			}
		})
	}
}

func testRuleset() *engine.Ruleset {
	return &engine.Ruleset{
		ID:      "onboarding",
		Version: "7",
		Rules: []engine.Rule{
			{RuleID: "signed", RuleText: "Is it signed?", Type: verdict.Boolean, Name: "Signature"},
			{RuleID: "risk", RuleText: "Rate the risk.", Type: verdict.Numerical, NumericalRuleConfig: &engine.NumericalRuleConfig{PossibleScores: []int{1, 2, 3}}},
			{RuleID: "insured", RuleText: "Is it insured?", Type: verdict.Boolean},
			{RuleID: "export", RuleText: "Export licence?", Type: verdict.Boolean},
		},
	}
}

func testResult() *engine.Result {
	return &engine.Result{
		RulesetID: "onboarding",
		Model:     "served-model",
		Rules: []engine.Verdict{
			{RuleID: "signed", Type: verdict.Boolean, DataSufficiency: true, Rationale: "Signed on page 2.", BooleanOutput: new(true),
				Evidences: []verdict.Evidence{{Text: "Signed: J. Müller", SourceOrigin: "agreement.pdf", SourcePageNumber: 2, CitedPageNumber: 2, PassageID: "d1p2s1",
					Anchored: true, Match: verdict.MatchExact, StartOffset: new(10), EndOffset: new(27)}}},
			{RuleID: "risk", Type: verdict.Numerical, DataSufficiency: true, Rationale: "Low risk.", NumericalOutput: new(1)},
			{RuleID: "insured", Type: verdict.Boolean, DataSufficiency: false, Rationale: "No certificate.", BooleanOutput: new(false),
				Confidence: new(0.4), NeedsReview: true, ReviewReasons: []engine.ReviewReason{engine.ReviewKeptWithProblems, engine.ReviewInsufficientData},
				SufficiencyNote: "kept with problems after every re-ask: no evidence found in the material supports the verdict",
				Problems:        []string{"no evidence found in the material supports the verdict"},
				Evidences:       []verdict.Evidence{{Text: "insured by Allianz", SourceOrigin: "agreement.pdf", SourcePageNumber: 1, CitedPageNumber: 5, Match: verdict.MatchNone}}},
			{RuleID: "export", Type: verdict.Boolean, DataSufficiency: true, Rationale: "Domestic supplier.", NotApplicable: true},
		},
		Aggregate: verdict.Aggregate{
			Boolean:   &verdict.BooleanAggregate{Mode: verdict.AggregateAll, Passed: false, Applicable: 2, PassedCount: 1},
			Numerical: &verdict.NumericalAggregate{Mode: verdict.AggregateMean, Score: new(1.0), Counted: 1},
		},
		Sources: []verdict.Source{{SourceOrigin: "agreement.pdf", Text: "Signed: J. Müller", SourcePageNumber: 2}},
		Usage:   verdict.Usage{PromptTokens: 900, CompletionTokens: 120, LLMCalls: 1},
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
	want := schemas.VerdictEvent{
		EventID: "acme/req-1/signed", RequestID: "req-1", TenantID: "acme",
		RulesetID: "onboarding", RulesetVersion: new("7"), Model: "served-model",
		RuleID: "signed", RuleName: new("Signature"), RuleType: verdict.Boolean,
		DataSufficiency: true, Rationale: "Signed on page 2.", BooleanOutput: new(true),
		Evidences:   evidences(testResult().Rules[0].Evidences),
		StartedAt:   time.Date(2025, 3, 1, 9, 0, 0, 123_000_000, time.UTC),
		CompletedAt: completed.UTC().Truncate(time.Millisecond),
		RuleIndex:   0, RuleCount: 4,
		RuleWeight: new(1.0),
	}
	assertEqual(t, events[0], want)
	if risk := events[1]; risk.RuleIndex != 1 || risk.RuleName != nil || *risk.NumericalOutput != 1 {
		t.Errorf("risk event: %+v", risk)
	}
	assertEqual(t, events[1].AllowedScores, []int{1, 2, 3})
	if events[3].EventID != "acme/req-1/export" || !events[3].NotApplicable || events[3].RuleIndex != 3 {
		t.Errorf("export event: %+v", events[3])
	}
	insured := events[2]
	assertEqual(t, insured.Problems, []string{"no evidence found in the material supports the verdict"})
	assertEqual(t, insured.ReviewReasons, []string{"kept_with_problems", "insufficient_data"})
	if insured.Confidence == nil || *insured.Confidence != 0.4 || !insured.NeedsReview || events[0].Confidence != nil || events[0].NeedsReview {
		t.Errorf("confidence or review routing not carried: %+v", insured)
	}
	if insured.SufficiencyNote == nil || insured.Evidences[0].CitedPageNumber != 5 || insured.Evidences[0].SourcePageNumber != 1 {
		t.Errorf("insured event lost its note or the page the model cited: %+v", insured)
	}
	if signed := events[0].Evidences[0]; signed.PassageID != "d1p2s1" || signed.CitedPageNumber != 2 {
		t.Errorf("signed evidence lost its passage id or cited page: %+v", signed)
	}
	// Built events round-trip unchanged.
	c := newCodecs(t)
	for i := range events {
		body, err := c.Marshal(&events[i])
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Unmarshal(schemas.VerdictSchema, body)
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
	res.Rules[2].Problems[0] = "changed"
	if !*events[0].BooleanOutput || events[0].Evidences[0].Text == "changed" || events[2].Problems[0] == "changed" || events[0].Model != "m" {
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
	report := &schemas.ReportDescriptor{FileName: "req-1.xlsx", URI: "s3://reports/acme/req-1.xlsx", MIMEType: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", ReferenceID: "acme/req-1.xlsx"}
	s := NewSummary(fullRequest(), testRuleset(), res, "", report, t1, t2)
	want := schemas.SummaryEvent{
		EventID: "acme/req-1", RequestID: "req-1", TenantID: "acme",
		RulesetID: "onboarding", RulesetVersion: new("7"), Model: "served-model",
		Status:    schemas.StatusCompleted,
		Counts:    schemas.Counts{Rules: 4, Passed: 1, Failed: 1, NotApplicable: 1, InsufficientData: 1, NeedsReview: 1},
		Aggregate: aggregate(testResult().Aggregate),
		Sources:   []verdict.Source{verdict.Source(testResult().Sources[0])},
		Usage:     verdict.Usage(testResult().Usage),
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

// TestEventEvidenceCarriesEveryEngineField: every field of verdict.Evidence,
// set, reaches the event's evidence under the same JSON name, so that a field
// the engine gains cannot be lost on the way to the events unnoticed.
func TestEventEvidenceCarriesEveryEngineField(t *testing.T) {
	var e verdict.Evidence
	fillFields(t, reflect.ValueOf(&e).Elem())
	got, want := jsonObject(t, evidences([]verdict.Evidence{e})[0]), jsonObject(t, e)
	if len(want) != reflect.TypeFor[verdict.Evidence]().NumField() {
		t.Fatalf("the filled engine evidence leaves fields out: %v", want)
	}
	assertEqual(t, got, want)
}

// fillFields sets every field of the struct v to a value other than its zero.
func fillFields(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name)
		case reflect.Int:
			f.SetInt(int64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Float64:
			f.SetFloat(0.5)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
			f.Elem().SetInt(int64(i + 1))
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
			fillFields(t, f.Index(0))
		default:
			t.Fatalf("fillFields: field %s is a %s", v.Type().Field(i).Name, f.Kind())
		}
	}
}

// jsonObject is v's JSON form as a map.
func jsonObject(t *testing.T, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
