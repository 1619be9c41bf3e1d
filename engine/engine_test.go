package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"rulevalidator/verdict"
)

func newTestEngine(t *testing.T, llm LLM, cfg Config) *Engine {
	t.Helper()
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	e, err := New(llm, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEvaluateFirstAnswerAccepted(t *testing.T) {
	llm := &scriptedLLM{replies: []scriptedReply{{content: answer(t,
		numRule("score", 3, capQuote),
		boolRule("term", true, map[string]any{"text": "The term of this agreement is two (2) years", "source_origin": "msa.pdf", "source_page_number": 1}),
		boolRule("cap", true, map[string]any{"text": "total liability is capped at fees paid", "source_origin": "msa.pdf", "source_page_number": 1}),
	)}}}
	res, err := newTestEngine(t, llm, Config{}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()})
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{res.Rules[0].RuleID, res.Rules[1].RuleID, res.Rules[2].RuleID}; fmt.Sprint(got) != "[cap term score]" {
		t.Errorf("verdicts in order %v, want ruleset order [cap term score]", got)
	}
	if res.Rules[0].Name != "Liability cap label" || res.Rules[2].Type != verdict.Numerical {
		t.Errorf("verdicts lack rule metadata: %+v", res.Rules)
	}
	// The term quote sits on page 2 although the model said page 1.
	ev := res.Rules[1].Evidences[0]
	if !ev.Anchored || ev.Match != verdict.MatchExact || ev.SourcePageNumber != 2 || ev.StartOffset == nil {
		t.Errorf("term evidence not anchored to page 2: %+v", ev)
	}
	if res.Usage != (verdict.Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 10, LLMCalls: 1, PlannedCalls: 1}) {
		t.Errorf("usage = %+v", res.Usage)
	}
	if len(res.Sources) != 2 || res.Sources[0].SourcePageNumber != 1 || res.Sources[1].SourcePageNumber != 2 {
		t.Errorf("sources = %+v", res.Sources)
	}
	if res.Aggregate.Boolean == nil || !res.Aggregate.Boolean.Passed || res.Aggregate.Boolean.Applicable != 2 {
		t.Errorf("boolean aggregate = %+v", res.Aggregate.Boolean)
	}
	if n := res.Aggregate.Numerical; n == nil || n.Score == nil || *n.Score != 3 || n.Counted != 1 {
		t.Errorf("numerical aggregate = %+v", res.Aggregate.Numerical)
	}
	// One call, structured output constrained to the ruleset, documents only in the user message.
	call := llm.calls[0]
	if call.Format != FormatJSONSchema || !strings.Contains(string(call.Schema), `"enum":["cap"]`) || !strings.Contains(string(call.Schema), `"enum":[1,2,3]`) {
		t.Errorf("request schema = %s (format %s)", call.Schema, call.Format)
	}
	if strings.Contains(call.Messages[0].Content, "Master Services Agreement") || !strings.Contains(call.Messages[1].Content, "Master Services Agreement") {
		t.Error("document text must be in the user message and only there")
	}
}

