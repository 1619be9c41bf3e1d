package rulesetdiff_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/engine/ruleexpr"
	"rulevalidator/engine/rulesetdiff"
	"rulevalidator/verdict"
	"rulevalidator/verdictcache"
)

// baseRuleset is the old version every case changes: boolean and numerical
// rules, a score set of its own and one from the ruleset's range, an
// alternate rule, a nested ruleset.
const baseRuleset = `{
  "id": "supply", "version": "1", "type": "boolean",
  "boolean_aggregation": "all", "numerical_aggregation": "mean",
  "global_numerical_rule_config": {"min_score": 0, "max_score": 3, "increment": 1},
  "rules": [
    {"rule_id": "cap", "name": "Cap", "rule_text": "Liability is capped at the fees paid.", "not_applicable_text": "No liability is named."},
    {"rule_id": "term", "rule_text": "The term is under three years."},
    {"rule_id": "clarity", "type": "numerical", "rule_text": "Rate how clear the agreement is.", "numerical_rule_config": {"possible_scores": [0, 1, 2]}},
    {"rule_id": "scale", "type": "numerical", "rule_text": "Rate the scale of the supply."}
  ],
  "nested_rulesets": [
    {"id": "payment", "name": "Payment", "boolean_aggregation": "any", "rules": [
      {"rule_id": "late-fee", "rule_text": "Late payment carries a fee."}
    ]}
  ]
}`

// base is baseRuleset read but not validated, so that a case may change it
// before Compare validates it.
func base(t *testing.T) *engine.Ruleset {
	t.Helper()
	var rs engine.Ruleset
	if err := json.Unmarshal([]byte(baseRuleset), &rs); err != nil {
		t.Fatal(err)
	}
	return &rs
}

