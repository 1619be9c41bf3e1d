package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/eval"
	"rulevalidator/internal/llmfake"
	"rulevalidator/judging"
	"rulevalidator/request"
	"rulevalidator/verdict"
)

// staticRulesets resolves every id to one ruleset.
type staticRulesets struct{ rs *engine.Ruleset }

func (s staticRulesets) Resolve(context.Context, string, string) (*engine.Ruleset, error) {
	return s.rs, nil
}

// TestEveryRoadGivesTheSameVerdicts: the example's inputs judged by the service's use case
// (judging.Judge), by validate and by eval reach the model as the same prompt and come
// back as the same verdicts, because all three judge through the one road into the engine
// (judging.Evaluate).
func TestEveryRoadGivesTheSameVerdicts(t *testing.T) {
	t.Parallel()
	fake := llmfake.New()
	defer fake.Close()
	fake.SetDefault(llmfake.Reply{Content: exampleAnswer(t, nil)})
	verdicts := map[string]map[string]string{} // road → rule → verdict
	var prompts [][]llmfake.Message
	seen := 0

	// validate
	code, stdout, stderr := runCLI(t, fake, "validate", "--ruleset", exampleRuleset, "--input", exampleInput, "--json")
	if code != exitOK {
		t.Fatalf("validate: exit %d\n%s", code, stderr)
	}
	var res engine.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("validate --json: %v", err)
	}
	verdicts["validate"] = map[string]string{}
	for _, v := range res.Rules {
		verdicts["validate"][v.RuleID] = verdictText(v.BooleanOutput, v.NumericalOutput, v.NotApplicable)
	}
	prompts = append(prompts, lastMessages(t, fake, &seen))

	// the service
	rs, err := readFile(exampleRuleset, engine.ParseRuleset)
	if err != nil {
		t.Fatal(err)
	}
	eng := oneRoadEngine(t, fake)
	judge, err := judging.New(judging.Config{Engine: eng, Rulesets: staticRulesets{rs}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exampleInput)
	if err != nil {
		t.Fatal(err)
	}
	m, err := request.DecodeObject(data)
	if err != nil {
		t.Fatal(err)
	}
	m["request_id"], m["tenant_id"], m["ruleset_ref"] = "one-road", "acme", map[string]any{"id": rs.ID}
	req, err := request.FromMap(m)
	if err != nil {
		t.Fatal(err)
	}
	out, release, err := judge.Judge(context.Background(), req, time.Now())
	release()
	if err != nil {
		t.Fatalf("service: %v", err)
	}
	verdicts["service"] = map[string]string{}
	for _, v := range out.Verdicts {
		verdicts["service"][v.RuleID] = verdictText(v.BooleanOutput, v.NumericalOutput, v.NotApplicable)
	}
	prompts = append(prompts, lastMessages(t, fake, &seen))

	// eval, on a dataset of the example labelled as the scripted model answers
	dir := t.TempDir()
	for name, from := range map[string]string{"ruleset.yaml": exampleRuleset, "input.json": exampleInput} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var labels strings.Builder
	for _, v := range res.Rules {
		fmt.Fprintf(&labels, "      - {rule_id: %s, not_applicable: %t", v.RuleID, v.NotApplicable)
		switch {
		case v.BooleanOutput != nil:
			fmt.Fprintf(&labels, ", boolean_output: %t", *v.BooleanOutput)
		case v.NumericalOutput != nil:
			fmt.Fprintf(&labels, ", numerical_output: %d", *v.NumericalOutput)
		case v.Type == verdict.Boolean:
			labels.WriteString(", boolean_output: false") // a label needs one; the roads are compared, not scored
		}
		labels.WriteString("}\n")
	}
	manifest := "name: one-road\nruleset: ruleset.yaml\ncases:\n  - id: example\n    input: input.json\n    labels:\n" + labels.String()
	if err := os.WriteFile(filepath.Join(dir, "dataset.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runEvalCLI(t, fake, "--dataset", dir, "--json", "--model", "fake-model")
	if code != exitOK {
		t.Fatalf("eval: exit %d\n%s", code, stderr)
	}
	var rep eval.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("eval --json: %v", err)
	}
	verdicts["eval"] = map[string]string{}
	for _, o := range rep.System(eval.SystemEngine).Outcomes {
		verdicts["eval"][o.RuleID] = verdictText(o.Boolean, o.Numerical, o.NotApplicable)
	}
	prompts = append(prompts, lastMessages(t, fake, &seen))

	if len(verdicts["validate"]) != len(rs.AllRules()) {
		t.Fatalf("validate judged %d rules, want %d", len(verdicts["validate"]), len(rs.AllRules()))
	}
	for _, road := range []string{"service", "eval"} {
		if !reflect.DeepEqual(verdicts[road], verdicts["validate"]) {
			t.Errorf("%s's verdicts %v, validate's %v", road, verdicts[road], verdicts["validate"])
		}
	}
	for i, road := range []string{"service", "eval"} {
		if !reflect.DeepEqual(prompts[i+1], prompts[0]) {
			t.Errorf("the model was asked otherwise by %s than by validate:\n%+v\n%+v", road, prompts[i+1], prompts[0])
		}
	}
}

// oneRoadEngine is the engine the judging commands build from their settings, against fake.
func oneRoadEngine(t *testing.T, fake *llmfake.Server) *engine.Engine {
	t.Helper()
	var (
		llm  llmConfig
		docs documentConfig
	)
	cl := newCommandLine("validate", validateDoc, judgeSettings(&llm, &docs), io.Discard)
	getenv := func(k string) string {
		return map[string]string{"OPENAI_BASE_URL": fake.URL(), "RULEVALIDATOR_MODEL": "fake-model", "RULEVALIDATOR_LLM_INSTRUCTIONS": "system"}[k]
	}
	if code, ok := cl.parse(nil, getenv); !ok {
		t.Fatalf("settings: exit %d", code)
	}
	eng, err := llm.newEngine(slog.New(slog.DiscardHandler), engine.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// lastMessages are the messages of the one call the model got since the seen calls before.
func lastMessages(t *testing.T, fake *llmfake.Server, seen *int) []llmfake.Message {
	t.Helper()
	reqs := fake.Requests()[*seen:]
	*seen += len(reqs)
	if len(reqs) != 1 {
		t.Fatalf("the model got %d calls, want 1", len(reqs))
	}
	return reqs[0].Messages
}

// verdictText is one verdict as the roads report it: pass, fail, a score, not applicable.
func verdictText(boolean *bool, score *int, notApplicable bool) string {
	s := "none"
	switch {
	case boolean != nil:
		s = fmt.Sprint(*boolean)
	case score != nil:
		s = fmt.Sprint(*score)
	}
	if notApplicable {
		s += " (n/a)"
	}
	return s
}
