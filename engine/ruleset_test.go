package engine_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/engine/ruleexpr"
	"rulevalidator/verdict"
)

func pointerTo[T any](v T) *T { return &v }

// joinedErrorLines splits a (joined) error into its messages.
func joinedErrorLines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

func TestParseRulesetResolvesDefaults(t *testing.T) {
	const doc = `
id: defaults
global_numerical_rule_config: {min_score: 1, max_score: 5, increment: 2}
rules:
  - rule_id: b
    rule_text: Boolean by inheritance.
  - rule_id: n-global
    type: numerical
    rule_text: Scored on the global range.
  - rule_id: n-own
    type: numerical
    weight: 2.5
    numerical_rule_config: {possible_scores: [3, 1, 3, 0, 2.0]}
    rule_text: Scored on its own set.
  - rule_id: n-empty-config
    type: numerical
    numerical_rule_config: {}
    rule_text: Empty config falls back to the global range.
`
	rs, err := engine.ParseRuleset([]byte(doc))
	if err != nil {
		t.Fatalf("ParseRuleset: %v", err)
	}
	want := &engine.Ruleset{
		ID:                        "defaults",
		Type:                      verdict.Boolean,
		GlobalNumericalRuleConfig: &engine.GlobalNumericalRuleConfig{MinScore: pointerTo(1), MaxScore: pointerTo(5), Increment: pointerTo(2)},
		BooleanAggregation:        verdict.AggregateAll,
		NumericalAggregation:      verdict.AggregateMean,
		Rules: []engine.Rule{
			{RuleID: "b", RuleText: "Boolean by inheritance.", Type: verdict.Boolean, Weight: pointerTo(1.0)},
			{RuleID: "n-global", RuleText: "Scored on the global range.", Type: verdict.Numerical, Weight: pointerTo(1.0),
				NumericalRuleConfig: &engine.NumericalRuleConfig{PossibleScores: []int{1, 3, 5}}},
			{RuleID: "n-own", RuleText: "Scored on its own set.", Type: verdict.Numerical, Weight: pointerTo(2.5),
				NumericalRuleConfig: &engine.NumericalRuleConfig{PossibleScores: []int{0, 1, 2, 3}}},
			{RuleID: "n-empty-config", RuleText: "Empty config falls back to the global range.", Type: verdict.Numerical, Weight: pointerTo(1.0),
				NumericalRuleConfig: &engine.NumericalRuleConfig{PossibleScores: []int{1, 3, 5}}},
		},
	}
	if !reflect.DeepEqual(rs, want) {
		t.Errorf("ParseRuleset:\n got %s\nwant %s", jsonString(t, rs), jsonString(t, want))
	}
	if got := rs.Rules[1].AllowedScores(); !slices.Equal(got, []int{1, 3, 5}) {
		t.Errorf("AllowedScores = %v, want [1 3 5]", got)
	}

	// Each rule owns its materialised set.
	rs.Rules[1].NumericalRuleConfig.PossibleScores[0] = 99
	if rs.Rules[3].NumericalRuleConfig.PossibleScores[0] != 1 {
		t.Error("rules share one materialised score slice")
	}
}

func TestParseRulesetRulesetTypeIsInherited(t *testing.T) {
	rs, err := engine.ParseRuleset([]byte(`{"type": "numerical", "numerical_aggregation": "sum",
		"global_numerical_rule_config": {"min_score": -2, "max_score": 2},
		"rules": [{"rule_id": "a", "rule_text": "x"}, {"rule_id": "b", "rule_text": "y", "type": "boolean"}]}`))
	if err != nil {
		t.Fatalf("ParseRuleset: %v", err)
	}
	if rs.Rules[0].Type != verdict.Numerical || !slices.Equal(rs.Rules[0].AllowedScores(), []int{-2, -1, 0, 1, 2}) {
		t.Errorf("rules[0] = %+v, want numerical scored -2..2 by the default increment 1", rs.Rules[0])
	}
	if rs.Rules[1].Type != verdict.Boolean || rs.Rules[1].NumericalRuleConfig != nil {
		t.Errorf("rules[1] = %+v, want boolean without scores", rs.Rules[1])
	}
	if rs.NumericalAggregation != verdict.AggregateSum {
		t.Errorf("numerical_aggregation = %q, want sum", rs.NumericalAggregation)
	}
}

