package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"rulevalidator/engine"
	"rulevalidator/internal/testtier"
)

// TestDemoRequestCitesRealPassages judges the demo's contract request (the
// request ops/demo.sh publishes, through validate: the same engine path) with
// the local model in the default evidence mode, and holds every verdict to
// the audit trail the demo shows: a rationale that is not a placeholder, and
// evidence that is a real passage of a supplied document, verbatim, with its
// page. A 270M model's judgement is poor; what it cites is still real.
//
// Real-model tier: it runs only with RULEVALIDATOR_REAL_MODEL=1 (ops/test.sh
// --real-model) and OPENAI_BASE_URL set to the local model. A release, and
// any change to the prompt, the local model stack (ops/llm.sh, ops/llm/) or
// the checks, must pass it.
func TestDemoRequestCitesRealPassages(t *testing.T) {
	testtier.RequireRealModel(t)
	baseURL := realModelURL(t)
	const request = "../../examples/contract-review/request.json"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, serviceBinary(t), "validate", "--ruleset", exampleRuleset, "--input", request, "--json",
		"--llm-base-url", baseURL, "--llm-timeout", "15m", "--llm-rules-per-call", "1", "--llm-calls-per-request", "1") // as ops/demo.sh serves it
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("validate: %v\n%s", err, stderr.String())
	}
	var res engine.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("validate --json: %v\n%s", err, stdout.String())
	}

	pages := requestPages(t, request)
	if len(res.Rules) != len(exampleRuleIDs) {
		t.Fatalf("%d verdicts, want the %d rules of the contract ruleset", len(res.Rules), len(exampleRuleIDs))
	}
	for _, v := range res.Rules {
		if !slices.Contains(exampleModelRuleIDs, v.RuleID) {
			continue // decided by a check or a filter, without the model
		}
		t.Logf("%s: %v/%v, rationale %q, %d evidence(s), problems %q", v.RuleID, ptrString(v.BooleanOutput), ptrString(v.NumericalOutput), v.Rationale, len(v.Evidences), v.Problems)
		if n := distinctWords(v.Rationale); n < 3 {
			t.Errorf("%s: rationale %q is a placeholder (%d distinct words of two letters or more)", v.RuleID, v.Rationale, n)
		}
		// The engine's own checks are stricter: a verdict kept with a
		// rationale they reject is marked, and the demo must show none.
		for _, p := range v.Problems {
			if strings.Contains(p, "rationale") {
				t.Errorf("%s: kept with a rationale the checks reject: %s", v.RuleID, p)
			}
		}
		real := 0
		for _, ev := range v.Evidences {
			t.Logf("  %s p.%d (cited p.%d) %s: %q", ev.SourceOrigin, ev.SourcePageNumber, ev.CitedPageNumber, ev.PassageID, ev.Text)
			doc, ok := pages[ev.SourceOrigin]
			switch {
			case !ok:
				// A named input or the message: real, but not a passage of a document.
			case ev.SourcePageNumber < 1 || ev.SourcePageNumber > len(doc):
				t.Errorf("%s: evidence on page %d of %q, which has %d", v.RuleID, ev.SourcePageNumber, ev.SourceOrigin, len(doc))
			case !ev.Anchored || strings.TrimSpace(ev.Text) == "" || !strings.Contains(doc[ev.SourcePageNumber-1], ev.Text):
				t.Errorf("%s: evidence %q is not verbatim on page %d of %q", v.RuleID, ev.Text, ev.SourcePageNumber, ev.SourceOrigin)
			default:
				real++
			}
		}
		if real == 0 {
			t.Errorf("%s: no evidence is a passage of a supplied document", v.RuleID)
		}
	}
}

// distinctWords counts the distinct words of s made of two letters or more:
// "n/a, n/a, n/a" and "1, 2, 3 (0-5)" have none.
func distinctWords(s string) int {
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) }) {
		if utf8.RuneCountInString(w) >= 2 {
			seen[w] = true
		}
	}
	return len(seen)
}

// requestPages reads the documents of a request file: name to pages.
func requestPages(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	docs := map[string]any{}
	for _, k := range []string{"primary_docs", "auxiliary_docs"} {
		if v, ok := raw[k]; ok {
			docs[k] = v
		}
	}
	in, err := engine.InputsFromMap(docs)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string][]string{}
	for _, d := range in.Documents() {
		out[d.Name] = d.Pages
	}
	return out
}

func ptrString[T any](p *T) any {
	if p == nil {
		return "-"
	}
	return *p
}
