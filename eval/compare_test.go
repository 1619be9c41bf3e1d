package eval

import (
	"testing"

	"rulevalidator/engine"
	"rulevalidator/verdict"
)

// TestCompare pairs two runs verdict by verdict: a verdict that changes is
// a flip, fixed or broken or wrong both times by the label; a rule the new
// version removed is scored for the old one alone; verdicts taken from the
// cache are counted.
func TestCompare(t *testing.T) {
	t.Parallel()
	out := func(c, rule string, label bool, got *bool, na, cached bool) Outcome {
		o := Outcome{Case: c, RuleID: rule, Run: 1, Type: verdict.Boolean, ExpectedBoolean: ptr(label), Answered: got != nil,
			Boolean: got, NotApplicable: na, Cached: cached}
		o.OutputCorrect = got != nil && *got == label
		o.NotApplicableCorrect = !na
		o.Correct = o.OutputCorrect && o.NotApplicableCorrect
		return o
	}
	yes, no := ptr(true), ptr(false)
	report := func(outs ...Outcome) *Report {
		return &Report{Dataset: "d", Model: "m", Runs: 1, Cases: 3, Systems: []SystemReport{{Name: SystemEngine, Outcomes: outs}}}
	}
	old := report(
		out("a", "same", true, yes, false, false),
		out("a", "changed", true, no, false, false),   // fixed
		out("b", "changed", true, yes, false, false),  // broken
		out("c", "changed", false, yes, false, false), // wrong both times
		out("a", "gone", true, yes, false, false),
		out("b", "flag", true, yes, false, false), // not applicable now: broken
	)
	new := report(
		out("a", "same", true, yes, false, true),
		out("a", "changed", true, yes, false, false),
		out("b", "changed", true, nil, false, false),
		out("c", "changed", false, nil, false, false),
		out("b", "flag", true, yes, true, true),
	)
	got, err := Compare(old, new)
	if err != nil {
		t.Fatal(err)
	}
	if o := got.Overall; o.Flips != 4 || o.Fixed != 1 || o.Broken != 2 || o.Reused != 2 || o.Old.Verdicts != 6 || o.Old.Correct != 4 || o.New.Verdicts != 5 || o.New.Correct != 2 {
		t.Errorf("overall %+v", o)
	}
	byRule := map[string]RuleComparison{}
	for _, r := range got.PerRule {
		byRule[r.RuleID] = r
	}
	if r := byRule["gone"]; r.Old.Verdicts != 1 || r.New.Verdicts != 0 || r.New.Accuracy != nil || len(r.Flips) != 0 {
		t.Errorf("removed rule %+v", r)
	}
	want := []Flip{
		{Case: "a", RuleID: "changed", Expected: "pass", Old: "fail", New: "pass", Change: FlipFixed},
		{Case: "b", RuleID: "changed", Expected: "pass", Old: "pass", New: "no answer", Change: FlipBroken},
		{Case: "c", RuleID: "changed", Expected: "fail", Old: "pass", New: "no answer", Change: FlipBothWrong},
	}
	if flips := byRule["changed"].Flips; len(flips) != 3 || flips[0] != want[0] || flips[1] != want[1] || flips[2] != want[2] {
		t.Errorf("flips %+v, want %+v", flips, want)
	}
	if f := byRule["flag"].Flips; len(f) != 1 || f[0].New != "pass (not applicable)" || f[0].Change != FlipBroken {
		t.Errorf("a verdict now flagged not applicable: %+v", f)
	}
	if _, err := Compare(&Report{Runs: 2}, new); err == nil {
		t.Error("two runs compared")
	}
}

// TestRevised keeps the labels of the rules the new version has, with its
// score sets, and refuses labels it cannot score.
func TestRevised(t *testing.T) {
	t.Parallel()
	oldRS := &engine.Ruleset{ID: "r", Rules: []engine.Rule{{RuleID: "a", RuleText: "A."}, {RuleID: "b", RuleText: "B."}}}
	ds := &Dataset{Cases: []*Case{{ID: "c", Ruleset: oldRS, Labels: []Label{
		{RuleID: "a", Type: verdict.Boolean, Boolean: ptr(true)}, {RuleID: "b", Type: verdict.Boolean, Boolean: ptr(false)},
	}}}}
	newRS := &engine.Ruleset{ID: "r", Version: "2", Rules: []engine.Rule{{RuleID: "a", RuleText: "A!"}, {RuleID: "n", RuleText: "N."}}}
	got, err := Revised(ds, newRS)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Cases[0]; c.Ruleset != newRS || len(c.Labels) != 1 || c.Labels[0].RuleID != "a" || len(ds.Cases[0].Labels) != 2 {
		t.Errorf("revised case %+v (the original must keep its labels)", c)
	}
	typed := &engine.Ruleset{ID: "r", Rules: []engine.Rule{{RuleID: "a", RuleText: "A.", Type: verdict.Numerical, NumericalRuleConfig: &engine.NumericalRuleConfig{PossibleScores: []int{0, 1}}}}}
	if _, err := Revised(ds, typed); err == nil {
		t.Error("a label of another type kept")
	}
	other := &engine.Ruleset{ID: "x", Rules: []engine.Rule{{RuleID: "z", RuleText: "Z."}}}
	if _, err := Revised(ds, other); err == nil {
		t.Error("a case left with no label kept")
	}
}