func TestParseRulesetJSONAndYAMLGiveTheSameRuleset(t *testing.T) {
	yamlDoc := `
id: same
version: "2"
type: numerical
boolean_aggregation: majority
numerical_aggregation: weighted_mean
generate_report: true
cache: false
nested_rulesets: [{id: child, required: true, weight: 2, rules: [{rule_id: c1, type: boolean, rule_text: Child, check: inputs.x > 1}]}]
filter_criteria: 'inputs.region == "EU"'
global_numerical_rule_config: {min_score: 0, max_score: 3}
rules:
  - rule_id: r1
    name: First
    rule_text: Text one.
    not_applicable_text: Alternate.
    weight: 3
  - rule_id: r2
    type: boolean
    rule_text: Text two.
`
	jsonDoc := `  {"id": "same", "version": "2", "type": "numerical", "boolean_aggregation": "majority",
	"numerical_aggregation": "weighted_mean", "generate_report": true, "cache": false,
	"nested_rulesets": [{"id": "child", "required": true, "weight": 2, "rules": [{"rule_id": "c1", "type": "boolean", "rule_text": "Child", "check": "inputs.x > 1"}]}],
	"filter_criteria": "inputs.region == \"EU\"",
	"global_numerical_rule_config": {"min_score": 0, "max_score": 3},
	"rules": [
	  {"rule_id": "r1", "name": "First", "rule_text": "Text one.", "not_applicable_text": "Alternate.", "weight": 3},
	  {"rule_id": "r2", "type": "boolean", "rule_text": "Text two."}]}`
	fromYAML, err := engine.ParseRuleset([]byte(yamlDoc))
	if err != nil {
		t.Fatalf("ParseRuleset(YAML): %v", err)
	}
	fromJSON, err := engine.ParseRuleset([]byte(jsonDoc))
	if err != nil {
		t.Fatalf("ParseRuleset(JSON): %v", err)
	}
	if a, b := jsonString(t, fromYAML), jsonString(t, fromJSON); a != b {
		t.Errorf("YAML and JSON differ:\nYAML %s\nJSON %s", a, b)
	}
	if !fromJSON.GenerateReport || fromJSON.Version != "2" || fromJSON.BooleanAggregation != verdict.AggregateMajority {
		t.Errorf("top-level fields lost: %s", jsonString(t, fromJSON))
	}
}

// TestParseRulesetReadsEveryField fails when a field is added to the Go types
// without teaching the parser to read it.
func TestParseRulesetReadsEveryField(t *testing.T) {
	want := &engine.Ruleset{
		ID:                        "all-fields",
		Version:                   "7",
		Type:                      verdict.Numerical,
		GlobalNumericalRuleConfig: &engine.GlobalNumericalRuleConfig{MinScore: pointerTo(0), MaxScore: pointerTo(4), Increment: pointerTo(2)},
		BooleanAggregation:        verdict.AggregateAny,
		NumericalAggregation:      verdict.AggregateWeightedMean,
		GenerateReport:            true,
		Cache:                     pointerTo(false),
		ReviewBelowConfidence:     pointerTo(0.7),
		Inputs:                    map[string]ruleexpr.Type{"region": ruleexpr.TypeString},
		NestedRulesets: []engine.Ruleset{{ID: "child", Name: "Child", Type: verdict.Numerical, Required: true, Weight: pointerTo(2.0),
			BooleanAggregation: verdict.AggregateAll, NumericalAggregation: verdict.AggregateMin,
			Rules: []engine.Rule{{RuleID: "c", RuleText: "t", Type: verdict.Boolean, Weight: pointerTo(1.0), Check: `inputs.region == "EU"`}}}},
		FilterCriteria: `inputs.region == "EU"`,
		Required:       false,
		Rules: []engine.Rule{{
			RuleID:                "r",
			RuleText:              "text",
			Type:                  verdict.Numerical,
			NumericalRuleConfig:   &engine.NumericalRuleConfig{PossibleScores: []int{1, 2}},
			NotApplicableText:     "alternate",
			Name:                  "Name",
			Weight:                pointerTo(0.5),
			ReviewBelowConfidence: pointerTo(0.9),
			FilterCriteria:        `inputs.region != ""`,
		}},
	}
	// Required, Weight and Name belong to nested rulesets: see the child,
	// whose rule has the check (a rule with a check takes no alternate).
	top := map[string]bool{"Required": true, "Weight": true, "Name": true}
	for _, v := range []any{*want, want.NestedRulesets[0], *want.GlobalNumericalRuleConfig, want.Rules[0], *want.Rules[0].NumericalRuleConfig} {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			f := rv.Type().Field(i)
			if !f.IsExported() || (rv.Type().Name() == "Rule" && f.Name == "Check") || (rv.Type().Name() == "Ruleset" && top[f.Name] && v.(engine.Ruleset).ID == "all-fields") ||
				(rv.Type().Name() == "Ruleset" && v.(engine.Ruleset).ID == "child" && !top[f.Name] && f.Name != "Type" && f.Name != "Rules" && f.Name != "ID" &&
					!strings.HasSuffix(f.Name, "Aggregation")) {
				continue
			}
			if rv.Field(i).IsZero() {
				t.Fatalf("%s.%s is not set in this test; set it so the parser is checked to read it", rv.Type().Name(), rv.Type().Field(i).Name)
			}
		}
	}
	data, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := engine.ParseRuleset(data)
	if err != nil {
		t.Fatalf("ParseRuleset(%s): %v", data, err)
	}
	if a, b := jsonString(t, got), jsonString(t, want); a != b {
		t.Errorf("round trip:\n got %s\nwant %s", a, b)
	}
}

