package engine

import "fmt"

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
)

// ReviewReasons lists every reason, in the order RouteReview gives them.
func ReviewReasons() []ReviewReason {
	return []ReviewReason{ReviewLowConfidence, ReviewKeptWithProblems, ReviewInsufficientData, ReviewCorrectedPage, ReviewAlteredEvidence, ReviewCorrectedCitation}
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

// RouteReview says why v needs a person's review under the confidence
// threshold (see ReviewThreshold); nil when it needs none. A verdict
// without a confidence is not routed for its confidence: nothing measured
// it. It is the one place routing is decided; Evaluate applies it to every
// verdict, cached ones included.
func RouteReview(v Verdict, threshold float64) []ReviewReason {
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
		v.ReviewReasons = RouteReview(*v, ReviewThreshold(rs, rules[v.RuleID], def))
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
