package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine/ruleexpr"
)

func TestRulesetWithUnboundedExpressionRefused(t *testing.T) {
	tests := []struct{ name, check, want string }{
		{"pattern read from an input", "inputs.s.matches(inputs.s)",
			`rules[0] (rule_id "m"): check: line 1, column 18 of "inputs.s.matches(inputs.s)": the pattern of matches must be a string literal`},
		{"loops nested over inputs", "inputs.l.all(x, inputs.l.all(y, inputs.l.all(z, x + y + z >= 0)))",
			`rules[0] (rule_id "m"): check: line 1, column 1 of "inputs.l.all(x, inputs.l.all(y, inputs.l.all(z, x + y + z >= 0)))": estimated cost up to`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRuleset([]byte(`{"id": "t", "rules": [{"rule_id": "m", "rule_text": "t", "check": "` + tc.check + `"}]}`))
			if !errors.Is(err, ErrInvalidRuleset) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseRuleset = %v; want an invalid ruleset with %q", err, tc.want)
			}
		})
	}
}

// TestChecksOverLongInputs: a check matching a string over the cap fails on
// that request only, fast, and the checks that read the string linearly
// still judge their rules.
func TestChecksOverLongInputs(t *testing.T) {
	rs := mustTree(t, `{"id": "c", "rules": [
	  {"rule_id": "match", "rule_text": "t", "check": "inputs.s.matches('^(a|b)*c$')"},
	  {"rule_id": "read", "rule_text": "t", "check": "size(inputs.s) > 0 && !inputs.s.contains('x') && inputs.s.startsWith('a')"}]}`)
	llm := &scriptedLLM{}
	e := newTestEngine(t, llm, Config{})
	start := time.Now()
	res, err := e.Evaluate(context.Background(), Task{Ruleset: rs, Inputs: &Inputs{TextInput: "x",
		NamedInputs: []NamedInput{{Name: "s", Value: strings.Repeat("a", 600<<10)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
	match, read := res.Rules[0], res.Rules[1]
	if match.DataSufficiency || len(match.Problems) != 1 ||
		!strings.Contains(match.Problems[0], "matches over a string of 614400 bytes; expressions match strings of at most 65536") {
		t.Errorf("match: %+v", match)
	}
	if read.BooleanOutput == nil || !*read.BooleanOutput {
		t.Errorf("read: %+v", read)
	}
}

// TestManyChecksQuotingALargeInput: five hundred checks reading one 4 MB
// input judge their rules quoting a clipped value each, without writing the
// input out once per rule.
func TestManyChecksQuotingALargeInput(t *testing.T) {
	rules := make([]string, 500)
	for i := range rules {
		rules[i] = fmt.Sprintf(`{"rule_id": "r%d", "rule_text": "t", "check": "size(inputs.m) > 0"}`, i)
	}
	rs := mustTree(t, `{"id": "c", "rules": [`+strings.Join(rules, ",")+`]}`)
	e := newTestEngine(t, &scriptedLLM{}, Config{})
	m := map[string]any{}
	for i := range 4096 {
		m[fmt.Sprintf("k%04d", i)] = strings.Repeat("v", 1000)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := e.Evaluate(context.Background(), Task{Ruleset: rs, Inputs: &Inputs{TextInput: "x", NamedInputs: []NamedInput{{Name: "m", Value: m}}}})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rules) != 500 {
		t.Fatalf("%d verdicts, want 500", len(res.Rules))
	}
	for _, v := range res.Rules {
		if len(v.Rationale) > 2*ruleexpr.MaxQuotedBytes || len(v.Evidences) != 1 || len(v.Evidences[0].Text) > 2*ruleexpr.MaxQuotedBytes {
			t.Fatalf("rule %s: rationale %d bytes, evidence %+v; want both clipped", v.RuleID, len(v.Rationale), len(v.Evidences))
		}
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("judging 500 checks over a 4 MB input allocated %d MB", alloc>>20)
	if alloc > 512<<20 {
		t.Errorf("judging allocated %d MB, want under 512 MB", alloc>>20)
	}
}
