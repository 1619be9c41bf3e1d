package engine

// RuleType says how a rule is judged.
type RuleType string

const (
	// Boolean rules pass or fail.
	Boolean RuleType = "boolean"
	// Numerical rules get an integer score from an allowed set.
	Numerical RuleType = "numerical"
)

// BooleanAggregation combines boolean verdicts into one pass/fail.
type BooleanAggregation string

const (
	AggregateAll      BooleanAggregation = "all"
	AggregateAny      BooleanAggregation = "any"
	AggregateMajority BooleanAggregation = "majority"
)

// NumericalAggregation combines numerical scores into one number.
type NumericalAggregation string

const (
	AggregateMean         NumericalAggregation = "mean"
	AggregateSum          NumericalAggregation = "sum"
	AggregateWeightedMean NumericalAggregation = "weighted_mean"
)

// Ruleset is a type_config: the rules to judge and how to combine their verdicts.
// Build one with ParseRuleset, or fill it in and call Validate, which also
// resolves defaults (rule types, weights, materialised score sets) in place.
type Ruleset struct {
	ID                        string                     `json:"id,omitempty"`
	Version                   string                     `json:"version,omitempty"`
	Type                      RuleType                   `json:"type,omitempty"`
	GlobalNumericalRuleConfig *GlobalNumericalRuleConfig `json:"global_numerical_rule_config,omitempty"`
	BooleanAggregation        BooleanAggregation         `json:"boolean_aggregation,omitempty"`
	NumericalAggregation      NumericalAggregation       `json:"numerical_aggregation,omitempty"`
	GenerateReport            bool                       `json:"generate_report,omitempty"`
	// Cache, when false, has every request on the ruleset judged afresh:
	// no verdict is taken from the verdict cache or stored in it. Unset
	// means true.
	Cache *bool `json:"cache,omitempty"`
	// NestedRulesets and FilterCriteria are accepted and carried unchanged for
	// forward compatibility; the engine does not interpret them yet.
	NestedRulesets any    `json:"nested_rulesets,omitempty"`
	FilterCriteria any    `json:"filter_criteria,omitempty"`
	Rules          []Rule `json:"rules"`
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
	Type                RuleType             `json:"type,omitempty"`
	NumericalRuleConfig *NumericalRuleConfig `json:"numerical_rule_config,omitempty"`
	// NotApplicableText is an alternate rule the model evaluates when the
	// primary rule does not apply.
	NotApplicableText string `json:"not_applicable_text,omitempty"`
	// Name is a display label for reports; it is never shown to the model.
	Name string `json:"name,omitempty"`
	// Weight is used by weighted_mean; Validate sets it to 1 when absent.
	Weight *float64 `json:"weight,omitempty"`
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

// Match says how an evidence quote was found in its document.
type Match string

const (
	MatchExact      Match = "exact"
	MatchNormalized Match = "normalized"
	MatchFuzzy      Match = "fuzzy"
	// MatchElided: the quote left parts out ("first words … last words") and
	// the span covers its parts, found in order.
	MatchElided Match = "elided"
	// MatchPassage: the evidence is the whole passage the model cited by id
	// (cite mode); the words it gave, if any, are not in that passage.
	MatchPassage Match = "passage"
	// MatchNone: the quote was not found; its text is kept as the model gave it.
	MatchNone Match = "none"
	// MatchNotDocument: the evidence cites a named input or free text, not a document.
	MatchNotDocument Match = "not_document"
)

// Evidence is a quote supporting a verdict. After anchoring, a quote found in a
// supplied document carries the verbatim span as Text, its page and its
// offsets (Unicode code points into the document text, end exclusive), and
// keeps the model's own words as QuotedText. Evidence is never rewritten
// silently: where the span says something else than the quote (a number, an
// amount, a date, a negation, a name), it is Altered, Differences say what
// differs, and it does not support the verdict.
type Evidence struct {
	Text             string `json:"text"`
	SourceOrigin     string `json:"source_origin"`
	SourcePageNumber int    `json:"source_page_number"`
	Anchored         bool   `json:"anchored"`
	Match            Match  `json:"match,omitempty"`
	StartOffset      *int   `json:"start_offset,omitempty"`
	EndOffset        *int   `json:"end_offset,omitempty"`
	// QuotedText is the quote as the model gave it (set once anchoring ran).
	QuotedText string `json:"quoted_text,omitempty"`
	// PassageID is the id of the passage the model cited (cite mode): the
	// passage whose text, origin, page and offsets the evidence carries.
	PassageID string `json:"passage_id,omitempty"`
	// CitedPageNumber is the page the model gave for the evidence, kept
	// beside SourcePageNumber (the page the text was found on): they differ
	// when anchoring corrected the page. In cite mode it is the cited
	// passage's page. 0 when the model gave none.
	CitedPageNumber int `json:"cited_page_number,omitempty"`
	// Similarity of the quote to the span, in [0, 1]; 1 for exact and
	// normalised matches, 0 when not anchored.
	Similarity  float64      `json:"similarity,omitempty"`
	Altered     bool         `json:"altered,omitempty"`
	Differences []Difference `json:"differences,omitempty"`
}

// Difference is one way an anchored span contradicts the quote it was found
// for.
type Difference struct {
	// Kind is "number", "amount", "date", "negation" or "name".
	Kind string `json:"kind"`
	// Quote is what the quote says; "" when the quote lacks it.
	Quote string `json:"quote"`
	// Document is what the document says; "" when the document lacks it.
	Document string `json:"document"`
}

// Verdict is the checked answer for one rule.
type Verdict struct {
	RuleID          string     `json:"rule_id"`
	Name            string     `json:"name,omitempty"`
	Type            RuleType   `json:"type"`
	DataSufficiency bool       `json:"data_sufficiency"`
	Rationale       string     `json:"rationale"`
	BooleanOutput   *bool      `json:"boolean_output,omitempty"`
	NumericalOutput *int       `json:"numerical_output,omitempty"`
	NotApplicable   bool       `json:"not_applicable"`
	Evidences       []Evidence `json:"evidences"`
	// SufficiencyNote says why DataSufficiency was set to false by the
	// engine: the model's best answer still had content problems when the
	// re-ask budget ran out.
	SufficiencyNote string `json:"sufficiency_note,omitempty"`
	// Problems lists, in the reader's terms, what was still wrong with the
	// model's answer when it was kept after the re-ask budget ran out
	// ("the model gave no rationale"); empty for a clean answer.
	// SufficiencyNote says the same in one sentence.
	Problems []string `json:"problems,omitempty"`
	// PagesConsidered names the pages the verdict was judged on when the
	// request was too large for one call and the rule saw an excerpt or a
	// batch; absent when it was judged on every page of every document.
	PagesConsidered []DocumentPages `json:"pages_considered,omitempty"`
	// Cached is set when the verdict came from the verdict cache: when it
	// was judged and under which request. Nil for a verdict judged for
	// this request.
	Cached *CachedFrom `json:"cached,omitempty"`
}

// DocumentPages names pages of one document (1-based, ascending).
type DocumentPages struct {
	Document string `json:"document"`
	Pages    []int  `json:"pages"`
}

// Source is a cited source, de-duplicated by (origin, text, page).
type Source struct {
	SourceOrigin     string `json:"source_origin"`
	Text             string `json:"text"`
	SourcePageNumber int    `json:"source_page_number"`
}

// BooleanAggregate combines the applicable boolean verdicts.
type BooleanAggregate struct {
	Mode        BooleanAggregation `json:"mode"`
	Passed      bool               `json:"passed"`
	Applicable  int                `json:"applicable"`
	PassedCount int                `json:"passed_count"`
}

// NumericalAggregate combines the counted numerical scores. Score is nil when
// no score was counted.
type NumericalAggregate struct {
	Mode    NumericalAggregation `json:"mode"`
	Score   *float64             `json:"score"`
	Counted int                  `json:"counted"`
}

// Aggregate holds one aggregate per rule type present in the ruleset.
type Aggregate struct {
	Boolean   *BooleanAggregate   `json:"boolean,omitempty"`
	Numerical *NumericalAggregate `json:"numerical,omitempty"`
}

// Usage is token usage summed over every model call of one request.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	CachedTokens     int `json:"cached_tokens"`
	LLMCalls         int `json:"llm_calls"`
	// PlannedCalls is the number of calls the request was planned as (1
	// when it fit one call); LLMCalls adds the corrective re-asks.
	PlannedCalls int `json:"planned_calls"`
}