func rule(rs *engine.Ruleset, id string) *engine.Rule {
	for i := range rs.Rules {
		if rs.Rules[i].RuleID == id {
			return &rs.Rules[i]
		}
	}
	for i := range rs.NestedRulesets {
		if r := rule(&rs.NestedRulesets[i], id); r != nil {
			return r
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// wantRule is what a case expects of one rule.
type wantRule struct {
	status  rulesetdiff.Status
	fields  []string // the changes' fields, in order
	cache   rulesetdiff.CacheStatus
	because string // in the cache reason
}

type diffCase struct {
	name    string
	change  func(rs *engine.Ruleset)
	ruleset []string // the ruleset-level changes' fields
	groups  []string // "status path: fields"
	rules   map[string]wantRule
}

// diffCases change one thing each; rules a case does not name are
// expected unchanged, their cached verdicts valid.
var diffCases = []diffCase{
	{name: "nothing", change: func(*engine.Ruleset) {}},
	{name: "a version bump", change: func(rs *engine.Ruleset) { rs.Version = "2" }, ruleset: []string{"version"}},
	{name: "rule text", change: func(rs *engine.Ruleset) { rule(rs, "cap").RuleText = "Liability is capped at twice the fees paid." },
		rules: map[string]wantRule{"cap": {rulesetdiff.Changed, []string{"rule_text"}, rulesetdiff.CacheInvalidated, "rule_text changed"}}},
	{name: "rule text respaced", change: func(rs *engine.Ruleset) { rule(rs, "cap").RuleText = "Liability is   capped\nat the fees paid." },
		rules: map[string]wantRule{"cap": {rulesetdiff.Changed, []string{"rule_text"}, rulesetdiff.CacheValid, "unchanged"}}},
	{name: "not-applicable text", change: func(rs *engine.Ruleset) { rule(rs, "cap").NotApplicableText = "" },
		rules: map[string]wantRule{"cap": {rulesetdiff.Changed, []string{"not_applicable_text"}, rulesetdiff.CacheInvalidated, "not_applicable_text changed"}}},
	{name: "display name", change: func(rs *engine.Ruleset) { rule(rs, "cap").Name = "Liability cap" },
		rules: map[string]wantRule{"cap": {rulesetdiff.Changed, []string{"name"}, rulesetdiff.CacheValid, ""}}},
	{name: "weight", change: func(rs *engine.Ruleset) { rule(rs, "term").Weight = ptr(3.0) },
		rules: map[string]wantRule{"term": {rulesetdiff.Changed, []string{"weight"}, rulesetdiff.CacheValid, ""}}},
	{name: "review threshold", change: func(rs *engine.Ruleset) { rule(rs, "term").ReviewBelowConfidence = ptr(0.5) },
		rules: map[string]wantRule{"term": {rulesetdiff.Changed, []string{"review_below_confidence"}, rulesetdiff.CacheValid, ""}}},
	{name: "type", change: func(rs *engine.Ruleset) {
		r := rule(rs, "term")
		r.Type, r.NumericalRuleConfig = verdict.Numerical, &engine.NumericalRuleConfig{PossibleScores: []int{0, 1}}
	}, rules: map[string]wantRule{"term": {rulesetdiff.Changed, []string{"type", "numerical_rule_config.possible_scores"}, rulesetdiff.CacheInvalidated, "type changed"}}},
	{name: "allowed scores", change: func(rs *engine.Ruleset) {
		rule(rs, "clarity").NumericalRuleConfig.PossibleScores = []int{0, 1, 2, 3}
	}, rules: map[string]wantRule{"clarity": {rulesetdiff.Changed, []string{"numerical_rule_config.possible_scores"}, rulesetdiff.CacheInvalidated, "numerical_rule_config changed"}}},
	{name: "the ruleset's score range", change: func(rs *engine.Ruleset) { rs.GlobalNumericalRuleConfig.MaxScore = ptr(5) },
		ruleset: []string{"global_numerical_rule_config.max_score"},
		rules:   map[string]wantRule{"scale": {rulesetdiff.Changed, []string{"numerical_rule_config.possible_scores"}, rulesetdiff.CacheInvalidated, "numerical_rule_config changed"}}},
	{name: "the ruleset's type", change: func(rs *engine.Ruleset) { rs.Type = verdict.Numerical },
		ruleset: []string{"type"}, groups: []string{"changed payment: type"}, // a nested ruleset takes its parent's type
		rules: map[string]wantRule{
			"cap":      {rulesetdiff.Changed, []string{"type", "numerical_rule_config.possible_scores"}, rulesetdiff.CacheInvalidated, "type changed"},
			"term":     {rulesetdiff.Changed, []string{"type", "numerical_rule_config.possible_scores"}, rulesetdiff.CacheInvalidated, "type changed"},
			"late-fee": {rulesetdiff.Changed, []string{"type", "numerical_rule_config.possible_scores"}, rulesetdiff.CacheInvalidated, "type changed"},
		}},
	{name: "a filter", change: func(rs *engine.Ruleset) { rule(rs, "term").FilterCriteria = `inputs.region == "eu"` },
		rules: map[string]wantRule{"term": {rulesetdiff.Changed, []string{"filter_criteria"}, rulesetdiff.CacheValid, ""}}},
	{name: "a check", change: func(rs *engine.Ruleset) { rule(rs, "term").Check = `inputs.region == "eu"` },
		rules: map[string]wantRule{"term": {rulesetdiff.Changed, []string{"check"}, rulesetdiff.CacheInvalidated, "decides the rule by its check"}}},
	{name: "aggregation", change: func(rs *engine.Ruleset) { rs.BooleanAggregation = verdict.AggregateMajority },
		ruleset: []string{"boolean_aggregation"}},
	{name: "numerical aggregation", change: func(rs *engine.Ruleset) { rs.NumericalAggregation = verdict.AggregateSum },
		ruleset: []string{"numerical_aggregation"}},
	{name: "report, threshold, inputs and filter of the ruleset", change: func(rs *engine.Ruleset) {
		rs.GenerateReport = true
		rs.ReviewBelowConfidence = ptr(0.7)
		rs.Inputs = map[string]ruleexpr.Type{"region": ruleexpr.TypeString}
		rs.FilterCriteria = `inputs.region != ""`
	}, ruleset: []string{"generate_report", "review_below_confidence", "inputs.region", "filter_criteria"}},
	{name: "the ruleset opts out of the cache", change: func(rs *engine.Ruleset) { rs.Cache = ptr(false) },
		ruleset: []string{"cache"},
		rules:   allRules(wantRule{rulesetdiff.Unchanged, nil, rulesetdiff.CacheInvalidated, "does not use the verdict cache"})},
	{name: "another ruleset id", change: func(rs *engine.Ruleset) { rs.ID = "supply-eu" },
		ruleset: []string{"id"},
		rules:   allRules(wantRule{rulesetdiff.Unchanged, nil, rulesetdiff.CacheInvalidated, "ruleset id changed"})},
	{name: "a rule added and one removed", change: func(rs *engine.Ruleset) {
		rs.Rules[1] = engine.Rule{RuleID: "renewal", RuleText: "The agreement renews by itself."}
	}, ruleset: nil, rules: map[string]wantRule{
		"renewal": {rulesetdiff.Added, nil, rulesetdiff.CacheNone, "new rule"},
		"term":    {rulesetdiff.Removed, nil, rulesetdiff.CacheNone, "removed"},
	}},
	{name: "rules reordered", change: func(rs *engine.Ruleset) { rs.Rules[0], rs.Rules[1] = rs.Rules[1], rs.Rules[0] },
		ruleset: []string{"rule order"}},
	{name: "a rule moved into a nested ruleset", change: func(rs *engine.Ruleset) {
		rs.NestedRulesets[0].Rules = append(rs.NestedRulesets[0].Rules, rs.Rules[1])
		rs.Rules = slices.Delete(rs.Rules, 1, 2)
	}, ruleset: []string{"rule order"}, rules: map[string]wantRule{"term": {rulesetdiff.Changed, []string{"group"}, rulesetdiff.CacheValid, ""}}},
	{name: "a nested ruleset's own fields", change: func(rs *engine.Ruleset) {
		g := &rs.NestedRulesets[0]
		g.Name, g.BooleanAggregation, g.Required, g.Weight = "Payments", verdict.AggregateAll, true, ptr(2.0)
		g.FilterCriteria = `inputs.region == "eu"`
	}, groups: []string{"changed payment: boolean_aggregation, filter_criteria, required, weight, name"}},
	{name: "a nested ruleset added and one removed", change: func(rs *engine.Ruleset) {
		rs.NestedRulesets[0].ID = "fees"
	}, groups: []string{"added fees: ", "removed payment: "},
		rules: map[string]wantRule{"late-fee": {rulesetdiff.Changed, []string{"group"}, rulesetdiff.CacheValid, ""}}},
	{name: "a nested ruleset's score range and type", change: func(rs *engine.Ruleset) {
		g := &rs.NestedRulesets[0]
		g.Type = verdict.Numerical
		g.GlobalNumericalRuleConfig = &engine.GlobalNumericalRuleConfig{MinScore: ptr(1), MaxScore: ptr(2), Increment: ptr(1)}
		g.NumericalAggregation = verdict.AggregateSum
	}, groups: []string{"changed payment: type, global_numerical_rule_config.min_score, global_numerical_rule_config.max_score, global_numerical_rule_config.increment, numerical_aggregation"},
		rules: map[string]wantRule{"late-fee": {rulesetdiff.Changed, []string{"type", "numerical_rule_config.possible_scores"}, rulesetdiff.CacheInvalidated, "type changed"}}},
}

func allRules(w wantRule) map[string]wantRule {
	m := map[string]wantRule{}
	for _, id := range []string{"cap", "term", "clarity", "scale", "late-fee"} {
		m[id] = w
	}
	return m
}

func TestCompare(t *testing.T) {
	t.Parallel()
	for _, tc := range diffCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			old, new := base(t), base(t)
			tc.change(new)
			d, err := rulesetdiff.Compare(old, new)
			if err != nil {
				t.Fatal(err)
			}
			if got := fields(d.Ruleset); !slices.Equal(got, tc.ruleset) {
				t.Errorf("ruleset changes %v, want %v", got, tc.ruleset)
			}
			var groups []string
			for _, g := range d.Groups {
				groups = append(groups, fmt.Sprintf("%s %s: %s", g.Status, g.Path, strings.Join(fields(g.Changes), ", ")))
			}
			if !slices.Equal(groups, tc.groups) {
				t.Errorf("nested ruleset changes %q, want %q", groups, tc.groups)
			}
			for _, r := range d.Rules {
				want, ok := tc.rules[r.RuleID]
				if !ok {
					want = wantRule{rulesetdiff.Unchanged, nil, rulesetdiff.CacheValid, "unchanged"}
				}
				if r.Status != want.status || !slices.Equal(fields(r.Changes), want.fields) || r.Cache.Status != want.cache || !strings.Contains(r.Cache.Reason, want.because) {
					t.Errorf("rule %s: %s %v, cache %s (%s); want %s %v, cache %s (%q)", r.RuleID, r.Status, fields(r.Changes), r.Cache.Status, r.Cache.Reason,
						want.status, want.fields, want.cache, want.because)
				}
			}
			for id := range tc.rules {
				if d.Rule(id) == nil {
					t.Errorf("no rule %s in the diff", id)
				}
			}
			if same := tc.name == "nothing"; d.Same() != same {
				t.Errorf("Same() = %v, want %v", d.Same(), same)
			}
			var text strings.Builder
			if err := d.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			for id, w := range tc.rules {
				if w.status != rulesetdiff.Unchanged && !strings.Contains(text.String(), string(w.status)+" rule "+id) {
					t.Errorf("the text does not say %s rule %s:\n%s", w.status, id, text.String())
				}
			}
		})
	}
}

