package engine

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"rulevalidator/verdict"
)

// passageHolding is the id of the passage of testInputs holding text.
func passageHolding(t *testing.T, e *Engine, text string) string {
	t.Helper()
	for _, p := range e.newAnchoring(testInputs()).passages().list {
		if strings.Contains(p.text, text) {
			return p.id
		}
	}
	t.Fatalf("no passage holds %q", text)
	return ""
}

// TestRecheck: verdicts judged before are checked again, with no judging
// call: each check reads the passages the verdict cites, by id, and the
// engine's settings decide as Evaluate's do. A pass an earlier check
// overruled comes as the model's pass and is judged by this check alone.
func TestRecheck(t *testing.T) {
	capAnswer, capTokens := holdsTokens("true", 0.3)   // under 0.4: overruled
	termAnswer, termTokens := holdsTokens("true", 0.6) // doubts the fail
	llm := &scriptedLLM{replies: []scriptedReply{{content: capAnswer, tokens: capTokens}, {content: termAnswer, tokens: termTokens}}}
	e := newTestEngine(t, llm, Config{Confidence: ConfidenceVerify, OverrulePassesBelow: 0.4, CallConcurrency: 1, ReviewBelowConfidence: 0.5})
	pass, fail := true, false
	earlier := 0.9
	verdicts := []Verdict{
		{RuleID: "cap", Type: verdict.Boolean, BooleanOutput: &pass, DataSufficiency: true, Confidence: &earlier,
			Rationale: "The agreement caps the supplier's liability at the fees of a year.",
			Evidences: []verdict.Evidence{{PassageID: passageHolding(t, e, "capped at fees paid")}}},
		{RuleID: "term", Type: verdict.Boolean, BooleanOutput: &fail, DataSufficiency: true,
			Rationale: "The agreement runs for two years, which the rule counts against it.",
			Evidences: []verdict.Evidence{{PassageID: passageHolding(t, e, "two (2) years")}}},
	}
	res, err := e.Recheck(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()}, verdicts)
	if err != nil {
		t.Fatal(err)
	}
	if len(llm.calls) != 2 {
		t.Fatalf("%d calls, want the two checks", len(llm.calls))
	}
	for i, call := range llm.calls {
		if call.Purpose != PurposeCheck {
			t.Errorf("call %d is a %s call", i, call.Purpose)
		}
	}
	if user := lastUser(llm.calls[0]); !strings.Contains(user, "total liability is capped at fees paid in the prior 12 months.") {
		t.Errorf("cap's check does not read its cited passage whole:\n%s", user)
	}
	cap, term := res.Rules[0], res.Rules[1]
	if !cap.Overruled || cap.BooleanOutput == nil || *cap.BooleanOutput || cap.Confidence == nil || math.Abs(*cap.Confidence-0.7) > 1e-9 ||
		!slices.Contains(cap.ReviewReasons, ReviewOverruledPass) {
		t.Errorf("cap: %+v, want overruled with confidence 0.7 and routed for it", cap)
	}
	if term.Overruled || term.Confidence == nil || math.Abs(*term.Confidence-0.4) > 1e-9 || !slices.Contains(term.ReviewReasons, ReviewLowConfidence) {
		t.Errorf("term: %+v, want its fail standing at confidence 0.4, routed under 0.5", term)
	}
	if len(cap.Evidences) != 1 || cap.Evidences[0].SourceOrigin != "msa.pdf" || cap.Evidences[0].SourcePageNumber != 1 || !cap.Evidences[0].Anchored {
		t.Errorf("cap's evidence %+v, want its passage on page 1 of msa.pdf", cap.Evidences)
	}
	if *verdicts[0].BooleanOutput != true || verdicts[0].Evidences[0].Text != "" || *verdicts[0].Confidence != 0.9 {
		t.Errorf("the verdicts given were changed: %+v", verdicts[0])
	}
	if res.Usage.LLMCalls != 2 {
		t.Errorf("usage counts %d calls, want 2", res.Usage.LLMCalls)
	}
}

// TestRecheckRefuses: what a recheck cannot read is refused before any
// call, the rule and the evidence named.
func TestRecheckRefuses(t *testing.T) {
	pass := true
	cited := func(rule, id string) []Verdict {
		return []Verdict{{RuleID: rule, Type: verdict.Boolean, BooleanOutput: &pass, DataSufficiency: true,
			Rationale: "The clause says so.", Evidences: []verdict.Evidence{{PassageID: id, Text: "a quote"}}}}
	}
	tests := []struct {
		name     string
		cfg      Config
		verdicts []Verdict
		is       error
		want     string
	}{
		{"another confidence source", Config{Confidence: ConfidenceLogProbs}, nil, nil, "Confidence must be verify"},
		{"an unknown passage", Config{Confidence: ConfidenceVerify}, cited("cap", "d9p9s9"), ErrInvalidInput, `rule "cap": evidence 0 cites passage "d9p9s9", which the material does not have`},
		{"a quote without a passage", Config{Confidence: ConfidenceVerify}, cited("cap", ""), ErrInvalidInput, `rule "cap": evidence 0 names no passage id`},
		{"an unknown rule", Config{Confidence: ConfidenceVerify}, cited("nope", ""), ErrInvalidRuleset, `a verdict of rule "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := &scriptedLLM{}
			_, err := newTestEngine(t, llm, tt.cfg).Recheck(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()}, tt.verdicts)
			if err == nil || !strings.Contains(err.Error(), tt.want) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Errorf("Recheck: %v, want %q (wrapping %v)", err, tt.want, tt.is)
			}
			if len(llm.calls) != 0 {
				t.Errorf("%d calls before refusing", len(llm.calls))
			}
		})
	}
}
