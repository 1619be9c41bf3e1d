package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/internal/testtier"
	"rulevalidator/request"
	"rulevalidator/verdict"
)

// TestValidateAgainstRealModel runs the example through a real
// OpenAI-compatible server: the local llama.cpp server that ops/llm.sh starts
// (ops/test.sh starts it and sets OPENAI_BASE_URL). It asserts the output
// contract, not the model's judgement.
//
// It is in the real-model tier (bash ops/test.sh --real-model, testtier.RequireRealModel):
// a release, and a change to the prompt, the local stack or the checks, must pass it.
func TestValidateAgainstRealModel(t *testing.T) {
	testtier.RequireRealModel(t)
	realModelURL(t)

	// A corrective re-ask carries the first answer back to the model, so its
	// prompt is about twice as long: on a small CPU one call can take minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	code := run(ctx, []string{"validate", "--ruleset", exampleRuleset, "--input", exampleInput, "--json", "-v",
		"--output-retries", "1", "--llm-timeout", "8m"}, &stdout, &stderr, os.Getenv)
	t.Logf("stderr:\n%s", stderr.String())
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var res engine.Result
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("stdout is not a result: %v\n%s", err, stdout.String())
	}
	t.Logf("result:\n%s", stdout.String())

	rs, err := readFile(exampleRuleset, engine.ParseRuleset)
	if err != nil {
		t.Fatal(err)
	}
	in, err := readFile(exampleInput, request.ParseInputs)
	if err != nil {
		t.Fatal(err)
	}
	// Its nested rulesets' rules follow its own: a gate judged by a check
	// and a group its filter leaves out.
	rules := rs.AllRules()
	if len(res.Rules) != len(rules) {
		t.Fatalf("%d verdicts for %d rules", len(res.Rules), len(rules))
	}
	docs := map[string]string{}
	for _, d := range in.Documents() {
		docs[d.Name] = d.Text()
	}
	for i, rule := range rules {
		v := res.Rules[i]
		if v.RuleID != rule.RuleID || v.Type != rule.Type || strings.TrimSpace(v.Rationale) == "" {
			t.Errorf("verdict %d = %+v, want rule %q of type %s with a rationale", i, v, rule.RuleID, rule.Type)
		}
		switch rule.Type {
		case verdict.Numerical:
			if v.NumericalOutput != nil && !slices.Contains(rule.AllowedScores(), *v.NumericalOutput) {
				t.Errorf("rule %s: score %d not in %v", rule.RuleID, *v.NumericalOutput, rule.AllowedScores())
			}
			if v.NumericalOutput == nil && v.DataSufficiency && !v.NotApplicable {
				t.Errorf("rule %s: no score although data is sufficient", rule.RuleID)
			}
		default:
			if v.BooleanOutput == nil && !(v.NotApplicable && rule.NotApplicableText == "") {
				t.Errorf("rule %s: no boolean_output", rule.RuleID)
			}
		}
		for _, ev := range v.Evidences {
			text, isDoc := docs[ev.SourceOrigin]
			switch {
			case ev.Anchored:
				runes := []rune(text)
				if !isDoc || ev.StartOffset == nil || ev.EndOffset == nil || *ev.EndOffset > len(runes) || string(runes[*ev.StartOffset:*ev.EndOffset]) != ev.Text {
					t.Errorf("rule %s: anchored evidence %+v is not the document's span", rule.RuleID, ev)
				}
			default:
				// Never left unanchored when the quote is in a document verbatim.
				for name, text := range docs {
					if strings.Contains(text, ev.Text) {
						t.Errorf("rule %s: evidence %q is in %s verbatim but was not anchored", rule.RuleID, ev.Text, name)
					}
				}
			}
		}
	}
	if res.Usage.LLMCalls < 1 || res.Usage.PromptTokens == 0 {
		t.Errorf("usage = %+v", res.Usage)
	}
}

// ping asks the model server for its models. The local server answers one request at a time,
// so the answer waits for any generation in progress, another test's or another user's.
func ping(baseURL string) error {
	client := &http.Client{Timeout: 10 * time.Minute}
	resp, err := client.Get(strings.TrimSuffix(baseURL, "/") + "/models")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /models answered %s", resp.Status)
	}
	return nil
}

// realModelURL is the real model server's base URL (OPENAI_BASE_URL, which
// ops/test.sh sets after starting the local model). Without one, or when it
// does not answer, the test is skipped, or fails where integration tests are
// required.
func realModelURL(t *testing.T) string {
	t.Helper()
	baseURL := os.Getenv("OPENAI_BASE_URL")
	require := os.Getenv("RULEVALIDATOR_REQUIRE_INTEGRATION") == "1"
	if baseURL == "" {
		if require {
			t.Fatal("OPENAI_BASE_URL is not set; ops/test.sh starts the local model and sets it")
		}
		t.Skip("integration: OPENAI_BASE_URL is not set (run ops/test.sh, or ops/llm.sh start and export OPENAI_BASE_URL=$(ops/llm.sh url))")
	}
	if err := ping(baseURL); err != nil {
		if require {
			t.Fatalf("model server at %s: %v", baseURL, err)
		}
		t.Skipf("integration: model server at %s not reachable: %v", baseURL, err)
	}
	return baseURL
}