func fields(cs []rulesetdiff.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Field)
	}
	return out
}

// TestCasesCoverEveryField: every field of the engine's Rule and Ruleset
// types is changed by a case above and reported by Compare. A field added to
// the model fails here until a case shows how the diff reports it (and
// whether it keeps cached verdicts valid).
func TestCasesCoverEveryField(t *testing.T) {
	t.Parallel()
	seenRule, seenRuleset := map[string]bool{}, map[string]bool{}
	for _, tc := range diffCases {
		old, new := base(t), base(t)
		tc.change(new)
		d, err := rulesetdiff.Compare(old, new)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, c := range d.Ruleset {
			seenRuleset[top(c.Field)] = true
		}
		for _, g := range d.Groups {
			for _, c := range g.Changes {
				seenRuleset[top(c.Field)] = true
			}
			if g.Status != rulesetdiff.Changed {
				seenRuleset["nested_rulesets"] = true
			}
		}
		for _, r := range d.Rules {
			for _, c := range r.Changes {
				seenRule[top(c.Field)] = true
			}
			if r.Status == rulesetdiff.Added || r.Status == rulesetdiff.Removed {
				seenRuleset["rules"] = true
			}
		}
	}
	for _, tc := range []struct {
		typ  reflect.Type
		seen map[string]bool
	}{{reflect.TypeFor[engine.Rule](), seenRule}, {reflect.TypeFor[engine.Ruleset](), seenRuleset}} {
		for f := range tc.typ.Fields() {
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !tc.seen[name] && !(tc.typ == reflect.TypeFor[engine.Rule]() && name == "rule_id") {
				t.Errorf("no case changes %s.%s (%s)", tc.typ.Name(), f.Name, name)
			}
		}
	}
}

