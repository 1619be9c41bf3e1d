package schemas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
		{"nothing to read", func(r *Request) { r.AuxiliaryDocs[0].Content, r.AuxiliaryDocs[0].ContentType = nil, nil }, []string{`auxiliary_docs[0] ("policy.md"): no content, pages, data or uri given`}},
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

// TestRequestJSONIsNotReadHere: encoding/json cannot read a request's JSON
// form into a Request; it says where that is done instead of returning an
// empty request.
func TestRequestJSONIsNotReadHere(t *testing.T) {
	data, err := fullRequest().JSON()
	if err != nil {
		t.Fatal(err)
	}
	var r Request
	if err := json.Unmarshal(data, &r); err == nil || !strings.Contains(err.Error(), "package rulevalidator/request") {
		t.Fatalf("json.Unmarshal into a Request: %v, want an error naming package rulevalidator/request", err)
	}
}

func TestRequestResolveDocuments(t *testing.T) {
	req := fullRequest()
	var read []string
	err := req.ResolveDocuments(context.Background(), func(_ context.Context, d Document) ([]string, error) {
		if d.URI != nil {
			read = append(read, *d.URI)
			return []string{"Insured for EUR 2,000,000."}, nil
		}
		read = append(read, fmt.Sprintf("%s: %d bytes", d.Name, len(d.Data)))
		return []string{"Order one.", "Order two."}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, read, []string{"s3://inbox/acme/scan.pdf", "order.pdf: 25 bytes"})
	assertEqual(t, req.PrimaryDocs[1].Pages, []string{"Insured for EUR 2,000,000."})
	assertEqual(t, req.PrimaryDocs[2].Pages, []string{"Order one.", "Order two."})
	if req.PrimaryDocs[2].Data != nil {
		t.Errorf("the file's bytes are kept once read: %q", req.PrimaryDocs[2].Data)
	}

	req = fullRequest()
	boom := errors.New("no such key")
	err = req.ResolveDocuments(context.Background(), func(context.Context, Document) ([]string, error) { return nil, boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), `primary_docs[1] ("scan.pdf"): resolving uri s3://inbox/acme/scan.pdf`) {
		t.Errorf("got %v", err)
	}
	req = fullRequest()
	req.PrimaryDocs = req.PrimaryDocs[2:]
	err = req.ResolveDocuments(context.Background(), func(context.Context, Document) ([]string, error) { return nil, boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), `primary_docs[0] ("order.pdf"): reading the file: no such key`) {
		t.Errorf("got %v", err)
	}
}

func TestEventNewFailedSummary(t *testing.T) {
	s := NewFailedSummary(fullRequest(), ReasonUnknownRuleset, `ruleset "supplier-onboarding" version 3 not found`, t1, t2)
	want := SummaryEvent{
		EventID: "acme/req-1", RequestID: "req-1", TenantID: "acme",
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
