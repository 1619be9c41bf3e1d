package request

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"rulevalidator/schemas"
)

// t0 is a time as events carry it: UTC, whole milliseconds.
var t0 = time.Date(2025, 3, 1, 9, 30, 0, 250_000_000, time.UTC)

const unicodeText = "Vertrag für Müller & Söhne — 契約書 🚀 \u200b ‘quotes’ \u0000 end"

// sampleRequests have every optional field set and unset, unicode text and
// empty values.
func sampleRequests() map[string]*schemas.Request {
	return map[string]*schemas.Request{
		"full": {
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
				{Name: "contacts", ValueJSON: `[{"email":"a@b.example","role":"sales"}]`},
			},
			Message:     new("Flag blockers."),
			Options:     schemas.Options{GenerateReport: new(true), Model: new("gemma-3-270m"), CallbackURL: new("https://hooks.example/x"), Cache: new(false)},
			SubmittedAt: t0,
		},
		"minimal": {
			RequestID:   "r-min",
			TenantID:    "t",
			RulesetRef:  &schemas.RulesetRef{ID: "rs"},
			SubmittedAt: t0,
		},
		"inline and empty values": {
			RequestID:     "r-inline",
			TenantID:      "t",
			InlineRuleset: new(`{"rules":[{"rule_id":"r1","rule_text":"Is it signed?"}]}`),
			PrimaryDocs: []schemas.Document{
				{Name: "empty-content", Content: new("")},
				{Name: "no-pages", Pages: []string{}},
				{Name: "blank-pages", Pages: []string{"", ""}},
			},
			TextInput:   new(""),
			NamedInputs: []schemas.NamedInput{{Name: "nothing", Description: new(""), ValueJSON: "null"}},
			Message:     new(""),
			Options:     schemas.Options{GenerateReport: new(false), Model: new(""), CallbackURL: new("")},
			SubmittedAt: time.UnixMilli(0).UTC(),
		},
	}
}

func TestJSONSample(t *testing.T) {
	data, err := os.ReadFile("testdata/request.json")
	if err != nil {
		t.Fatal(err)
	}
	req, err := FromJSON(data)
	if err != nil {
		t.Fatalf("FromJSON: %v", err)
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
	back, err := FromJSON(again)
	if err != nil {
		t.Fatalf("reading JSON() output: %v", err)
	}
	assertEqual(t, back, req)
	c := newCodecs(t)
	body, err := c.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := c.Unmarshal(schemas.RequestSchema, body)
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, decoded, req)
}

// TestJSONRoundTrip: what schemas.Request.MarshalJSON writes, FromJSON
// reads back as the same request.
func TestJSONRoundTrip(t *testing.T) {
	for name, req := range sampleRequests() {
		t.Run(name, func(t *testing.T) {
			data, err := req.JSON()
			if err != nil {
				t.Fatal(err)
			}
			got, err := FromJSON(data)
			if err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			assertEqual(t, got, req)
		})
	}
}

func TestJSONInlineRuleset(t *testing.T) {
	const object = `{"rules":[{"rule_id":"r1","rule_text":"Signed?"}]}`
	for _, tc := range []struct {
		name, inline, want string
	}{
		{"object", "{\n  \"rules\": [{\"rule_id\": \"r1\", \"rule_text\": \"Signed?\"}]\n}", object},
		{"string holding an object", fmt.Sprintf("%q", object), object},
		{"string holding anything", `"rules: yaml?"`, "rules: yaml?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := FromJSON([]byte(`{"request_id":"r","tenant_id":"t","inline_ruleset":` + tc.inline + `}`))
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

func TestJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		name, json, want string
	}{
		{"not an object", `[1]`, "not a request in JSON form"},
		{"unknown field next to named_inputs", `{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"x"},"named_inputs":[],"primary_doc":[]}`, `primary_doc: unknown field: with named_inputs given`},
		{"unknown option", `{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"x"},"options":{"generate_reprot":true}}`, `options: unknown field "generate_reprot" (known: generate_report, model, callback_url, cache)`},
		{"cache option not a boolean", `{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"x"},"options":{"cache":"no"}}`, `options.cache: must be true or false (got a string)`},
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
			_, err := FromJSON([]byte(tc.json))
			if !errors.Is(err, schemas.ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an invalid request error containing %q", err, tc.want)
			}
		})
	}
}

// TestJSONInvalidKeepsRequest: a request that reads but does not validate
// comes with its error, so a failure can still be addressed to it.
func TestJSONInvalidKeepsRequest(t *testing.T) {
	_, err := FromJSON([]byte(`{"request_id":"r","tenant_id":"t"}`))
	var re *schemas.RequestError
	if !errors.As(err, &re) || re.Request == nil || re.Request.RequestID != "r" {
		t.Fatalf("got %v, want a *schemas.RequestError carrying request r", err)
	}
}

// TestJSONWithoutSubmittedAt: the JSON form may leave submitted_at for the
// caller to stamp; encoding refuses a request that still lacks it.
func TestJSONWithoutSubmittedAt(t *testing.T) {
	req, err := FromJSON([]byte(`{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := newCodecs(t)
	if _, err := c.Marshal(req); !errors.Is(err, schemas.ErrInvalidRequest) || !strings.Contains(err.Error(), "submitted_at is not set") {
		t.Fatalf("Marshal without submitted_at: %v", err)
	}
	req.SubmittedAt = t0
	if _, err := c.Marshal(req); err != nil {
		t.Fatal(err)
	}
}

// TestJoinProblems lists what reading found before what Validate found and
// keeps the first request id.
func TestJoinProblems(t *testing.T) {
	read := &schemas.RequestError{RequestID: "r", Problems: []string{"text_input: must be a string"}}
	other := errors.New(`request_id "r r": not an id`)
	validate := (&schemas.Request{RequestID: "r"}).Validate()
	err := JoinProblems(read, nil, other, validate)
	var re *schemas.RequestError
	if !errors.As(err, &re) || !errors.Is(err, schemas.ErrInvalidRequest) {
		t.Fatalf("got %v, want a *schemas.RequestError", err)
	}
	assertEqual(t, re, &schemas.RequestError{RequestID: "r", Problems: []string{
		"text_input: must be a string",
		`request_id "r r": not an id`,
		"tenant_id is empty",
		"neither ruleset_ref nor inline_ruleset is set; set exactly one",
		"submitted_at is not set",
	}})
	if err := JoinProblems(nil, nil); err != nil {
		t.Errorf("no problems: got %v", err)
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
