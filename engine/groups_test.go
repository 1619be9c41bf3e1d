package engine

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"rulevalidator/verdict"
)

// mustTree parses a ruleset with a tree.
func mustTree(t *testing.T, doc string) *Ruleset {
	t.Helper()
	rs, err := ParseRuleset([]byte(doc))
	if err != nil {
		t.Fatalf("ParseRuleset: %v", err)
	}
	if rs.tree == nil {
		t.Fatal("the ruleset has no tree")
	}
	return rs
}

// verdictsOf makes verdicts in tree order from short outcomes: "pass",
// "fail", "na", "insufficient-pass", or a score "s3" (insufficient: "is3").
func verdictsOf(t *testing.T, rs *Ruleset, outcomes map[string]string) []Verdict {
	t.Helper()
	out := make([]Verdict, len(rs.tree.rules))
	for i, tr := range rs.tree.rules {
		r := tr.rule
		v := Verdict{RuleID: r.RuleID, Type: r.Type, DataSufficiency: true}
		o, ok := outcomes[r.RuleID]
		if !ok {
			t.Fatalf("no outcome for %s", r.RuleID)
		}
		if strings.HasPrefix(o, "insufficient-") || strings.HasPrefix(o, "is") {
			v.DataSufficiency = false
			o = strings.TrimPrefix(strings.TrimPrefix(o, "insufficient-"), "i")
		}
		switch {
		case o == "pass":
			v.BooleanOutput = ptr(true)
		case o == "fail":
			v.BooleanOutput = ptr(false)
		case o == "na":
			v.NotApplicable = true
		case strings.HasPrefix(o, "s"):
			var n int
			if err := json.Unmarshal([]byte(o[1:]), &n); err != nil {
				t.Fatal(err)
			}
			v.NumericalOutput = &n
		}
		out[i] = v
	}
	return out
}

