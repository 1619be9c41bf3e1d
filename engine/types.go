package engine

import (
	"rulevalidator/engine/ruleexpr"
	"rulevalidator/verdict"
)

// Ruleset is a type_config: the rules to judge and how to combine their verdicts.
// Build one with ParseRuleset, or fill it in and call Validate, which also
// resolves defaults (rule types, weights, materialised score sets) in place.
type Ruleset struct {
	ID                        string                       `json:"id,omitempty"`
	Version                   string                       `json:"version,omitempty"`
	Type                      verdict.RuleType             `json:"type,omitempty"`
	GlobalNumericalRuleConfig *GlobalNumericalRuleConfig   `json:"global_numerical_rule_config,omitempty"`
	BooleanAggregation        verdict.BooleanAggregation   `json:"boolean_aggregation,omitempty"`
	NumericalAggregation      verdict.NumericalAggregation `json:"numerical_aggregation,omitempty"`
	GenerateReport            bool                         `json:"generate_report,omitempty"`
	// Cache, when false, has every request on the ruleset judged afresh:
	// no verdict is taken from the verdict cache or stored in it. Unset
	// means true.
	Cache *bool `json:"cache,omitempty"`
	// ReviewBelowConfidence routes a verdict of this ruleset to a person
	// when its confidence is under it (0..1); nil: the service's default.
	// A rule's own setting overrides it.
	ReviewBelowConfidence *float64 `json:"review_below_confidence,omitempty"`
	// Inputs declares the named inputs the ruleset's expressions read, with
	// their types. When given (top level only), an expression reading any
	// other name is refused at load, and a request's value of another type
	// fails the expressions reading it. Absent: any name may be read.
	Inputs map[string]ruleexpr.Type `json:"inputs,omitempty"`
	// NestedRulesets are groups of rules, each written like a ruleset, with
	// their own aggregation (see docs/rule-groups.md).
	NestedRulesets []Ruleset `json:"nested_rulesets,omitempty"`
	// FilterCriteria is a CEL expression saying when the ruleset's rules
	// apply; false makes each of them not applicable, unjudged.
	FilterCriteria string `json:"filter_criteria,omitempty"`
	// Required, on a nested ruleset, gates its parent: when the group fails,
	// the parent fails whatever its own mode.
	Required bool `json:"required,omitempty"`
	// Weight, on a nested ruleset, is its weight in its parent's
	// weighted_mean; Validate sets it to 1 when absent.
	Weight *float64 `json:"weight,omitempty"`
	// Name is a nested ruleset's display label for reports.
	Name string `json:"name,omitempty"`
	// Rules are omitted from JSON when there are none (a ruleset of
	// nested rulesets only): the parser refuses "rules": null.
	Rules []Rule `json:"rules,omitempty"`

	// tree is the compiled form Validate builds once: the rules in tree
	// order and the compiled expressions.
	tree *tree
}

// GlobalNumericalRuleConfig materialises min..max by increment as the score set of
// numerical rules that have no possible_scores of their own.
type GlobalNumericalRuleConfig struct {
	MinScore  *int `json:"min_score,omitempty"`
	MaxScore  *int `json:"max_score,omitempty"`
	Increment *int `json:"increment,omitempty"`
}

// NumericalRuleConfig is a rule's own score set.
type NumericalRuleConfig struct {
	PossibleScores []int `json:"possible_scores,omitempty"`
}

// Rule is one business rule.
type Rule struct {
	RuleID              string               `json:"rule_id"`
	RuleText            string               `json:"rule_text"`
	Type                verdict.RuleType     `json:"type,omitempty"`
	NumericalRuleConfig *NumericalRuleConfig `json:"numerical_rule_config,omitempty"`
	// NotApplicableText is an alternate rule the model evaluates when the
	// primary rule does not apply.
	NotApplicableText string `json:"not_applicable_text,omitempty"`
	// Name is a display label for reports; it is never shown to the model.
	Name string `json:"name,omitempty"`
	// Weight is used by weighted_mean; Validate sets it to 1 when absent.
	Weight *float64 `json:"weight,omitempty"`
	// FilterCriteria is a CEL expression saying when the rule applies.
	FilterCriteria string `json:"filter_criteria,omitempty"`
	// Check is a CEL expression that judges the rule in place of the
	// model: a bool for a boolean rule, a number (mapped to the nearest
	// allowed score) or a bool (highest or lowest score) for a numerical one.
	Check string `json:"check,omitempty"`
	// ReviewBelowConfidence overrides the ruleset's threshold for this
	// rule (0..1; 0: never routed for its confidence).
	ReviewBelowConfidence *float64 `json:"review_below_confidence,omitempty"`
}

