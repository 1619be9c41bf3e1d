package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/registry"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// fakeEngine answers with a fixed result or error; the point here is how the
// pipeline classifies what the engine says.
type fakeEngine struct {
	res *engine.Result
	err error
}

func (f fakeEngine) Evaluate(context.Context, engine.Task) (*engine.Result, error) {
	return f.res, f.err
}

type failingReports struct{ err error }

func (f failingReports) WriteReport(context.Context, *schemas.Request, *engine.Ruleset, *engine.Result, time.Time) (*schemas.ReportDescriptor, error) {
	return nil, f.err
}

func ptr[T any](v T) *T { return &v }

func TestJudgeClassifiesFailures(t *testing.T) {
	rs := &engine.Ruleset{ID: "rs", Version: "1", Rules: []engine.Rule{{RuleID: "r1", RuleText: "text"}}}
	static, err := registry.NewStatic(rs)
	if err != nil {
		t.Fatal(err)
	}
	pass := true
	ok := &engine.Result{RulesetID: "rs", Model: "m", Rules: []engine.Verdict{{RuleID: "r1", Type: engine.Boolean, DataSufficiency: true, Rationale: "x", BooleanOutput: &pass, Evidences: []engine.Evidence{}}}}
	request := func(mut func(*schemas.Request)) *schemas.Request {
		r := &schemas.Request{RequestID: "req-1", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"}, TextInput: ptr("hello"), SubmittedAt: time.Now()}
		if mut != nil {
			mut(r)
		}
		return r
	}
	tests := []struct {
		name       string
		eng        fakeEngine
		reports    ReportWriter
		req        *schemas.Request
		wantReason string // "" = success; "transient" = not permanent
	}{
		{"judged", fakeEngine{res: ok}, nil, request(nil), ""},
		{"unknown ruleset", fakeEngine{res: ok}, nil, request(func(r *schemas.Request) { r.RulesetRef.ID = "nope" }), "unknown_ruleset"},
		{"invalid inline ruleset", fakeEngine{res: ok}, nil, request(func(r *schemas.Request) { r.RulesetRef = nil; r.InlineRuleset = ptr(`{"rules":[]}`) }), "invalid_ruleset"},
		{"inputs too large", fakeEngine{err: fmt.Errorf("%w: big", engine.ErrInputTooLarge)}, nil, request(nil), "oversized"},
		{"model rejected", fakeEngine{err: fmt.Errorf("%w: 401", engine.ErrLLMRejected)}, nil, request(nil), "model_rejected"},
		{"output invalid", fakeEngine{err: &engine.OutputError{Attempts: 3}}, nil, request(nil), "invalid_output"},
		{"model unavailable", fakeEngine{err: fmt.Errorf("%w: 503", engine.ErrLLMUnavailable)}, nil, request(nil), "transient"},
		{"uri without object storage", fakeEngine{res: ok}, nil, request(func(r *schemas.Request) {
			r.TextInput = nil
			r.PrimaryDocs = []schemas.Document{{Name: "a.txt", URI: ptr("s3://b/k")}}
		}), "invalid_input"},
		{"model key refused", fakeEngine{err: &adapterFault{cause: "model_auth", kind: engine.ErrLLMUnavailable}}, nil, request(nil), "transient"},
		{"report storage refuses the secret", fakeEngine{res: ok}, failingReports{s3Error("SignatureDoesNotMatch", 403)}, request(func(r *schemas.Request) { r.Options.GenerateReport = ptr(true) }), "transient"},
		{"report bucket missing", fakeEngine{res: ok}, failingReports{s3Error("NoSuchBucket", 404)}, request(func(r *schemas.Request) { r.Options.GenerateReport = ptr(true) }), "transient"},
		{"report not stored", fakeEngine{res: ok}, failingReports{errors.New("bucket gone")}, request(func(r *schemas.Request) { r.Options.GenerateReport = ptr(true) }), "report_failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reportFailed := 0
			p, err := New(Config{Engine: tt.eng, Rulesets: static, Reports: tt.reports, Hooks: Hooks{ReportFailed: func() { reportFailed++ }}})
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Judge(context.Background(), tt.req, time.Now())
			reason, permanent := MessageFault(err)
			switch tt.wantReason {
			case "":
				if err != nil || out.Summary.Status != schemas.StatusCompleted || len(out.Verdicts) != 1 {
					t.Fatalf("err %v, outcome %+v", err, out)
				}
			case "transient":
				if err == nil || permanent {
					t.Fatalf("err %v (permanent %v), want a transient error", err, permanent)
				}
			default:
				if reason != tt.wantReason {
					t.Fatalf("reason %q (err %v), want %q", reason, err, tt.wantReason)
				}
				if out.Summary.Status != schemas.StatusFailed || out.Summary.Error == nil || string(out.Summary.Error.Code) != tt.wantReason || len(out.Verdicts) != 0 {
					t.Errorf("failed summary = %+v", out.Summary)
				}
			}
			if tt.wantReason == "report_failed" && reportFailed != 1 {
				t.Errorf("ReportFailed hook called %d times", reportFailed)
			}
		})
	}
}

