package eval

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"

	"rulevalidator/verdict"
)

// OverruleSweep says what --overrule-passes-below would have made of a
// run's boolean verdicts at other thresholds, read from the verify check's
// probability that each pass the model gave holds (engine.ConfidenceVerify):
// at a threshold, a pass the check gives less is a fail, and a pass the
// run overruled that the check gives at least that stands. Nothing else
// moves, so one run with the check on (the threshold at 0, or any) shows
// every threshold. A threshold chosen from it fits these verdicts: confirm
// it on cases it was not chosen on.
type OverruleSweep struct {
	// Used is the run's own threshold (0: off).
	Used float64 `json:"used"`
	// Checked counts the boolean passes the model gave whose check gave a
	// probability, over every run.
	Checked int `json:"passes_checked"`
	// Points are the thresholds: off (0), then OverruleSweepFrom to
	// OverruleSweepTo by OverruleSweepStep, and Used where it falls between.
	Points []OverrulePoint `json:"points"`
}

// OverrulePoint is the run's boolean verdicts as one threshold would have
// left them.
type OverrulePoint struct {
	Below     float64 `json:"below"`
	Overruled int     `json:"passes_overruled"`
	// Correct and Verdicts count the labelled boolean verdicts;
	// BalancedAccuracy is as BooleanMetrics has it (nil unless both
	// classes were expected).
	Correct          int      `json:"boolean_correct"`
	Verdicts         int      `json:"boolean_verdicts"`
	BalancedAccuracy *float64 `json:"balanced_accuracy"`
}

// The thresholds a sweep tries besides off and the run's own: those the
// check's probabilities have fallen between on the local model (0.29 to
// 0.72), finely enough to see a plateau.
const (
	OverruleSweepFrom = 0.20
	OverruleSweepTo   = 0.80
	OverruleSweepStep = 0.01
)

// overruleSweep is the sweep of outs' boolean verdicts, used being the
// threshold they were judged with; with no pass that a check gave a
// probability, every point is the verdicts as they are. The confidences
// must be the verify check's.
func overruleSweep(outs []Outcome, used float64) *OverruleSweep {
	type judged struct {
		want  bool
		given *bool    // the verdict as scored; nil for none
		check *float64 // the check's probability that the model's pass holds
	}
	var verdicts []judged
	checked := 0
	for _, o := range outs {
		if o.Type == verdict.Numerical {
			continue
		}
		j := judged{want: o.ExpectedBoolean != nil && *o.ExpectedBoolean, given: o.scoredBoolean()}
		pass := o.Overruled || (o.Boolean != nil && *o.Boolean && !o.NotApplicable)
		if o.Answered && pass && o.Confidence != nil {
			p := *o.Confidence
			if o.Overruled {
				p = 1 - p
			}
			j.check = &p
			checked++
		}
		verdicts = append(verdicts, j)
	}
	sweep := &OverruleSweep{Used: used, Checked: checked}
	for _, below := range overruleThresholds(used) {
		pt := OverrulePoint{Below: below, Verdicts: len(verdicts)}
		var c Confusion
		for _, j := range verdicts {
			given := j.given
			if j.check != nil {
				// An overruled pass's probability comes back as 1 − (1 − p):
				// p up to rounding, which must not move it across a threshold.
				holds := below == 0 || *j.check >= below-1e-9
				if !holds {
					pt.Overruled++
				}
				given = &holds
			}
			c.count(j.want, given)
		}
		pt.Correct = c.TruePass + c.TrueFail
		_, _, pt.BalancedAccuracy = c.recalls()
		sweep.Points = append(sweep.Points, pt)
	}
	return sweep
}

// overruleThresholds are off, the grid, and used where the grid does not
// hold it, in order.
func overruleThresholds(used float64) []float64 {
	out := []float64{0}
	steps := int(math.Round((OverruleSweepTo - OverruleSweepFrom) / OverruleSweepStep))
	for i := 0; i <= steps; i++ {
		t := roundThreshold(OverruleSweepFrom + float64(i)*OverruleSweepStep)
		if used > out[len(out)-1] && used < t {
			out = append(out, used)
		}
		out = append(out, t)
	}
	if used > out[len(out)-1] {
		out = append(out, used)
	}
	return out
}

// roundThreshold takes a grid point's floating-point error away (0.2 +
// 3 × 0.01 is 0.23, not 0.22999…), so that it compares equal to a
// threshold given as 0.23.
func roundThreshold(t float64) float64 { return math.Round(t*1e6) / 1e6 }

// textThreshold says whether the text report shows a sweep's point: off,
// every 0.05 of the grid from 0.30 to 0.70, and the run's own.
func textThreshold(p OverrulePoint, used float64) bool {
	if p.Below == 0 || p.Below == used {
		return true
	}
	hundredths := math.Round(p.Below * 100)
	return hundredths >= 30 && hundredths <= 70 && int(hundredths)%5 == 0 && math.Abs(p.Below*100-hundredths) < 1e-6
}

// writeOverruleSweeps writes each system's sweep as a table.
func (r *Report) writeOverruleSweeps(w io.Writer) {
	for _, s := range r.Systems {
		sw := s.Overrule
		if sw == nil || sw.Checked == 0 {
			continue
		}
		used := "off"
		if sw.Used > 0 {
			used = strconv.FormatFloat(sw.Used, 'f', -1, 64)
		}
		fmt.Fprintf(w, "\n%s: --overrule-passes-below from the check of %d boolean passes (this run: %s; JSON: every 0.01 from %.2f to %.2f). A threshold chosen here fits these verdicts: confirm it on other cases.\n",
			s.Name, sw.Checked, used, OverruleSweepFrom, OverruleSweepTo)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "BELOW\tPASSES OVERRULED\tBOOLEAN RIGHT\tBALANCED ACCURACY")
		for _, p := range sw.Points {
			if !textThreshold(p, sw.Used) {
				continue
			}
			below := strconv.FormatFloat(p.Below, 'f', 2, 64)
			switch {
			case p.Below == 0:
				below = "off"
			case p.Below == sw.Used:
				below = strconv.FormatFloat(p.Below, 'f', -1, 64) + " (this run)"
			}
			bal := "-"
			if p.BalancedAccuracy != nil {
				bal = pct(*p.BalancedAccuracy)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", below, p.Overruled, frac(p.Correct, p.Verdicts), bal)
		}
		tw.Flush()
	}
}
