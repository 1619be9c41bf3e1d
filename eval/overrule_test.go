package eval

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/verdict"
)

// checkedVerdict is a boolean verdict as the engine leaves it after the
// verify check gave the model's answer the probability holds: a pass under
// below is overruled (a fail, its confidence the check's doubt), as
// engine's overrule does.
func checkedVerdict(pass bool, holds, below float64) *engine.Verdict {
	v := boolVerdict(&pass, true, false, "The agreement says so in its third clause.")
	if !pass {
		v.Confidence = ptr(holds)
		return v
	}
	if holds < below {
		fail, doubt := false, 1-holds
		v.BooleanOutput, v.Confidence, v.Overruled, v.DataSufficiency = &fail, &doubt, true, false
		return v
	}
	v.Confidence = ptr(holds)
	return v
}

// A sweep moves only the model's passes that a check gave a probability:
// each is a pass at a threshold its probability reaches and a fail below
// it, whether the run overruled it or not; fails, unanswered verdicts and
// numerical rules stay as they were. At the run's own threshold it gives
// the run's balanced accuracy.
func TestOverruleSweep(t *testing.T) {
	const used = 0.485
	type judged struct {
		want   bool
		pass   bool
		holds  float64
		answer bool // false: unanswered
	}
	cases := []judged{
		{want: true, pass: true, holds: 0.60, answer: true},  // a pass at every threshold to 0.60
		{want: true, pass: true, holds: 0.45, answer: true},  // overruled in the run
		{want: false, pass: true, holds: 0.47, answer: true}, // overruled in the run, rightly
		{want: false, pass: true, holds: 0.52, answer: true}, // a wrong pass the run kept
		{want: false, pass: false, holds: 0.9, answer: true}, // the model's fail: never moves
		{want: true, answer: false},                          // unanswered: wrong at every threshold
	}
	var outs []Outcome
	for _, c := range cases {
		lab := boolLabel(c.want, false)
		var v *engine.Verdict
		if c.answer {
			v = checkedVerdict(c.pass, c.holds, used)
		}
		outs = append(outs, scoreVerdict("case", 1, lab, v))
	}
	score := 3
	numeric := scoreVerdict("case", 1, Label{RuleID: "n", Type: verdict.Numerical, Numerical: &score, Allowed: []int{1, 3, 5}},
		&engine.Verdict{RuleID: "n", Type: verdict.Numerical, NumericalOutput: &score, DataSufficiency: true, Confidence: ptr(0.1)})
	outs = append(outs, numeric)

	sw := overruleSweep(outs, used)
	if sw == nil {
		t.Fatal("no sweep of checked passes")
	}
	if sw.Checked != 4 || sw.Used != used {
		t.Fatalf("checked %d passes at %v, want 4 at %v", sw.Checked, sw.Used, used)
	}
	at := func(below float64) OverrulePoint {
		t.Helper()
		for _, p := range sw.Points {
			if p.Below == below {
				return p
			}
		}
		t.Fatalf("no point at %v in %v", below, sw.Points)
		return OverrulePoint{}
	}
	tests := []struct {
		below     float64
		overruled int
		correct   int
		balanced  float64
	}{
		// off: three passes (two wrong) and the fail; recall 2/3 of passes, 1/3 of fails.
		{0, 0, 3, (2.0/3 + 1.0/3) / 2},
		{0.45, 0, 3, (2.0/3 + 1.0/3) / 2},
		{0.46, 1, 2, (1.0/3 + 1.0/3) / 2},
		{used, 2, 3, (1.0/3 + 2.0/3) / 2},
		{0.53, 3, 4, (1.0/3 + 1.0) / 2},
		{0.61, 4, 3, (0 + 1.0) / 2},
	}
	for _, tt := range tests {
		p := at(tt.below)
		if p.Overruled != tt.overruled || p.Correct != tt.correct || p.Verdicts != 6 || p.BalancedAccuracy == nil || !near(*p.BalancedAccuracy, tt.balanced) {
			t.Errorf("below %v: overruled %d, right %d of %d, balanced %v; want %d, %d of 6, %.3f",
				tt.below, p.Overruled, p.Correct, p.Verdicts, p.BalancedAccuracy, tt.overruled, tt.correct, tt.balanced)
		}
	}
	run := summarise(outs).Boolean.BalancedAccuracy
	if got := at(used).BalancedAccuracy; run == nil || got == nil || !near(*got, *run) {
		t.Errorf("at the run's threshold the sweep gives %v, the run %v", got, run)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// The thresholds: off, the grid in order, the run's own where it falls
// between two grid points and once where it is one.
func TestOverruleThresholds(t *testing.T) {
	ts := overruleThresholds(0.485)
	if ts[0] != 0 || ts[1] != OverruleSweepFrom || ts[len(ts)-1] != OverruleSweepTo {
		t.Fatalf("thresholds %v: want off, then %v to %v", ts, OverruleSweepFrom, OverruleSweepTo)
	}
	const want = 1 + 61 + 1 // off, 0.20 to 0.80 by 0.01, 0.485
	if len(ts) != want {
		t.Fatalf("%d thresholds, want %d", len(ts), want)
	}
	for i := 1; i < len(ts); i++ {
		if ts[i] <= ts[i-1] {
			t.Fatalf("thresholds out of order at %d: %v", i, ts)
		}
	}
	if !slices.Contains(ts, 0.485) || !slices.Contains(ts, 0.48) || !slices.Contains(ts, 0.23) {
		t.Errorf("thresholds %v lack 0.485, 0.48 or 0.23", ts)
	}
	if n := len(overruleThresholds(0.48)); n != want-1 {
		t.Errorf("a run's threshold on the grid added a point: %d thresholds, want %d", n, want-1)
	}
	if ts := overruleThresholds(0.9); ts[len(ts)-1] != 0.9 {
		t.Errorf("a threshold past the grid is not last: %v", ts[len(ts)-3:])
	}
}

// Without a check's probability on any pass nothing moves and no table is
// written; the text report shows off, the grid's twentieths from 0.30 to
// 0.70 and the run's own threshold, marked.
func TestOverruleSweepReport(t *testing.T) {
	plain := []Outcome{scoreVerdict("case", 1, boolLabel(true, false), boolVerdict(ptr(true), true, false, "It says so."))}
	sw := overruleSweep(plain, 0.48)
	if sw.Checked != 0 || sw.Points[len(sw.Points)-1].Overruled != 0 {
		t.Fatalf("a sweep of verdicts no check measured moved some: %+v", sw)
	}
	var none bytes.Buffer
	(&Report{Systems: []SystemReport{{Name: SystemEngine, Overrule: sw}}}).writeOverruleSweeps(&none)
	if none.Len() > 0 {
		t.Errorf("a table with no pass checked:\n%s", none.String())
	}
	outs := []Outcome{
		scoreVerdict("case", 1, boolLabel(true, false), checkedVerdict(true, 0.6, 0.48)),
		scoreVerdict("case", 1, boolLabel(false, false), checkedVerdict(true, 0.4, 0.48)),
	}
	r := &Report{Systems: []SystemReport{{Name: SystemEngine, Overrule: overruleSweep(outs, 0.48)}, {Name: SystemBaseline}}}
	var b bytes.Buffer
	r.writeOverruleSweeps(&b)
	text := b.String()
	for _, want := range []string{"engine: --overrule-passes-below from the check of 2 boolean passes (this run: 0.48;",
		"off ", "0.30 ", "0.35 ", "0.45 ", "0.48 (this run)", "0.70 ", "100.0%"} {
		if !strings.Contains(text, want) {
			t.Errorf("the sweep's text lacks %q:\n%s", want, text)
		}
	}
	for _, unwanted := range []string{"0.31 ", "0.47 ", "0.75 ", "baseline"} {
		if strings.Contains(text, unwanted) {
			t.Errorf("the sweep's text shows %q:\n%s", unwanted, text)
		}
	}
	if rows := strings.Count(text, "\n"); rows != 2+1+1+9+1 {
		t.Errorf("%d lines, want the heading, the header, off, nine twentieths and the run's own:\n%s", rows, text)
	}
}

// checkingLLM answers the engine's judging calls in turn and each check
// with the probability holds gives its rule (found by the rule's text in
// the check), as a server's log-probabilities.
type checkingLLM struct {
	judged []string
	holds  map[string]float64
}

func (l *checkingLLM) Chat(_ context.Context, req engine.ChatRequest) (engine.ChatResponse, error) {
	if req.Purpose != engine.PurposeCheck {
		if len(l.judged) == 0 {
			return engine.ChatResponse{}, fmt.Errorf("unexpected %s call", req.Purpose)
		}
		content := l.judged[0]
		l.judged = l.judged[1:]
		return engine.ChatResponse{Content: content}, nil
	}
	question := req.Messages[len(req.Messages)-1].Content
	for text, p := range l.holds {
		if strings.Contains(question, text) {
			return engine.ChatResponse{Content: `{"holds":true}`, Tokens: []engine.TokenLogProb{
				{Text: `{"holds":`},
				{Text: "true", LogProb: math.Log(p), Top: []engine.TokenAlternative{{Text: "true", LogProb: math.Log(p)}, {Text: "false", LogProb: math.Log(1 - p)}}},
				{Text: "}"},
			}}, nil
		}
	}
	return engine.ChatResponse{}, fmt.Errorf("a check of no known rule: %s", question)
}

// A run with the verify check carries the engine's sweep, whose point at
// the run's threshold is the run's own balanced accuracy: here the check
// doubts case a's governing-law pass (0.4), which 0.5 overrules wrongly,
// and off leaves every verdict right.
func TestRunSweepsTheOverruleWithTheCheckOn(t *testing.T) {
	ds := loadTest(t)
	var judged []string
	for _, r := range allCorrect() {
		judged = append(judged, r.Content)
	}
	llm := &checkingLLM{judged: judged, holds: map[string]float64{
		"governing law": 0.4, "fixed number of years": 0.7, "Score the years": 0.6,
	}}
	rep, err := Run(context.Background(), ds, Options{LLM: llm, Engine: engine.Config{
		Model: "fake-model", OutputRetries: -1, Confidence: engine.ConfidenceVerify, OverrulePassesBelow: 0.5, CallConcurrency: 1,
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.System(SystemEngine)
	sw := s.Overrule
	if sw == nil {
		t.Fatal("no overrule sweep with the verify check on")
	}
	if sw.Checked != 2 || sw.Used != 0.5 {
		t.Errorf("checked %d passes at %v, want the two passes at 0.5", sw.Checked, sw.Used)
	}
	for _, p := range sw.Points {
		switch p.Below {
		case 0:
			if p.Overruled != 0 || p.BalancedAccuracy == nil || *p.BalancedAccuracy != 1 {
				t.Errorf("off: %+v, want nothing overruled and every verdict right", p)
			}
		case 0.5:
			if p.Overruled != 1 || p.BalancedAccuracy == nil || s.Overall.Boolean.BalancedAccuracy == nil || !near(*p.BalancedAccuracy, *s.Overall.Boolean.BalancedAccuracy) {
				t.Errorf("at the run's 0.5: %+v, want one overruled and the run's balanced accuracy %v", p, s.Overall.Boolean.BalancedAccuracy)
			}
		}
	}
	plain := run(t, ds, func() engine.LLM { _, l := newFake(t, allCorrect()...); return l }(), 1, "")
	if plain.System(SystemEngine).Overrule != nil {
		t.Error("a sweep without the verify check")
	}
}