func TestParseRulesetRejects(t *testing.T) {
	long := strings.Repeat("x", engine.MaxRuleTextChars+1)
	manyRules := `{"id": "many", "rules": [` + strings.Repeat(`{"rule_id": "dup", "rule_text": "t"},`, engine.MaxRules) +
		`{"rule_id": "last", "rule_text": "t"}]}`
	tests := []struct {
		name string
		doc  string
		want []string // every message, in order
	}{
		{
			name: "empty document",
			doc:  " \n",
			want: []string{"ruleset: empty document"},
		},
		{
			name: "JSON syntax error names line and column",
			doc:  "{\n  \"id\": \"x\",\n  \"rules\": [}\n}",
			want: []string{`ruleset: invalid JSON at line 3, column 13 (byte offset 27): invalid character '}' looking for beginning of value`},
		},
		{
			name: "truncated JSON",
			doc:  `{"id": "x"`,
			want: []string{"ruleset: invalid JSON: the document ends early"},
		},
		{
			name: "data after the JSON document",
			doc:  `{"rules": []} {}`,
			want: []string{"ruleset: invalid JSON: unexpected data after the document at line 1, column 15 (byte offset 14)"},
		},
		{
			name: "YAML syntax error",
			doc:  "id: x\nrules: [\n",
			want: []string{"ruleset: invalid YAML: line 2: did not find expected node content"},
		},
		{
			name: "two YAML documents",
			doc:  "id: a\n---\nid: b\n",
			want: []string{"ruleset: invalid YAML: more than one document (remove the second '---')"},
		},
		{
			name: "not an object",
			doc:  "- a\n- b\n",
			want: []string{"ruleset: must be an object (got an array)"},
		},
		{
			name: "unknown field in a rule",
			doc: `id: contract-review
rules:
  - {rule_id: r1, rule_text: a}
  - {rule_id: r2, rule_text: b}
  - {rule_id: r3, rule_text: c, scroe: 3}
`,
			want: []string{`ruleset "contract-review": rules[2] (rule_id "r3"): unknown field "scroe" (known: rule_id, rule_text, type, numerical_rule_config, not_applicable_text, name, weight, filter_criteria, check, review_below_confidence)`},
		},
		{
			name: "unknown fields at every level",
			doc: `{"id": "u", "rule": [], "global_numerical_rule_config": {"min": 0},
			"rules": [{"rule_id": "a", "rule_text": "t", "type": "numerical", "numerical_rule_config": {"scores": [1]}}]}`,
			want: []string{
				`ruleset "u": global_numerical_rule_config: unknown field "min" (known: min_score, max_score, increment)`,
				`ruleset "u": unknown field "rule" (known: id, version, type, global_numerical_rule_config, boolean_aggregation, numerical_aggregation, generate_report, cache, review_below_confidence, inputs, nested_rulesets, filter_criteria, rules)`,
				// min/max were misspelt, so the rule has no score set.
				`ruleset "u": global_numerical_rule_config.min_score: missing, and needed by the numerical rules without possible_scores: a`,
				`ruleset "u": global_numerical_rule_config.max_score: missing, and needed by the numerical rules without possible_scores: a`,
				`ruleset "u": rules[0] (rule_id "a"): numerical_rule_config: unknown field "scores" (known: possible_scores)`,
			},
		},
		{
			name: "wrong JSON types",
			doc: `{"id": "w", "version": 2, "generate_report": "yes", "boolean_aggregation": 1,
			"rules": [{"rule_id": "a", "rule_text": "t"}, {"rule_id": "b", "rule_text": ["t"], "weight": "heavy", "name": 5}, "c"]}`,
			want: []string{
				`ruleset "w": boolean_aggregation: must be a string (got a number)`,
				`ruleset "w": generate_report: must be true or false (got a string)`,
				`ruleset "w": version: must be a string (got a number)`,
				`ruleset "w": rules[1] (rule_id "b"): name: must be a string (got a number)`,
				`ruleset "w": rules[1] (rule_id "b"): rule_text: must be a string (got an array)`,
				`ruleset "w": rules[1] (rule_id "b"): weight: must be a finite number (got a string)`,
				`ruleset "w": rules[2]: must be an object (got a string)`,
			},
		},
		{
			name: "unquoted YAML numbers where strings belong",
			doc:  "id: y\nversion: 1.0\nrules:\n  - {rule_id: 7, rule_text: t}\n",
			want: []string{
				`ruleset "y": version: must be a string (got a number); quote it in YAML, e.g. "1.0"`,
				`ruleset "y": rules[0]: rule_id: must be a string (got a number); quote it in YAML, e.g. "1.0"`,
			},
		},
		{
			name: "wrong types in score configs",
			doc: `{"id": "s", "type": "numerical", "global_numerical_rule_config": {"min_score": 0.5, "max_score": "5"},
			"rules": [{"rule_id": "a", "rule_text": "t", "numerical_rule_config": {"possible_scores": [1, "two", 1e40]}},
			{"rule_id": "b", "rule_text": "t", "numerical_rule_config": {"possible_scores": 3}}]}`,
			want: []string{
				`ruleset "s": global_numerical_rule_config.max_score: must be an integer (got a string)`,
				`ruleset "s": global_numerical_rule_config.min_score: must be an integer (got a number)`,
				`ruleset "s": rules[0] (rule_id "a"): numerical_rule_config.possible_scores[1]: must be an integer (got a string)`,
				`ruleset "s": rules[0] (rule_id "a"): numerical_rule_config.possible_scores[2]: must be an integer (got a number)`,
				`ruleset "s": rules[1] (rule_id "b"): numerical_rule_config.possible_scores: must be an array of integers (got a number)`,
			},
		},
		{
			name: "rules of the wrong type",
			doc:  `{"id": "r", "rules": {"rule_id": "a"}}`,
			want: []string{`ruleset "r": rules: must be an array (got an object)`},
		},
		{
			name: "no rules",
			doc:  `{"id": "none", "rules": []}`,
			want: []string{`ruleset "none": rules: no rules: give at least one`},
		},
		{
			name: "rules missing",
			doc:  `id: none`,
			want: []string{`ruleset "none": rules: no rules: give at least one`},
		},
		{
			name: "too many rules",
			doc:  manyRules,
			want: append([]string{`ruleset "many": rules: too many rules: 501 (at most 500)`}, duplicateLines("many", engine.MaxRules)...),
		},
		{
			name: "missing, blank and duplicate rule ids and texts",
			doc: `id: ids
rules:
  - {rule_id: a, rule_text: t}
  - {rule_text: t}
  - {rule_id: a, rule_text: "  \n"}
  - {rule_id: b}
  - {rule_id: a, rule_text: t}
`,
			want: []string{
				`ruleset "ids": rules[1]: rule_id: missing`,
				`ruleset "ids": rules[2] (rule_id "a"): rule_id: duplicate rule_id: rules[0] has it too`,
				`ruleset "ids": rules[2] (rule_id "a"): rule_text: missing or blank`,
				`ruleset "ids": rules[3] (rule_id "b"): rule_text: missing or blank`,
				`ruleset "ids": rules[4] (rule_id "a"): rule_id: duplicate rule_id: rules[0] has it too`,
			},
		},
		{
			name: "unreasonable rule ids",
			doc: `{"id": "bad-ids", "rules": [
			{"rule_id": "a/b", "rule_text": "t"},
			{"rule_id": "tab\there", "rule_text": "t"},
			{"rule_id": " padded", "rule_text": "t"},
			{"rule_id": "` + strings.Repeat("é", engine.MaxRuleIDChars+1) + `", "rule_text": "t"},
			{"rule_id": "` + strings.Repeat("é", engine.MaxRuleIDChars) + `", "rule_text": "t"}]}`,
			want: []string{
				`ruleset "bad-ids": rules[0] (rule_id "a/b"): rule_id: must not contain "/" (event ids are request_id/rule_id)`,
				`ruleset "bad-ids": rules[1] (rule_id "tab\there"): rule_id: must not contain control characters (found '\t')`,
				`ruleset "bad-ids": rules[2] (rule_id " padded"): rule_id: must not start or end with white space`,
				fmt.Sprintf(`ruleset "bad-ids": rules[3] (rule_id %q): rule_id: too long: 129 characters (at most 128)`, strings.Repeat("é", engine.MaxRuleIDChars+1)),
			},
		},
		{
			name: "texts too long",
			doc:  `{"id": "long", "rules": [{"rule_id": "a", "rule_text": "` + long + `", "not_applicable_text": "` + long + `"}]}`,
			want: []string{
				`ruleset "long": rules[0] (rule_id "a"): rule_text: too long: 8193 characters (at most 8192)`,
				`ruleset "long": rules[0] (rule_id "a"): not_applicable_text: too long: 8193 characters (at most 8192)`,
			},
		},
		{
			name: "unknown types and aggregations",
			doc: `{"id": "enums", "type": "fuzzy", "boolean_aggregation": "most", "numerical_aggregation": "median",
			"rules": [{"rule_id": "a", "rule_text": "t", "type": "ternary"}, {"rule_id": "b", "rule_text": "t"}]}`,
			want: []string{
				`ruleset "enums": type: unknown rule type "fuzzy" (want boolean or numerical)`,
				`ruleset "enums": boolean_aggregation: unknown aggregation "most" (want all, any or majority)`,
				`ruleset "enums": numerical_aggregation: unknown aggregation "median" (want mean, sum, weighted_mean, min or max)`,
				`ruleset "enums": rules[0] (rule_id "a"): type: unknown rule type "ternary" (want boolean or numerical)`,
			},
		},
		{
			name: "weights",
			doc: `{"id": "weights", "rules": [{"rule_id": "zero", "rule_text": "t", "weight": 0},
			{"rule_id": "negative", "rule_text": "t", "weight": -1.5}, {"rule_id": "huge", "rule_text": "t", "weight": 1e400},
			{"rule_id": "fine", "rule_text": "t", "weight": 1e-9}]}`,
			want: []string{
				`ruleset "weights": rules[0] (rule_id "zero"): weight: must be a finite number greater than 0 (got 0)`,
				`ruleset "weights": rules[1] (rule_id "negative"): weight: must be a finite number greater than 0 (got -1.5)`,
				`ruleset "weights": rules[2] (rule_id "huge"): weight: must be a finite number (got a number)`,
			},
		},
		{
			name: "review thresholds",
			doc: `{"id": "thresholds", "review_below_confidence": 1.5, "rules": [{"rule_id": "neg", "rule_text": "t", "review_below_confidence": -0.1},
			{"rule_id": "text", "rule_text": "t", "review_below_confidence": "high"}, {"rule_id": "fine", "rule_text": "t", "review_below_confidence": 1}]}`,
			want: []string{
				`ruleset "thresholds": review_below_confidence: must be a number from 0 to 1 (got 1.5)`,
				`ruleset "thresholds": rules[0] (rule_id "neg"): review_below_confidence: must be a number from 0 to 1 (got -0.1)`,
				`ruleset "thresholds": rules[1] (rule_id "text"): review_below_confidence: must be a number from 0 to 1 (got a string)`,
			},
		},
		{
			name: "non-finite YAML weights",
			doc:  "id: inf\nrules:\n  - {rule_id: a, rule_text: t, weight: .inf}\n  - {rule_id: b, rule_text: t, weight: .nan}\n",
			want: []string{
				`ruleset "inf": rules[0] (rule_id "a"): weight: must be a finite number greater than 0 (got +Inf)`,
				`ruleset "inf": rules[1] (rule_id "b"): weight: must be a finite number greater than 0 (got NaN)`,
			},
		},
		{
			name: "numerical rule without a score set",
			doc:  `{"id": "scores", "rules": [{"rule_id": "a", "rule_text": "t", "type": "numerical"}]}`,
			want: []string{`ruleset "scores": rules[0] (rule_id "a"): numerical_rule_config.possible_scores: numerical rule has no score set: give numerical_rule_config.possible_scores or a global_numerical_rule_config`},
		},
		{
			name: "explicit empty and oversized score sets",
			doc: `{"id": "scores", "type": "numerical", "global_numerical_rule_config": {"min_score": 0, "max_score": 1},
			"rules": [{"rule_id": "a", "rule_text": "t", "numerical_rule_config": {"possible_scores": []}},
			{"rule_id": "b", "rule_text": "t", "numerical_rule_config": {"possible_scores": [` + strings.TrimSuffix(strings.Repeat("1,", engine.MaxScores+1), ",") + `]}}]}`,
			want: []string{
				`ruleset "scores": rules[0] (rule_id "a"): numerical_rule_config.possible_scores: must not be empty`,
				`ruleset "scores": rules[1] (rule_id "b"): numerical_rule_config.possible_scores: too many scores: 1002 (at most 1001)`,
			},
		},
		{
			name: "score config on a boolean rule",
			doc: `{"id": "bool", "rules": [{"rule_id": "inherits", "rule_text": "t", "numerical_rule_config": {"possible_scores": [1]}},
			{"rule_id": "explicit", "type": "boolean", "rule_text": "t", "numerical_rule_config": {}}]}`,
			want: []string{
				`ruleset "bool": rules[0] (rule_id "inherits"): numerical_rule_config: only numerical rules take a numerical_rule_config; this rule is boolean`,
				`ruleset "bool": rules[1] (rule_id "explicit"): numerical_rule_config: only numerical rules take a numerical_rule_config; this rule is boolean`,
			},
		},
		{
			name: "bad global ranges",
			doc: `{"id": "range", "global_numerical_rule_config": {"min_score": 5, "max_score": 1, "increment": 0},
			"rules": [{"rule_id": "a", "rule_text": "t"}]}`,
			want: []string{
				`ruleset "range": global_numerical_rule_config.increment: must be greater than 0 (got 0)`,
				`ruleset "range": global_numerical_rule_config: min_score 5 is greater than max_score 1`,
			},
		},
		{
			name: "global range too large",
			doc: `{"id": "range", "global_numerical_rule_config": {"min_score": 0, "max_score": 1001},
			"rules": [{"rule_id": "a", "rule_text": "t"}]}`,
			want: []string{`ruleset "range": global_numerical_rule_config: range 0..1001 by 1 gives 1002 scores (at most 1001)`},
		},
		{
			name: "global range spanning all of int64",
			doc: `{"id": "range", "global_numerical_rule_config": {"min_score": -9223372036854775808, "max_score": 9223372036854775807, "increment": 9223372036854775807},
			"rules": [{"rule_id": "a", "rule_text": "t"}]}`,
			// Exactly three scores; nothing overflows.
			want: nil,
		},
		{
			name: "incomplete global range used by a rule",
			doc: `{"id": "range", "global_numerical_rule_config": {"max_score": 3},
			"rules": [{"rule_id": "a", "rule_text": "t", "type": "numerical"}, {"rule_id": "b", "rule_text": "t", "type": "numerical"}]}`,
			want: []string{`ruleset "range": global_numerical_rule_config.min_score: missing, and needed by the numerical rules without possible_scores: a, b`},
		},
		{
			name: "a ruleset-level type error hides the checks it would skew",
			doc:  `{"id": "t", "type": 1, "rules": [{"rule_id": "a", "rule_text": "t", "numerical_rule_config": {"possible_scores": [1]}}]}`,
			want: []string{`ruleset "t": type: must be a string (got a number)`},
		},
		{
			name: "problems in other rules are still reported next to a type error",
			doc:  `{"id": "t", "rules": [{"rule_id": "a", "rule_text": 1}, {"rule_id": "b"}]}`,
			want: []string{
				`ruleset "t": rules[0] (rule_id "a"): rule_text: must be a string (got a number)`,
				`ruleset "t": rules[1] (rule_id "b"): rule_text: missing or blank`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := engine.ParseRuleset([]byte(tc.doc))
			got := joinedErrorLines(err)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ParseRuleset errors:\n got %q\nwant %q", got, tc.want)
			}
			if err == nil {
				if rs == nil {
					t.Fatal("nil ruleset without an error")
				}
				return
			}
			if rs != nil {
				t.Errorf("ruleset returned with an error: %+v", rs)
			}
			if !errors.Is(err, engine.ErrInvalidRuleset) {
				t.Errorf("errors.Is(err, ErrInvalidRuleset) = false for %v", err)
			}
			var re *engine.RulesetError
			if !errors.As(err, &re) {
				t.Errorf("errors.As(err, *RulesetError) = false for %v", err)
			}
		})
	}
}