func top(field string) string {
	name, _, _ := strings.Cut(field, ".")
	return name
}

// askedRule is a rule as the prompt lists it: its id, its type, and a
// numerical rule's allowed scores.
var askedRule = regexp.MustCompile(`(?m)^\d+\. rule_id: ("(?:[^"\\]|\\.)*")\n   type: (boolean|numerical)(?:\. numerical_output must be exactly one of: ([0-9, ]+))?`)

// answerer is a model that answers every rule it is asked about (false, or
// the lowest score), counting the calls.
type answerer struct {
	mu    sync.Mutex
	calls int
}

func (a *answerer) Chat(_ context.Context, req engine.ChatRequest) (engine.ChatResponse, error) {
	a.mu.Lock()
	a.calls++
	a.mu.Unlock()
	var rules []map[string]any
	for _, m := range askedRule.FindAllStringSubmatch(req.Messages[len(req.Messages)-1].Content, -1) {
		id, _ := strconv.Unquote(m[1])
		r := map[string]any{"rule_id": id, "data_sufficiency": true, "not_applicable": false, "evidences": []any{},
			"rationale": "The agreement does not say so."}
		if m[2] == "numerical" {
			lowest, _ := strconv.Atoi(strings.TrimSpace(strings.Split(m[3], ",")[0]))
			r["numerical_output"] = lowest
		} else {
			r["boolean_output"] = false
		}
		rules = append(rules, r)
	}
	data, err := json.Marshal(map[string]any{"rules": rules})
	return engine.ChatResponse{Content: string(data), Format: req.Format, Model: req.Model, Usage: verdict.Usage{LLMCalls: 1}}, err
}

