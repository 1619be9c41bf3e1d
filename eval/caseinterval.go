package eval

import (
	"math/rand/v2"
	"slices"

	"rulevalidator/verdict"
)

// CaseInterval is how far a margin can be trusted across cases: the 95%
// bootstrap interval of the balanced-accuracy margin, the cases drawn
// again with replacement (both systems' verdicts on a drawn case go
// together) CaseResamples times. At temperature 0 runs agree with each
// other, so the spread between runs says little; which cases were judged
// says much (seventeen labels an agreement move either system's balanced
// accuracy by a quarter).
type CaseInterval struct {
	Cases int     `json:"cases"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
	// Excludes says the interval leaves zero out: these cases tell the
	// margin from none.
	Excludes bool `json:"excludes_zero"`
}

// CaseResamples is how many times the cases are drawn; the draws are
// seeded, so a report gives the same interval every time it is made.
const CaseResamples = 4000

// CaseIntervalMinCases is the fewest cases an interval is drawn from: drawn
// from two or three, the interval is as narrow as the few margins there are
// and says nothing of other documents.
const CaseIntervalMinCases = 6

// caseInterval is the interval of the margin of sys over base, from their
// outcomes; nil with fewer than CaseIntervalMinCases cases or where a draw
// has no balanced accuracy (one class only).
func caseInterval(sys, base []Outcome) *CaseInterval {
	confusions := func(outs []Outcome) map[string]Confusion {
		by := map[string]Confusion{}
		for _, o := range outs {
			if o.Type == verdict.Numerical {
				continue
			}
			c := by[o.Case]
			c.count(o.ExpectedBoolean != nil && *o.ExpectedBoolean, o.scoredBoolean())
			by[o.Case] = c
		}
		return by
	}
	s, b := confusions(sys), confusions(base)
	var cases []string
	for id := range s {
		if _, ok := b[id]; ok {
			cases = append(cases, id)
		}
	}
	if len(cases) < CaseIntervalMinCases {
		return nil
	}
	slices.Sort(cases) // the draws depend on the order, not on a map's
	rng := rand.New(rand.NewPCG(1, 2))
	margins := make([]float64, 0, CaseResamples)
	for range CaseResamples {
		var sc, bc Confusion
		for range cases {
			id := cases[rng.IntN(len(cases))]
			sc, bc = sc.add(s[id]), bc.add(b[id])
		}
		_, _, sb := sc.recalls()
		_, _, bb := bc.recalls()
		if sb == nil || bb == nil {
			return nil
		}
		margins = append(margins, *sb-*bb)
	}
	slices.Sort(margins)
	low, high := margins[int(0.025*CaseResamples)], margins[int(0.975*CaseResamples)-1]
	return &CaseInterval{Cases: len(cases), Low: low, High: high, Excludes: low > 0 || high < 0}
}