// TestReportWithoutStorage: with reports disabled, a request asking for one
// completes without it, and the log says why.
func TestReportWithoutStorage(t *testing.T) {
	rs := &engine.Ruleset{ID: "rs", Rules: []engine.Rule{{RuleID: "r1", RuleText: "text"}}, GenerateReport: true}
	static, err := registry.NewStatic(rs)
	if err != nil {
		t.Fatal(err)
	}
	pass := true
	res := &engine.Result{RulesetID: "rs", Model: "m", Rules: []engine.Verdict{{RuleID: "r1", Type: engine.Boolean, DataSufficiency: true, Rationale: "x", BooleanOutput: &pass}}}
	var logs bytes.Buffer
	p, err := New(Config{Engine: fakeEngine{res: res}, Rulesets: static, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	req := &schemas.Request{RequestID: "req-1", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"}, TextInput: ptr("hello"), SubmittedAt: time.Now()}
	out, err := p.Judge(context.Background(), req, time.Now())
	if err != nil || out.Summary.Status != schemas.StatusCompleted || out.Summary.Report != nil || len(out.Verdicts) != 1 {
		t.Fatalf("err %v, summary %+v", err, out.Summary)
	}
	if !strings.Contains(logs.String(), `"msg":"report skipped: a report was asked for but no report storage is configured`) ||
		!strings.Contains(logs.String(), `"request_id":"req-1"`) {
		t.Errorf("the log does not say why there is no report:\n%s", logs.String())
	}
}

func TestResultCacheBounds(t *testing.T) {
	c := newResultCache(2, 1<<20)
	c.put("a", nil)
	c.put("b", nil)
	c.put("c", nil)
	if _, ok := c.get("a"); ok || c.len() != 2 {
		t.Errorf("oldest entry kept, %d entries", c.len())
	}
	off := newResultCache(-1, 1<<20)
	off.put("a", nil)
	if _, ok := off.get("a"); ok {
		t.Error("a disabled cache remembered a result")
	}

	// By bytes: the least recently used go first, a result replaced gives
	// its bytes back, and one larger than the bound is not kept at all.
	sized := func(n int) *published { return &published{msgs: []stream.Record{{Value: make([]byte, n)}}} }
	b := newResultCache(10, 100)
	b.put("a", sized(40))
	b.put("b", sized(40))
	b.get("a")
	b.put("c", sized(40)) // 120 bytes: b, the least recently used, goes
	if _, ok := b.get("b"); ok || b.len() != 2 || b.bytes != 80 {
		t.Errorf("after a third 40-byte result: b kept %v, %d entries, %d bytes", ok, b.len(), b.bytes)
	}
	b.put("a", sized(10))
	b.put("huge", sized(101))
	if _, ok := b.get("huge"); ok || b.len() != 2 || b.bytes != 50 {
		t.Errorf("after replacing a and offering a huge result: huge kept %v, %d entries, %d bytes", ok, b.len(), b.bytes)
	}
	b.remove("a")
	if b.len() != 1 || b.bytes != 40 {
		t.Errorf("after removing a: %d entries, %d bytes", b.len(), b.bytes)
	}
}

// oneRuleFixture is what most pipeline tests start from: a resolver holding the one-rule
// ruleset "rs", a result passing its rule, and the plain wire format.
func oneRuleFixture(t *testing.T) (*registry.Static, *engine.Result, *schemas.Serde) {
	t.Helper()
	static, err := registry.NewStatic(&engine.Ruleset{ID: "rs", Version: "1", Rules: []engine.Rule{{RuleID: "r1", RuleText: "text"}}})
	if err != nil {
		t.Fatal(err)
	}
	serde, err := schemas.NewSerde(context.Background(), schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return static, passResult(), serde
}