// TestCacheVerdictsAgreeWithTheCache: for every case, the rules the diff
// says keep their cached verdicts are exactly those the engine takes from
// the verdict cache when it judges the new version after the old one, on
// the same material, for the same tenant.
func TestCacheVerdictsAgreeWithTheCache(t *testing.T) {
	t.Parallel()
	in := &engine.Inputs{
		PrimaryDocs: []engine.Document{{Name: "msa.txt", Pages: []string{"The supplier's liability is capped at the fees paid. The term is two years."}}},
		NamedInputs: []engine.NamedInput{{Name: "region", Value: "eu"}},
	}
	for _, tc := range diffCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			old, new := base(t), base(t)
			tc.change(new)
			d, err := rulesetdiff.Compare(old, new)
			if err != nil {
				t.Fatal(err)
			}
			cache, err := verdictcache.NewMemory(verdictcache.MemoryConfig{})
			if err != nil {
				t.Fatal(err)
			}
			model := &answerer{}
			eng, err := engine.New(model, engine.Config{Model: "m", Cache: cache, OutputRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := eng.Evaluate(ctx, engine.Task{Ruleset: old, Inputs: in, Tenant: "t", RequestID: "first"}); err != nil {
				t.Fatal(err)
			}
			res, err := eng.Evaluate(ctx, engine.Task{Ruleset: new, Inputs: in, Tenant: "t", RequestID: "second"})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range res.Rules {
				r := d.Rule(v.RuleID)
				if r == nil {
					t.Errorf("rule %s judged, not in the diff", v.RuleID)
					continue
				}
				if cached := v.Cached != nil; cached != (r.Cache.Status == rulesetdiff.CacheValid) {
					t.Errorf("rule %s: taken from the cache %v; the diff says %s (%s)", v.RuleID, cached, r.Cache.Status, r.Cache.Reason)
				}
			}
		})
	}
}

func TestWordDiff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ old, new, want string }{
		{"a b c", "a  b\nc", "(white space only)"},
		{"a b c", "a x c", "a [-b-] {+x+} c"},
		{"one two three four five six seven", "one two three four five six seven eight", "… four five six seven {+eight+}"},
		{"zero one two three four five six seven eight nine", "zero one two three four FIVE six seven eight nine",
			"… one two three four [-five-] {+FIVE+} six seven eight nine"},
		{"", "new text", "{+new text+}"},
		{"a b c d e f g h i j k", "A b c d e f g h i j K", "[-a-] {+A+} b c d e … g h i j [-k-] {+K+}"},
	} {
		if got := rulesetdiff.WordDiff(tc.old, tc.new); got != tc.want {
			t.Errorf("WordDiff(%q, %q) = %q, want %q", tc.old, tc.new, got, tc.want)
		}
	}
}
