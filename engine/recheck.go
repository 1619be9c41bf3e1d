package engine

import (
	"context"
	"errors"
	"fmt"

	"rulevalidator/verdict"
)

// Recheck asks the verify check (Config.Confidence must be ConfidenceVerify)
// again of verdicts judged before on the same request, with this engine's
// check settings, and makes no judging call: each verdict's confidence is
// its check's, a pass under Config.OverrulePassesBelow is overruled, and
// the verdicts are routed as Evaluate routes them. A check runs after every
// judging call and changes none, so this gives what Evaluate would have with
// these settings, for the cost of the checks: how a check's settings are
// chosen on recorded verdicts.
//
// verdicts are as the model gave them: a pass an earlier check overruled is
// a pass again, its rationale the model's own, without a confidence. Their
// evidence names passages of the request's material by id (the cite
// evidence mode); the check reads each passage whole. Errors wrap
// ErrInvalidRuleset (a ruleset with groups, filters or checks, or a verdict
// of no rule of it) or ErrInvalidInput (a passage id the material does not
// have, evidence without one), as Evaluate's do, and the LLM's.
func (e *Engine) Recheck(ctx context.Context, req Task, verdicts []Verdict) (*Result, error) {
	if e.cfg.Confidence != ConfidenceVerify {
		return nil, errors.New("engine: a recheck asks the verify check: Confidence must be verify")
	}
	model, err := e.checkTask(req)
	if err != nil {
		return nil, err
	}
	rs, in := req.Ruleset, req.Inputs
	if rs.tree != nil {
		return nil, fmt.Errorf("%w: a recheck takes a ruleset without groups, filters or checks", ErrInvalidRuleset)
	}
	rules := make(map[string]Rule, len(rs.Rules))
	for _, r := range rs.Rules {
		rules[r.RuleID] = r
	}
	an := e.newAnchoring(in)
	ps := an.passages()
	out := make([]Verdict, len(verdicts))
	judged := make([]judgedVerdict, 0, len(verdicts))
	for i, v := range verdicts {
		rule, ok := rules[v.RuleID]
		if !ok {
			return nil, fmt.Errorf("%w: a verdict of rule %q, which the ruleset does not have", ErrInvalidRuleset, v.RuleID)
		}
		v.Confidence, v.Overruled, v.SufficiencyNote = nil, false, ""
		v.Evidences = append([]verdict.Evidence(nil), v.Evidences...)
		for j := range v.Evidences {
			ev := &v.Evidences[j]
			if ev.PassageID == "" {
				return nil, fmt.Errorf("%w: rule %q: evidence %d names no passage id (a recheck reads evidence by passage id: the cite evidence mode)",
					ErrInvalidInput, v.RuleID, j)
			}
			k, ok := ps.byID[ev.PassageID]
			if !ok {
				return nil, fmt.Errorf("%w: rule %q: evidence %d cites passage %q, which the material does not have (a recheck reads evidence by passage id)",
					ErrInvalidInput, v.RuleID, j, ev.PassageID)
			}
			p := ps.list[k]
			ev.Text, ev.SourceOrigin, ev.SourcePageNumber, ev.Anchored, ev.Match = p.text, p.origin, p.page, true, verdict.MatchPassage
			if p.doc < 0 {
				ev.Anchored, ev.Match = false, verdict.MatchNotDocument
			}
		}
		out[i] = v
		judged = append(judged, judgedVerdict{rule: rule, verdict: &out[i]})
	}
	mode, _, err := e.instructionMode(ctx, model)
	if err != nil {
		return nil, err
	}
	usage, err := e.verifyConfidences(ctx, model, mode, an, judged)
	if err != nil {
		return nil, err
	}
	return flatResult(rs, model, out, usage, e.cfg.ReviewBelowConfidence), nil
}
