package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/eval"
	"rulevalidator/internal/llmfake"
	"rulevalidator/internal/otlptest"
	"rulevalidator/internal/pdftest"
	"rulevalidator/internal/testtier"
)

const evalDataset = "../../examples/eval/edgar-nda"

// evalCases are the cases the CLI tests judge, in dataset order.
var evalCases = []string{"nebs-premium-wear", "michigan-genesis"}

// labelledReplies answers every case as labelled, quoting the gold evidence,
// with the boolean verdicts flipped when flip is set.
func labelledReplies(t *testing.T, ids []string, flip bool) []llmfake.Reply {
	t.Helper()
	ds, err := eval.Load(evalDataset)
	if err != nil {
		t.Fatal(err)
	}
	type ev struct {
		Text   string `json:"text"`
		Origin string `json:"source_origin"`
		Page   int    `json:"source_page_number"`
	}
	type rule struct {
		RuleID          string `json:"rule_id"`
		DataSufficiency bool   `json:"data_sufficiency"`
		Rationale       string `json:"rationale"`
		BooleanOutput   *bool  `json:"boolean_output,omitempty"`
		NumericalOutput *int   `json:"numerical_output,omitempty"`
		NotApplicable   bool   `json:"not_applicable"`
		Evidences       []ev   `json:"evidences"`
	}
	var replies []llmfake.Reply
	for _, c := range ds.Cases {
		if !strings.Contains(","+strings.Join(ids, ",")+",", ","+c.ID+",") {
			continue
		}
		var ans struct {
			Rules []rule `json:"rules"`
		}
		for _, l := range c.Labels {
			r := rule{RuleID: l.RuleID, DataSufficiency: true, Rationale: "As the agreement states.", NumericalOutput: l.Numerical, NotApplicable: l.NotApplicable, Evidences: []ev{}}
			if l.Boolean != nil {
				r.BooleanOutput = ptr(*l.Boolean != flip)
			}
			for _, g := range l.Gold {
				r.Evidences = append(r.Evidences, ev{g.Text, g.Document, g.Page})
			}
			ans.Rules = append(ans.Rules, r)
		}
		data, err := json.Marshal(ans)
		if err != nil {
			t.Fatal(err)
		}
		replies = append(replies, llmfake.Reply{Content: string(data), PromptTokens: 3000, CompletionTokens: 500})
	}
	return replies
}

// printedReport reads the one report eval --json printed.
func printedReport(t *testing.T, stdout string) eval.Report {
	t.Helper()
	var rep eval.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not one report: %v\n%s", err, stdout)
	}
	return rep
}

func runEvalCLI(t *testing.T, fake *llmfake.Server, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runEvalCLIEnv(t, fake, nil, args...)
}