// Add sums u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + o.PromptTokens,
		CompletionTokens: u.CompletionTokens + o.CompletionTokens,
		CachedTokens:     u.CachedTokens + o.CachedTokens,
		LLMCalls:         u.LLMCalls + o.LLMCalls,
		PlannedCalls:     u.PlannedCalls + o.PlannedCalls,
	}
}

// Result is the engine's answer for one request.
type Result struct {
	RulesetID      string    `json:"ruleset_id,omitempty"`
	RulesetVersion string    `json:"ruleset_version,omitempty"`
	Model          string    `json:"model,omitempty"`
	Rules          []Verdict `json:"rules"`
	Aggregate      Aggregate `json:"aggregate"`
	Sources        []Source  `json:"sources"`
	Usage          Usage     `json:"usage"`
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
func VerdictOutcome(typ RuleType, notApplicable bool, boolean *bool, score *int) Outcome {
	if typ == "" {
		typ = Boolean
		if boolean == nil && score != nil {
			typ = Numerical
		}
	}
	switch {
	case notApplicable:
		return OutcomeNotApplicable
	case typ == Numerical && score != nil:
		return OutcomeScore
	case typ == Numerical:
		return OutcomeNoVerdict
	case boolean != nil && *boolean:
		return OutcomePass
	default:
		return OutcomeFail
	}
}
