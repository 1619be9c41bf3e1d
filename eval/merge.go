package eval

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Merge combines reports of one dataset and model, judged on disjoint
// cases (one eval a server, say, each printed with --json), into the report
// one run over all their cases would have given: the outcomes, costs and
// re-asks added together, and every figure, margin, interval and overrule
// sweep computed again from them. The reports must have the same systems
// in the same order, the same number of runs and, for a sweep, the same
// overrule threshold. Wall times add up: the merged wall time is the time
// the judging took, not how long the reports took side by side.
func Merge(reports []*Report) (*Report, error) {
	if len(reports) == 0 {
		return nil, errors.New("no report to merge")
	}
	first := reports[0]
	out := &Report{Dataset: first.Dataset, Model: first.Model, Runs: first.Runs}
	names := systemNames(first)
	seen := map[string]int{} // case → the report that judged it
	for i, r := range reports {
		switch {
		case r.Dataset != first.Dataset:
			return nil, fmt.Errorf("report %d is of dataset %q, report 1 of %q", i+1, r.Dataset, first.Dataset)
		case r.Model != first.Model:
			return nil, fmt.Errorf("report %d judged with model %q, report 1 with %q", i+1, r.Model, first.Model)
		case r.Runs != first.Runs:
			return nil, fmt.Errorf("report %d has %d runs, report 1 %d", i+1, r.Runs, first.Runs)
		case !slices.EqualFunc(r.Systems, first.Systems, func(a, b SystemReport) bool { return a.Name == b.Name }):
			return nil, fmt.Errorf("report %d has systems %v, report 1 %v", i+1, systemNames(r), names)
		}
		if len(r.Systems) > 0 {
			for _, c := range r.Systems[0].PerCase {
				if j, ok := seen[c.Case]; ok {
					return nil, fmt.Errorf("case %q is in report %d and report %d: merge reports of disjoint cases", c.Case, j+1, i+1)
				}
				seen[c.Case] = i
			}
		}
		out.Cases += r.Cases
		out.Rules += r.Rules
	}

	runWalls := make([][]time.Duration, len(names))
	for si, name := range names {
		sr := SystemReport{Name: name}
		caseCost := map[string]Cost{}
		var cases []string
		var rules []ruleKey
		ruleSeen := map[string]bool{}
		runWalls[si] = make([]time.Duration, out.Runs)
		swept, used := 0, 0.0
		for ri, r := range reports {
			s := &r.Systems[si]
			sr.Outcomes = append(sr.Outcomes, s.Outcomes...)
			sr.Errors = append(sr.Errors, s.Errors...)
			sr.Cost = sr.Cost.add(s.Cost)
			for reason, n := range s.Reasks {
				if sr.Reasks == nil {
					sr.Reasks = map[string]int{}
				}
				sr.Reasks[reason] += n
			}
			for _, c := range s.PerCase {
				cases = append(cases, c.Case)
				caseCost[c.Case] = c.Cost
			}
			for _, rr := range s.PerRule {
				if !ruleSeen[rr.RuleID] {
					ruleSeen[rr.RuleID] = true
					rules = append(rules, ruleKey{rr.RuleID, rr.Type})
				}
			}
			switch {
			case out.Runs == 1:
				runWalls[si][0] += s.Cost.Wall
			case s.Spread != nil && s.Spread.WallSeconds != nil && len(s.Spread.WallSeconds.Runs) == out.Runs:
				for run, secs := range s.Spread.WallSeconds.Runs {
					runWalls[si][run] += time.Duration(secs * float64(time.Second))
				}
			}
			if s.Overrule != nil {
				if swept > 0 && s.Overrule.Used != used {
					return nil, fmt.Errorf("%s: report %d overrules passes below %v, an earlier report below %v", name, ri+1, s.Overrule.Used, used)
				}
				swept, used = swept+1, s.Overrule.Used
			}
		}
		switch swept {
		case 0:
		case len(reports):
			sr.Overrule = overruleSweep(sr.Outcomes, used)
		default:
			return nil, fmt.Errorf("%s: %d of %d reports were judged with the verify check: merge reports judged with the same settings", name, swept, len(reports))
		}
		summariseSystem(&sr, rules, cases, caseCost, out.Runs, runWalls[si])
		out.Systems = append(out.Systems, sr)
	}
	out.Margins = margins(out, runWalls)
	return out, nil
}

func systemNames(r *Report) []string {
	names := make([]string, len(r.Systems))
	for i, s := range r.Systems {
		names[i] = s.Name
	}
	return names
}