// AllowedScores is the resolved score set of a numerical rule (after Validate).
func (r Rule) AllowedScores() []int {
	if r.NumericalRuleConfig == nil {
		return nil
	}
	return r.NumericalRuleConfig.PossibleScores
}

// WeightOrDefault is the rule's weight, 1 when unset.
func (r Rule) WeightOrDefault() float64 {
	if r.Weight == nil {
		return 1
	}
	return *r.Weight
}

// Document is one supplied document, split into pages. Page N (1-based) is
// Pages[N-1]. Its text, as offsets count it, is the pages joined by form feeds.
type Document struct {
	Name  string   `json:"name"`
	Pages []string `json:"pages"`
}

// NamedInput is a named value given to the model next to the documents.
type NamedInput struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Value       any    `json:"value"`
}

// Inputs is everything a request supplies to be judged. Documents are untrusted
// data: they are only ever placed in the user message, wrapped and neutralised.
type Inputs struct {
	PrimaryDocs   []Document   `json:"primary_docs,omitempty"`
	AuxiliaryDocs []Document   `json:"auxiliary_docs,omitempty"`
	TextInput     string       `json:"text_input,omitempty"`
	NamedInputs   []NamedInput `json:"named_inputs,omitempty"`
	Message       string       `json:"message,omitempty"`
}

// Verdict is the checked answer for one rule.
type Verdict struct {
	RuleID          string             `json:"rule_id"`
	Name            string             `json:"name,omitempty"`
	Type            verdict.RuleType   `json:"type"`
	DataSufficiency bool               `json:"data_sufficiency"`
	Rationale       string             `json:"rationale"`
	BooleanOutput   *bool              `json:"boolean_output,omitempty"`
	NumericalOutput *int               `json:"numerical_output,omitempty"`
	NotApplicable   bool               `json:"not_applicable"`
	Evidences       []verdict.Evidence `json:"evidences"`
	// SufficiencyNote says why DataSufficiency was set to false by the
	// engine rather than the model: the rule was judged on an excerpt of
	// the material that held nothing supporting the verdict, or its pass
	// was overruled (Overruled).
	SufficiencyNote string `json:"sufficiency_note,omitempty"`
	// Problems lists, in the reader's terms, what was still wrong with the
	// model's answer when it was kept after the re-ask budget ran out
	// ("the model gave no rationale"); empty for a clean answer. A verdict
	// with problems is kept with problems: its value stands and counts in
	// the aggregates, and it is one to review.
	Problems []string `json:"problems,omitempty"`
	// PagesConsidered names the pages the verdict was judged on when the
	// request was too large for one call and the rule saw an excerpt or a
	// batch; absent when it was judged on every page of every document.
	PagesConsidered []verdict.DocumentPages `json:"pages_considered,omitempty"`
	// Cached is set when the verdict came from the verdict cache: when it
	// was judged and under which request. Nil for a verdict judged for
	// this request.
	Cached *verdict.CachedFrom `json:"cached,omitempty"`
	// Confidence is how sure the model was of the verdict's value, from 0
	// to 1: the probability its own tokens gave the value it chose, where
	// the server returns log-probabilities, or the share of sampled answers
	// that give it (Config.Confidence). Nil when nothing measured it;
	// never invented.
	Confidence *float64 `json:"confidence"`
	// Overruled is set when the engine turned the model's pass into a fail:
	// the verify check found that the cited passages do not show the rule
	// is met (Config.OverrulePassesBelow). The rationale says so before the
	// model's own.
	Overruled bool `json:"overruled,omitempty"`
	// NeedsReview says a person should check the verdict; ReviewReasons
	// say why (RouteReview). Set at the end of Evaluate.
	NeedsReview   bool           `json:"needs_review"`
	ReviewReasons []ReviewReason `json:"review_reasons,omitempty"`
}

