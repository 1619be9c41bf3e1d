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

	req = fullRequest()
	boom := errors.New("no such key")
	err = req.ResolveURIs(context.Background(), func(context.Context, Document) ([]string, error) { return nil, boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), `primary_docs[1] ("scan.pdf"): resolving uri s3://inbox/acme/scan.pdf`) {
		t.Errorf("got %v", err)
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
