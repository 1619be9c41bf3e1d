// Package eval measures verdict quality: it judges a labelled dataset with the
// engine (and, optionally, with a naive one-call-per-rule judge on the same
// model), scores verdicts and evidence against the labels, and reports
// accuracy, evidence precision and recall, and cost.
package eval

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"rulevalidator/engine"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// ErrInvalidDataset marks every problem Load finds with a dataset.
var ErrInvalidDataset = errors.New("invalid dataset")

// Problem is one thing wrong with a dataset. Case and RuleID are empty when
// the problem is not about one case or one rule; Field is a path inside the
// case (or the manifest) such as labels[2].evidence[0].text.
type Problem struct {
	File    string
	Case    string
	RuleID  string
	Field   string
	Message string
}

func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Case != "" {
		b.WriteString(": case " + strconv.Quote(p.Case))
	}
	if p.RuleID != "" {
		b.WriteString(": rule " + strconv.Quote(p.RuleID))
	}
	if p.Field != "" {
		b.WriteString(": " + p.Field)
	}
	b.WriteString(": " + p.Message)
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidDataset) hold for every Problem.
func (p *Problem) Is(target error) bool { return target == ErrInvalidDataset }

// Dataset is a loaded, checked dataset.
type Dataset struct {
	Name        string
	Description string
	// Dir is the directory the dataset was read from.
	Dir   string
	Cases []*Case
}

// Case is one input with its ruleset and the expected verdict of every rule.
type Case struct {
	ID          string
	Description string
	Ruleset     *engine.Ruleset
	// Request is the case as the service would receive it: what the engine judges
	// (judging.Evaluate). Inputs are the engine's inputs built from it, for the
	// baseline and for locating gold evidence.
	Request *schemas.Request
	Inputs  *engine.Inputs
	// Labels are in the ruleset's rule order.
	Labels []Label
}

// Label is the expected verdict of one rule.
type Label struct {
	RuleID string
	Type   verdict.RuleType
	// Boolean is set for boolean rules, Numerical for numerical ones.
	Boolean       *bool
	Numerical     *int
	NotApplicable bool
	// Insufficient says the material does not hold what is needed to judge
	// the rule (the label's data_sufficiency is false: ContractNLI's "not
	// mentioned"). The expected output is still given; a verdict that says
	// so (data_sufficiency false or not applicable) is counted as saying it.
	Insufficient bool
	// Allowed is the rule's resolved score set (numerical rules).
	Allowed []int
	Gold    []Span
	// RuleWords are the words of the rule's text and of its not-applicable
	// text, for telling a rationale that restates the rule.
	RuleWords map[string]bool
}

// Span is a passage of a document, located: offsets count Unicode code points
// into the document's text (its pages joined by form feeds), end exclusive,
// the way the engine reports evidence offsets.
type Span struct {
	Text     string `json:"text"`
	Document string `json:"document"`
	Page     int    `json:"page"`
	Start    int    `json:"start_offset"`
	End      int    `json:"end_offset"`
}

func joinProblems(probs []*Problem) error {
	errs := make([]error, len(probs))
	for i, p := range probs {
		errs[i] = p
	}
	return errors.Join(errs...)
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ", ")
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
