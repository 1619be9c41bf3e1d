package engine

import (
	"testing"

	"rulevalidator/verdict"
)

func TestAggregate(t *testing.T) {
	b := func(id string, pass, na bool) Verdict {
		return Verdict{RuleID: id, Type: verdict.Boolean, BooleanOutput: ptr(pass), NotApplicable: na, DataSufficiency: true}
	}
	n := func(id string, score int, sufficient, na bool) Verdict {
		return Verdict{RuleID: id, Type: verdict.Numerical, NumericalOutput: ptr(score), DataSufficiency: sufficient, NotApplicable: na}
	}
	rules := []Rule{
		{RuleID: "b1", Type: verdict.Boolean}, {RuleID: "b2", Type: verdict.Boolean}, {RuleID: "b3", Type: verdict.Boolean}, {RuleID: "b4", Type: verdict.Boolean},
		{RuleID: "n1", Type: verdict.Numerical, Weight: ptr(1.0)}, {RuleID: "n2", Type: verdict.Numerical, Weight: ptr(3.0)}, {RuleID: "n3", Type: verdict.Numerical, Weight: ptr(5.0)}, {RuleID: "n4", Type: verdict.Numerical, Weight: ptr(7.0)},
	}
	// b4 not applicable; n3 insufficient; n4 not applicable.
	verdicts := []Verdict{b("b1", true, false), b("b2", true, false), b("b3", false, false), b("b4", false, true),
		n("n1", 2, true, false), n("n2", 4, true, false), n("n3", 5, false, false), n("n4", 1, true, true)}

	tests := []struct {
		name       string
		boolMode   verdict.BooleanAggregation
		numMode    verdict.NumericalAggregation
		verdicts   []Verdict
		wantPassed bool
		wantScore  float64
	}{
		{"all fails with one failure", verdict.AggregateAll, verdict.AggregateMean, verdicts, false, 3},
		{"any", verdict.AggregateAny, verdict.AggregateSum, verdicts, true, 6},
		{"majority 2 of 3", verdict.AggregateMajority, verdict.AggregateWeightedMean, verdicts, true, (2*1 + 4*3) / 4.0},
		{"default modes", "", "", verdicts, false, 3},
		{"majority needs more than half", verdict.AggregateMajority, verdict.AggregateMean, []Verdict{b("b1", true, false), b("b2", false, false), n("n1", 2, true, false)}, false, 2},
		{"all with every rule passing", verdict.AggregateAll, verdict.AggregateMean, []Verdict{b("b1", true, false), b("b2", true, false), b("b4", false, true), n("n1", 2, true, false)}, true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := &Ruleset{Rules: rules, BooleanAggregation: tt.boolMode, NumericalAggregation: tt.numMode}
			agg := aggregate(rs, tt.verdicts)
			if agg.Boolean == nil || agg.Boolean.Passed != tt.wantPassed {
				t.Errorf("boolean = %+v, want passed=%v", agg.Boolean, tt.wantPassed)
			}
			if agg.Numerical == nil || agg.Numerical.Score == nil || *agg.Numerical.Score != tt.wantScore {
				t.Errorf("numerical = %+v, want %v", agg.Numerical, tt.wantScore)
			}
		})
	}

	agg := aggregate(&Ruleset{Rules: rules}, verdicts)
	if agg.Boolean.Applicable != 3 || agg.Boolean.PassedCount != 2 || agg.Boolean.Mode != verdict.AggregateAll {
		t.Errorf("boolean counts = %+v", agg.Boolean)
	}
	if agg.Numerical.Counted != 2 || agg.Numerical.Mode != verdict.AggregateMean {
		t.Errorf("numerical counts = %+v", agg.Numerical)
	}
}

func TestAggregateOnlyPresentTypes(t *testing.T) {
	agg := aggregate(&Ruleset{Rules: []Rule{{RuleID: "b", Type: verdict.Boolean}}}, []Verdict{{RuleID: "b", Type: verdict.Boolean, BooleanOutput: ptr(true)}})
	if agg.Numerical != nil || agg.Boolean == nil {
		t.Errorf("aggregate = %+v", agg)
	}
	agg = aggregate(&Ruleset{Rules: []Rule{{RuleID: "n", Type: verdict.Numerical}}}, []Verdict{{RuleID: "n", Type: verdict.Numerical, DataSufficiency: false}})
	if agg.Boolean != nil || agg.Numerical == nil || agg.Numerical.Score != nil || agg.Numerical.Counted != 0 {
		t.Errorf("aggregate = %+v", agg)
	}
}
