package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
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
