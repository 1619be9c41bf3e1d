package engine

import (
	"slices"
	"strings"
	"testing"

	"rulevalidator/verdict"
)

// FuzzCheckAnswerSingle: an answer for one pending rule, in the shape a
// grammar server is held to (the rule's object alone, its id and a cited
// passage optional) or the plain {"rules": [...]} form, gives a verdict
// that obeys its rule or a problem, never a panic; the rationale-only
// re-ask reads it alike.
func FuzzCheckAnswerSingle(f *testing.F) {
	f.Add(`{"rationale": "Capped at fees.", "boolean_output": true, "passage_id": "d1p1n1"}`, false)
	f.Add(`{"rationale": "Clear.", "numerical_output": 2, "evidences": [{"passage_id": "d1p2n1", "quote": "two (2) years"}]}`, true)
	f.Add(`{"rules": [{"rule_id": "only", "rationale": "x", "numerical_output": "3.0", "data_sufficiency": false}]}`, true)
	f.Add(`{"rule_id": "only", "rationale": "r", "not_applicable": true, "evidences": [{"text": " t ", "source_origin": "msa.pdf", "source_page_number": -1}]}`, false)
	f.Add("```json\n{\"rationale\": \"a\nb\", \"boolean_output\": false}\n```", false)
	f.Add(`{"rationale": "x", "numerical_output": 1e400}`, true)
	boolean := []Rule{{RuleID: "only", RuleText: "Liability is capped.", Type: verdict.Boolean}}
	numerical := []Rule{{RuleID: "only", RuleText: "Rate the clarity.", Type: verdict.Numerical, NumericalRuleConfig: &NumericalRuleConfig{PossibleScores: []int{1, 2, 3}}}}
	f.Fuzz(func(t *testing.T, content string, isNumerical bool) {
		pending := boolean
		if isNumerical {
			pending = numerical
		}
		rule := pending[0]
		good, problems := checkAnswer(content, pending)
		v, ok := good[rule.RuleID]
		if len(good) > 1 || (len(good) == 1 && !ok) {
			t.Fatalf("verdicts for rules not asked for: %v", good)
		}
		if !ok && len(problems) == 0 {
			t.Fatal("the rule left unanswered without a problem")
		}
		if ok {
			if v.RuleID != rule.RuleID || v.Type != rule.Type {
				t.Fatalf("verdict %+v for rule %+v", v, rule)
			}
			switch rule.Type {
			case verdict.Numerical:
				if v.BooleanOutput != nil || (v.NumericalOutput != nil && !slices.Contains(rule.AllowedScores(), *v.NumericalOutput)) {
					t.Fatalf("numerical verdict %+v", v)
				}
			default:
				if v.NumericalOutput != nil {
					t.Fatalf("boolean verdict with a score %+v", v)
				}
			}
			for _, e := range v.Evidences {
				if e.SourcePageNumber < 0 || (e.PassageID == "" && e.Text == "") ||
					e.Text != strings.TrimSpace(e.Text) || e.PassageID != strings.TrimSpace(e.PassageID) {
					t.Fatalf("evidence %+v", e)
				}
			}
		}
		for _, p := range problems {
			if p.Reason == "" || p.Detail == "" {
				t.Fatalf("problem without a reason or detail: %+v", p)
			}
		}
		rationales, problems := checkRationales(content, pending)
		if _, ok := rationales[rule.RuleID]; !ok && len(problems) == 0 {
			t.Fatal("a rationale left unread without a problem")
		}
	})
}