func TestEvaluateReasksOnlyFailingRules(t *testing.T) {
	llm := &scriptedLLM{replies: []scriptedReply{
		{content: answer(t, boolRule("cap", true, capQuote), numRule("score", 9))},   // term missing, score not allowed
		{content: answer(t, boolRule("term", false), numRule("score", 2, capQuote))}, // both fixed
	}}
	var retries []string
	res, err := newTestEngine(t, llm, Config{Hooks: Hooks{OutputRetry: func(r string) { retries = append(retries, r) }}}).
		Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()})
	if err != nil {
		t.Fatal(err)
	}
	if len(llm.calls) != 2 {
		t.Fatalf("%d calls, want 2", len(llm.calls))
	}
	second := llm.calls[1]
	msgs := second.Messages
	// A fresh call: the same instructions, the same material as a prefix,
	// the pending rules and the correction after it; not the model's answer.
	first := llm.calls[0].Messages
	if len(msgs) != 2 || msgs[0] != first[0] || msgs[1].Role != "user" {
		t.Fatalf("re-ask messages = %+v", msgs)
	}
	material := strings.TrimSuffix(first[1].Content, RulesPrompt(testRuleset().Rules))
	if !strings.HasPrefix(msgs[1].Content, material+RulesPrompt(testRuleset().Rules[1:])) {
		t.Errorf("re-ask does not start with the material and the pending rules:\n%s", msgs[1].Content)
	}
	correction := strings.TrimPrefix(msgs[1].Content, material)
	for _, want := range []string{`rule "score": numerical_output 9 is not one of the allowed scores 1, 2, 3`, `rule "term": no answer was given`, `containing only these rules: "term", "score"`} {
		if !strings.Contains(correction, want) {
			t.Errorf("correction lacks %q:\n%s", want, correction)
		}
	}
	if strings.Contains(string(second.Schema), `"enum":["cap"]`) {
		t.Error("re-ask schema still asks for the accepted rule")
	}
	if fmt.Sprint(retries) != "[score_not_allowed missing_rule]" {
		t.Errorf("retry reasons %v", retries)
	}
	if *res.Rules[0].BooleanOutput != true || *res.Rules[1].BooleanOutput != false || *res.Rules[2].NumericalOutput != 2 {
		t.Errorf("merged verdicts wrong: %+v", res.Rules)
	}
	if res.Usage.LLMCalls != 2 || res.Usage.PromptTokens != 200 || res.Usage.CachedTokens != 20 {
		t.Errorf("usage not summed over retries: %+v", res.Usage)
	}
}

func TestEvaluateBudgetExhausted(t *testing.T) {
	bad := answer(t, boolRule("cap", true), boolRule("term", true), numRule("score", 9))
	llm := &scriptedLLM{replies: []scriptedReply{{content: "not json"}, {content: bad}, {content: bad}}}
	_, err := newTestEngine(t, llm, Config{}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()})
	if !errors.Is(err, ErrInvalidOutput) {
		t.Fatalf("err = %v, want ErrInvalidOutput", err)
	}
	if len(llm.calls) != 3 {
		t.Errorf("%d calls, want 1 + 2 retries", len(llm.calls))
	}
	if !strings.Contains(err.Error(), "after 3 attempts") || !strings.Contains(err.Error(), `rule "score": numerical_output 9`) {
		t.Errorf("error does not list what is still wrong: %v", err)
	}
}

func TestEvaluateNoRetriesWhenDisabled(t *testing.T) {
	llm := &scriptedLLM{replies: []scriptedReply{{content: "{"}}}
	_, err := newTestEngine(t, llm, Config{OutputRetries: -1}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()})
	if !errors.Is(err, ErrInvalidOutput) || len(llm.calls) != 1 {
		t.Fatalf("err = %v after %d calls", err, len(llm.calls))
	}
}

func TestEvaluateLLMErrorsPassThrough(t *testing.T) {
	for _, sentinel := range []error{ErrLLMUnavailable, ErrLLMRejected} {
		llm := &scriptedLLM{replies: []scriptedReply{{err: fmt.Errorf("%w: boom", sentinel)}}}
		_, err := newTestEngine(t, llm, Config{}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()})
		if !errors.Is(err, sentinel) {
			t.Errorf("err = %v, want %v", err, sentinel)
		}
	}
}

func TestEvaluateRejectsBadRequestsWithoutCallingTheModel(t *testing.T) {
	tests := []struct {
		name string
		req  Task
		want error
	}{
		{"no ruleset", Task{Inputs: testInputs()}, ErrInvalidRuleset},
		{"invalid ruleset", Task{Ruleset: &Ruleset{ID: "x"}, Inputs: testInputs()}, ErrInvalidRuleset},
		{"no inputs", Task{Ruleset: testRuleset()}, ErrInvalidInput},
		{"empty inputs", Task{Ruleset: testRuleset(), Inputs: &Inputs{}}, ErrInvalidInput},
		{"too large", Task{Ruleset: testRuleset(), Inputs: &Inputs{TextInput: strings.Repeat("x", 2048)}}, ErrInputTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := &scriptedLLM{}
			_, err := newTestEngine(t, llm, Config{MaxInputBytes: 1024}).Evaluate(context.Background(), tt.req)
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if len(llm.calls) != 0 {
				t.Error("the model was called for an invalid request")
			}
		})
	}
}

