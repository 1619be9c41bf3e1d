package reviews

import (
	"cmp"
	"slices"
	"strconv"

	"rulevalidator/engine"
)

// MinAgreementReviews is the fewest reviews of a rule whose agreement is
// reported: below it accuracy and kappa say more about chance than about
// the model.
const MinAgreementReviews = 20

// RuleAgreement is how often the model's verdicts on one rule agree with
// the reviewers' final ones. Accuracy and Kappa are nil below
// MinAgreementReviews reviews; Kappa also when chance alone would agree
// every time (one label only).
type RuleAgreement struct {
	RulesetID string   `json:"ruleset_id"`
	RuleID    string   `json:"rule_id"`
	Reviews   int      `json:"reviews"`
	Agreed    int      `json:"agreed"`
	Accuracy  *float64 `json:"accuracy"`
	Kappa     *float64 `json:"kappa"`
}

// label is a verdict as agreement compares it: its outcome, with the score
// of a scored rule.
func label(outcome engine.Outcome, score *int) string {
	if outcome == engine.OutcomeScore && score != nil {
		return "score:" + strconv.Itoa(*score)
	}
	return string(outcome)
}

func modelLabel(r Review) string {
	return label(r.ModelVerdict.Outcome, r.ModelVerdict.NumericalOutput)
}

func finalLabel(r Review) string {
	if r.Decision == Confirm {
		return modelLabel(r)
	}
	return label(engine.VerdictOutcome(r.RuleType, r.NotApplicable, r.BooleanOutput, r.NumericalOutput), r.NumericalOutput)
}

// Agrees says whether the review leaves the model's verdict as it was.
func Agrees(r Review) bool { return modelLabel(r) == finalLabel(r) }

// Agreement measures, per (ruleset, rule), the model against the current
// review of each reviewed verdict (a confirm agrees; an override agrees
// when it gives the model's verdict again). all holds the reviews of
// many validations, each list oldest first. Rules come ordered by ruleset
// and rule id.
func Agreement(all [][]Review) []RuleAgreement {
	type pair struct{ model, final string }
	byRule := map[[2]string][]pair{}
	for _, reviews := range all {
		seen := map[string]bool{}
		for i := len(reviews) - 1; i >= 0; i-- { // the current review of each rule
			r := reviews[i]
			if seen[r.RuleID] {
				continue
			}
			seen[r.RuleID] = true
			p := pair{model: modelLabel(r), final: finalLabel(r)}
			k := [2]string{r.RulesetID, r.RuleID}
			byRule[k] = append(byRule[k], p)
		}
	}
	keys := make([][2]string, 0, len(byRule))
	for k := range byRule {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	out := make([]RuleAgreement, 0, len(keys))
	for _, k := range keys {
		pairs := byRule[k]
		ra := RuleAgreement{RulesetID: k[0], RuleID: k[1], Reviews: len(pairs)}
		modelN, finalN := map[string]int{}, map[string]int{}
		for _, p := range pairs {
			if p.model == p.final {
				ra.Agreed++
			}
			modelN[p.model]++
			finalN[p.final]++
		}
		if ra.Reviews >= MinAgreementReviews {
			n := float64(ra.Reviews)
			po := float64(ra.Agreed) / n
			ra.Accuracy = &po
			var pe float64
			for l, c := range modelN {
				pe += float64(c) / n * float64(finalN[l]) / n
			}
			if pe < 1 {
				kappa := (po - pe) / (1 - pe)
				ra.Kappa = &kappa
			}
		}
		out = append(out, ra)
	}
	return out
}
