package judging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/registry"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// fakeEngine answers with a fixed result or error; the point here is how the
// use case classifies what the engine says.
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
	ok := &engine.Result{RulesetID: "rs", Model: "m", Rules: []engine.Verdict{{RuleID: "r1", Type: verdict.Boolean, DataSufficiency: true, Rationale: "x", BooleanOutput: &pass, Evidences: []verdict.Evidence{}}}}
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
			judge, err := New(Config{Engine: tt.eng, Rulesets: static, Reports: tt.reports, ReportFailed: func() { reportFailed++ }})
			if err != nil {
				t.Fatal(err)
			}
			out, release, err := judge.Judge(context.Background(), tt.req, time.Now())
			release()
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
	res := &engine.Result{RulesetID: "rs", Model: "m", Rules: []engine.Verdict{{RuleID: "r1", Type: verdict.Boolean, DataSufficiency: true, Rationale: "x", BooleanOutput: &pass}}}
	var logs bytes.Buffer
	judge, err := New(Config{Engine: fakeEngine{res: res}, Rulesets: static, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	req := &schemas.Request{RequestID: "req-1", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"}, TextInput: ptr("hello"), SubmittedAt: time.Now()}
	out, release, err := judge.Judge(context.Background(), req, time.Now())
	release()
	if err != nil || out.Summary.Status != schemas.StatusCompleted || out.Summary.Report != nil || len(out.Verdicts) != 1 {
		t.Fatalf("err %v, summary %+v", err, out.Summary)
	}
	if !strings.Contains(logs.String(), `"msg":"report skipped: a report was asked for but no report storage is configured`) ||
		!strings.Contains(logs.String(), `"request_id":"req-1"`) {
		t.Errorf("the log does not say why there is no report:\n%s", logs.String())
	}
}

func passResult() *engine.Result {
	pass := true
	return &engine.Result{RulesetID: "rs", Model: "m", Rules: []engine.Verdict{{RuleID: "r1", Type: verdict.Boolean, DataSufficiency: true, Rationale: "x", BooleanOutput: &pass, Evidences: []verdict.Evidence{}}}}
}

// taskEngine records the tasks it is asked to judge; a zero block answers at once, else it
// waits until the request's context ends (a model slower than the request timeout).
type taskEngine struct {
	mu    sync.Mutex
	tasks []engine.Task
	block bool
}

func (e *taskEngine) Evaluate(ctx context.Context, task engine.Task) (*engine.Result, error) {
	e.mu.Lock()
	e.tasks = append(e.tasks, task)
	e.mu.Unlock()
	if e.block {
		<-ctx.Done()
		return nil, fmt.Errorf("model call abandoned: %w", ctx.Err())
	}
	return passResult(), nil
}

// TestJudgeBuildsTheTaskOnce: the engine's inputs are built once on the road, from the
// request with its documents read, and what was judged (Events.Material) is that task's
// inputs, with the request's options and facts.
func TestJudgeBuildsTheTaskOnce(t *testing.T) {
	static, err := registry.NewStatic(&engine.Ruleset{ID: "rs", Version: "1", Rules: []engine.Rule{{RuleID: "r1", RuleText: "text"}}})
	if err != nil {
		t.Fatal(err)
	}
	eng := &taskEngine{}
	judge, err := New(Config{Engine: eng, Rulesets: static})
	if err != nil {
		t.Fatal(err)
	}
	req := &schemas.Request{RequestID: "req-1", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"}, SubmittedAt: time.Now(),
		PrimaryDocs: []schemas.Document{{Name: "a.txt", Data: []byte("page one\fpage two")}},
		Options:     schemas.Options{Model: ptr("m2"), Cache: ptr(false)}}
	out, release, err := judge.Judge(context.Background(), req, time.Now())
	release()
	if err != nil {
		t.Fatal(err)
	}
	if len(eng.tasks) != 1 {
		t.Fatalf("engine asked %d times, want 1", len(eng.tasks))
	}
	task := eng.tasks[0]
	if out.Material != task.Inputs {
		t.Error("Events.Material is not the inputs the engine judged: they were built twice")
	}
	if got := task.Inputs.PrimaryDocs; len(got) != 1 || got[0].Name != "a.txt" || strings.Join(got[0].Pages, "|") != "page one|page two" {
		t.Errorf("inputs = %+v, want a.txt's two pages as read", got)
	}
	if task.Model != "m2" || !task.NoCache || task.Tenant != "t" || task.RequestID != "req-1" || task.Facts.MediaTypes["a.txt"] != "text/plain" {
		t.Errorf("task = model %q, no cache %v, tenant %q, request %q, media types %v", task.Model, task.NoCache, task.Tenant, task.RequestID, task.Facts.MediaTypes)
	}
	if out.Ruleset == nil || out.Ruleset.ID != "rs" || out.Summary.Status != schemas.StatusCompleted {
		t.Errorf("events = ruleset %v, summary %+v", out.Ruleset, out.Summary)
	}
}

// TestJudgeTimeout: an attempt that runs out of Config.Timeout returns no events and an
// error wrapping ErrRequestTimeout, which is nobody's fault yet.
func TestJudgeTimeout(t *testing.T) {
	static, err := registry.NewStatic(&engine.Ruleset{ID: "rs", Version: "1", Rules: []engine.Rule{{RuleID: "r1", RuleText: "text"}}})
	if err != nil {
		t.Fatal(err)
	}
	judge, err := New(Config{Engine: &taskEngine{block: true}, Rulesets: static, Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	req := &schemas.Request{RequestID: "req-1", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"}, TextInput: ptr("hello"), SubmittedAt: time.Now()}
	out, release, err := judge.Judge(context.Background(), req, time.Now())
	release()
	if !errors.Is(err, ErrRequestTimeout) || out.Summary.EventID != "" {
		t.Fatalf("Judge = %+v, %v; want no events and ErrRequestTimeout", out.Summary, err)
	}
	if _, message := MessageFault(err); message {
		t.Errorf("a timed-out attempt is the message's fault: %v", err)
	}
}
