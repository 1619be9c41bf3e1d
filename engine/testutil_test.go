package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"rulevalidator/verdict"
)

func ptr[T any](v T) *T { return &v }

// testRuleset is a small resolved ruleset with both rule types.
func testRuleset() *Ruleset {
	return &Ruleset{
		ID:      "msa",
		Version: "7",
		Rules: []Rule{
			{RuleID: "cap", RuleText: "Liability is capped.", Type: verdict.Boolean, Name: "Liability cap label", NotApplicableText: "The contract names no liability at all.", Weight: ptr(1.0)},
			{RuleID: "term", RuleText: "The term is under 3 years.", Type: verdict.Boolean, Weight: ptr(1.0)},
			{RuleID: "score", RuleText: "Rate the clarity.", Type: verdict.Numerical, NumericalRuleConfig: &NumericalRuleConfig{PossibleScores: []int{1, 2, 3}}, Weight: ptr(2.0)},
		},
	}
}

func testInputs() *Inputs {
	return &Inputs{
		PrimaryDocs: []Document{{Name: "msa.pdf", Pages: []string{
			"Master Services Agreement. The supplier's total liability is capped at fees paid in the prior 12 months.",
			"The term of this agreement is two (2) years from the effective date.",
		}}},
		NamedInputs: []NamedInput{{Name: "budget", Value: 50000}},
	}
}

// scriptedLLM answers each call with the next scripted reply and records the
// requests it got.
type scriptedLLM struct {
	mu      sync.Mutex
	replies []scriptedReply
	calls   []ChatRequest
}

type scriptedReply struct {
	content string
	err     error
	// tokens are the answer's log-probabilities, sent when asked for.
	tokens []TokenLogProb
}

func (s *scriptedLLM) Chat(_ context.Context, req ChatRequest) (ChatResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, req)
	if len(s.calls) > len(s.replies) {
		return ChatResponse{}, fmt.Errorf("scripted LLM: unexpected call %d", len(s.calls))
	}
	r := s.replies[len(s.calls)-1]
	if r.err != nil {
		return ChatResponse{}, r.err
	}
	resp := ChatResponse{Content: r.content, Format: req.Format, Model: req.Model, Usage: verdict.Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 10, LLMCalls: 1}}
	if req.LogProbs {
		resp.Tokens = r.tokens
	}
	return resp, nil
}

// answer builds a model answer from rule objects.
func answer(t testing.TB, rules ...map[string]any) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"rules": rules})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func boolRule(id string, pass bool, evidences ...map[string]any) map[string]any {
	if evidences == nil {
		evidences = []map[string]any{}
	}
	return map[string]any{"rule_id": id, "data_sufficiency": true, "rationale": "The material shows why " + id + " is judged so.", "boolean_output": pass, "not_applicable": false, "evidences": evidences}
}

func numRule(id string, score any, evidences ...map[string]any) map[string]any {
	if evidences == nil {
		evidences = []map[string]any{}
	}
	return map[string]any{"rule_id": id, "data_sufficiency": true, "rationale": "The material shows why " + id + " is judged so.", "numerical_output": score, "not_applicable": false, "evidences": evidences}
}

// Quotes of testInputs' document.
var (
	capQuote  = map[string]any{"text": "total liability is capped at fees paid", "source_origin": "msa.pdf", "source_page_number": 1}
	termQuote = map[string]any{"text": "The term of this agreement is two (2) years", "source_origin": "msa.pdf", "source_page_number": 2}
)
