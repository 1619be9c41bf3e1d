package reviews

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// Limits on a review, so that one stays small and a page shows it whole.
const (
	MaxReviewIDBytes = 128
	MaxNoteChars     = 4000
	MaxPassageIDs    = 64
)

// FieldError is one problem with a posted review, naming its field.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Check checks r as the model's answers are checked, against the verdict it
// reviews: the decision and its outputs fit the rule (its type, its allowed
// scores), the passages exist in the validation's material (known), and the
// sizes are within the limits. It returns the first problem, a
// *FieldError, or nil.
func Check(r Review, v schemas.VerdictEvent, known func(passageID string) bool) error {
	switch {
	case r.ReviewID == "":
		return fieldErr("review_id", "missing: give the review a client-chosen id, so that posting it again is harmless")
	case len(r.ReviewID) > MaxReviewIDBytes:
		return fieldErr("review_id", "too long: %d bytes (at most %d)", len(r.ReviewID), MaxReviewIDBytes)
	case !utf8.ValidString(r.ReviewID) || strings.ContainsFunc(r.ReviewID, func(c rune) bool { return unicode.IsControl(c) || c == '/' }):
		return fieldErr("review_id", "must be valid UTF-8 without '/' or control characters")
	case r.RuleID != v.RuleID:
		return fieldErr("rule_id", "the validation has no rule %q", r.RuleID)
	}
	switch r.Decision {
	case Confirm:
		switch {
		case r.BooleanOutput != nil:
			return fieldErr("boolean_output", "a confirm takes no boolean_output: it keeps the model's verdict (override to change it)")
		case r.NumericalOutput != nil:
			return fieldErr("numerical_output", "a confirm takes no numerical_output: it keeps the model's verdict (override to change it)")
		case r.NotApplicable:
			return fieldErr("not_applicable", "a confirm takes no not_applicable: it keeps the model's verdict (override to change it)")
		}
	case Override:
		if err := checkOverride(r, v); err != nil {
			return err
		}
	case "":
		return fieldErr("decision", `missing: give "confirm" or "override"`)
	default:
		return fieldErr("decision", `%q is not "confirm" or "override"`, r.Decision)
	}
	if n := utf8.RuneCountInString(r.Note); n > MaxNoteChars {
		return fieldErr("note", "too long: %d characters (at most %d)", n, MaxNoteChars)
	}
	if !utf8.ValidString(r.Note) {
		return fieldErr("note", "must be valid UTF-8")
	}
	if len(r.PassageIDs) > MaxPassageIDs {
		return fieldErr("passage_ids", "too many: %d (at most %d)", len(r.PassageIDs), MaxPassageIDs)
	}
	for i, id := range r.PassageIDs {
		if !known(id) {
			return fieldErr(fmt.Sprintf("passage_ids[%d]", i), "%q is not a passage of the validation's material", clip(id, 80))
		}
	}
	return nil
}

func checkOverride(r Review, v schemas.VerdictEvent) error {
	switch v.RuleType {
	case verdict.Numerical:
		if r.BooleanOutput != nil {
			return fieldErr("boolean_output", "rule %q is numerical: give numerical_output", v.RuleID)
		}
		if r.NumericalOutput == nil {
			if r.NotApplicable {
				return nil
			}
			return fieldErr("numerical_output", "missing: rule %q is numerical; give a score (allowed: %s) or not_applicable", v.RuleID, scoresText(v.AllowedScores))
		}
		if len(v.AllowedScores) > 0 && !slices.Contains(v.AllowedScores, *r.NumericalOutput) {
			return fieldErr("numerical_output", "%d is not an allowed score of rule %q (allowed: %s)", *r.NumericalOutput, v.RuleID, scoresText(v.AllowedScores))
		}
	default:
		if r.NumericalOutput != nil {
			return fieldErr("numerical_output", "rule %q is boolean: give boolean_output", v.RuleID)
		}
		if r.BooleanOutput == nil && !r.NotApplicable {
			return fieldErr("boolean_output", "missing: rule %q is boolean; give true (passes), false (fails) or not_applicable", v.RuleID)
		}
	}
	return nil
}

func scoresText(scores []int) string {
	parts := make([]string, len(scores))
	for i, s := range scores {
		parts[i] = strconv.Itoa(s)
	}
	return strings.Join(parts, ", ")
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
