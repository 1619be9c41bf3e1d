package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/internal/llmfake"
	"rulevalidator/internal/synthdoc"
	"rulevalidator/request"
)

var ruleEntry = regexp.MustCompile(`(?m)^\d+\. rule_id: ("(?:[^"\\]|\\.)*")\n   type: (boolean|numerical)`)

// insufficientAnswers answers every rule the request names after its
// material as judged on insufficient data.
func insufficientAnswers(req llmfake.Call) llmfake.Reply {
	var rules []map[string]any
	for _, m := range ruleEntry.FindAllStringSubmatch(req.Messages[len(req.Messages)-1].Content, -1) {
		id, _ := strconv.Unquote(m[1])
		v := map[string]any{"rule_id": id, "data_sufficiency": false, "not_applicable": false, "evidences": []any{},
			"rationale": "The passages shown do not address this rule."}
		if m[2] == "numerical" {
			v["numerical_output"] = 0
		} else {
			v["boolean_output"] = false
		}
		rules = append(rules, v)
	}
	data, _ := json.Marshal(map[string]any{"rules": rules})
	return llmfake.Reply{Content: string(data), PromptTokens: 1000, CompletionTokens: 100}
}

// TestValidateSplitsALongDocument: --llm-context-tokens makes validate judge
// a document too long for the window in several calls, each within it, and
// the JSON result says how many and on which pages each rule was judged.
func TestValidateSplitsALongDocument(t *testing.T) {
	t.Parallel()
	example, err := readFile(exampleInput, request.ParseInputs)
	if err != nil {
		t.Fatal(err)
	}
	contract := example.PrimaryDocs[0]
	contract.Pages = append(slices.Clone(contract.Pages), synthdoc.Pages(40, 2000, 17)...)
	in := *example
	in.PrimaryDocs = []engine.Document{contract}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	inputPath := filepath.Join(t.TempDir(), "input.json")
	if err := os.WriteFile(inputPath, data, 0o600); err != nil {
		t.Fatal(err)
	}

	fake := llmfake.New()
	defer fake.Close()
	fake.Answer(insufficientAnswers)
	code, stdout, stderr := runCLI(t, fake, "validate", "--ruleset", exampleRuleset, "--input", inputPath, "--json",
		"--llm-instructions", "system", "--llm-context-tokens", "4096", "--llm-calls-per-request", "2")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var res engine.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout is not a result: %v\n%s", err, stdout)
	}
	requests := fake.Requests()
	if res.Usage.PlannedCalls < 2 || res.Usage.PlannedCalls != len(requests) {
		t.Errorf("usage %+v for %d requests", res.Usage, len(requests))
	}
	for i, req := range requests {
		size := 0
		for _, m := range req.Messages {
			size += len(m.Content)
		}
		if !strings.Contains(req.Messages[1].Content, "excerpts of the documents") {
			t.Errorf("call %d is not marked as an excerpt", i)
		}
		if size >= len(contract.Text()) { // no call carries the whole contract
			t.Errorf("call %d carries %d bytes, the whole contract is %d", i, size, len(contract.Text()))
		}
	}
	if len(res.Rules) != len(exampleRuleIDs) {
		t.Fatalf("%d verdicts", len(res.Rules))
	}
	for _, v := range res.Rules {
		if !slices.Contains(exampleModelRuleIDs, v.RuleID) {
			continue // decided by a check or a filter, without the model
		}
		if len(v.PagesConsidered) == 0 || v.PagesConsidered[0].Document != contract.Name {
			t.Errorf("%s: pages considered %+v", v.RuleID, v.PagesConsidered)
		}
	}
	if !strings.Contains(stdout, `"pages_considered"`) || !strings.Contains(stdout, `"planned_calls"`) {
		t.Error("the JSON result does not show the plan")
	}

	// The text report says so too.
	code, stdout, stderr = runCLI(t, fake, "validate", "--ruleset", exampleRuleset, "--input", inputPath,
		"--llm-instructions", "system", "--llm-context-tokens", "4096")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"it was judged in", "judged on northwind-msa.pdf, pages "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the text report lacks %q:\n%s", want, stdout)
		}
	}
}