func TestAggregateOverGroups(t *testing.T) {
	const twoGroups = `{"id": "t", "boolean_aggregation": "any", "numerical_aggregation": "weighted_mean", "rules": [{"rule_id": "top", "rule_text": "t"}],
	"nested_rulesets": [
	  {"id": "liability", "required": true, "rules": [{"rule_id": "l1", "rule_text": "t"}, {"rule_id": "l2", "rule_text": "t"}]},
	  {"id": "payment", "weight": 3, "type": "numerical", "numerical_aggregation": "%s", "global_numerical_rule_config": {"min_score": 0, "max_score": 5},
	   "rules": [{"rule_id": "p1", "rule_text": "t"}, {"rule_id": "p2", "rule_text": "t", "weight": 2}, {"rule_id": "p3", "rule_text": "t"}]},
	  {"id": "quality", "type": "numerical", "numerical_rule_config": null, "global_numerical_rule_config": {"min_score": 0, "max_score": 5},
	   "rules": [{"rule_id": "q1", "rule_text": "t"}]}]}`
	type group struct {
		passed  *bool
		score   *float64
		counted int
		na      bool
		gatedBy []string
	}
	tests := []struct {
		name     string
		mode     string
		outcomes map[string]string
		top      group
		groups   map[string]group
	}{
		{
			name:     "a failed gate fails the parent whatever its mode",
			mode:     "mean",
			outcomes: map[string]string{"top": "pass", "l1": "pass", "l2": "fail", "p1": "s1", "p2": "s2", "p3": "s3", "q1": "s5"},
			// Members: top (pass), liability (fail): any passes, the gate fails it.
			top: group{passed: ptr(false), score: ptr((2.0*3 + 5) / 4), counted: 2, gatedBy: []string{"liability"}},
			groups: map[string]group{
				"liability": {passed: ptr(false)},
				"payment":   {score: ptr(2.0), counted: 3},
				"quality":   {score: ptr(5.0), counted: 1},
			},
		},
		{
			name:     "not-applicable rules and insufficient scores are left out; min",
			mode:     "min",
			outcomes: map[string]string{"top": "fail", "l1": "pass", "l2": "na", "p1": "is0", "p2": "s4", "p3": "s2", "q1": "na"},
			top:      group{passed: ptr(true), score: ptr(2.0), counted: 1},
			groups: map[string]group{
				"liability": {passed: ptr(true)},
				"payment":   {score: ptr(2.0), counted: 2},
				"quality":   {counted: 0, na: true},
			},
		},
		{
			name:     "max, and a group whose rules all do not apply is no member",
			mode:     "max",
			outcomes: map[string]string{"top": "fail", "l1": "na", "l2": "na", "p1": "s1", "p2": "s4", "p3": "s2", "q1": "s1"},
			// Liability applies to nothing: it neither passes nor gates.
			top: group{passed: ptr(false), score: ptr((4.0*3 + 1) / 4), counted: 2},
			groups: map[string]group{
				"liability": {passed: ptr(true), na: true},
				"payment":   {score: ptr(4.0), counted: 3},
				"quality":   {score: ptr(1.0), counted: 1},
			},
		},
		{
			name:     "weighted mean within a group; insufficient boolean data still counts by its output",
			mode:     "weighted_mean",
			outcomes: map[string]string{"top": "insufficient-pass", "l1": "pass", "l2": "pass", "p1": "s1", "p2": "s4", "p3": "s1", "q1": "is3"},
			top:      group{passed: ptr(true), score: ptr(2.5), counted: 1},
			groups: map[string]group{
				"liability": {passed: ptr(true)},
				"payment":   {score: ptr((1 + 2*4 + 1) / 4.0), counted: 3},
				"quality":   {counted: 0},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(twoGroups, "%s", tc.mode, 1)
			doc = strings.Replace(doc, `"numerical_rule_config": null, `, "", 1)
			rs := mustTree(t, doc)
			agg, groups := rs.tree.aggregate(verdictsOf(t, rs, tc.outcomes), nil)
			checkGroup := func(name string, a verdict.Aggregate, na bool, gatedBy []string, want group) {
				t.Helper()
				if want.passed != nil && (a.Boolean == nil || a.Boolean.Passed != *want.passed) {
					t.Errorf("%s: boolean %+v, want passed %v", name, a.Boolean, *want.passed)
				}
				if n := a.Numerical; n != nil || want.score != nil {
					switch {
					case n == nil:
						t.Errorf("%s: no numerical aggregate, want %v", name, *want.score)
					case want.score == nil && n.Score != nil, want.score != nil && (n.Score == nil || *n.Score != *want.score):
						t.Errorf("%s: score %v, want %v", name, fmtPtr(n.Score), fmtPtr(want.score))
					case n.Counted != want.counted:
						t.Errorf("%s: counted %d, want %d", name, n.Counted, want.counted)
					}
				}
				if na != want.na {
					t.Errorf("%s: not applicable %v, want %v", name, na, want.na)
				}
				if !slices.Equal(gatedBy, want.gatedBy) {
					t.Errorf("%s: gated by %v, want %v", name, gatedBy, want.gatedBy)
				}
			}
			checkGroup("top", agg, false, tc.top.gatedBy, tc.top)
			var gatedTop []string
			for _, g := range groups {
				if g.Required && g.Aggregate.Boolean != nil && !g.Aggregate.Boolean.Passed && !g.NotApplicable {
					gatedTop = append(gatedTop, g.Path)
				}
				checkGroup(g.ID, g.Aggregate, g.NotApplicable, g.GatedBy, tc.groups[g.ID])
			}
			if !slices.Equal(gatedTop, tc.top.gatedBy) {
				t.Errorf("failed gates %v, want %v", gatedTop, tc.top.gatedBy)
			}
		})
	}
}

func fmtPtr(f *float64) any {
	if f == nil {
		return "nil"
	}
	return *f
}

// groupedRuleset has two groups, the first a gate, the second filtered on
// the contract value, a check rule and a rule filtered on the documents.
const groupedRuleset = `
id: grouped
inputs: {contract_value: number, cap: number, region: string}
rules:
  - rule_id: signed
    rule_text: The contract is signed.
  - rule_id: cap-within-limit
    rule_text: The liability cap named in the request is at most 1,000,000.
    check: inputs.cap <= 1000000
  - rule_id: pdf-only
    rule_text: The primary document is a PDF.
    filter_criteria: documents.exists(d, d.media_type == "application/pdf")
nested_rulesets:
  - id: liability
    required: true
    rules:
      - {rule_id: liability-capped, rule_text: Liability is capped.}
      - {rule_id: liability-mutual, rule_text: Liability is mutual.}
  - id: payment
    filter_criteria: inputs.contract_value > 100000
    rules:
      - {rule_id: payment-terms, rule_text: Payment is due within 30 days.}
`

