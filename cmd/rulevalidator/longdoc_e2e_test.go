package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/plan"
	"rulevalidator/internal/synthdoc"
	"rulevalidator/internal/testtier"
	"rulevalidator/request"
	"rulevalidator/verdict"
)

// TestValidateLongDocumentAgainstRealModel judges, with the real local
// model, a multi-page contract that does not fit a 2048-token window: the
// request is split into several calls, each fitting the window, and every
// rule gets a valid verdict with the pages it was judged on. The window is
// declared with --llm-context-tokens, so any server whose own window is at
// least that large will do (ops/llm.sh start with LLM_CTX=2048 runs one that
// is exactly that large).
//
// It is in the real-model tier (bash ops/test.sh --real-model, testtier.RequireRealModel):
// a release, and a change to the prompt, the local stack or the checks, must pass it.
func TestValidateLongDocumentAgainstRealModel(t *testing.T) {
	testtier.RequireRealModel(t)
	realModelURL(t)

	full, err := readFile(exampleRuleset, engine.ParseRuleset)
	if err != nil {
		t.Fatal(err)
	}
	// Two of the example's rules keep the run short on a CPU-only server;
	// its nested rulesets read named inputs this request leaves out.
	rs := *full
	rs.Rules, rs.NestedRulesets = nil, nil
	for _, r := range full.Rules {
		if r.RuleID == "governing-law" || r.RuleID == "liability-cap" {
			rs.Rules = append(rs.Rules, r)
		}
	}
	example, err := readFile(exampleInput, request.ParseInputs)
	if err != nil {
		t.Fatal(err)
	}
	// The example contract followed by annexes: too long for the window.
	// The example's named inputs and auxiliary document are left out: with
	// the rules, the output contract and room for a re-ask they would fill
	// most of a 2048-token window.
	contract := example.PrimaryDocs[0]
	contract.Pages = append(slices.Clone(contract.Pages), synthdoc.Pages(6, 1500, 3)...)
	in := engine.Inputs{PrimaryDocs: []engine.Document{contract}, Message: example.Message}
	const window = 2048
	if n := plan.Count(engine.UserPrompt(&in, engine.EvidenceCite)); n <= window {
		t.Fatalf("the document is %d tokens by estimate: it must not fit %d", n, window)
	}
	dir := t.TempDir()
	inputPath, rulesetPath := filepath.Join(dir, "input.json"), filepath.Join(dir, "ruleset.json")
	for path, v := range map[string]any{inputPath: in, rulesetPath: rs} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	// Room for one rule's answer per call, one call at a time: the server
	// has one slot.
	code := run(ctx, []string{"validate", "--ruleset", rulesetPath, "--input", inputPath, "--json", "-v",
		"--llm-context-tokens", "2048", "--max-tokens", "448", "--llm-calls-per-request", "1"}, &stdout, &stderr, os.Getenv)
	t.Logf("stderr:\n%s", stderr.String())
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var res engine.Result
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("stdout is not a result: %v\n%s", err, stdout.String())
	}
	t.Logf("result:\n%s", stdout.String())
	if res.Usage.PlannedCalls < 2 || res.Usage.LLMCalls < res.Usage.PlannedCalls {
		t.Errorf("usage %+v: a request that does not fit must be split", res.Usage)
	}
	if res.Usage.PromptTokens > res.Usage.LLMCalls*window {
		t.Errorf("%d prompt tokens over %d calls: some call exceeded the %d-token window", res.Usage.PromptTokens, res.Usage.LLMCalls, window)
	}
	if len(res.Rules) != len(rs.Rules) {
		t.Fatalf("%d verdicts for %d rules", len(res.Rules), len(rs.Rules))
	}
	text := []rune(contract.Text())
	for i, rule := range rs.Rules {
		v := res.Rules[i]
		if v.RuleID != rule.RuleID || v.Type != rule.Type || strings.TrimSpace(v.Rationale) == "" {
			t.Errorf("verdict %d = %+v, want rule %q of type %s with a rationale", i, v, rule.RuleID, rule.Type)
		}
		switch rule.Type {
		case verdict.Numerical:
			if v.NumericalOutput != nil && !slices.Contains(rule.AllowedScores(), *v.NumericalOutput) {
				t.Errorf("rule %s: score %d not in %v", rule.RuleID, *v.NumericalOutput, rule.AllowedScores())
			}
		default:
			if v.BooleanOutput == nil && !(v.NotApplicable && rule.NotApplicableText == "") {
				t.Errorf("rule %s: no boolean_output", rule.RuleID)
			}
		}
		if len(v.PagesConsidered) != 1 || v.PagesConsidered[0].Document != contract.Name || len(v.PagesConsidered[0].Pages) == 0 {
			t.Errorf("rule %s: pages considered %+v", rule.RuleID, v.PagesConsidered)
		}
		for _, ev := range v.Evidences {
			if !ev.Anchored {
				continue
			}
			if ev.StartOffset == nil || *ev.EndOffset > len(text) || string(text[*ev.StartOffset:*ev.EndOffset]) != ev.Text {
				t.Errorf("rule %s: anchored evidence %+v is not the document's span", rule.RuleID, ev)
			}
		}
	}
}