func duplicateLines(rulesetID string, n int) []string {
	lines := make([]string, 0, n-1)
	for i := 1; i < n; i++ {
		lines = append(lines, fmt.Sprintf(`ruleset %q: rules[%d] (rule_id "dup"): rule_id: duplicate rule_id: rules[0] has it too`, rulesetID, i))
	}
	return lines
}

func TestRulesetErrorFields(t *testing.T) {
	_, err := engine.ParseRuleset([]byte(`{"id": "f", "rules": [{"rule_id": "a", "rule_text": "t", "weight": -1}]}`))
	var re *engine.RulesetError
	if !errors.As(err, &re) {
		t.Fatalf("want a RulesetError, got %v", err)
	}
	want := engine.RulesetError{RulesetID: "f", RuleIndex: 0, RuleID: "a", Field: "weight", Problem: "must be a finite number greater than 0 (got -1)"}
	if *re != want {
		t.Errorf("RulesetError = %+v, want %+v", *re, want)
	}

	top := &engine.RulesetError{RuleIndex: -1, Field: "rules", Problem: "no rules: give at least one"}
	if got, want := top.Error(), "ruleset: rules: no rules: give at least one"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if errors.Is(top, engine.ErrInvalidInput) {
		t.Error("a RulesetError is not an ErrInvalidInput")
	}
}

