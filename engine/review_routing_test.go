package engine

import (
	"slices"
	"testing"

	"rulevalidator/verdict"
)

func TestRouteReview(t *testing.T) {
	rule := Rule{RuleID: "r", Type: verdict.Boolean, RuleText: "Disputes under the agreement are to be taken to mediation or arbitration."}
	clean := func() Verdict {
		return Verdict{RuleID: "r", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: new(true),
			Evidences: []verdict.Evidence{{Text: "x", SourceOrigin: "a.pdf", SourcePageNumber: 2, CitedPageNumber: 2, Anchored: true, Match: verdict.MatchExact}}}
	}
	with := func(f func(*Verdict)) Verdict {
		v := clean()
		f(&v)
		return v
	}
	for _, tc := range []struct {
		name      string
		v         Verdict
		threshold float64
		want      []ReviewReason
	}{
		{"clean, no confidence", clean(), 0.8, nil},
		{"confidence above the threshold", with(func(v *Verdict) { v.Confidence = new(0.9) }), 0.8, nil},
		{"confidence at the threshold", with(func(v *Verdict) { v.Confidence = new(0.8) }), 0.8, nil},
		{"confidence under the threshold", with(func(v *Verdict) { v.Confidence = new(0.79) }), 0.8, []ReviewReason{ReviewLowConfidence}},
		{"threshold 0 routes none for confidence", with(func(v *Verdict) { v.Confidence = new(0.0) }), 0, nil},
		{"kept with problems", with(func(v *Verdict) { v.Problems = []string{"no rationale"} }), 0.8, []ReviewReason{ReviewKeptWithProblems}},
		{"insufficient data", with(func(v *Verdict) { v.DataSufficiency = false }), 0.8, []ReviewReason{ReviewInsufficientData}},
		{"not applicable without data is not routed", with(func(v *Verdict) { v.DataSufficiency, v.NotApplicable = false, true }), 0.8, nil},
		{"corrected page", with(func(v *Verdict) { v.Evidences[0].CitedPageNumber = 9 }), 0.8, []ReviewReason{ReviewCorrectedPage}},
		{"no cited page is no correction", with(func(v *Verdict) { v.Evidences[0].CitedPageNumber = 0 }), 0.8, nil},
		{"unanchored evidence is no correction", with(func(v *Verdict) { v.Evidences[0].CitedPageNumber, v.Evidences[0].Anchored = 9, false }), 0.8, nil},
		{"altered evidence", with(func(v *Verdict) { v.Evidences[0].Altered = true }), 0.8, []ReviewReason{ReviewAlteredEvidence}},
		{"corrected citation", with(func(v *Verdict) { v.Evidences[0].PassageID, v.Evidences[0].CitedPassageID = "d1p2s2", "d1p2s1" }), 0.8, []ReviewReason{ReviewCorrectedCitation}},
		{"a citation corrected to another page is one correction", with(func(v *Verdict) {
			v.Evidences[0].PassageID, v.Evidences[0].CitedPassageID, v.Evidences[0].CitedPageNumber = "d1p2s2", "d1p9s1", 9
		}), 0.8, []ReviewReason{ReviewCorrectedCitation}},
		{"restated rule", with(func(v *Verdict) {
			v.Rationale = "The material states that disputes under the agreement are to be taken to mediation or arbitration."
		}), 0.8, []ReviewReason{ReviewRestatedRule}},
		{"overruled pass", with(func(v *Verdict) { v.Overruled = true }), 0.8, []ReviewReason{ReviewOverruledPass}},
		{"every reason, in order", with(func(v *Verdict) {
			v.Confidence, v.Problems, v.DataSufficiency, v.Overruled = new(0.1), []string{"p"}, false, true
			v.Rationale = "Disputes under the agreement are to be taken to mediation or arbitration."
			v.Evidences = append(v.Evidences,
				verdict.Evidence{Anchored: true, SourcePageNumber: 1, CitedPageNumber: 3, Altered: true},
				verdict.Evidence{Anchored: true, SourcePageNumber: 2, CitedPageNumber: 2, CitedPassageID: "d1p3s1"})
		}), 0.5, ReviewReasons()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RouteReview(tc.v, rule, tc.threshold); !slices.Equal(got, tc.want) {
				t.Errorf("RouteReview = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRestatedRule(t *testing.T) {
	rule := Rule{RuleID: "mediation", RuleText: "Disputes under the agreement are to be taken to mediation or arbitration.",
		NotApplicableText: "The agreement names no forum at all. Judge instead: the agreement leaves disputes to the courts of a named state."}
	for _, tc := range []struct {
		name, rationale, want string
	}{
		{"the rule as what the material says", "The agreement states that disputes under the agreement are to be taken to mediation or arbitration, a form of ADR.",
			"disputes under the agreement are to be taken to mediation or arbitration"},
		{"the rule denied, as long a run", "The material does not say that disputes under the agreement are to be taken to mediation or arbitration.",
			"disputes under the agreement are to be taken to mediation or arbitration"},
		{"the alternate restated", "Here the agreement leaves disputes to the courts of a named state, Ohio.", "the agreement leaves disputes to the courts of a named state"},
		{"a few of the rule's words", "Clause 12 sends disputes to the courts of Ohio, not to arbitration.", ""},
		{"seven words in a row", "Disputes under the agreement are to be heard by the courts of Ohio.", ""},
		{"case and punctuation do not hide a run", "DISPUTES, under the agreement, are to be taken to mediation.", "disputes under the agreement are to be taken to mediation"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := restatedRule(rule, tc.rationale); got != tc.want {
				t.Errorf("restatedRule = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReviewThreshold(t *testing.T) {
	rs := &Ruleset{ReviewBelowConfidence: new(0.6)}
	for _, tc := range []struct {
		name string
		rs   *Ruleset
		r    Rule
		want float64
	}{
		{"service default", &Ruleset{}, Rule{}, 0.8},
		{"ruleset", rs, Rule{}, 0.6},
		{"rule over ruleset", rs, Rule{ReviewBelowConfidence: new(0.95)}, 0.95},
		{"rule 0 turns it off", rs, Rule{ReviewBelowConfidence: new(0.0)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReviewThreshold(tc.rs, tc.r, 0.8); got != tc.want {
				t.Errorf("ReviewThreshold = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRouteReviewsEachRuleUnderItsThreshold(t *testing.T) {
	rs := &Ruleset{ReviewBelowConfidence: new(0.5), Rules: []Rule{{RuleID: "a"}, {RuleID: "b", ReviewBelowConfidence: new(0.9)}}}
	verdicts := []Verdict{
		{RuleID: "a", DataSufficiency: true, Confidence: new(0.7)},
		{RuleID: "b", DataSufficiency: true, Confidence: new(0.7)},
	}
	routeReviews(rs, rs.Rules, verdicts, 0.99)
	if verdicts[0].NeedsReview || !verdicts[1].NeedsReview || !slices.Equal(verdicts[1].ReviewReasons, []ReviewReason{ReviewLowConfidence}) {
		t.Errorf("routed %+v", verdicts)
	}
	if c := CountVerdicts(verdicts); c.NeedsReview != 1 {
		t.Errorf("CountVerdicts NeedsReview = %d, want 1", c.NeedsReview)
	}
}
