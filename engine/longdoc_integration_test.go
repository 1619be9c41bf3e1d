package engine_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/opsscript"
	"rulevalidator/internal/synthdoc"
	"rulevalidator/internal/testtier"
	"rulevalidator/verdict"
)

// TestRealServerWindowIsLearned runs against the local model server
// (OPENAI_BASE_URL) with no window configured. llama-cpp-python does not
// report its window, so the engine assumes the default; a server with a
// smaller one (ops/llm.sh start with LLM_CTX=2048) refuses the first call,
// names its window, and the engine judges again within it. A second request
// then makes no refused call. A server whose window holds the default judges
// without a refusal.
//
// It is in the real-model tier (bash ops/test.sh --real-model, testtier.RequireRealModel):
// a release, and a change to the prompt, the local stack or the checks, must pass it.
func TestRealServerWindowIsLearned(t *testing.T) {
	testtier.RequireRealModel(t)
	baseURL := os.Getenv("OPENAI_BASE_URL")
	if baseURL == "" {
		opsscript.Unavailable(t, "Model server", "OPENAI_BASE_URL is not set (run ops/llm.sh start and export OPENAI_BASE_URL=$(ops/llm.sh url))")
		return
	}
	client, err := openai.New(openai.Config{BaseURL: baseURL, Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var refused, calls int
	e, err := engine.New(client, engine.Config{
		Model:         "gemma-3-270m",
		OutputRetries: -1,
		MaxTokens:     256,
		Hooks: engine.Hooks{LLMCall: func(_ context.Context, _ string, _ engine.CallPurpose, _ time.Duration, _ verdict.Usage, err error) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if errors.Is(err, engine.ErrLLMRejected) && strings.Contains(err.Error(), "context") {
				refused++
			}
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	topic := synthdoc.TopicOf(3)
	rs := &engine.Ruleset{ID: "window", Rules: []engine.Rule{{RuleID: "topic", RuleText: synthdoc.RuleText(topic)}}}
	// About 3,000 tokens by the server's count: over a 2048-token window,
	// within the 8192 assumed.
	in := &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "contract.pdf", Pages: synthdoc.Pages(10, 2000, 21)}}}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	res, err := e.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in})
	if err != nil {
		t.Fatalf("%v (after %d calls, %d refused)", err, calls, refused)
	}
	t.Logf("first request: %d calls, %d refused, usage %+v, pages %+v", calls, refused, res.Usage, res.Rules[0].PagesConsidered)
	if refused > 1 {
		t.Errorf("%d calls refused as too long: the window named in the first refusal was not learned", refused)
	}
	if refused == 1 && res.Usage.PlannedCalls != calls-1 {
		t.Errorf("usage %+v after a refusal and %d calls: planned calls are those of the plan within the learned window", res.Usage, calls)
	}
	if strings.TrimSpace(res.Rules[0].Rationale) == "" {
		t.Errorf("verdict without a rationale: %+v", res.Rules[0])
	}

	before := refused
	if _, err := e.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in}); err != nil {
		t.Fatal(err)
	}
	if refused != before {
		t.Errorf("the second request was refused as too long: the learned window was not kept")
	}
}
