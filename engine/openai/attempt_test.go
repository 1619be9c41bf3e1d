package openai_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
	"rulevalidator/verdict"
)

// attempts records what OnAttempt is told.
type attempts struct {
	mu sync.Mutex
	as []openai.Attempt
}

func (r *attempts) observe(a openai.Attempt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.as = append(r.as, a)
}

func (r *attempts) get() []openai.Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]openai.Attempt(nil), r.as...)
}

// OnAttempt sees every HTTP request of a call, retries and format fallbacks
// included, with its status, usage and error; the call's own Usage counts one
// call.
func TestOnAttemptSeesEveryHTTPAttempt(t *testing.T) {
	ok := llmfake.Reply{Content: `{"verdict":"yes"}`, PromptTokens: 100, CompletionTokens: 10, CachedTokens: 40}
	type want struct {
		format  engine.ResponseFormat
		n       int
		status  int
		failed  bool
		refused bool
		usage   verdict.Usage
	}
	success := verdict.Usage{PromptTokens: 100, CompletionTokens: 10, CachedTokens: 40}
	tests := []struct {
		name    string
		refuse  []string
		replies []llmfake.Reply
		want    []want
	}{
		{"one attempt", nil, []llmfake.Reply{ok}, []want{
			{engine.FormatJSONSchema, 1, 200, false, false, success},
		}},
		{"retried after a 503 and a cut-off body", nil, []llmfake.Reply{{Status: 503}, {Content: `{"verdict":"yes"}`, Truncate: true}, ok}, []want{
			{engine.FormatJSONSchema, 1, 503, true, false, verdict.Usage{}},
			{engine.FormatJSONSchema, 2, 200, true, false, verdict.Usage{}},
			{engine.FormatJSONSchema, 3, 200, false, false, success},
		}},
		{"format fallbacks", []string{"json_schema", "json_object"}, []llmfake.Reply{ok}, []want{
			{engine.FormatJSONSchema, 1, 400, true, true, verdict.Usage{}},
			{engine.FormatJSONObject, 1, 400, true, true, verdict.Usage{}},
			{engine.FormatText, 1, 200, false, false, success},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(t)
			fake.RefuseFormats(tt.refuse...)
			fake.Enqueue(tt.replies...)
			rec := &attempts{}
			c, _ := newClient(t, fake.URL(), func(cfg *openai.Config) { cfg.OnAttempt = rec.observe })
			resp, err := c.Chat(context.Background(), schemaRequest())
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if resp.Usage.LLMCalls != 1 || resp.Usage.PromptTokens != 100 {
				t.Errorf("call usage %+v, want one call of 100 prompt tokens", resp.Usage)
			}
			got := rec.get()
			if len(got) != len(tt.want) || len(got) != len(fake.Requests()) {
				t.Fatalf("%d attempts observed, %d requests sent, want %d: %+v", len(got), len(fake.Requests()), len(tt.want), got)
			}
			for i, w := range tt.want {
				a := got[i]
				if a.Model != "test-model" || a.Format != w.format || a.N != w.n || a.Status != w.status ||
					(a.Err != nil) != w.failed || a.FormatRefused != w.refused || a.Usage != w.usage || a.Took <= 0 {
					t.Errorf("attempt %d: %+v\nwant %+v", i+1, a, w)
				}
			}
		})
	}
}

func TestOnAttemptReportsConnectionFailures(t *testing.T) {
	rec := &attempts{}
	c, _ := newClient(t, "http://127.0.0.1:1/v1", func(cfg *openai.Config) {
		cfg.MaxAttempts = 2
		cfg.OnAttempt = rec.observe
	})
	_, err := c.Chat(context.Background(), schemaRequest())
	if !errors.Is(err, engine.ErrLLMUnavailable) {
		t.Fatalf("err = %v, want ErrLLMUnavailable", err)
	}
	got := rec.get()
	if len(got) != 2 {
		t.Fatalf("%d attempts, want 2: %+v", len(got), got)
	}
	for i, a := range got {
		if a.Status != 0 || a.Err == nil || a.N != i+1 || a.Usage != (verdict.Usage{}) {
			t.Errorf("attempt %d: %+v, want no status, an error and no usage", i+1, a)
		}
	}
}

// Concurrent calls report their attempts concurrently; the hook is told of
// each exactly once.
func TestOnAttemptConcurrentCalls(t *testing.T) {
	fake := newFake(t)
	fake.SetDefault(llmfake.Reply{Content: `{"verdict":"yes"}`, PromptTokens: 7})
	rec := &attempts{}
	c, _ := newClient(t, fake.URL(), func(cfg *openai.Config) { cfg.OnAttempt = rec.observe })
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := c.Chat(ctx, schemaRequest()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	tokens := 0
	for _, a := range rec.get() {
		tokens += a.Usage.PromptTokens
	}
	if n := len(rec.get()); n != 8 || tokens != 56 {
		t.Errorf("%d attempts and %d prompt tokens, want 8 and 56", n, tokens)
	}
}
