package engine

import (
	"testing"

	"rulevalidator/verdict"
)

func TestCountVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		verdicts []Verdict
		want     Counts
	}{
		{"none", nil, Counts{}},
		{"boolean without output fails", []Verdict{{Type: verdict.Boolean, DataSufficiency: true}}, Counts{Rules: 1, Failed: 1}},
		{"numerical is neither", []Verdict{{Type: verdict.Numerical, DataSufficiency: true, NumericalOutput: new(3)}}, Counts{Rules: 1}},
		{"not applicable", []Verdict{{Type: verdict.Boolean, NotApplicable: true, DataSufficiency: true, BooleanOutput: new(true)}}, Counts{Rules: 1, NotApplicable: 1}},
		{"insufficient overlaps", []Verdict{{Type: verdict.Boolean, BooleanOutput: new(false)}, {Type: verdict.Numerical}}, Counts{Rules: 2, Failed: 1, InsufficientData: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CountVerdicts(tc.verdicts); got != tc.want {
				t.Errorf("CountVerdicts = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestVerdictOutcome(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    Verdict
		want Outcome
	}{
		{"boolean true", Verdict{Type: verdict.Boolean, BooleanOutput: new(true)}, OutcomePass},
		{"boolean false", Verdict{Type: verdict.Boolean, BooleanOutput: new(false)}, OutcomeFail},
		{"boolean without output", Verdict{Type: verdict.Boolean}, OutcomeFail},
		{"insufficient data keeps its outcome", Verdict{Type: verdict.Boolean, BooleanOutput: new(true), DataSufficiency: false}, OutcomePass},
		{"score", Verdict{Type: verdict.Numerical, NumericalOutput: new(4)}, OutcomeScore},
		{"numerical without score", Verdict{Type: verdict.Numerical}, OutcomeNoVerdict},
		{"not applicable wins", Verdict{Type: verdict.Boolean, NotApplicable: true, BooleanOutput: new(false)}, OutcomeNotApplicable},
		{"untyped with a score", Verdict{NumericalOutput: new(2)}, OutcomeScore},
		{"untyped with a boolean", Verdict{BooleanOutput: new(true)}, OutcomePass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.v.Outcome(); got != tc.want {
				t.Errorf("Outcome = %s, want %s", got, tc.want)
			}
		})
	}
}