func TestEvaluateEvidenceOrigins(t *testing.T) {
	in := testInputs()
	in.AuxiliaryDocs = []Document{{Name: "policy.md", Pages: []string{"Suppliers must carry insurance of at least one million euros."}}}
	llm := &scriptedLLM{replies: []scriptedReply{{content: answer(t,
		boolRule("cap", true,
			// wrong origin, found verbatim in the other document
			map[string]any{"text": "Suppliers must carry insurance", "source_origin": "msa.pdf", "source_page_number": 1},
			// named input evidence
			map[string]any{"text": "50000", "source_origin": "budget", "source_page_number": 3},
			// not in any document
			map[string]any{"text": "The supplier shall indemnify the customer against all claims whatsoever.", "source_origin": "msa.pdf", "source_page_number": 1},
		),
		boolRule("term", false), numRule("score", 1),
	)}}}
	var matches []verdict.Match
	// No re-asks: the unfound quote is kept, and its verdict marked.
	res, err := newTestEngine(t, llm, Config{OutputRetries: -1, Hooks: Hooks{Anchor: func(m verdict.Match) { matches = append(matches, m) }}}).
		Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	ev := res.Rules[0].Evidences
	if ev[0].SourceOrigin != "policy.md" || !ev[0].Anchored {
		t.Errorf("wrong-origin quote not moved to its document: %+v", ev[0])
	}
	if ev[1].SourcePageNumber != 0 || ev[1].Anchored || ev[1].Match != verdict.MatchNotDocument {
		t.Errorf("named-input evidence: %+v", ev[1])
	}
	if ev[2].Anchored || ev[2].Match != verdict.MatchNone || ev[2].StartOffset != nil || !strings.Contains(ev[2].Text, "indemnify") {
		t.Errorf("unfound quote must stay unanchored with its text: %+v", ev[2])
	}
	if v := res.Rules[0]; !strings.Contains(strings.Join(v.Problems, "; "), `is not in "msa.pdf"`) {
		t.Errorf("a verdict kept with an unfound quote must say so: %+v", v)
	}
	if fmt.Sprint(matches) != "[exact not_document none]" {
		t.Errorf("anchor outcomes %v", matches)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	for _, cfg := range []Config{{Format: "xml"}, {FuzzyThreshold: 1.5}, {Temperature: -1}, {MaxTokens: -1}} {
		if _, err := New(&scriptedLLM{}, cfg); err == nil {
			t.Errorf("New(%+v) accepted a bad config", cfg)
		}
	}
	if _, err := New(nil, Config{}); err == nil {
		t.Error("New accepted a nil LLM")
	}
}

// TestConverseSubset: one conversation judges a subset of the rules on an
// excerpt of the inputs, and anchors against all of the request's documents.
func TestConverseSubset(t *testing.T) {
	rs, full := testRuleset(), testInputs()
	if err := rs.Validate(); err != nil {
		t.Fatal(err)
	}
	excerpt := &Inputs{PrimaryDocs: []Document{{Name: "msa.pdf", Pages: []string{full.PrimaryDocs[0].Pages[1]}}}}
	llm := &scriptedLLM{replies: []scriptedReply{{content: answer(t, numRule("score", 1), boolRule("cap", true, capQuote))}}}
	e := newTestEngine(t, llm, Config{})
	subset := []Rule{rs.Rules[2], rs.Rules[0]}
	verdicts, usage, err := e.converse(context.Background(), "m", InstructionsSystem, rs, subset, renderer{in: excerpt}.whole(""), e.newAnchoring(full))
	if err != nil {
		t.Fatal(err)
	}
	if len(verdicts) != 2 || verdicts[0].RuleID != "score" || verdicts[1].RuleID != "cap" || usage.LLMCalls != 1 {
		t.Fatalf("verdicts %+v, usage %+v", verdicts, usage)
	}
	if ev := verdicts[1].Evidences[0]; !ev.Anchored || ev.SourcePageNumber != 1 {
		t.Errorf("a quote outside the excerpt did not anchor in the request's document: %+v", ev)
	}
	user := llm.calls[0].Messages[1].Content
	if strings.Contains(user, `"term"`) || !strings.Contains(user, `"score"`) || strings.Contains(user, "Master Services Agreement") {
		t.Error("the conversation's prompt is not limited to its rules and excerpt")
	}
	if strings.Contains(string(llm.calls[0].Schema), `"term"`) {
		t.Error("the schema asks for a rule outside the subset")
	}
}
