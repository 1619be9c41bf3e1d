package schemas

import "rulevalidator/verdict"

// The value types the events carry are the verdict package's, which the
// engine produces too: one declaration of each field. The encoders of this
// package (Avro, JSON) write them field by field, so a field added there
// reaches the wire only when a contract names it.
type (
	// RuleType is a rule's kind, as rule_type carries it.
	RuleType = verdict.RuleType
	// Match says how an evidence quote was found in its document.
	Match = verdict.Match
	// Evidence is a quote supporting a verdict.
	Evidence = verdict.Evidence
	// Difference is one way an anchored span contradicts the quote it was found for.
	Difference = verdict.Difference
	// DocumentPages names pages of one document (1-based, ascending).
	DocumentPages = verdict.DocumentPages
	// Source is one input the request supplied, as the summary lists it.
	Source = verdict.Source
	// BooleanAggregation names how boolean verdicts are combined: all, any or majority.
	BooleanAggregation = verdict.BooleanAggregation
	// NumericalAggregation names how scores are combined: mean, sum or weighted_mean.
	NumericalAggregation = verdict.NumericalAggregation
	// BooleanAggregate combines the applicable boolean verdicts.
	BooleanAggregate = verdict.BooleanAggregate
	// NumericalAggregate combines the counted scores; Score is nil when none was counted.
	NumericalAggregate = verdict.NumericalAggregate
	// Aggregate holds one aggregate per rule type present in the ruleset.
	Aggregate = verdict.Aggregate
	// Usage is token usage summed over every model call of one request.
	Usage = verdict.Usage
	// GroupResult is one nested ruleset's result.
	GroupResult = verdict.GroupResult
	// CachedFrom says when, and under which request of the same tenant, a
	// verdict taken from the verdict cache was judged.
	CachedFrom = verdict.CachedFrom
)

// The rule types.
const (
	RuleBoolean   = verdict.Boolean
	RuleNumerical = verdict.Numerical
)

// The matches an evidence can have.
const (
	MatchExact       = verdict.MatchExact
	MatchNormalized  = verdict.MatchNormalized
	MatchFuzzy       = verdict.MatchFuzzy
	MatchElided      = verdict.MatchElided
	MatchPassage     = verdict.MatchPassage
	MatchNone        = verdict.MatchNone
	MatchNotDocument = verdict.MatchNotDocument
)
