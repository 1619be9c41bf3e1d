package engine

import "testing"

func TestCountVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		verdicts []Verdict
		want     Counts
	}{
		{"none", nil, Counts{}},
		{"boolean without output fails", []Verdict{{Type: Boolean, DataSufficiency: true}}, Counts{Rules: 1, Failed: 1}},
		{"numerical is neither", []Verdict{{Type: Numerical, DataSufficiency: true, NumericalOutput: new(3)}}, Counts{Rules: 1}},
		{"not applicable", []Verdict{{Type: Boolean, NotApplicable: true, DataSufficiency: true, BooleanOutput: new(true)}}, Counts{Rules: 1, NotApplicable: 1}},
		{"insufficient overlaps", []Verdict{{Type: Boolean, BooleanOutput: new(false)}, {Type: Numerical}}, Counts{Rules: 2, Failed: 1, InsufficientData: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CountVerdicts(tc.verdicts); got != tc.want {
				t.Errorf("CountVerdicts = %+v, want %+v", got, tc.want)
			}
		})
	}
}