func TestEvaluateGroupsFiltersAndChecks(t *testing.T) {
	rs := mustTree(t, groupedRuleset)
	in := testInputs()
	in.NamedInputs = []NamedInput{{Name: "contract_value", Value: json.Number("50000")}, {Name: "cap", Value: json.Number("250000")}}
	llm := &scriptedLLM{replies: []scriptedReply{{content: answer(t,
		boolRule("signed", true, termQuote), boolRule("liability-capped", true, capQuote), boolRule("liability-mutual", false))}}}
	decided := map[string]int{}
	e := newTestEngine(t, llm, Config{Hooks: Hooks{RulesDecided: func(how string, n int) { decided[how] += n }}})
	res, err := e.Evaluate(context.Background(), Task{Ruleset: rs, Inputs: in, Facts: RequestFacts{MediaTypes: map[string]string{"msa.pdf": "text/plain"}}})
	if err != nil {
		for _, c := range llm.calls {
			t.Log(c.Messages[len(c.Messages)-1].Content)
		}
		t.Fatal(err)
	}
	if len(llm.calls) != 1 {
		for _, c := range llm.calls {
			t.Log(c.Messages[len(c.Messages)-1].Content)
		}
		t.Fatalf("%d model calls, want 1", len(llm.calls))
	}
	user := llm.calls[0].Messages[len(llm.calls[0].Messages)-1].Content
	asked := regexp.MustCompile(`rule_id: "([^"]+)"`).FindAllStringSubmatch(user, -1)
	var ids []string
	for _, m := range asked {
		ids = append(ids, m[1])
	}
	if want := []string{"signed", "liability-capped", "liability-mutual"}; !slices.Equal(ids, want) {
		t.Errorf("the model was asked about %v, want %v", ids, want)
	}

	byID := map[string]Verdict{}
	var order []string
	for _, v := range res.Rules {
		byID[v.RuleID] = v
		order = append(order, v.RuleID)
	}
	if want := []string{"signed", "cap-within-limit", "pdf-only", "liability-capped", "liability-mutual", "payment-terms"}; !slices.Equal(order, want) {
		t.Errorf("verdicts in order %v, want %v", order, want)
	}
	check := byID["cap-within-limit"]
	if check.BooleanOutput == nil || !*check.BooleanOutput || !check.DataSufficiency ||
		len(check.Evidences) != 1 || !reflect.DeepEqual(check.Evidences[0], verdict.Evidence{Text: "250000", SourceOrigin: "cap", Match: verdict.MatchNotDocument}) ||
		!strings.Contains(check.Rationale, "inputs.cap <= 1000000") || !strings.Contains(check.Rationale, "cap = 250000") {
		t.Errorf("check verdict: %+v", check)
	}
	for id, filter := range map[string]string{
		"pdf-only":      `filter_criteria of rule "pdf-only"`,
		"payment-terms": `filter_criteria of nested ruleset "payment" (inputs.contract_value > 100000) is false`,
	} {
		v := byID[id]
		if !v.NotApplicable || !strings.Contains(v.Rationale, filter) {
			t.Errorf("%s: not applicable %v, rationale %q; want it to name %s", id, v.NotApplicable, v.Rationale, filter)
		}
	}
	if res.Usage.RulesFiltered != 2 || res.Usage.RulesChecked != 1 || res.Usage.LLMCalls != 1 {
		t.Errorf("usage %+v: want 2 filtered, 1 checked, 1 call", res.Usage)
	}
	if decided[DecidedFiltered] != 2 || decided[DecidedChecked] != 1 {
		t.Errorf("hook RulesDecided saw %v, want 2 filtered and 1 checked", decided)
	}
	// The gate failed: the ruleset fails.
	if b := res.Aggregate.Boolean; b == nil || b.Passed || b.Applicable != 3 || b.PassedCount != 2 {
		t.Errorf("aggregate %+v", res.Aggregate.Boolean)
	}
	if len(res.Groups) != 2 {
		t.Fatalf("groups %+v", res.Groups)
	}
	liability, payment := res.Groups[0], res.Groups[1]
	if liability.ID != "liability" || !liability.Required || liability.Aggregate.Boolean.Passed || liability.NotApplicable ||
		!slices.Equal(liability.RuleIDs, []string{"liability-capped", "liability-mutual"}) {
		t.Errorf("liability %+v", liability)
	}
	if payment.ID != "payment" || !payment.NotApplicable || !strings.Contains(payment.Reason, "inputs.contract_value > 100000") {
		t.Errorf("payment %+v", payment)
	}

	// Above the value, with a PDF, payment applies and its rule is asked.
	in.NamedInputs[0].Value = json.Number("250000")
	llm2 := &scriptedLLM{replies: []scriptedReply{{content: answer(t,
		boolRule("signed", true, termQuote), boolRule("pdf-only", true, termQuote), boolRule("liability-capped", true, capQuote),
		boolRule("liability-mutual", true, capQuote), boolRule("payment-terms", true, termQuote))}}}
	res, err = newTestEngine(t, llm2, Config{}).Evaluate(context.Background(),
		Task{Ruleset: rs, Inputs: in, Facts: RequestFacts{MediaTypes: map[string]string{"msa.pdf": "application/pdf"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Aggregate.Boolean.Passed || res.Usage.RulesFiltered != 0 || res.Groups[1].NotApplicable {
		t.Errorf("second request: %+v, groups %+v", res.Aggregate.Boolean, res.Groups)
	}
}

func TestEvaluateCheckFailsOnOneRequestOnly(t *testing.T) {
	rs := mustTree(t, `{"id": "c", "rules": [
	  {"rule_id": "cap", "rule_text": "t", "check": "inputs.cap <= 1000000"},
	  {"rule_id": "score", "type": "numerical", "numerical_rule_config": {"possible_scores": [0, 5, 10]}, "rule_text": "t", "check": "inputs.rating * 2.0"},
	  {"rule_id": "gate", "rule_text": "t", "filter_criteria": "inputs.region == 'EU'", "check": "true"}]}`)
	llm := &scriptedLLM{}
	e := newTestEngine(t, llm, Config{})
	res, err := e.Evaluate(context.Background(), Task{Ruleset: rs, Inputs: &Inputs{TextInput: "x",
		NamedInputs: []NamedInput{{Name: "rating", Value: json.Number("3.2")}}}})
	if err != nil {
		t.Fatalf("a check failing on a missing input failed the request: %v", err)
	}
	if len(llm.calls) != 0 {
		t.Errorf("%d model calls for a ruleset of checks", len(llm.calls))
	}
	cap, score, gate := res.Rules[0], res.Rules[1], res.Rules[2]
	if cap.DataSufficiency || cap.BooleanOutput != nil || len(cap.Problems) != 1 || !strings.Contains(cap.Problems[0], "no such key: cap") {
		t.Errorf("cap: %+v", cap)
	}
	if score.NumericalOutput == nil || *score.NumericalOutput != 5 || !strings.Contains(score.Rationale, "6.4, the nearest allowed score being 5") {
		t.Errorf("score: %+v", score)
	}
	if gate.DataSufficiency || !strings.Contains(gate.Rationale, "could not be decided") {
		t.Errorf("gate: %+v", gate)
	}
}

// mapCache is a verdict cache in a map, keys only.
type mapCache struct {
	mu sync.Mutex
	m  map[string]CachedVerdict
}

func (c *mapCache) Get(_ context.Context, _ CacheScope, keys []string) (map[string]CachedVerdict, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]CachedVerdict{}
	for _, k := range keys {
		if v, ok := c.m[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

func (c *mapCache) Put(_ context.Context, _ CacheScope, entries []CachedVerdict) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range entries {
		c.m[e.Key] = e
	}
	return nil
}

// Grouping changes aggregation only: a rule's verdict cache key is the same
// in a flat ruleset and in a group, so verdicts judged before the rules
// were grouped are found again.
func TestGroupingKeepsVerdictCacheKeys(t *testing.T) {
	cache := &mapCache{m: map[string]CachedVerdict{}}
	flat, err := ParseRuleset([]byte(`{"id": "grouped", "rules": [
	  {"rule_id": "signed", "rule_text": "The contract is signed."},
	  {"rule_id": "liability-capped", "rule_text": "Liability is capped."},
	  {"rule_id": "liability-mutual", "rule_text": "Liability is mutual."}]}`))
	if err != nil {
		t.Fatal(err)
	}
	in := testInputs()
	in.NamedInputs = []NamedInput{{Name: "contract_value", Value: json.Number("50000")}, {Name: "cap", Value: json.Number("250000")}}
	llm := &scriptedLLM{replies: []scriptedReply{{content: answer(t,
		boolRule("signed", true, termQuote), boolRule("liability-capped", true, capQuote), boolRule("liability-mutual", false))}}}
	e := newTestEngine(t, llm, Config{Cache: cache})
	if _, err := e.Evaluate(context.Background(), Task{Ruleset: flat, Inputs: in, Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	res, err := e.Evaluate(context.Background(), Task{Ruleset: mustTree(t, groupedRuleset), Inputs: in, Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if len(llm.calls) != 1 {
		t.Errorf("%d model calls; the grouped rules' verdicts should all come from the cache", len(llm.calls))
	}
	for _, v := range res.Rules {
		if (v.Cached != nil) != slices.Contains([]string{"signed", "liability-capped", "liability-mutual"}, v.RuleID) {
			t.Errorf("%s: cached %v", v.RuleID, v.Cached)
		}
	}
}

// One loaded ruleset with groups, filters and checks serves concurrent
// requests: its compiled tree is only read.
func TestEvaluateTreeConcurrently(t *testing.T) {
	rs := mustTree(t, groupedRuleset)
	llm := &scriptedLLM{}
	for range 8 {
		llm.replies = append(llm.replies, scriptedReply{content: answer(t,
			boolRule("signed", true, termQuote), boolRule("liability-capped", true, capQuote), boolRule("liability-mutual", true, capQuote))})
	}
	e := newTestEngine(t, llm, Config{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			in := testInputs()
			in.NamedInputs = []NamedInput{{Name: "contract_value", Value: json.Number("50000")}, {Name: "cap", Value: json.Number(strconv.Itoa(i * 300000))}}
			res, err := e.Evaluate(context.Background(), Task{Ruleset: rs, Inputs: in})
			if err != nil {
				t.Error(err)
				return
			}
			if want := i*300000 <= 1000000; *res.Rules[1].BooleanOutput != want {
				t.Errorf("request %d: check gave %v, want %v", i, *res.Rules[1].BooleanOutput, want)
			}
		})
	}
	wg.Wait()
	if err := rs.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestGroupedVerdictsAreRoutedForReview: a ruleset with groups, filters or
// checks routes its verdicts for review as a flat one does, under each
// rule's threshold.
func TestGroupedVerdictsAreRoutedForReview(t *testing.T) {
	rs, err := ParseRuleset([]byte(`{"id":"g","review_below_confidence":0.9,"rules":[{"rule_id":"top","rule_text":"t"}],
		"nested_rulesets":[{"id":"grp","rules":[{"rule_id":"inner","rule_text":"i"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	content := `{"rules":[{"rule_id":"top","rationale":"Liability is capped at twelve months of fees.","evidences":[],"not_applicable":false,"data_sufficiency":true,"boolean_output":false},` +
		`{"rule_id":"inner","rationale":"No clause names a governing jurisdiction.","evidences":[],"not_applicable":false,"data_sufficiency":false,"boolean_output":false}]}`
	llm := &scriptedLLM{replies: []scriptedReply{{content: content}}}
	res, err := newTestEngine(t, llm, Config{}).Evaluate(t.Context(), Task{Ruleset: rs, Inputs: testInputs()})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Rules {
		want := v.RuleID == "inner"
		if v.NeedsReview != want {
			t.Errorf("%s: needs_review %v (reasons %v), want %v", v.RuleID, v.NeedsReview, v.ReviewReasons, want)
		}
	}
}
