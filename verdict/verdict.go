// Package verdict holds the value types a verdict carries: how a rule is
// judged, its evidence and how that evidence was found, the pages judged, the
// sources cited, the aggregates and the model usage. The engine produces them
// and the event contracts (schemas) carry them; both use these types, so a
// field is declared once, and every package names them here (verdict.Evidence,
// verdict.Boolean): neither the engine nor the contracts re-export them. It
// imports only the standard library, so the contracts stay free of the engine
// and the engine free of Avro.
package verdict

import "time"

// RuleType says how a rule is judged.
type RuleType string

const (
	// Boolean rules pass or fail.
	Boolean RuleType = "boolean"
	// Numerical rules get an integer score from an allowed set.
	Numerical RuleType = "numerical"
)

// BooleanAggregation combines boolean verdicts into one pass/fail: all, any or
// majority.
type BooleanAggregation string

const (
	AggregateAll      BooleanAggregation = "all"
	AggregateAny      BooleanAggregation = "any"
	AggregateMajority BooleanAggregation = "majority"
)

// NumericalAggregation combines numerical scores into one number: mean, sum,
// weighted_mean, min or max.
type NumericalAggregation string

const (
	AggregateMean         NumericalAggregation = "mean"
	AggregateSum          NumericalAggregation = "sum"
	AggregateWeightedMean NumericalAggregation = "weighted_mean"
	AggregateMin          NumericalAggregation = "min"
	AggregateMax          NumericalAggregation = "max"
)

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
	// passage whose text, origin, page and offsets the evidence carries
	// ("d1p3s4"; a named input by its name); "" when it quoted.
	PassageID string `json:"passage_id,omitempty"`
	// CitedPassageID is the id the model gave beside its quote when the
	// quoted words stand in another passage than that one: PassageID is
	// then the passage that holds them. "" when the model's id held them,
	// and outside cite mode.
	CitedPassageID string `json:"cited_passage_id,omitempty"`
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

// GroupResult is the result of one nested ruleset (a group) of a request's
// ruleset: its verdicts and its nested groups' results combined by its own
// modes. Its members are its own applicable rules and its applicable nested
// groups, each nested group one member (its pass or fail, its score with
// its weight).
type GroupResult struct {
	// ID is the nested ruleset's id; Path its ids from the top level down,
	// joined by "/" ("liability/caps").
	ID   string `json:"id"`
	Path string `json:"path"`
	Name string `json:"name,omitempty"`
	// Required: the group gates its parent.
	Required bool `json:"required"`
	// NotApplicable: a filter left the group out, or none of its rules
	// applied; Reason says which. A group that does not apply is no member
	// of its parent.
	NotApplicable bool   `json:"not_applicable"`
	Reason        string `json:"reason,omitempty"`
	// GatedBy names the required nested groups (by path) that failed, and
	// so failed this group whatever its mode.
	GatedBy []string `json:"gated_by,omitempty"`
	// RuleIDs are the group's own rules, in ruleset order.
	RuleIDs   []string  `json:"rule_ids"`
	Aggregate Aggregate `json:"aggregate"`
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
	// RulesFiltered counts the rules a filter (filter_criteria) left out
	// as not applicable, and RulesChecked those judged by their check: the
	// rules no model was asked about.
	RulesFiltered int `json:"rules_filtered"`
	RulesChecked  int `json:"rules_checked"`
	// Cost is the price of the request's tokens from a price table; nil without one. It is
	// priced once for the whole request, never summed from its parts (Add leaves it out).
	Cost *float64 `json:"cost,omitempty"`
}

// Add sums u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + o.PromptTokens,
		CompletionTokens: u.CompletionTokens + o.CompletionTokens,
		CachedTokens:     u.CachedTokens + o.CachedTokens,
		LLMCalls:         u.LLMCalls + o.LLMCalls,
		PlannedCalls:     u.PlannedCalls + o.PlannedCalls,
		RulesFiltered:    u.RulesFiltered + o.RulesFiltered,
		RulesChecked:     u.RulesChecked + o.RulesChecked,
	}
}

// CachedFrom marks a verdict taken from the cache: when it was judged and
// under which request (of the same tenant).
type CachedFrom struct {
	JudgedAt  time.Time `json:"judged_at"`
	RequestID string    `json:"request_id"`
}
