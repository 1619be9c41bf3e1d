package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"rulevalidator/engine/plan"
	"rulevalidator/internal/llmfake"
)

// askedRule is a rule as the rules after the material show it: its id, and
// for a numerical rule its allowed scores.
var askedRule = regexp.MustCompile(`(?m)^\d+\. rule_id: ("(?:[^"\\]|\\.)*")\n   type: (boolean|numerical)(?:\. numerical_output must be exactly one of: ([0-9, ]+))?`)

// ruleAnswerer answers every rule a call asks for, cleanly and claiming
// nothing (false, the lowest score, no evidence), and counts the rules asked.
type ruleAnswerer struct {
	mu    sync.Mutex
	asked map[string]int
	// counted reports the prompt's tokens as the engine estimates them,
	// so that its token estimate (and with it the plan of a long request)
	// stays as it is; else 3000 a call.
	counted bool
}

func (a *ruleAnswerer) answer(req llmfake.Call) llmfake.Reply {
	user := req.Messages[len(req.Messages)-1].Content
	var rules []map[string]any
	for _, m := range askedRule.FindAllStringSubmatch(user, -1) {
		id, _ := strconv.Unquote(m[1])
		a.mu.Lock()
		a.asked[id]++
		a.mu.Unlock()
		r := map[string]any{"rule_id": id, "data_sufficiency": true, "not_applicable": false, "evidences": []any{},
			"rationale": "The agreement shown does not establish this term clearly."}
		if m[2] == "numerical" {
			lowest, _ := strconv.Atoi(strings.TrimSpace(strings.Split(m[3], ",")[0]))
			r["numerical_output"] = lowest
		} else {
			r["boolean_output"] = false
		}
		rules = append(rules, r)
	}
	data, _ := json.Marshal(map[string]any{"rules": rules})
	prompt := 3000
	if a.counted {
		prompt = 0
		for _, m := range req.Messages {
			prompt += plan.Count(m.Content) + 8
		}
	}
	return llmfake.Reply{Content: string(data), PromptTokens: prompt, CompletionTokens: 100}
}

// TestEvalCLIRevalidates: --revalidate-ruleset judges the dataset, then the
// changed ruleset through the verdict cache the first run filled, asking
// only for the changed rule, and reports the second run's share of the
// first's cost.
func TestEvalCLIRevalidates(t *testing.T) {
	t.Parallel()
	fake := llmfake.New()
	defer fake.Close()
	a := &ruleAnswerer{asked: map[string]int{}}
	fake.Answer(a.answer)
	cases := "--cases=" + strings.Join(evalCases, ",")
	code, stdout, stderr := runEvalCLI(t, fake, "--dataset", evalDataset, cases, "--json", "--output-retries", "0",
		"--llm-rules-per-call", "1", "--revalidate-ruleset", evalDataset+"/ruleset-revised.yaml")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var got revalidation
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not one report: %v\n%s", err, stdout)
	}
	first, again := got.First.System("engine").Cost, got.Revalidation.System("engine").Cost
	if first.Calls != 20 || again.Calls != 2 {
		t.Errorf("calls: first run %d, re-validation %d; want 20 (10 rules, 2 cases) and 2 (the changed rule)", first.Calls, again.Calls)
	}
	if got.TokensShare != 0.1 || got.CallsShare != 0.1 {
		t.Errorf("shares: tokens %v, calls %v; want 0.1", got.TokensShare, got.CallsShare)
	}
	for id, n := range a.asked {
		want := len(evalCases)
		if id == "return-or-destroy" {
			want *= 2
		}
		if n != want {
			t.Errorf("rule %s asked %d times, want %d", id, n, want)
		}
	}
	if len(a.asked) != 10 {
		t.Errorf("%d rules asked, want 10: %v", len(a.asked), a.asked)
	}

	code, stdout, stderr = runEvalCLI(t, fake, "--dataset", evalDataset, cases, "--output-retries", "0",
		"--llm-rules-per-call", "1", "--revalidate-ruleset", evalDataset+"/ruleset-revised.yaml")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if want := fmt.Sprintf("model calls %d of %d (0.100)", 2, 20); !strings.Contains(stdout, want) || !strings.Contains(stdout, "Re-validation") {
		t.Errorf("table lacks %q:\n%s", want, stdout)
	}
	if code, _, stderr := runEvalCLI(t, fake, "--dataset", evalDataset, "--runs", "2", "--revalidate-ruleset", evalDataset+"/ruleset-revised.yaml"); code != exitInvalid {
		t.Errorf("--runs 2 with --revalidate-ruleset: exit %d, want %d\n%s", code, exitInvalid, stderr)
	}
}