// Result is the engine's answer for one request.
type Result struct {
	RulesetID      string            `json:"ruleset_id,omitempty"`
	RulesetVersion string            `json:"ruleset_version,omitempty"`
	Model          string            `json:"model,omitempty"`
	Rules          []Verdict         `json:"rules"`
	Aggregate      verdict.Aggregate `json:"aggregate"`
	// Groups are the nested rulesets' results, in ruleset order (a group
	// before the groups nested in it); absent when the ruleset has none.
	Groups  []verdict.GroupResult `json:"groups,omitempty"`
	Sources []verdict.Source      `json:"sources"`
	Usage   verdict.Usage         `json:"usage"`
}

// Counts counts verdicts by outcome. Passed and Failed count the applicable boolean rules,
// as the boolean aggregate does; InsufficientData overlaps them.
type Counts struct {
	Rules            int
	Passed           int
	Failed           int
	NotApplicable    int
	InsufficientData int
	// Cached counts the verdicts taken from the verdict cache.
	Cached int
	// NeedsReview counts the verdicts routed to a person.
	NeedsReview int
}

// CountVerdicts counts verdicts by Outcome: the one count the summary event and the report
// both show. InsufficientData counts the verdicts whose data was insufficient, whatever
// their outcome.
func CountVerdicts(verdicts []Verdict) Counts {
	c := Counts{Rules: len(verdicts)}
	for _, v := range verdicts {
		switch v.Outcome() {
		case OutcomeNotApplicable:
			c.NotApplicable++
		case OutcomePass:
			c.Passed++
		case OutcomeFail:
			c.Failed++
		}
		if !v.DataSufficiency {
			c.InsufficientData++
		}
		if v.Cached != nil {
			c.Cached++
		}
		if v.NeedsReview {
			c.NeedsReview++
		}
	}
	return c
}

// Outcome is what a verdict says, in one word. It is the single classification behind the
// summary's counts, the boolean aggregate, the verdict metrics, the report and the CLI.
type Outcome string

const (
	// OutcomePass: an applicable boolean rule passed.
	OutcomePass Outcome = "pass"
	// OutcomeFail: an applicable boolean rule failed, or gave no verdict (a boolean rule
	// without a verdict has not been shown to pass).
	OutcomeFail Outcome = "fail"
	// OutcomeScore: an applicable numerical rule got a score.
	OutcomeScore Outcome = "score"
	// OutcomeNotApplicable: the rule does not apply to this request.
	OutcomeNotApplicable Outcome = "not_applicable"
	// OutcomeNoVerdict: an applicable numerical rule without a score.
	OutcomeNoVerdict Outcome = "no_verdict"
)

// Outcome classifies v; see VerdictOutcome.
func (v Verdict) Outcome() Outcome {
	return VerdictOutcome(v.Type, v.NotApplicable, v.BooleanOutput, v.NumericalOutput)
}

// VerdictOutcome classifies a verdict from its fields, for callers holding a verdict event
// rather than a Verdict. A rule without a type is taken by the output it carries.
func VerdictOutcome(typ verdict.RuleType, notApplicable bool, boolean *bool, score *int) Outcome {
	if typ == "" {
		typ = verdict.Boolean
		if boolean == nil && score != nil {
			typ = verdict.Numerical
		}
	}
	switch {
	case notApplicable:
		return OutcomeNotApplicable
	case typ == verdict.Numerical && score != nil:
		return OutcomeScore
	case typ == verdict.Numerical:
		return OutcomeNoVerdict
	case boolean != nil && *boolean:
		return OutcomePass
	default:
		return OutcomeFail
	}
}
