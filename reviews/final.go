package reviews

import (
	"rulevalidator/engine"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// Source says where a final outcome comes from.
type Source string

const (
	// FromModel: no review, or a confirm; the model's verdict stands.
	FromModel Source = "model"
	// FromReview: an override replaced the model's verdict.
	FromReview Source = "review"
)

// Final is a rule's outcome once its current review is applied.
type Final struct {
	Source          Source         `json:"source"`
	Outcome         engine.Outcome `json:"outcome"`
	BooleanOutput   *bool          `json:"boolean_output"`
	NumericalOutput *int           `json:"numerical_output"`
	NotApplicable   bool           `json:"not_applicable"`
	// Reviewed says whether a person reviewed the verdict (confirm or
	// override).
	Reviewed bool `json:"reviewed"`
}

// FinalVerdict is v as the engine would hold it, with current applied: an
// override's outputs replace the model's and count as judged on sufficient
// data (a person decided them).
func FinalVerdict(v schemas.VerdictEvent, current *Review) engine.Verdict {
	out := engine.Verdict{
		RuleID: v.RuleID, Type: v.RuleType, DataSufficiency: v.DataSufficiency,
		BooleanOutput: v.BooleanOutput, NumericalOutput: v.NumericalOutput, NotApplicable: v.NotApplicable,
	}
	if current != nil && current.Decision == Override {
		out.BooleanOutput, out.NumericalOutput, out.NotApplicable = current.BooleanOutput, current.NumericalOutput, current.NotApplicable
		out.DataSufficiency = true
	}
	return out
}

// FinalOf is the final outcome of v under its current review.
func FinalOf(v schemas.VerdictEvent, current *Review) Final {
	fv := FinalVerdict(v, current)
	f := Final{Source: FromModel, Outcome: fv.Outcome(), BooleanOutput: fv.BooleanOutput,
		NumericalOutput: fv.NumericalOutput, NotApplicable: fv.NotApplicable, Reviewed: current != nil}
	if current != nil && current.Decision == Override {
		f.Source = FromReview
	}
	return f
}

// FinalAggregates are the aggregates of the validation's final outcomes,
// combined by the engine's one aggregation with the modes the summary
// reports and the weights the verdicts carry.
func FinalAggregates(summary schemas.SummaryEvent, verdicts []schemas.VerdictEvent, all []Review) verdict.Aggregate {
	rs := &engine.Ruleset{}
	if b := summary.Aggregate.Boolean; b != nil {
		rs.BooleanAggregation = b.Mode
	}
	if n := summary.Aggregate.Numerical; n != nil {
		rs.NumericalAggregation = n.Mode
	}
	finals := make([]engine.Verdict, len(verdicts))
	for i, v := range verdicts {
		rs.Rules = append(rs.Rules, engine.Rule{RuleID: v.RuleID, Type: v.RuleType, Weight: v.RuleWeight})
		finals[i] = FinalVerdict(v, Current(all, v.RuleID))
	}
	return engine.AggregateVerdicts(rs, finals)
}

// ItemOf is the queue's item for v.
func ItemOf(v schemas.VerdictEvent) Item {
	it := Item{
		RequestID: v.RequestID, RuleID: v.RuleID, RulesetID: v.RulesetID,
		Verdict:    string(engine.VerdictOutcome(v.RuleType, v.NotApplicable, v.BooleanOutput, v.NumericalOutput)),
		Confidence: v.Confidence, ReviewReasons: v.ReviewReasons, JudgedAt: v.CompletedAt,
		NumericalOutput: v.NumericalOutput,
	}
	if v.RulesetVersion != nil {
		it.RulesetVersion = *v.RulesetVersion
	}
	if v.RuleName != nil {
		it.RuleName = *v.RuleName
	}
	if it.ReviewReasons == nil {
		it.ReviewReasons = []string{}
	}
	return it
}

// EngineResult is a finished validation as the engine gave it, rebuilt from
// its events, for what renders engine results (the report).
func EngineResult(summary schemas.SummaryEvent, verdicts []schemas.VerdictEvent) *engine.Result {
	res := &engine.Result{RulesetID: summary.RulesetID, Model: summary.Model, Aggregate: summary.Aggregate,
		Sources: summary.Sources, Usage: summary.Usage}
	if summary.RulesetVersion != nil {
		res.RulesetVersion = *summary.RulesetVersion
	}
	for _, v := range verdicts {
		ev := engine.Verdict{
			RuleID: v.RuleID, Type: v.RuleType, DataSufficiency: v.DataSufficiency, Rationale: v.Rationale,
			BooleanOutput: v.BooleanOutput, NumericalOutput: v.NumericalOutput, NotApplicable: v.NotApplicable,
			Evidences: v.Evidences, Problems: v.Problems, PagesConsidered: v.PagesConsidered, Cached: v.Cached,
			Confidence: v.Confidence, NeedsReview: v.NeedsReview,
		}
		if v.RuleName != nil {
			ev.Name = *v.RuleName
		}
		if v.SufficiencyNote != nil {
			ev.SufficiencyNote = *v.SufficiencyNote
		}
		for _, r := range v.ReviewReasons {
			ev.ReviewReasons = append(ev.ReviewReasons, engine.ReviewReason(r))
		}
		res.Rules = append(res.Rules, ev)
	}
	return res
}
