package eval

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"rulevalidator/engine"
	"rulevalidator/judging"
	"rulevalidator/verdict"
)

// A recheck (Options.Recheck) judges nothing: the engine's verdicts are
// those a recorded report gave, each asked the verify check again with the
// engine's settings (engine.Engine.Recheck). A check changes no judging
// call, so this is what the engine would have given with those settings,
// for the cost of the checks alone.

// recheckReasons are the review reasons a check cannot change and the
// recorded outcome cannot rebuild (they come from how the judging call's
// evidence was anchored): a rechecked verdict keeps them as recorded.
var recheckReasons = []engine.ReviewReason{engine.ReviewCorrectedPage, engine.ReviewAlteredEvidence, engine.ReviewCorrectedCitation}

// recordedVerdicts are the engine's answered outcomes of rec, by case.
func recordedVerdicts(rec *Report) (map[string][]Outcome, error) {
	s := rec.System(SystemEngine)
	switch {
	case s == nil:
		return nil, errors.New("the recorded report has no engine system")
	case rec.Runs != 1:
		return nil, fmt.Errorf("the recorded report has %d runs: recheck a report of one", rec.Runs)
	}
	by := map[string][]Outcome{}
	for _, o := range s.Outcomes {
		if _, ok := by[o.Case]; !ok {
			by[o.Case] = nil // judged, if with no verdict
		}
		if o.Answered {
			by[o.Case] = append(by[o.Case], o)
		}
	}
	return by, nil
}

// modelVerdict is the verdict the model gave that o scores, as a check
// reads it: a pass the engine overruled is the model's pass again (outcomes
// recorded before they said overruled say it by their review reason), its
// rationale the model's own, its evidence the passages it cited.
func modelVerdict(o Outcome) (engine.Verdict, error) {
	v := engine.Verdict{RuleID: o.RuleID, Type: o.Type, BooleanOutput: o.Boolean, NumericalOutput: o.Numerical,
		NotApplicable: o.NotApplicable, DataSufficiency: o.DataSufficiency, Problems: o.Problems,
		Rationale: o.Rationale, Overruled: o.Overruled || slices.Contains(o.ReviewReasons, engine.ReviewOverruledPass)}
	v.Rationale = v.ModelRationale()
	if v.Overruled {
		pass := true
		v.BooleanOutput, v.DataSufficiency, v.Overruled = &pass, true, false
	}
	for i, c := range o.Citations {
		if c.PassageID == "" {
			return engine.Verdict{}, fmt.Errorf("case %q, rule %q: citation %d is a quote, not a passage: recheck a report judged in the cite evidence mode", o.Case, o.RuleID, i)
		}
		v.Evidences = append(v.Evidences, verdict.Evidence{PassageID: c.PassageID})
	}
	return v, nil
}

// recheckJudge asks eng's check again of the verdicts recorded for each case.
func recheckJudge(eng *engine.Engine, recorded map[string][]Outcome) judge {
	return func(ctx context.Context, c *Case) (map[string]*engine.Verdict, verdict.Usage, error) {
		outs, ok := recorded[c.ID]
		if !ok {
			return nil, verdict.Usage{}, fmt.Errorf("case %q is not in the recorded report", c.ID)
		}
		verdicts := make([]engine.Verdict, 0, len(outs))
		kept := map[string][]engine.ReviewReason{}
		for _, o := range outs {
			v, err := modelVerdict(o)
			if err != nil {
				return nil, verdict.Usage{}, err
			}
			verdicts = append(verdicts, v)
			for _, r := range o.ReviewReasons {
				if slices.Contains(recheckReasons, r) {
					kept[o.RuleID] = append(kept[o.RuleID], r)
				}
			}
		}
		res, err := judging.Recheck(ctx, eng, c.Ruleset, c.Request, verdicts)
		if err != nil {
			return nil, verdict.Usage{}, err
		}
		out := make(map[string]*engine.Verdict, len(res.Rules))
		order := engine.ReviewReasons()
		for i := range res.Rules {
			v := &res.Rules[i]
			for _, r := range kept[v.RuleID] {
				if !slices.Contains(v.ReviewReasons, r) {
					v.ReviewReasons = append(v.ReviewReasons, r)
				}
			}
			slices.SortFunc(v.ReviewReasons, func(a, b engine.ReviewReason) int { return slices.Index(order, a) - slices.Index(order, b) })
			v.NeedsReview = len(v.ReviewReasons) > 0
			out[v.RuleID] = v
		}
		return out, res.Usage, nil
	}
}
