package eval

import (
	"fmt"
	"strings"
	"testing"

	"rulevalidator/verdict"
)

// outcomesOf scores one boolean verdict a label: each case has one label
// expected to pass and one to fail, and right says which of a case's two
// the system got right.
func outcomesOf(right [][2]bool) []Outcome {
	var outs []Outcome
	for i, r := range right {
		id := fmt.Sprintf("case-%02d", i)
		for j, want := range []bool{true, false} {
			given := want == r[j]
			outs = append(outs, scoreVerdict(id, 1, boolLabel(want, false), boolVerdict(&given, true, false, "The clause says so.")))
		}
	}
	return outs
}

// The margin's interval over cases: the cases drawn again with both
// systems' verdicts on each, the same interval every time; one that leaves
// zero out only where the cases tell the systems apart.
func TestCaseInterval(t *testing.T) {
	repeat := func(n int, r [2]bool) [][2]bool {
		out := make([][2]bool, n)
		for i := range out {
			out[i] = r
		}
		return out
	}
	both, half, none := [2]bool{true, true}, [2]bool{true, false}, [2]bool{false, false}
	mixed := append(append(repeat(6, both), repeat(4, half)...), repeat(2, none)...)
	tests := []struct {
		name      string
		sys, base [][2]bool
		low, high float64 // bounds the interval must lie within
		excludes  bool
	}{
		{"always right over always wrong", repeat(12, both), repeat(12, none), 1, 1, true},
		{"the same verdicts", mixed, mixed, 0, 0, false},
		{"ahead on two cases of twelve", append(repeat(2, both), repeat(10, half)...), repeat(12, half), 0, 0.5, false},
		{"ahead on every case by half", repeat(12, both), repeat(12, half), 0.5, 0.5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := caseInterval(outcomesOf(tt.sys), outcomesOf(tt.base))
			if c == nil {
				t.Fatal("no interval over twelve cases")
			}
			if c.Cases != len(tt.sys) || c.Low < tt.low-1e-9 || c.High > tt.high+1e-9 || c.Low > c.High || c.Excludes != tt.excludes {
				t.Errorf("interval %+v, want %d cases within [%v, %v], excludes zero %v", c, len(tt.sys), tt.low, tt.high, tt.excludes)
			}
			if again := caseInterval(outcomesOf(tt.sys), outcomesOf(tt.base)); *again != *c {
				t.Errorf("the interval changed from one report to the next: %+v, then %+v", c, again)
			}
		})
	}
	if c := caseInterval(outcomesOf(repeat(CaseIntervalMinCases-1, both)), outcomesOf(repeat(CaseIntervalMinCases-1, none))); c != nil {
		t.Errorf("an interval over %d cases: %+v", CaseIntervalMinCases-1, c)
	}
	if c := caseInterval(outcomesOf(repeat(CaseIntervalMinCases, both)), outcomesOf(repeat(CaseIntervalMinCases, none))); c == nil {
		t.Errorf("no interval over %d cases", CaseIntervalMinCases)
	}
	numerical := []Outcome{{Case: "a", Type: verdict.Numerical}, {Case: "b", Type: verdict.Numerical}}
	if c := caseInterval(numerical, numerical); c != nil {
		t.Errorf("an interval with no boolean verdict: %+v", c)
	}
}

// The margin's line gives the interval and what it says.
func TestMarginLineGivesTheCaseInterval(t *testing.T) {
	m := 0.25
	r := &Report{Margins: []Margin{{System: SystemEngine, BalancedAccuracy: &m, Cases: &CaseInterval{Cases: 13, Low: -0.107, High: 0.059}}}}
	var b strings.Builder
	r.writeMargins(&b)
	if want := "engine over the baseline: balanced accuracy +25.0 pp (95% over 13 cases -10.7 to +5.9 pp: these cases cannot tell it from none)"; !strings.Contains(b.String(), want) {
		t.Errorf("margin line %q lacks %q", b.String(), want)
	}
	r.Margins[0].Cases.Low, r.Margins[0].Cases.Excludes = 0.01, true
	b.Reset()
	r.writeMargins(&b)
	if want := "(95% over 13 cases +1.0 to +5.9 pp: beyond what the cases vary)"; !strings.Contains(b.String(), want) {
		t.Errorf("margin line %q lacks %q", b.String(), want)
	}
}
