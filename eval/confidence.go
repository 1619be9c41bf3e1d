package eval

import (
	"cmp"
	"math"
	"slices"
)

// ReviewShares are the shares of verdicts, least confident first, whose
// review ConfidenceMetrics.Caught reports.
var ReviewShares = []float64{0.1, 0.2, 0.3}

// ConfidenceMetrics say what the verdicts' confidence is worth: how well it
// tells right verdicts from wrong ones, and how many of the wrong ones a
// person would see by reviewing the least confident. Only verdicts with a
// confidence count.
type ConfidenceMetrics struct {
	// Measured counts the verdicts with a confidence, Wrong the wrong ones
	// among them.
	Measured int `json:"measured"`
	Wrong    int `json:"wrong"`
	// AUROC is the chance that a right verdict has a higher confidence
	// than a wrong one (ties count half): 0.5 is no better than chance, 1
	// perfect. Nil when every verdict is right, or every one wrong.
	AUROC *float64 `json:"auroc"`
	// Caught holds, for each of ReviewShares, the share of the wrong
	// verdicts among the least confident that share of verdicts; random
	// review catches the share itself. Nil entries when none is wrong.
	Caught []CaughtShare `json:"caught_by_review"`
}

// CaughtShare is the share of wrong verdicts caught by reviewing the least
// confident Reviewed share of verdicts.
type CaughtShare struct {
	Reviewed float64  `json:"reviewed"`
	Caught   *float64 `json:"caught"`
}

// confidenceMetrics measures outs' confidences; nil when none has one.
func confidenceMetrics(outs []Outcome) *ConfidenceMetrics {
	type scored struct {
		conf    float64
		correct bool
	}
	var measured []scored
	for _, o := range outs {
		if o.Answered && o.Confidence != nil {
			measured = append(measured, scored{*o.Confidence, o.Correct})
		}
	}
	if len(measured) == 0 {
		return nil
	}
	m := &ConfidenceMetrics{Measured: len(measured)}
	var right, wrong []float64
	for _, s := range measured {
		if s.correct {
			right = append(right, s.conf)
		} else {
			wrong = append(wrong, s.conf)
		}
	}
	m.Wrong = len(wrong)
	if len(right) > 0 && len(wrong) > 0 {
		var wins float64
		for _, r := range right {
			for _, w := range wrong {
				switch {
				case r > w:
					wins++
				case r == w:
					wins += 0.5
				}
			}
		}
		auroc := wins / float64(len(right)*len(wrong))
		m.AUROC = &auroc
	}
	// Least confident first; among equals, the wrong ones last, so that a
	// tie never flatters the figure.
	slices.SortStableFunc(measured, func(a, b scored) int {
		if c := cmp.Compare(a.conf, b.conf); c != 0 {
			return c
		}
		switch {
		case a.correct && !b.correct:
			return -1
		case !a.correct && b.correct:
			return 1
		}
		return 0
	})
	for _, share := range ReviewShares {
		cs := CaughtShare{Reviewed: share}
		if m.Wrong > 0 {
			n := int(math.Ceil(share * float64(len(measured))))
			caught := 0
			for _, s := range measured[:n] {
				if !s.correct {
					caught++
				}
			}
			f := float64(caught) / float64(m.Wrong)
			cs.Caught = &f
		}
		m.Caught = append(m.Caught, cs)
	}
	return m
}
