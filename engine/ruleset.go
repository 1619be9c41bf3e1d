package engine

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"rulevalidator/internal/jsonyaml"
)

// Limits on a ruleset. They keep one request's prompt and report bounded; the
// JSON Schema in schemas/ruleset.schema.json states the same numbers.
const (
	MaxRules       = 500
	MaxRuleIDChars = 128
	// MaxRuleTextChars bounds rule_text and not_applicable_text, in characters
	// (code points, as JSON Schema's maxLength counts them).
	MaxRuleTextChars = 8192
	// MaxScores bounds a numerical rule's score set, given or materialised.
	MaxScores = 1001
	// MaxDepth bounds how deep nested rulesets go: a nested ruleset is at
	// depth 1, one nested in it at 2, and so on.
	MaxDepth = 4
	// MaxGroups bounds the nested rulesets of one ruleset, at every depth.
	MaxGroups = 100
)

// RulesetError is one problem with a ruleset. Group is the path to the nested
// ruleset it is in (nested_rulesets[1] ("payment") > nested_rulesets[0]),
// empty for the top level. RuleIndex is -1 for problems of the (nested)
// ruleset itself; Field is a path inside the ruleset (RuleIndex -1) or
// inside the rule, empty when the problem is the object itself. For an
// expression that does not compile, Expression is its source and Line and
// Column (1-based) point into it.
type RulesetError struct {
	RulesetID  string
	Group      string
	RuleIndex  int
	RuleID     string
	Field      string
	Expression string
	Line       int
	Column     int
	Problem    string
	// groupOrder is Group's place in the tree, in reading order (0: the
	// top level), for sorting.
	groupOrder int
}

func (e *RulesetError) Error() string {
	var b strings.Builder
	b.WriteString("ruleset")
	if e.RulesetID != "" {
		fmt.Fprintf(&b, " %q", e.RulesetID)
	}
	if e.Group != "" {
		b.WriteString(": " + e.Group)
	}
	if e.RuleIndex >= 0 {
		fmt.Fprintf(&b, ": rules[%d]", e.RuleIndex)
		if e.RuleID != "" {
			fmt.Fprintf(&b, " (rule_id %q)", e.RuleID)
		}
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	if e.Expression != "" {
		fmt.Fprintf(&b, ": line %d, column %d of %q", e.Line, e.Column, e.Expression)
	}
	b.WriteString(": ")
	b.WriteString(e.Problem)
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidRuleset) hold for every RulesetError.
func (e *RulesetError) Is(target error) bool { return target == ErrInvalidRuleset }

// joinRulesetErrors orders problems ruleset-level first, then by rule, keeping
// the order they were found in otherwise, and joins them (nil when none).
func joinRulesetErrors(problems []*RulesetError) error {
	if len(problems) == 0 {
		return nil
	}
	sort.SliceStable(problems, func(i, j int) bool {
		a, b := problems[i], problems[j]
		if a.groupOrder != b.groupOrder {
			return a.groupOrder < b.groupOrder
		}
		return a.RuleIndex < b.RuleIndex
	})
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// ParseRuleset reads a ruleset from JSON (a document starting with '{') or
// YAML, rejects unknown fields and wrong value types with their exact place,
// then checks it and resolves its defaults (see Validate). Every problem found
// is reported; each one matches errors.Is(err, ErrInvalidRuleset) and
// errors.As(err, **RulesetError).
func ParseRuleset(data []byte) (*Ruleset, error) {
	doc, err := jsonyaml.Decode(data)
	if err != nil {
		return nil, &RulesetError{RuleIndex: -1, Problem: err.Error()}
	}
	p := rulesetParser{ruleTypeErr: map[string]bool{}, groupTypeErr: map[int]bool{}}
	rs := p.ruleset(doc)
	if rs == nil {
		return nil, joinRulesetErrors(p.problems)
	}
	// Semantic checks run on what could be read. A value of the wrong type is
	// left unset, so checks that could only echo it (a "missing" rule_text
	// that was a number) are dropped: for the rule it belongs to, or for the
	// whole ruleset when the bad value sat at ruleset level (type and the
	// global score config shape every rule).
	for _, problem := range rs.check() {
		if p.rulesetTypeErr || p.groupTypeErr[problem.groupOrder] ||
			(problem.RuleIndex >= 0 && p.ruleTypeErr[ruleKey(problem.groupOrder, problem.RuleIndex)]) {
			continue
		}
		p.problems = append(p.problems, problem)
	}
	if err := joinRulesetErrors(p.problems); err != nil {
		return nil, err
	}
	return rs, nil
}

// Validate checks the ruleset and resolves its defaults in place: the ruleset
// type (boolean), each rule's type (the ruleset's), the aggregations (all,
// mean), weights (1), and each numerical rule's score set (its own
// possible_scores, else the global min..max by increment), deduplicated and
// sorted ascending. Calling it again changes nothing and writes nothing, so a
// validated ruleset may be shared and validated again by concurrent requests.
// A ruleset that fails may be left partly resolved.
// All problems are reported, joined; each matches errors.Is(err, ErrInvalidRuleset).
func (rs *Ruleset) Validate() error {
	if rs == nil {
		return &RulesetError{RuleIndex: -1, Problem: "no ruleset"}
	}
	return joinRulesetErrors(rs.check())
}
