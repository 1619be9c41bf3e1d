package engine_test

import (
	"errors"
	"strings"
	"testing"

	"rulevalidator/engine"
)

func TestParseRulesetRefusesTreeProblems(t *testing.T) {
	deep := `{"id": "g4", "rules": [{"rule_id": "d", "rule_text": "t"}]}`
	for _, id := range []string{"g3", "g2", "g1", "g0"} {
		deep = `{"id": "` + id + `", "rules": [{"rule_id": "r` + id + `", "rule_text": "t"}], "nested_rulesets": [` + deep + `]}`
	}
	deep = `{"id": "t", "rules": [{"rule_id": "top", "rule_text": "t"}], "nested_rulesets": [` + deep + `]}`
	tests := []struct {
		name string
		doc  string
		want []string // substrings of the messages, in order
	}{
		{
			name: "expression that does not parse, in a group's filter",
			doc: `{"id": "t", "rules": [{"rule_id": "a", "rule_text": "t"}],
			"nested_rulesets": [{"id": "pay", "filter_criteria": "inputs.contract_value >", "rules": [{"rule_id": "p", "rule_text": "t"}]}]}`,
			want: []string{`ruleset "t": nested_rulesets[0] ("pay"): filter_criteria: line 1, column 24 of "inputs.contract_value >": Syntax error`},
		},
		{
			name: "unknown input name in a rule's check",
			doc: `{"id": "t", "inputs": {"contract_value": "number"}, "rules": [{"rule_id": "a", "rule_text": "t"}],
			"nested_rulesets": [{"id": "pay", "rules": [{"rule_id": "p", "rule_text": "t", "check": "inputs.contract_value > 1 && inputs.cap < 2"}]}]}`,
			want: []string{`ruleset "t": nested_rulesets[0] ("pay"): rules[0] (rule_id "p"): check: line 1, column 37 of "inputs.contract_value > 1 && inputs.cap < 2": unknown input "cap": the ruleset's inputs declare contract_value`},
		},
		{
			name: "check of the wrong type",
			doc:  `{"id": "t", "rules": [{"rule_id": "a", "rule_text": "t", "check": "'yes'"}]}`,
			want: []string{`rules[0] (rule_id "a"): check: line 1, column 1 of "'yes'": gives string; it must give a bool`},
		},
		{
			name: "rule ids unique across the tree",
			doc: `{"id": "t", "rules": [{"rule_id": "a", "rule_text": "t"}],
			"nested_rulesets": [{"id": "g", "rules": [{"rule_id": "a", "rule_text": "t"}]}]}`,
			want: []string{`ruleset "t": nested_rulesets[0] ("g"): rules[0] (rule_id "a"): rule_id: duplicate rule_id: rules[0] has it too`},
		},
		{
			name: "group ids unique",
			doc: `{"id": "t", "nested_rulesets": [{"id": "g", "rules": [{"rule_id": "a", "rule_text": "t"}]},
			{"id": "g", "rules": [{"rule_id": "b", "rule_text": "t"}]}]}`,
			want: []string{`nested_rulesets[1] ("g"): id: duplicate nested ruleset id: nested_rulesets[0] ("g") has it too`},
		},
		{
			name: "depth over the limit",
			doc:  deep,
			want: []string{`nested_rulesets[0] ("g0") > nested_rulesets[0] ("g1") > nested_rulesets[0] ("g2") > nested_rulesets[0] ("g3"): nested_rulesets: nested deeper than 4 levels`},
		},
		{
			name: "a gate without boolean rules, a group without rules",
			doc: `{"id": "t", "rules": [{"rule_id": "a", "rule_text": "t"}], "nested_rulesets": [
			{"id": "g", "required": true, "type": "numerical", "rules": [{"rule_id": "n", "rule_text": "t", "numerical_rule_config": {"possible_scores": [1]}}]},
			{"id": "e", "rules": []}]}`,
			want: []string{
				`nested_rulesets[0] ("g"): required: a gate needs boolean rules`,
				`nested_rulesets[1] ("e"): rules: no rules: give at least one`,
			},
		},
		{
			name: "top-level fields in a nested ruleset, a gate at the top",
			doc: `{"id": "t", "required": true, "rules": [{"rule_id": "a", "rule_text": "t"}],
			"nested_rulesets": [{"id": "g", "version": "2", "rules": [{"rule_id": "b", "rule_text": "t"}]}]}`,
			want: []string{
				`ruleset "t": unknown field "required"`,
				`nested_rulesets[0] ("g"): version: only the top-level ruleset takes version`,
			},
		},
		{
			name: "a group cycle through a YAML alias",
			doc:  "id: cyc\nrules: [{rule_id: a, rule_text: t}]\nnested_rulesets:\n  - &g\n    id: g\n    rules: [{rule_id: b, rule_text: t}]\n    nested_rulesets: [*g]\n",
			want: []string{`anchor 'g' value contains itself`},
		},
		{
			name: "a group repeated through a YAML alias",
			doc:  "id: rep\nrules: [{rule_id: a, rule_text: t}]\nnested_rulesets:\n  - &g\n    id: g\n    rules: [{rule_id: b, rule_text: t}]\n  - *g\n",
			want: []string{
				`nested_rulesets[1] ("g"): id: duplicate nested ruleset id: nested_rulesets[0] ("g") has it too`,
				`nested_rulesets[1] ("g"): rules[0] (rule_id "b"): rule_id: duplicate rule_id: nested_rulesets[0] ("g") rules[0] has it too`,
			},
		},
		{
			name: "unknown declared type",
			doc:  `{"id": "t", "inputs": {"cap": "money"}, "rules": [{"rule_id": "a", "rule_text": "t"}]}`,
			want: []string{`inputs.cap: unknown type "money"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := engine.ParseRuleset([]byte(tc.doc))
			if !errors.Is(err, engine.ErrInvalidRuleset) {
				t.Fatalf("ParseRuleset = %v; want an invalid ruleset", err)
			}
			got := joinedErrorLines(err)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(tc.want), err)
			}
			for i, want := range tc.want {
				if !strings.Contains(got[i], want) {
					t.Errorf("problem %d:\n got %s\nwant it to contain %s", i, got[i], want)
				}
			}
		})
	}
}

func TestRulesetErrorNamesTheExpression(t *testing.T) {
	_, err := engine.ParseRuleset([]byte(`{"id": "t", "rules": [{"rule_id": "a", "rule_text": "t", "filter_criteria": "inputs.x +"}]}`))
	var re *engine.RulesetError
	if !errors.As(err, &re) {
		t.Fatalf("want a RulesetError, got %v", err)
	}
	if re.RuleID != "a" || re.Field != "filter_criteria" || re.Expression != "inputs.x +" || re.Line != 1 || re.Column != 11 {
		t.Errorf("RulesetError = %+v", *re)
	}
}
