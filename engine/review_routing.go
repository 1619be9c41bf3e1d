package engine

import (
	"fmt"
	"strings"
)

// ReviewReason says why a verdict is routed to a person.
type ReviewReason string

const (
	// ReviewLowConfidence: the model's confidence in the verdict's value is
	// under the rule's threshold.
	ReviewLowConfidence ReviewReason = "low_confidence"
	// ReviewKeptWithProblems: the answer was kept with problems left after
	// the re-asks ran out (Verdict.Problems).
	ReviewKeptWithProblems ReviewReason = "kept_with_problems"
	// ReviewInsufficientData: the verdict says the inputs did not hold
	// enough to judge the rule.
	ReviewInsufficientData ReviewReason = "insufficient_data"
	// ReviewCorrectedPage: an evidence was found on another page than the
	// model cited.
	ReviewCorrectedPage ReviewReason = "corrected_page"
	// ReviewAlteredEvidence: an evidence's span says something other than
	// the model's quote.
	ReviewAlteredEvidence ReviewReason = "altered_evidence"
	// ReviewCorrectedCitation: the words the model quoted, or for an id
	// given alone its rationale, stand in another passage than the one it
	// cited, which the evidence now is.
	ReviewCorrectedCitation ReviewReason = "corrected_citation"
	// ReviewRestatedRule: the rationale repeats a long run of the rule's
	// own words (restatedRule), the way a model writes the rule as what
	// the material says.
	ReviewRestatedRule ReviewReason = "restated_rule"
	// ReviewOverruledPass: the engine turned the model's pass into a fail
	// on its check of the cited passages (Verdict.Overruled).
	ReviewOverruledPass ReviewReason = "overruled_pass"
)

// ReviewReasons lists every reason, in the order RouteReview gives them.
func ReviewReasons() []ReviewReason {
	return []ReviewReason{ReviewLowConfidence, ReviewKeptWithProblems, ReviewInsufficientData, ReviewCorrectedPage, ReviewAlteredEvidence, ReviewCorrectedCitation, ReviewRestatedRule, ReviewOverruledPass}
}

// validThreshold says whether t is a confidence threshold: 0 to 1.
func validThreshold(t float64) bool { return t >= 0 && t <= 1 }

// ReviewThreshold is the confidence under which a verdict on rule r of rs
// is routed to a person: the rule's review_below_confidence, else the
// ruleset's, else def (the service's default). 0 routes none for its
// confidence.
func ReviewThreshold(rs *Ruleset, r Rule, def float64) float64 {
	switch {
	case r.ReviewBelowConfidence != nil:
		return *r.ReviewBelowConfidence
	case rs != nil && rs.ReviewBelowConfidence != nil:
		return *rs.ReviewBelowConfidence
	default:
		return def
	}
}

// RouteReview says why v, a verdict on rule r, needs a person's review
// under the confidence threshold (see ReviewThreshold); nil when it needs
// none. A verdict without a confidence is not routed for its confidence:
// nothing measured it. It is the one place routing is decided; Evaluate
// applies it to every verdict, cached ones included.
func RouteReview(v Verdict, r Rule, threshold float64) []ReviewReason {
	var reasons []ReviewReason
	if v.Confidence != nil && *v.Confidence < threshold {
		reasons = append(reasons, ReviewLowConfidence)
	}
	if len(v.Problems) > 0 {
		reasons = append(reasons, ReviewKeptWithProblems)
	}
	if !v.DataSufficiency && !v.NotApplicable {
		reasons = append(reasons, ReviewInsufficientData)
	}
	var corrected, altered, relocated bool
	for _, ev := range v.Evidences {
		switch {
		case ev.CitedPassageID != "":
			relocated = true // its page is the other passage's: one correction, one reason
		case ev.Anchored && ev.CitedPageNumber != 0 && ev.CitedPageNumber != ev.SourcePageNumber:
			corrected = true
		}
		if ev.Altered {
			altered = true
		}
	}
	if corrected {
		reasons = append(reasons, ReviewCorrectedPage)
	}
	if altered {
		reasons = append(reasons, ReviewAlteredEvidence)
	}
	if relocated {
		reasons = append(reasons, ReviewCorrectedCitation)
	}
	if restatedRule(r, v.Rationale) != "" {
		reasons = append(reasons, ReviewRestatedRule)
	}
	if v.Overruled {
		reasons = append(reasons, ReviewOverruledPass)
	}
	return reasons
}

// routeReviews sets NeedsReview and ReviewReasons on every verdict, each
// under its rule's threshold; all are the rules of rs, its groups' too.
func routeReviews(rs *Ruleset, all []Rule, verdicts []Verdict, def float64) {
	rules := make(map[string]Rule, len(all))
	for _, r := range all {
		rules[r.RuleID] = r
	}
	for i := range verdicts {
		v := &verdicts[i]
		r := rules[v.RuleID]
		v.ReviewReasons = RouteReview(*v, r, ReviewThreshold(rs, r, def))
		v.NeedsReview = len(v.ReviewReasons) > 0
	}
}

// checkReviewThreshold reports a service default outside 0..1.
func checkReviewThreshold(t float64) error {
	if !validThreshold(t) {
		return fmt.Errorf("engine: ReviewBelowConfidence %v must be from 0 to 1", t)
	}
	return nil
}

// minRestatedWords is the shortest run of a rule's own words, in its order,
// that makes a rationale a restatement of the rule. A rationale that quotes
// a few of them ("the agreement does not state which law governs it") says
// what the material holds. On the NDA dataset the local model's verdicts
// whose rationale holds a run of eight or more were wrong about twice as
// often as the others (docs/measurements/2026-12-local-model-verdicts.md).
const minRestatedWords = 8

// restatedRule is the longest run of at least minRestatedWords words that
// rationale repeats, in order, from r's text or its alternate, or "" when
// there is none. Judged on the rationale and the rule alone, it marks a
// cached verdict as it marked the verdict first.
func restatedRule(r Rule, rationale string) string {
	said := words(rationale)
	if len(said) < minRestatedWords {
		return ""
	}
	var longest []string
	for _, text := range []string{r.RuleText, r.NotApplicableText} {
		if run := longestCommonRun(said, words(text)); len(run) > len(longest) {
			longest = run
		}
	}
	if len(longest) < minRestatedWords {
		return ""
	}
	return strings.Join(longest, " ")
}

// longestCommonRun is the longest run of consecutive words a and b share,
// the first of equals in a.
func longestCommonRun(a, b []string) []string {
	// run[j] is the length of the common run ending at a[i-1] and b[j-1],
	// one row at a time.
	prev, run := make([]int, len(b)+1), make([]int, len(b)+1)
	best, end := 0, 0
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			if a[i-1] == b[j-1] {
				run[j] = prev[j-1] + 1
				if run[j] > best {
					best, end = run[j], i
				}
			} else {
				run[j] = 0
			}
		}
		prev, run = run, prev
	}
	return a[end-best : end]
}
