package engine

import (
	"context"
	"fmt"

	"rulevalidator/engine/plan"
	"rulevalidator/verdict"
)

// This file is the token budget of a request's calls: what a call may hold within the
// model's context window, and what the estimator learns from the tokens a call really used.

// Defaults of the token budget.
const (
	// DefaultContextTokens is the context window assumed when neither the
	// configuration nor the server says: small enough for the models people
	// run themselves, so that a request is split rather than refused.
	DefaultContextTokens = 8192
	// DefaultCallConcurrency is how many calls of one request run at once.
	DefaultCallConcurrency = 4
	// DefaultOutputRetries is how many corrective re-asks a request gets.
	DefaultOutputRetries = 2
	// DefaultMaxInputBytes caps a request's input text.
	DefaultMaxInputBytes = 4 << 20
)

// Token arithmetic of a call besides the texts themselves.
const (
	// perMessageTokens covers a chat template's turn markers.
	perMessageTokens = 8
	// reaskTokens and reaskTokensPerRule bound a corrective message: its
	// fixed text, and the problems it names for one rule.
	reaskTokens        = 64
	reaskTokensPerRule = 100
	// citeOverhead is what the ids before each passage add to a
	// document's tokens in cite mode, at most: a passage is a sentence of
	// some 30 tokens or more, its id and brackets about 7.
	citeOverhead = 1.25
)

// budget is the token arithmetic of one request's calls.
type budget struct {
	window   int     // context window
	maxTok   int     // Config.MaxTokens (0: the server's default)
	ratio    float64 // the model's correction of plan.Count
	perRule  int     // expected answer tokens per rule
	reserved int     // answer tokens kept when planning
}

func (e *Engine) budgetFor(ctx context.Context, model string) (budget, error) {
	window, err := e.contextTokens(ctx, model)
	if err != nil {
		return budget{}, err
	}
	b := budget{
		window:  window,
		maxTok:  e.cfg.MaxTokens,
		ratio:   e.est.PromptRatio(model),
		perRule: e.est.AnswerTokensPerRule(model),
	}
	b.reserved = b.maxTok
	if b.reserved == 0 {
		b.reserved = min(max(b.window/4, 256), 4096)
	}
	if b.reserved >= b.window {
		return b, fmt.Errorf("engine: the answer budget of %d tokens (max tokens) leaves no room for a prompt in the context window of %d tokens", b.reserved, b.window)
	}
	return b, nil
}

func (b budget) tokens(s string) int { return plan.Scale(plan.Count(s), b.ratio) }

// fits reports whether one call with every rule and the whole prompt fits:
// the prompt and the answers within the window, and the answers within
// max tokens when that is set.
func (b budget) fits(promptTokens, rules int) bool {
	answers := rules * b.perRule
	if b.maxTok > 0 {
		return promptTokens <= b.window-b.maxTok && answers <= b.maxTok
	}
	return promptTokens+answers <= b.window
}

// observeUsage teaches the estimator how the model's tokenizer compares with
// the estimate and how long its answers run.
func (e *Engine) observeUsage(model string, messages []Message, rules int, u verdict.Usage) {
	if u.PromptTokens > 0 && e.est.WantsPrompt(model) {
		counted := 0
		for _, m := range messages {
			counted += plan.Count(m.Content) + perMessageTokens
		}
		e.est.ObservePrompt(model, counted, u.PromptTokens)
	}
	e.est.ObserveAnswer(model, rules, u.CompletionTokens)
}
