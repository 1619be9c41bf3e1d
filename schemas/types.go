package schemas

// The value types the events carry, as the contracts define them. They mirror the engine's
// result types field for field; pipeline maps one to the other, so that this package stays
// the contracts alone.

// RuleType is a rule's kind, as rule_type carries it.
type RuleType string

// The rule types.
const (
	RuleBoolean   RuleType = "boolean"
	RuleNumerical RuleType = "numerical"
)

// Match says how an evidence quote was found in its document: exact, normalized, fuzzy,
// elided (its parts, in order), passage (the whole passage the model cited by id), none (not
// found, kept as the model gave it) or not_document (a named input or free text).
type Match string

// The matches an evidence can have.
const (
	MatchExact       Match = "exact"
	MatchNormalized  Match = "normalized"
	MatchFuzzy       Match = "fuzzy"
	MatchElided      Match = "elided"
	MatchPassage     Match = "passage"
	MatchNone        Match = "none"
	MatchNotDocument Match = "not_document"
)

// Evidence is a quote supporting a verdict; an anchored quote carries the verbatim span, its
// page and its offsets (Unicode code points into the document text, end exclusive).
type Evidence struct {
	Text             string `json:"text"`
	SourceOrigin     string `json:"source_origin"`
	SourcePageNumber int    `json:"source_page_number"`
	Anchored         bool   `json:"anchored"`
	Match            Match  `json:"match,omitempty"`
	StartOffset      *int   `json:"start_offset,omitempty"`
	EndOffset        *int   `json:"end_offset,omitempty"`
	// QuotedText is the quote as the model gave it.
	QuotedText string `json:"quoted_text,omitempty"`
	// Similarity of the quote to the span, in [0, 1].
	Similarity float64 `json:"similarity,omitempty"`
	// Altered: the span contradicts the quote (Differences says how), so the
	// evidence does not support the verdict.
	Altered     bool         `json:"altered,omitempty"`
	Differences []Difference `json:"differences,omitempty"`
	// PassageID is the id of the passage the model cited when it cited by
	// reference ("d1p3s4"; a named input by its name); "" when it quoted.
	PassageID string `json:"passage_id,omitempty"`
	// CitedPageNumber is the page the model gave, beside SourcePageNumber,
	// the page the text was found on; 0 when it gave none.
	CitedPageNumber int `json:"cited_page_number,omitempty"`
}

// Difference is one way an anchored span contradicts the quote it was found for.
type Difference struct {
	Kind     string `json:"kind"`     // number, amount, date, negation or name
	Quote    string `json:"quote"`    // what the quote says; "" when it lacks it
	Document string `json:"document"` // what the document says; "" when it lacks it
}

// DocumentPages names pages of one document (1-based, ascending).
type DocumentPages struct {
	Document string `json:"document"`
	Pages    []int  `json:"pages"`
}

// Source is one input the request supplied, as the summary lists it.
type Source struct {
	SourceOrigin     string `json:"source_origin"`
	Text             string `json:"text"`
	SourcePageNumber int    `json:"source_page_number"`
}

// BooleanAggregation names how boolean verdicts are combined: all, any or majority.
type BooleanAggregation string

// NumericalAggregation names how scores are combined: mean, sum or weighted_mean.
type NumericalAggregation string

// BooleanAggregate combines the applicable boolean verdicts.
type BooleanAggregate struct {
	Mode        BooleanAggregation `json:"mode"`
	Passed      bool               `json:"passed"`
	Applicable  int                `json:"applicable"`
	PassedCount int                `json:"passed_count"`
}

// NumericalAggregate combines the counted scores; Score is nil when none was counted.
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
	// PlannedCalls is the number of calls the request was planned as.
	PlannedCalls int `json:"planned_calls"`
}