func TestRulesetValidate(t *testing.T) {
	tests := []struct {
		name string
		rs   *engine.Ruleset
		want []string
	}{
		{
			name: "nil",
			rs:   nil,
			want: []string{"ruleset: no ruleset"},
		},
		{
			name: "empty",
			rs:   &engine.Ruleset{},
			want: []string{"ruleset: rules: no rules: give at least one"},
		},
		{
			name: "non-finite weights",
			rs: &engine.Ruleset{ID: "w", Rules: []engine.Rule{
				{RuleID: "inf", RuleText: "t", Weight: pointerTo(math.Inf(1))},
				{RuleID: "nan", RuleText: "t", Weight: pointerTo(math.NaN())},
			}},
			want: []string{
				`ruleset "w": rules[0] (rule_id "inf"): weight: must be a finite number greater than 0 (got +Inf)`,
				`ruleset "w": rules[1] (rule_id "nan"): weight: must be a finite number greater than 0 (got NaN)`,
			},
		},
		{
			name: "empty but non-nil possible_scores",
			rs: &engine.Ruleset{ID: "e", Rules: []engine.Rule{
				{RuleID: "a", RuleText: "t", Type: verdict.Numerical, NumericalRuleConfig: &engine.NumericalRuleConfig{PossibleScores: []int{}}},
			}},
			want: []string{`ruleset "e": rules[0] (rule_id "a"): numerical_rule_config.possible_scores: must not be empty`},
		},
		{
			name: "control character in a rule id",
			rs:   &engine.Ruleset{ID: "c", Rules: []engine.Rule{{RuleID: "a\u0085b", RuleText: "t"}}},
			want: []string{`ruleset "c": rules[0] (rule_id "a\u0085b"): rule_id: must not contain control characters (found '\u0085')`},
		},
		{
			name: "unicode white space counts as blank",
			rs:   &engine.Ruleset{ID: "s", Rules: []engine.Rule{{RuleID: "a", RuleText: "\u00a0\u3000"}, {RuleID: "b\u2003", RuleText: "t"}}},
			want: []string{
				`ruleset "s": rules[0] (rule_id "a"): rule_text: missing or blank`,
				`ruleset "s": rules[1] (rule_id "b\u2003"): rule_id: must not start or end with white space`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rs.Validate()
			if got := joinedErrorLines(err); !slices.Equal(got, tc.want) {
				t.Fatalf("Validate errors:\n got %q\nwant %q", got, tc.want)
			}
			if !errors.Is(err, engine.ErrInvalidRuleset) {
				t.Errorf("errors.Is(err, ErrInvalidRuleset) = false for %v", err)
			}
		})
	}
}