// runEvalCLIEnv is runEvalCLI with the variables of env set too.
func runEvalCLIEnv(t *testing.T, fake *llmfake.Server, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	getenv := func(k string) string {
		switch {
		case k == "OPENAI_BASE_URL" && fake != nil:
			return fake.URL()
		case k == "RULEVALIDATOR_LLM_INSTRUCTIONS":
			return "system" // scripted replies answer judging calls only
		case k == "RULEVALIDATOR_MODEL_PROFILE":
			// The default model's profile judges a rule a call; a scripted reply answers
			// every rule of a case.
			return "none"
		}
		return env[k]
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var out, errOut strings.Builder
	code = run(ctx, append([]string{"eval"}, args...), &out, &errOut, getenv)
	return code, out.String(), errOut.String()
}

func TestEvalCLIReportsAndGates(t *testing.T) {
	t.Parallel()
	fake := llmfake.New()
	defer fake.Close()
	fake.Enqueue(labelledReplies(t, evalCases, false)...)
	cases := "--cases=" + strings.Join(evalCases, ",")

	code, stdout, stderr := runEvalCLI(t, fake, "--dataset", evalDataset, cases, "--json", "--min-accuracy", "1", "--output-retries", "0")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	rep := printedReport(t, stdout)
	s := rep.System(eval.SystemEngine)
	if rep.Cases != 2 || s == nil || s.Overall.Accuracy == nil || *s.Overall.Accuracy != 1 || s.Cost.Calls != 2 || s.Cost.PromptTokens != 6000 {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(stderr, "engine run 1 case michigan-genesis: ok") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}

	// The same cases answered with every boolean flipped fail the gate.
	fake.Enqueue(labelledReplies(t, evalCases, true)...)
	code, stdout, stderr = runEvalCLI(t, fake, "--dataset", evalDataset, cases, "--min-accuracy", "0.9", "--output-retries", "0")
	if code != exitBelowMinimum {
		t.Fatalf("exit %d, want %d\n%s", code, exitBelowMinimum, stderr)
	}
	if !strings.Contains(stderr, "is below --min-accuracy 0.900") {
		t.Errorf("stderr does not say why:\n%s", stderr)
	}
	for _, want := range []string{"verdict accuracy", "ENGINE", "Per rule", "governing-law", "Per case", "michigan-genesis"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
}

// Two runs of disjoint cases, each written with --json, merge into the
// report of both: no model call, the gate applied to the merged figures.
func TestEvalCLIMergesReports(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var files []string
	for i, c := range evalCases {
		fake := llmfake.New()
		defer fake.Close()
		fake.Enqueue(labelledReplies(t, []string{c}, i == 1)...) // the second case answered all wrong
		code, stdout, stderr := runEvalCLI(t, fake, "--dataset", evalDataset, "--cases", c, "--json", "--output-retries", "0")
		if code != exitOK {
			t.Fatalf("case %s: exit %d\n%s", c, code, stderr)
		}
		files = append(files, filepath.Join(dir, c+".json"))
		if err := os.WriteFile(files[i], []byte(stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runEvalCLI(t, nil, "--merge", strings.Join(files, ","), "--json", "--min-accuracy", "0.4")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	rep := printedReport(t, stdout)
	s := rep.System(eval.SystemEngine)
	if rep.Cases != 2 || s == nil || len(s.PerCase) != 2 || s.Cost.Calls != 2 || s.Overall.Accuracy == nil || *s.Overall.Accuracy >= 1 || *s.Overall.Accuracy <= 0.4 {
		t.Fatalf("merged report: %d cases, engine %+v", rep.Cases, s)
	}
	code, stdout, stderr = runEvalCLI(t, nil, "--merge", strings.Join(files, ","), "--min-accuracy", "0.9")
	if code != exitBelowMinimum || !strings.Contains(stderr, "is below --min-accuracy 0.900") || !strings.Contains(stdout, "Per case") {
		t.Errorf("merged table gated at 0.9: exit %d\n%s\n%s", code, stderr, stdout)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"with a dataset", []string{"--merge", files[0], "--dataset", evalDataset}, "--merge judges nothing: it takes no --dataset"},
		{"the same case twice", []string{"--merge", files[0] + "," + files[0]}, "is in report 1 and report 2: merge reports of disjoint cases"},
		{"a missing file", []string{"--merge", filepath.Join(dir, "none.json")}, "none.json: no such file"},
		{"not a report", []string{"--merge", evalDataset + "/dataset.yaml"}, "dataset.yaml is not a report eval --json wrote"},
	} {
		if code, _, stderr := runEvalCLI(t, nil, tt.args...); code != exitInvalid || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: exit %d, want %d and %q:\n%s", tt.name, code, exitInvalid, tt.want, stderr)
		}
	}
}

// What --recheck cannot do is refused before any model call.
func TestEvalCLIRecheckRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fake := llmfake.New()
	defer fake.Close()
	fake.Enqueue(labelledReplies(t, evalCases[:1], false)...)
	code, stdout, stderr := runEvalCLI(t, fake, "--dataset", evalDataset, "--cases", evalCases[0], "--json", "--output-retries", "0")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	recorded := filepath.Join(dir, "run.json")
	if err := os.WriteFile(recorded, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.json")
	if err := os.WriteFile(other, []byte(strings.Replace(stdout, `"dataset": "edgar-nda"`, `"dataset": "another"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"with a baseline", []string{"--recheck", recorded, "--baseline", "per-rule"}, "--recheck asks the checks again of one recorded run of the engine: it takes no --runs, --baseline"},
		{"with runs", []string{"--recheck", recorded, "--runs", "2"}, "it takes no --runs"},
		{"a missing report", []string{"--recheck", filepath.Join(dir, "none.json")}, "none.json: no such file"},
		{"another dataset's report", []string{"--recheck", other}, `the report is of dataset "another", not "edgar-nda"`},
		{"a case the report lacks", []string{"--recheck", recorded, "--cases", evalCases[1]}, "no case " + evalCases[1]},
		{"another confidence source", []string{"--recheck", recorded, "--confidence", "logprobs"}, "the engine's confidence must be verify"},
	} {
		fake := llmfake.New()
		code, _, stderr := runEvalCLI(t, fake, append([]string{"--dataset", evalDataset}, tt.args...)...)
		if code != exitInvalid || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: exit %d, want %d saying %q:\n%s", tt.name, code, exitInvalid, tt.want, stderr)
		}
		if n := len(fake.Requests()); n != 0 {
			t.Errorf("%s: %d model calls", tt.name, n)
		}
		fake.Close()
	}
}

// The bounds of --min-accuracy are gates too: 0 passes any run that
// answered, 1 only a perfect one.
func TestEvalCLIGateBounds(t *testing.T) {
	cases := "--cases=" + strings.Join(evalCases, ",")
	for _, tt := range []struct {
		min  string
		flip bool
		want int
	}{{"0", true, exitOK}, {"1", false, exitOK}, {"1", true, exitBelowMinimum}} {
		t.Run(tt.min, func(t *testing.T) {
			fake := llmfake.New()
			defer fake.Close()
			fake.Enqueue(labelledReplies(t, evalCases, tt.flip)...)
			code, _, stderr := runEvalCLI(t, fake, "--dataset", evalDataset, cases, "--min-accuracy", tt.min, "--output-retries", "0")
			if code != tt.want {
				t.Errorf("exit %d, want %d\n%s", code, tt.want, stderr)
			}
		})
	}
}

// The command counts every HTTP request the server saw: a server without
// json_schema refuses the first call's format, so two calls take three
// requests.
func TestEvalCLICountsEveryHTTPAttempt(t *testing.T) {
	fake := llmfake.New()
	defer fake.Close()
	fake.RefuseFormats("json_schema")
	fake.Enqueue(labelledReplies(t, evalCases, false)...)
	code, stdout, stderr := runEvalCLI(t, fake, "--dataset", evalDataset, "--cases="+strings.Join(evalCases, ","), "--json", "--output-retries", "0")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	rep := printedReport(t, stdout)
	c := rep.System(eval.SystemEngine).Cost
	if sent := len(fake.Requests()); sent != 3 || c.Calls != 2 || !c.AttemptsObserved || c.Attempts != sent || c.FailedAttempts != 1 || c.FormatRefusals != 1 {
		t.Errorf("the server saw %d requests; cost %+v, want 2 calls and 3 HTTP attempts, 1 of them a format refusal", sent, c)
	}
	if c.PromptTokens != 6000 || c.CompletionTokens != 1000 || c.ModelTime <= 0 {
		t.Errorf("cost %+v, want 6000 prompt and 1000 completion tokens and some model time", c)
	}
}

// --first N judges the first N cases of the dataset, after --cases: a quick
// run of a large dataset.
func TestEvalCLIFirstCases(t *testing.T) {
	t.Parallel()
	ds, err := eval.Load(evalDataset)
	if err != nil {
		t.Fatal(err)
	}
	first := ds.Cases[0].ID
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"first of the dataset", []string{"--first", "1"}, []string{first}},
		{"first of those named", []string{"--cases", strings.Join(evalCases, ","), "--first", "1"}, evalCases[:1]},
		{"more than there are", []string{"--cases", strings.Join(evalCases, ","), "--first", "9"}, evalCases},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := llmfake.New()
			defer fake.Close()
			fake.Enqueue(labelledReplies(t, tt.want, false)...)
			args := append([]string{"--dataset", evalDataset, "--json", "--output-retries", "0"}, tt.args...)
			code, stdout, stderr := runEvalCLI(t, fake, args...)
			if code != exitOK {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			rep := printedReport(t, stdout)
			var judged []string
			for _, c := range rep.System(eval.SystemEngine).PerCase {
				judged = append(judged, c.Case)
			}
			if strings.Join(judged, ",") != strings.Join(tt.want, ",") {
				t.Errorf("judged %v, want %v", judged, tt.want)
			}
		})
	}
}

// With the OTEL_* variables set, eval traces as serve does: each case judged
// is an evaluate span of a trace of its own, with its model calls, whose
// requests carry that trace. A variable it cannot read is refused.
func TestEvalCLITracesEachCase(t *testing.T) {
	t.Parallel()
	fake := llmfake.New()
	defer fake.Close()
	fake.Enqueue(labelledReplies(t, evalCases, false)...)
	rcv := otlptest.New(t)
	otel := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL()}
	code, _, stderr := runEvalCLIEnv(t, fake, otel, "--dataset", evalDataset, "--cases="+strings.Join(evalCases, ","), "--output-retries", "0")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	// Flushed at exit: the spans are there when run returns.
	traces := map[string]bool{}
	chats := map[string]string{}
	for _, s := range rcv.Spans() {
		switch {
		case s.GetName() == "evaluate" && s.ParentID() == "":
			traces[s.TraceID()] = true
		case strings.HasPrefix(s.GetName(), "chat "):
			chats[s.SpanID()] = s.TraceID()
		}
	}
	if len(traces) != len(evalCases) || len(chats) != len(evalCases) {
		t.Fatalf("%d evaluate traces and %d model call spans, want %d of each", len(traces), len(chats), len(evalCases))
	}
	for _, call := range fake.Requests() {
		parts := strings.Split(call.Header.Get("traceparent"), "-")
		if len(parts) != 4 || !traces[chats[parts[2]]] || chats[parts[2]] != parts[1] {
			t.Errorf("a model request carries traceparent %q, not one of its call's span", call.Header.Get("traceparent"))
		}
	}

	code, _, stderr = runEvalCLIEnv(t, fake, map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "--dataset", evalDataset)
	if code != exitInvalid || !strings.Contains(stderr, "OTEL_TRACES_EXPORTER") {
		t.Errorf("exit %d, want %d naming the variable:\n%s", code, exitInvalid, stderr)
	}
}

func TestEvalCLIRejectsBadArguments(t *testing.T) {
	t.Parallel()
	bad := t.TempDir()
	manifest := "name: x\ncases:\n  - id: c\n    input: missing.yaml\n    labels: [{rule_id: r, boolean_output: true}]\n"
	if err := os.WriteFile(filepath.Join(bad, "dataset.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no dataset", nil, "--dataset is required"},
		{"unknown baseline", []string{"--dataset", evalDataset, "--baseline", "judge"}, `the only baseline is "per-rule"`},
		{"runs", []string{"--dataset", evalDataset, "--runs", "0"}, "--runs 0"},
		{"accuracy over one", []string{"--dataset", evalDataset, "--min-accuracy", "80"}, "--min-accuracy 80: accuracy is a share between 0 and 1"},
		// A gate below 0 or NaN passes every run: it is refused, not ignored.
		{"negative accuracy", []string{"--dataset", evalDataset, "--min-accuracy", "-0.5"}, "--min-accuracy -0.5: accuracy is a share between 0 and 1"},
		{"NaN accuracy", []string{"--dataset", evalDataset, "--min-accuracy", "NaN"}, "--min-accuracy NaN: accuracy is a share between 0 and 1"},
		{"infinite accuracy", []string{"--dataset", evalDataset, "--min-accuracy=-Inf"}, "--min-accuracy -Inf: accuracy is a share between 0 and 1"},
		{"accuracy not a number", []string{"--dataset", evalDataset, "--min-accuracy", "90%"}, `invalid value "90%" for flag -min-accuracy: not a number`},
		{"unknown case", []string{"--dataset", evalDataset, "--cases", "nebs-premium-wear,nope"}, "no case nope"},
		{"negative first", []string{"--dataset", evalDataset, "--first", "-1"}, "--first -1: must be 0 (all cases) or more"},
		{"malformed dataset", []string{"--dataset", bad}, `case "c": ruleset: no ruleset`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := llmfake.New()
			defer fake.Close()
			code, _, stderr := runEvalCLI(t, fake, tt.args...)
			if code != exitInvalid {
				t.Errorf("exit %d, want %d", code, exitInvalid)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, stderr)
			}
			if n := len(fake.Requests()); n != 0 {
				t.Errorf("%d model calls for an invalid command line", n)
			}
		})
	}
}

// TestEvalAgainstRealModel runs eval with the baseline on part of the shipped
// dataset against the local model (ops/test.sh starts it and sets
// OPENAI_BASE_URL). It asserts that the scoring works, not a level.
//
// It is in the real-model tier (bash ops/test.sh --real-model, testtier.RequireRealModel):
// a release, and a change to the prompt, the local stack or the checks, must pass it.
func TestEvalAgainstRealModel(t *testing.T) {
	testtier.RequireRealModel(t)
	realModelURL(t)

	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	// One short case keeps the test to a few minutes on two cores.
	args := []string{"eval", "--dataset", evalDataset, "--cases", "citizens-bank-logan", "--baseline", "per-rule",
		"--json", "--llm-timeout", "10m", "--max-tokens", "1200"}
	code := run(ctx, args, &stdout, &stderr, os.Getenv)
	t.Logf("stderr:\n%s", stderr.String())
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	rep := printedReport(t, stdout.String())
	t.Logf("report:\n%s", stdout.String())
	if len(rep.Systems) != 2 {
		t.Fatalf("%d systems, want engine and baseline", len(rep.Systems))
	}
	for _, s := range rep.Systems {
		m := s.Overall
		if m.Verdicts != rep.Rules || len(s.Outcomes) != rep.Rules {
			t.Errorf("%s: %d verdicts and %d outcomes, want %d", s.Name, m.Verdicts, len(s.Outcomes), rep.Rules)
		}
		if m.Accuracy == nil || *m.Accuracy < 0 || *m.Accuracy > 1 {
			t.Errorf("%s: accuracy %v out of range", s.Name, m.Accuracy)
		}
		correct := 0
		for _, o := range s.Outcomes {
			if o.Correct {
				correct++
			}
			if o.Correct != (o.OutputCorrect && o.NotApplicableCorrect) {
				t.Errorf("%s: outcome %+v is inconsistent", s.Name, o)
			}
		}
		if correct != m.Correct {
			t.Errorf("%s: %d correct outcomes, metrics say %d", s.Name, correct, m.Correct)
		}
		if s.Cost.Calls == 0 || s.Cost.PromptTokens == 0 || s.Cost.Wall <= 0 {
			t.Errorf("%s: cost %+v, want calls, tokens and time", s.Name, s.Cost)
		}
		if m.Evidence.Gold == 0 {
			t.Errorf("%s: no gold spans counted", s.Name)
		}
	}
	if b := rep.System(eval.SystemBaseline); b.Cost.Calls < rep.Rules {
		t.Errorf("baseline made %d calls for %d rules", b.Cost.Calls, rep.Rules)
	}

	// The default model's profile checks every verdict: the report sweeps
	// the overrule, and the checks asked again of the same verdicts with the
	// same settings give the same confidences (greedy decoding), with no
	// judging call.
	engineRep := rep.System(eval.SystemEngine)
	if engineRep.Overrule == nil {
		t.Log("this model's profile does not check verdicts: no sweep, nothing to recheck")
		return
	}
	recorded := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(recorded, []byte(stdout.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	code = run(ctx, []string{"eval", "--dataset", evalDataset, "--recheck", recorded, "--json", "--llm-timeout", "10m"}, &stdout, &stderr, os.Getenv)
	t.Logf("recheck stderr:\n%s", stderr.String())
	if code != exitOK {
		t.Fatalf("recheck: exit %d", code)
	}
	again := printedReport(t, stdout.String())
	rechecked := again.System(eval.SystemEngine)
	if by := rechecked.Cost.ByPurpose; by[engine.PurposeJudge].Calls != 0 || by[engine.PurposeCheck].Calls == 0 {
		t.Errorf("the recheck's calls by purpose: %+v, want checks alone", by)
	}
	for i, o := range engineRep.Outcomes {
		r := rechecked.Outcomes[i]
		differs := (o.Confidence == nil) != (r.Confidence == nil) || (o.Confidence != nil && r.Confidence != nil && math.Abs(*o.Confidence-*r.Confidence) > 0.02)
		if differs || o.Overruled != r.Overruled || o.Correct != r.Correct {
			t.Errorf("%s: recorded %v (overruled %v), rechecked %v (overruled %v)", o.RuleID, o.Confidence, o.Overruled, r.Confidence, r.Overruled)
		}
	}
}

// eval judges the shipped dataset from its PDF inputs (--inputs pdf): with the model
// answering the labels and quoting the gold passages, it scores 100%, every page right.
func TestEvalCLIFromPDFInputs(t *testing.T) {
	t.Parallel()
	pdftest.Warm(t)
	fake := llmfake.New()
	defer fake.Close()
	ds, err := eval.Load(evalDataset)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range ds.Cases {
		ids = append(ids, c.ID)
	}
	fake.Enqueue(labelledReplies(t, ids, false)...)
	code, stdout, stderr := runEvalCLI(t, fake, "--dataset", evalDataset, "--inputs", "pdf", "--json", "--min-accuracy", "1", "--output-retries", "0")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	rep := printedReport(t, stdout)
	m := rep.System(eval.SystemEngine).Overall
	if rep.Cases != len(ids) || m.Accuracy == nil || *m.Accuracy != 1 || m.Evidence.PagesRightShare == nil || *m.Evidence.PagesRightShare != 1 ||
		m.Evidence.Recall == nil || *m.Evidence.Recall != 1 || m.Evidence.PagesCorrected != 0 {
		t.Fatalf("report from PDFs: %s", stdout)
	}
	// The model was shown the text PDFium read from the PDFs: page by page, as a viewer numbers them.
	if sent := fake.Requests(); len(sent) != len(ids) || !strings.Contains(sent[0].Messages[len(sent[0].Messages)-1].Content, "MUTUAL CONFIDENTIALITY AGREEMENT") {
		t.Errorf("%d requests; the first does not show the first agreement", len(sent))
	}
}

// The ContractNLI dev split runs through the command with the baseline:
// the table shows "not mentioned" said and the engine's margin over the
// plain judge.
func TestEvalCLIContractNLIDev(t *testing.T) {
	t.Parallel()
	const dir = "../../examples/eval/contractnli-dev"
	ds, err := eval.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"doc-003", "doc-012"}
	labels := map[string][]eval.Label{} // by document name
	for _, c := range ds.Cases {
		labels[c.Inputs.PrimaryDocs[0].Name] = c.Labels
	}
	fake := llmfake.New()
	defer fake.Close()
	// The engine answers as labelled, saying where the agreement does not
	// say; the plain judge passes every rule.
	fake.Answer(func(req llmfake.Call) llmfake.Reply {
		if strings.HasPrefix(req.Messages[0].Content, "You are grading output") {
			return llmfake.Reply{Content: `{"reason": "It does.", "pass": true, "score": 1}`}
		}
		user := req.Messages[len(req.Messages)-1].Content
		var rules []map[string]any
		for name, ls := range labels {
			if !strings.Contains(user, name) {
				continue
			}
			for _, m := range askedRuleText.FindAllStringSubmatch(user, -1) {
				id, _ := strconv.Unquote(m[1])
				for _, l := range ls {
					if l.RuleID == id {
						rules = append(rules, map[string]any{"rule_id": id, "data_sufficiency": !l.Insufficient, "not_applicable": false,
							"evidences": []any{}, "rationale": "Section 2 of the agreement decides it.", "boolean_output": *l.Boolean})
					}
				}
			}
		}
		data, _ := json.Marshal(map[string]any{"rules": rules})
		return llmfake.Reply{Content: string(data)}
	})
	code, stdout, stderr := runEvalCLI(t, fake, "--dataset", dir, "--cases", strings.Join(ids, ","), "--baseline", "per-rule", "--output-retries", "0")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"2 cases, 34 labelled verdicts per run", "not mentioned said", "boolean balanced (pass, fail recall)",
		"engine over the baseline: balanced accuracy +50.0 pp", "rationales restating the rule"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
}