func TestRulesetValidateIsIdempotent(t *testing.T) {
	rs := &engine.Ruleset{
		ID:                        "idem",
		Type:                      verdict.Numerical,
		GlobalNumericalRuleConfig: &engine.GlobalNumericalRuleConfig{MinScore: pointerTo(0), MaxScore: pointerTo(10), Increment: pointerTo(5)},
		Rules: []engine.Rule{
			{RuleID: "a", RuleText: "t"},
			{RuleID: "b", RuleText: "t", NumericalRuleConfig: &engine.NumericalRuleConfig{PossibleScores: []int{9, -1, 9}}},
			{RuleID: "c", RuleText: "t", Type: verdict.Boolean, Weight: pointerTo(4.0)},
		},
	}
	if err := rs.Validate(); err != nil {
		t.Fatalf("first Validate: %v", err)
	}
	first := jsonString(t, rs)
	if err := rs.Validate(); err != nil {
		t.Fatalf("second Validate: %v", err)
	}
	if second := jsonString(t, rs); second != first {
		t.Errorf("second Validate changed the ruleset:\n%s\n%s", first, second)
	}
	if got := rs.Rules[0].AllowedScores(); !slices.Equal(got, []int{0, 5, 10}) {
		t.Errorf("rules[0] scores = %v, want [0 5 10]", got)
	}
	if got := rs.Rules[1].AllowedScores(); !slices.Equal(got, []int{-1, 9}) {
		t.Errorf("rules[1] scores = %v, want [-1 9]", got)
	}
	if rs.Rules[2].WeightOrDefault() != 4 || rs.Rules[0].WeightOrDefault() != 1 {
		t.Errorf("weights = %v, %v; want 1, 4", rs.Rules[0].WeightOrDefault(), rs.Rules[2].WeightOrDefault())
	}
}

// TestRulesetValidateConcurrentlyOnceValidated: a cached, validated ruleset is
// validated again by every request that uses it, possibly at the same time;
// run with -race.
func TestRulesetValidateConcurrentlyOnceValidated(t *testing.T) {
	rs, err := engine.ParseRuleset([]byte(`{"type": "numerical", "global_numerical_rule_config": {"min_score": 0, "max_score": 3},
		"rules": [{"rule_id": "a", "rule_text": "t"}, {"rule_id": "b", "rule_text": "t", "numerical_rule_config": {"possible_scores": [2, 1, 2]}},
		{"rule_id": "c", "rule_text": "t", "type": "boolean"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- rs.Validate() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Validate: %v", err)
		}
	}
}

func TestParseRulesetExample(t *testing.T) {
	data, err := os.ReadFile("../examples/contract-review/ruleset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := engine.ParseRuleset(data)
	if err != nil {
		t.Fatalf("ParseRuleset(example): %v", err)
	}
	if rs.ID != "contract-review" || !rs.GenerateReport || len(rs.Rules) < 4 || len(rs.Rules) > 6 {
		t.Fatalf("unexpected example ruleset: %s", jsonString(t, rs))
	}
	var boolean, numerical, weighted, notApplicable int
	for _, r := range rs.Rules {
		switch r.Type {
		case verdict.Boolean:
			boolean++
		case verdict.Numerical:
			numerical++
			if len(r.AllowedScores()) == 0 {
				t.Errorf("rule %s has no scores", r.RuleID)
			}
		}
		if r.WeightOrDefault() != 1 {
			weighted++
		}
		if r.NotApplicableText != "" {
			notApplicable++
		}
	}
	if boolean == 0 || numerical == 0 || weighted == 0 || notApplicable == 0 {
		t.Errorf("example should show boolean (%d), numerical (%d), weighted (%d) and not-applicable (%d) rules",
			boolean, numerical, weighted, notApplicable)
	}
}

func ExampleParseRuleset() {
	rs, err := engine.ParseRuleset([]byte(`
id: example
global_numerical_rule_config: {min_score: 0, max_score: 4, increment: 2}
rules:
  - rule_id: signed
    rule_text: The agreement is signed by both parties.
  - rule_id: clarity
    type: numerical
    rule_text: Score how clearly the obligations are written.
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rs.Rules {
		fmt.Println(r.RuleID, r.Type, r.AllowedScores(), r.WeightOrDefault())
	}

	_, err = engine.ParseRuleset([]byte(`{"id": "example", "rules": [{"rule_id": "a", "rule_txt": "typo"}]}`))
	fmt.Println(err)
	// Output:
	// signed boolean [] 1
	// clarity numerical [0 2 4] 1
	// ruleset "example": rules[0] (rule_id "a"): unknown field "rule_txt" (known: rule_id, rule_text, type, numerical_rule_config, not_applicable_text, name, weight, filter_criteria, check, review_below_confidence)
	// ruleset "example": rules[0] (rule_id "a"): rule_text: missing or blank
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
