package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
	"rulevalidator/verdict"
)

const testSchema = `{"type":"object","properties":{"verdict":{"type":"string"}},"required":["verdict"],"additionalProperties":false}`

// waits records the backoff waits a Client asked for, without sleeping.
type waits struct {
	mu sync.Mutex
	ds []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.ds = append(w.ds, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waits) get() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.ds...)
}

// newClient returns a Client for fake whose waits are recorded, not slept.
func newClient(t *testing.T, baseURL string, tweak func(*openai.Config)) (*openai.Client, *waits) {
	t.Helper()
	w := &waits{}
	cfg := openai.Config{
		BaseURL: baseURL,
		APIKey:  "sk-test",
		Timeout: 5 * time.Second,
		Logger:  slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		Sleep:   w.sleep,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := openai.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, w
}

func newFake(t *testing.T) *llmfake.Server {
	t.Helper()
	fake := llmfake.New()
	t.Cleanup(fake.Close)
	return fake
}

func schemaRequest() engine.ChatRequest {
	return engine.ChatRequest{
		Model: "test-model",
		Messages: []engine.Message{
			{Role: "system", Content: "You judge documents."},
			{Role: "user", Content: "Is the sky blue?"},
		},
		Format:      engine.FormatJSONSchema,
		SchemaName:  "verdicts",
		Schema:      json.RawMessage(testSchema),
		Temperature: engine.Temperature(0.2),
		MaxTokens:   256,
	}
}

func TestChatSuccess(t *testing.T) {
	fake := newFake(t)
	fake.Enqueue(llmfake.Reply{
		Content:          `{"verdict":"pass"}`,
		Model:            "test-model-2024",
		PromptTokens:     120,
		CompletionTokens: 9,
		CachedTokens:     64,
	})
	c, w := newClient(t, fake.URL(), nil)

	resp, err := c.Chat(t.Context(), schemaRequest())
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	want := engine.ChatResponse{
		Content: `{"verdict":"pass"}`,
		Format:  engine.FormatJSONSchema,
		Model:   "test-model-2024",
		Usage:   verdict.Usage{PromptTokens: 120, CompletionTokens: 9, CachedTokens: 64, LLMCalls: 1},
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("response = %+v, want %+v", resp, want)
	}
	if got := w.get(); len(got) != 0 {
		t.Errorf("waited %v on a first-time success", got)
	}

	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q, want %q", got, "Bearer sk-test")
	}
	if r.Model != "test-model" || r.Format != "json_schema" || r.SchemaName != "verdicts" || !r.Strict {
		t.Errorf("model, format, schema name, strict = %q, %q, %q, %v; want test-model, json_schema, verdicts, true",
			r.Model, r.Format, r.SchemaName, r.Strict)
	}
	if string(r.Schema) != testSchema {
		t.Errorf("schema on the wire = %s, want %s", r.Schema, testSchema)
	}
	wantMsgs := []llmfake.Message{{Role: "system", Content: "You judge documents."}, {Role: "user", Content: "Is the sky blue?"}}
	if len(r.Messages) != len(wantMsgs) || r.Messages[0] != wantMsgs[0] || r.Messages[1] != wantMsgs[1] {
		t.Errorf("messages = %+v, want %+v", r.Messages, wantMsgs)
	}
	if r.Temperature == nil || *r.Temperature < 0.19 || *r.Temperature > 0.21 {
		t.Errorf("temperature = %v, want 0.2", r.Temperature)
	}
	if r.MaxTokens != 256 {
		t.Errorf("max_tokens = %d, want 256", r.MaxTokens)
	}
}

func TestChatNoAPIKeySendsNoAuthorization(t *testing.T) {
	fake := newFake(t)
	c, _ := newClient(t, fake.URL(), func(cfg *openai.Config) { cfg.APIKey = "" })
	if _, err := c.Chat(t.Context(), schemaRequest()); err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if got := fake.Requests()[0].Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none", got)
	}
}

func TestChatWireFormat(t *testing.T) {
	tests := []struct {
		name       string
		cfgFormat  engine.ResponseFormat
		req        func(*engine.ChatRequest)
		wantWire   string // response_format.type, "" for none
		wantFormat engine.ResponseFormat
	}{
		{name: "json_schema", wantWire: "json_schema", wantFormat: engine.FormatJSONSchema},
		{name: "json_object asked", req: func(r *engine.ChatRequest) { r.Format = engine.FormatJSONObject },
			wantWire: "json_object", wantFormat: engine.FormatJSONObject},
		{name: "text asked", req: func(r *engine.ChatRequest) { r.Format = engine.FormatText },
			wantWire: "", wantFormat: engine.FormatText},
		{name: "config bounds json_schema to json_object", cfgFormat: engine.FormatJSONObject,
			wantWire: "json_object", wantFormat: engine.FormatJSONObject},
		{name: "config text", cfgFormat: engine.FormatText, wantWire: "", wantFormat: engine.FormatText},
		{name: "unset format with schema", req: func(r *engine.ChatRequest) { r.Format = "" },
			wantWire: "json_schema", wantFormat: engine.FormatJSONSchema},
		{name: "unset format without schema", req: func(r *engine.ChatRequest) { r.Format, r.Schema = "", nil },
			wantWire: "json_object", wantFormat: engine.FormatJSONObject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(t)
			c, _ := newClient(t, fake.URL(), func(cfg *openai.Config) { cfg.Format = tt.cfgFormat })
			req := schemaRequest()
			if tt.req != nil {
				tt.req(&req)
			}
			resp, err := c.Chat(t.Context(), req)
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if resp.Format != tt.wantFormat {
				t.Errorf("response format = %q, want %q", resp.Format, tt.wantFormat)
			}
			r := fake.Requests()[0]
			if r.Format != tt.wantWire {
				t.Errorf("response_format.type on the wire = %q, want %q", r.Format, tt.wantWire)
			}
			if tt.wantWire != "json_schema" && r.Schema != nil {
				t.Errorf("a %q request carried a schema: %s", tt.wantWire, r.Schema)
			}
		})
	}
}

func TestChatReasoningModelGetsMaxCompletionTokens(t *testing.T) {
	fake := newFake(t)
	c, _ := newClient(t, fake.URL(), nil)
	req := schemaRequest()
	req.Model, req.LogProbs = "o3-mini", true
	if _, err := c.Chat(t.Context(), req); err != nil {
		t.Fatalf("Chat: %v", err)
	}
	r := fake.Requests()[0]
	if r.MaxTokens != 0 || r.MaxCompletionTokens != 256 {
		t.Errorf("max_tokens, max_completion_tokens = %d, %d; want 0, 256", r.MaxTokens, r.MaxCompletionTokens)
	}
	// A reasoning model refuses sampling parameters: none is sent.
	if r.Temperature != nil || r.LogProbs {
		t.Errorf("temperature %v, logprobs %v sent to a reasoning model; want neither", r.Temperature, r.LogProbs)
	}
}

func TestChatEmptyAnswerIsNotAnError(t *testing.T) {
	tests := []struct {
		name  string
		reply llmfake.Reply
	}{
		{"no choices", llmfake.Reply{NoChoices: true, PromptTokens: 10}},
		{"empty content", llmfake.Reply{Content: "", PromptTokens: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(t)
			fake.Enqueue(tt.reply)
			c, _ := newClient(t, fake.URL(), nil)
			resp, err := c.Chat(t.Context(), schemaRequest())
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if resp.Content != "" || resp.Usage.PromptTokens != 10 || resp.Usage.LLMCalls != 1 {
				t.Errorf("response = %+v, want empty content with usage", resp)
			}
			if n := len(fake.Requests()); n != 1 {
				t.Errorf("server saw %d requests, want 1 (no retry)", n)
			}
		})
	}
}

func TestChatFailures(t *testing.T) {
	unavailable := llmfake.Reply{Status: http.StatusServiceUnavailable, Error: &llmfake.Error{Message: "overloaded"}}
	ok := llmfake.Reply{Content: `{"verdict":"pass"}`}
	tests := []struct {
		name    string
		replies []llmfake.Reply
		tweak   func(*openai.Config)
		// wantErr is nil for success, else the sentinel the error wraps.
		wantErr      error
		wantMsg      []string
		wantRequests int
		// wantFault is the environment cause the error reports; empty for a message fault.
		wantFault  string
		checkWaits func(t *testing.T, ws []time.Duration)
	}{
		{
			name: "429 with Retry-After seconds, then success",
			replies: []llmfake.Reply{
				{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "1"}},
				ok,
			},
			wantRequests: 2,
			checkWaits:   exactWaits(time.Second),
		},
		{
			name: "Retry-After above MaxDelay is honoured",
			replies: []llmfake.Reply{
				{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "45"}},
				ok,
			},
			wantRequests: 2,
			checkWaits:   exactWaits(45 * time.Second),
		},
		{
			name: "429 with Retry-After as an HTTP-date",
			replies: []llmfake.Reply{
				{Status: http.StatusTooManyRequests, Header: map[string]string{
					"Retry-After": time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)}},
				ok,
			},
			wantRequests: 2,
			checkWaits: func(t *testing.T, ws []time.Duration) {
				if len(ws) != 1 || ws[0] <= 0 || ws[0] > 4*time.Second {
					t.Errorf("waits = %v, want one wait in (0, 4s]", ws)
				}
			},
		},
		{
			name: "retry-after-ms wins over Retry-After",
			replies: []llmfake.Reply{
				{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "2", "retry-after-ms": "1250"}},
				ok,
			},
			wantRequests: 2,
			checkWaits:   exactWaits(1250 * time.Millisecond),
		},
		{
			name: "a Retry-After shorter than the backoff waits the backoff",
			replies: []llmfake.Reply{
				{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "0"}},
				ok,
			},
			wantRequests: 2,
			checkWaits: func(t *testing.T, ws []time.Duration) {
				if len(ws) != 1 || ws[0] < 250*time.Millisecond || ws[0] > 500*time.Millisecond {
					t.Errorf("waits = %v, want one within the first backoff [250ms, 500ms]", ws)
				}
			},
		},
		{
			name:         "503 twice, then success",
			replies:      []llmfake.Reply{unavailable, unavailable, ok},
			wantRequests: 3,
			checkWaits:   jitteredWaits(500*time.Millisecond, time.Second),
		},
		{
			name: "502 with a non-JSON body, then success",
			replies: []llmfake.Reply{
				{Status: http.StatusBadGateway, Body: "<html><body>Bad Gateway</body></html>"},
				ok,
			},
			wantRequests: 2,
			checkWaits:   jitteredWaits(500 * time.Millisecond),
		},
		{
			name:         "response cut off mid-body, then success",
			replies:      []llmfake.Reply{{Content: `{"verdict":"pass"}`, Truncate: true}, ok},
			wantRequests: 2,
			checkWaits:   jitteredWaits(500 * time.Millisecond),
		},
		{
			name:         "retries exhausted",
			replies:      []llmfake.Reply{unavailable, unavailable, unavailable, ok},
			tweak:        func(c *openai.Config) { c.MaxAttempts = 3 },
			wantErr:      engine.ErrLLMUnavailable,
			wantFault:    openai.CauseModelUnavailable,
			wantMsg:      []string{"model unavailable after 3 attempts over ", "last error: 503 Service Unavailable: overloaded"},
			wantRequests: 3,
			checkWaits:   jitteredWaits(500*time.Millisecond, time.Second),
		},
		{
			name: "backoff is capped by MaxDelay",
			replies: []llmfake.Reply{
				{Status: http.StatusInternalServerError}, {Status: http.StatusInternalServerError},
				{Status: http.StatusInternalServerError}, {Status: http.StatusInternalServerError},
			},
			tweak: func(c *openai.Config) {
				c.MaxAttempts, c.BaseDelay, c.MaxDelay = 4, 100*time.Millisecond, 250*time.Millisecond
			},
			wantErr:      engine.ErrLLMUnavailable,
			wantFault:    openai.CauseModelUnavailable,
			wantMsg:      []string{"after 4 attempts", "last error: 500 Internal Server Error"},
			wantRequests: 4,
			checkWaits:   jitteredWaits(100*time.Millisecond, 200*time.Millisecond, 250*time.Millisecond),
		},
		{
			name: "Retry-After beyond the retry budget gives up at once",
			replies: []llmfake.Reply{
				{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "600"}},
				ok,
			},
			tweak:        func(c *openai.Config) { c.MaxElapsed = time.Minute },
			wantErr:      engine.ErrLLMUnavailable,
			wantFault:    openai.CauseModelUnavailable,
			wantMsg:      []string{"after 1 attempt over ", "the server asked to wait 10m0s", "429 Too Many Requests"},
			wantRequests: 1,
			checkWaits:   exactWaits(),
		},
		{
			name: "401 fails fast",
			replies: []llmfake.Reply{{Status: http.StatusUnauthorized, Error: &llmfake.Error{
				Message: "Incorrect API key provided", Type: "invalid_request_error", Code: "invalid_api_key"}}},
			wantErr:      engine.ErrLLMUnavailable,
			wantFault:    openai.CauseModelAuth,
			wantMsg:      []string{"model unavailable: the server refused the API key (401: Incorrect API key provided); check the configured API key"},
			wantRequests: 1,
			checkWaits:   exactWaits(),
		},
		{
			name:         "403 fails fast",
			replies:      []llmfake.Reply{{Status: http.StatusForbidden}},
			wantErr:      engine.ErrLLMUnavailable,
			wantFault:    openai.CauseModelAuth,
			wantMsg:      []string{"the server refused the API key (403"},
			wantRequests: 1,
			checkWaits:   exactWaits(),
		},
		{
			name: "404 model not found",
			replies: []llmfake.Reply{{Status: http.StatusNotFound, Error: &llmfake.Error{
				Message: "The model `test-model` does not exist", Code: "model_not_found"}}},
			tweak:        func(c *openai.Config) { c.Model = "test-model" },
			wantErr:      engine.ErrLLMUnavailable,
			wantFault:    openai.CauseModelNotFound,
			wantMsg:      []string{`the configured model "test-model" was not found (404: The model`},
			wantRequests: 1,
			checkWaits:   exactWaits(),
		},
		{
			name: "404 for a model the request chose is the request's fault",
			replies: []llmfake.Reply{{Status: http.StatusNotFound, Error: &llmfake.Error{
				Message: "The model `test-model` does not exist", Code: "model_not_found"}}},
			tweak:        func(c *openai.Config) { c.Model = "configured-model" },
			wantErr:      engine.ErrLLMRejected,
			wantMsg:      []string{`model "test-model" not found (404: The model`},
			wantRequests: 1,
			checkWaits:   exactWaits(),
		},
		{
			name: "400 unrelated to the format is a bad request, not a fallback",
			replies: []llmfake.Reply{{Status: http.StatusBadRequest, Error: &llmfake.Error{
				Message: "messages[1].role must be one of system, user, assistant", Param: "messages"}}},
			wantErr:      engine.ErrLLMRejected,
			wantMsg:      []string{"bad request (400: messages[1].role"},
			wantRequests: 1,
			checkWaits:   exactWaits(),
		},
		{
			name: "context_length_exceeded code",
			replies: []llmfake.Reply{{Status: http.StatusBadRequest, Error: &llmfake.Error{
				Message: "Please reduce the length of the messages.", Code: "context_length_exceeded"}}},
			wantErr:      engine.ErrLLMRejected,
			wantMsg:      []string{"the input is too long for the model's context window"},
			wantRequests: 1,
			checkWaits:   exactWaits(),
		},
		{
			name: "context length in the message only",
			replies: []llmfake.Reply{{Status: http.StatusBadRequest, Error: &llmfake.Error{
				Message: "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens."}}},
			wantErr:      engine.ErrLLMRejected,
			wantMsg:      []string{"the input is too long for the model's context window (400: This model's maximum context length"},
			wantRequests: 1,
			checkWaits:   exactWaits(),
		},
		{
			name:         "501 is permanent",
			replies:      []llmfake.Reply{{Status: http.StatusNotImplemented}},
			wantErr:      engine.ErrLLMRejected,
			wantMsg:      []string{"501 Not Implemented"},
			wantRequests: 1,
			checkWaits:   exactWaits(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(t)
			fake.Enqueue(tt.replies...)
			// The retry loop alone, its waits recorded, not slept: the
			// adaptive limit would also pause the server for a Retry-After,
			// in real time (concurrency_test.go tests that).
			c, w := newClient(t, fake.URL(), func(cfg *openai.Config) {
				cfg.FixedConcurrency = true
				if tt.tweak != nil {
					tt.tweak(cfg)
				}
			})

			resp, err := c.Chat(t.Context(), schemaRequest())
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("Chat: %v", err)
			case tt.wantErr == nil && resp.Content != `{"verdict":"pass"}`:
				t.Errorf("content = %q, want the successful answer", resp.Content)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("Chat error = %v, want one wrapping %q", err, tt.wantErr)
			}
			if err != nil {
				var f interface {
					MessageFault() bool
					FaultCause() string
				}
				if !errors.As(err, &f) {
					if tt.wantFault != "" {
						t.Errorf("error %v reports no fault, want cause %q", err, tt.wantFault)
					}
				} else if f.FaultCause() != tt.wantFault || f.MessageFault() != (tt.wantFault == "") {
					t.Errorf("fault = (message %v, cause %q), want cause %q", f.MessageFault(), f.FaultCause(), tt.wantFault)
				}
			}
			for _, s := range tt.wantMsg {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Errorf("error %v does not contain %q", err, s)
				}
			}
			if n := len(fake.Requests()); n != tt.wantRequests {
				t.Errorf("server saw %d requests, want %d", n, tt.wantRequests)
			}
			tt.checkWaits(t, w.get())
		})
	}
}

// exactWaits expects exactly these waits.
func exactWaits(want ...time.Duration) func(*testing.T, []time.Duration) {
	return func(t *testing.T, got []time.Duration) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("waits = %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("waits = %v, want %v", got, want)
			}
		}
	}
}

// jitteredWaits expects one wait per ceiling, each within [0, ceiling].
func jitteredWaits(ceilings ...time.Duration) func(*testing.T, []time.Duration) {
	return func(t *testing.T, got []time.Duration) {
		t.Helper()
		if len(got) != len(ceilings) {
			t.Fatalf("waits = %v, want %d waits under %v", got, len(ceilings), ceilings)
		}
		for i, ceiling := range ceilings {
			if got[i] < 0 || got[i] > ceiling {
				t.Errorf("wait %d = %v, want within [0, %v]", i+1, got[i], ceiling)
			}
		}
	}
}

func TestChatConnectionRefused(t *testing.T) {
	fake := llmfake.New()
	url := fake.URL()
	fake.Close() // nothing listens there any more
	c, w := newClient(t, url, func(c *openai.Config) { c.MaxAttempts = 3 })

	_, err := c.Chat(t.Context(), schemaRequest())
	if !errors.Is(err, engine.ErrLLMUnavailable) {
		t.Fatalf("Chat error = %v, want one wrapping %q", err, engine.ErrLLMUnavailable)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Chat error = %v, want it to wrap ECONNREFUSED", err)
	}
	if !strings.Contains(err.Error(), "after 3 attempts") {
		t.Errorf("error %q does not say how many attempts were made", err)
	}
	if got := w.get(); len(got) != 2 {
		t.Errorf("waited %v, want 2 waits between 3 attempts", got)
	}
}

func TestChatAttemptTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	t.Run("slow attempt is retried", func(t *testing.T) {
		fake := newFake(t)
		fake.Enqueue(llmfake.Reply{Delay: 10 * time.Second}, llmfake.Reply{Content: `{"verdict":"pass"}`})
		c, w := newClient(t, fake.URL(), func(c *openai.Config) { c.Timeout = timeout })

		start := time.Now()
		resp, err := c.Chat(t.Context(), schemaRequest())
		if err != nil {
			t.Fatalf("Chat: %v", err)
		}
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("Chat took %v; the %v attempt timeout did not cut the slow attempt short", elapsed, timeout)
		}
		if resp.Content != `{"verdict":"pass"}` || len(w.get()) != 1 || len(fake.Requests()) != 2 {
			t.Errorf("content %q after %d requests and waits %v; want the answer after 2 requests and 1 wait",
				resp.Content, len(fake.Requests()), w.get())
		}
	})
	t.Run("every attempt too slow", func(t *testing.T) {
		fake := newFake(t)
		fake.SetDefault(llmfake.Reply{Delay: 10 * time.Second})
		c, _ := newClient(t, fake.URL(), func(c *openai.Config) { c.Timeout, c.MaxAttempts = timeout, 2 })

		_, err := c.Chat(t.Context(), schemaRequest())
		if !errors.Is(err, engine.ErrLLMUnavailable) {
			t.Fatalf("Chat error = %v, want one wrapping %q", err, engine.ErrLLMUnavailable)
		}
		if want := "last error: no response within 100ms (attempt timeout)"; !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	})
}

func TestChatCancelledDuringBackoff(t *testing.T) {
	fake := newFake(t)
	fake.SetDefault(llmfake.Reply{Status: http.StatusServiceUnavailable, Header: map[string]string{"Retry-After": "30"}})
	c, _ := newClient(t, fake.URL(), func(c *openai.Config) { c.Sleep = nil }) // real timer

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.Chat(ctx, schemaRequest())
	elapsed := time.Since(start)

	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Chat error = %v, want one wrapping context.Canceled", err)
	}
	if errors.Is(err, engine.ErrLLMUnavailable) || errors.Is(err, engine.ErrLLMRejected) {
		t.Errorf("Chat error = %v; a cancelled call is neither unavailable nor rejected", err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("Chat returned %v after cancellation during a 30s wait, want promptly", elapsed)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestChatFormatFallback(t *testing.T) {
	tests := []struct {
		name       string
		refuse     []string
		cfgFormat  engine.ResponseFormat
		wantFirst  map[string]int // requests by wire format after the first call
		wantSecond map[string]int // after the second call
		wantFormat engine.ResponseFormat
		// wantRemembered is the format later calls start at, when not
		// wantFormat.
		wantRemembered engine.ResponseFormat
	}{
		{
			// The request has no grammar schema, so the grammar tier
			// sends json_object; the model stays at grammar for calls
			// that have one.
			name:           "json_schema refused",
			refuse:         []string{"json_schema"},
			wantFirst:      map[string]int{"json_schema": 1, "json_object": 1},
			wantSecond:     map[string]int{"json_schema": 1, "json_object": 2},
			wantFormat:     engine.FormatJSONObject,
			wantRemembered: engine.FormatGrammar,
		},
		{
			name:       "json_schema and json_object refused",
			refuse:     []string{"json_schema", "json_object"},
			wantFirst:  map[string]int{"json_schema": 1, "json_object": 1, "": 1},
			wantSecond: map[string]int{"json_schema": 1, "json_object": 1, "": 2},
			wantFormat: engine.FormatText,
		},
		{
			name:       "configured json_object never tries json_schema",
			refuse:     []string{"json_object"},
			cfgFormat:  engine.FormatJSONObject,
			wantFirst:  map[string]int{"json_object": 1, "": 1},
			wantSecond: map[string]int{"json_object": 1, "": 2},
			wantFormat: engine.FormatText,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(t)
			fake.RefuseFormats(tt.refuse...)
			fake.SetDefault(llmfake.Reply{Content: `{"verdict":"pass"}`})
			c, w := newClient(t, fake.URL(), func(c *openai.Config) { c.Format = tt.cfgFormat })

			for i, want := range []map[string]int{tt.wantFirst, tt.wantSecond} {
				resp, err := c.Chat(t.Context(), schemaRequest())
				if err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
				if resp.Format != tt.wantFormat || resp.Content != `{"verdict":"pass"}` {
					t.Errorf("call %d: format %q, content %q; want %q and the answer", i+1, resp.Format, resp.Content, tt.wantFormat)
				}
				if got := fake.CountByFormat(); !equalCounts(got, want) {
					t.Errorf("after call %d: requests by format = %v, want %v", i+1, got, want)
				}
			}
			wantRemembered := tt.wantFormat
			if tt.wantRemembered != "" {
				wantRemembered = tt.wantRemembered
			}
			if got := c.Format("test-model"); got != wantRemembered {
				t.Errorf("remembered format = %q, want %q", got, wantRemembered)
			}
			wantOther := tt.cfgFormat
			if wantOther == "" {
				wantOther = engine.FormatJSONSchema
			}
			if got := c.Format("other-model"); got != wantOther {
				t.Errorf("format for another model = %q, want %q: a refusal for test-model must not lower it", got, wantOther)
			}
			if got := w.get(); len(got) != 0 {
				t.Errorf("waited %v; a format refusal is retried at once", got)
			}
		})
	}
}

func TestChatFormatRefusalOnTextIsABadRequest(t *testing.T) {
	fake := newFake(t)
	fake.SetDefault(llmfake.Reply{Status: http.StatusBadRequest, Error: &llmfake.Error{Message: "grammar failed to parse"}})
	c, _ := newClient(t, fake.URL(), func(c *openai.Config) { c.Format = engine.FormatText })

	_, err := c.Chat(t.Context(), schemaRequest())
	if !errors.Is(err, engine.ErrLLMRejected) || !strings.Contains(err.Error(), "bad request (400") {
		t.Fatalf("Chat error = %v, want a bad request wrapping %q", err, engine.ErrLLMRejected)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestChatConcurrentFallback(t *testing.T) {
	fake := newFake(t)
	fake.RefuseFormats("json_schema")
	c, _ := newClient(t, fake.URL(), nil)

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			resp, err := c.Chat(t.Context(), schemaRequest())
			if err == nil && resp.Format != engine.FormatJSONObject {
				err = errors.New("answered in format " + string(resp.Format))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := fake.CountByFormat()["json_object"]; got != 8 {
		t.Errorf("json_object requests = %d, want 8", got)
	}
}

func TestChatRejectsUnsendableRequests(t *testing.T) {
	tests := []struct {
		name string
		edit func(*engine.ChatRequest)
		want string
	}{
		{"no messages", func(r *engine.ChatRequest) { r.Messages = nil }, "the request has no messages"},
		{"json_schema without schema", func(r *engine.ChatRequest) { r.Schema = nil }, "format json_schema needs a Schema"},
		{"schema not JSON", func(r *engine.ChatRequest) { r.Schema = json.RawMessage(`{"type":`) }, `schema "verdicts" is not valid JSON`},
		{"bad schema name", func(r *engine.ChatRequest) { r.SchemaName = "rule verdicts" }, `SchemaName "rule verdicts" must be`},
		{"unknown format", func(r *engine.ChatRequest) { r.Format = "xml" }, `format "xml" is not one of`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(t)
			c, _ := newClient(t, fake.URL(), nil)
			req := schemaRequest()
			tt.edit(&req)
			_, err := c.Chat(t.Context(), req)
			if !errors.Is(err, engine.ErrLLMRejected) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Chat error = %v, want one wrapping %q containing %q", err, engine.ErrLLMRejected, tt.want)
			}
			if n := len(fake.Requests()); n != 0 {
				t.Errorf("server saw %d requests, want none", n)
			}
		})
	}
}

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  openai.Config
		want string
	}{
		{"no base URL", openai.Config{}, "openai: BaseURL is required"},
		{"relative URL", openai.Config{BaseURL: "x"}, `openai: BaseURL "x" is not an absolute http(s) URL`},
		{"other scheme", openai.Config{BaseURL: "ftp://host/v1"}, `openai: BaseURL "ftp://host/v1" is not an absolute http(s) URL`},
		{"negative timeout", openai.Config{BaseURL: "http://h/v1", Timeout: -time.Second}, "openai: Timeout must not be negative, got -1s"},
		{"negative attempts", openai.Config{BaseURL: "http://h/v1", MaxAttempts: -1}, "openai: MaxAttempts must not be negative, got -1"},
		{"base above max delay", openai.Config{BaseURL: "http://h/v1", BaseDelay: time.Minute}, "openai: BaseDelay 1m0s exceeds MaxDelay 30s"},
		{"negative max concurrency", openai.Config{BaseURL: "http://h/v1", MaxConcurrency: -1}, "openai: MaxConcurrency must not be negative, got -1"},
		{"negative initial concurrency", openai.Config{BaseURL: "http://h/v1", InitialConcurrency: -2}, "openai: InitialConcurrency must not be negative, got -2"},
		{"initial above max concurrency", openai.Config{BaseURL: "http://h/v1", InitialConcurrency: 8, MaxConcurrency: 6}, "openai: InitialConcurrency 8 exceeds MaxConcurrency 6"},
		{"initial above the default max", openai.Config{BaseURL: "http://h/v1", InitialConcurrency: 20}, "openai: InitialConcurrency 20 exceeds MaxConcurrency 16"},
		{"unknown format", openai.Config{BaseURL: "http://h/v1", Format: "yaml"}, `openai: Format "yaml" is not one of json_schema, grammar, json_object, text`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := openai.New(tt.cfg)
			if err == nil || err.Error() != tt.want {
				t.Errorf("New error = %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := openai.New(openai.Config{BaseURL: "http://127.0.0.1:8080/v1"}); err != nil {
		t.Errorf("New with only a BaseURL: %v", err)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// llama-cpp-python's server answers a response_format it does not know with a
// 500 naming the parameter; that is a refusal of the format, not an outage.
func TestChatFormatRefusedWith500NamingResponseFormat(t *testing.T) {
	fake := newFake(t)
	fake.Enqueue(
		llmfake.Reply{Status: http.StatusInternalServerError, Error: &llmfake.Error{Message: "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}", Type: "internal_server_error"}},
		llmfake.Reply{Content: `{"rules":[]}`},
	)
	c, w := newClient(t, fake.URL(), nil)

	resp, err := c.Chat(t.Context(), schemaRequest())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Format != engine.FormatJSONObject {
		t.Errorf("format = %q, want json_object after the refusal", resp.Format)
	}
	if got := fake.CountByFormat(); !equalCounts(got, map[string]int{"json_schema": 1, "json_object": 1}) {
		t.Errorf("requests by format = %v", got)
	}
	if got := w.get(); len(got) != 0 {
		t.Errorf("waited %v; a format refusal is not retried with backoff", got)
	}
}

// In json_object mode the schema rides along inside response_format, where
// llama.cpp-based servers enforce it; OmitSchemaHint turns that off.
func TestChatJSONObjectCarriesSchemaHint(t *testing.T) {
	for _, omit := range []bool{false, true} {
		fake := newFake(t)
		fake.SetDefault(llmfake.Reply{Content: `{}`})
		c, _ := newClient(t, fake.URL(), func(c *openai.Config) { c.Format = engine.FormatJSONObject; c.OmitSchemaHint = omit })
		if _, err := c.Chat(t.Context(), schemaRequest()); err != nil {
			t.Fatal(err)
		}
		var body struct {
			ResponseFormat struct {
				Type   string          `json:"type"`
				Schema json.RawMessage `json:"schema"`
			} `json:"response_format"`
		}
		if err := json.Unmarshal(fake.Requests()[0].Raw, &body); err != nil {
			t.Fatal(err)
		}
		if body.ResponseFormat.Type != "json_object" {
			t.Fatalf("response_format.type = %q", body.ResponseFormat.Type)
		}
		if got := len(body.ResponseFormat.Schema) > 0; got == omit {
			t.Errorf("OmitSchemaHint=%v: schema sent = %v (%s)", omit, got, body.ResponseFormat.Schema)
		}
		if !omit && !json.Valid(body.ResponseFormat.Schema) {
			t.Errorf("schema hint is not JSON: %s", body.ResponseFormat.Schema)
		}
	}
}

// grammarRequest is schemaRequest with a grammar schema, as the engine sends
// its calls.
func grammarRequest() engine.ChatRequest {
	req := schemaRequest()
	req.GrammarSchema = json.RawMessage(testSchema)
	return req
}

// A server that lacks json_schema but takes llama.cpp's grammar field gets
// the grammar schema as a compact GBNF grammar, with no response_format;
// one that refuses the field, or ignores it, gets json_object.
func TestChatGrammarTier(t *testing.T) {
	tests := []struct {
		name       string
		refuse     []string
		answer     string
		req        func() engine.ChatRequest
		wantWire   []string // the formats of the first call's requests, in order
		wantFormat engine.ResponseFormat
		wantNext   engine.ResponseFormat // the format the next call starts at
	}{
		{name: "json_schema refused, grammar taken", refuse: []string{"json_schema"}, answer: `{"verdict":"pass"}`, req: grammarRequest,
			wantWire: []string{"json_schema", "grammar"}, wantFormat: engine.FormatGrammar, wantNext: engine.FormatGrammar},
		{name: "grammar refused as an unknown field", refuse: []string{"json_schema", "grammar"}, answer: `{"verdict":"pass"}`, req: grammarRequest,
			wantWire: []string{"json_schema", "grammar", "json_object"}, wantFormat: engine.FormatJSONObject, wantNext: engine.FormatJSONObject},
		{name: "grammar ignored: the answer is spaced", refuse: []string{"json_schema"}, answer: "{\"verdict\": \"pass\"}", req: grammarRequest,
			wantWire: []string{"json_schema", "grammar"}, wantFormat: engine.FormatGrammar, wantNext: engine.FormatJSONObject},
		{name: "grammar ignored: prose", refuse: []string{"json_schema"}, answer: "The verdict is pass.", req: grammarRequest,
			wantWire: []string{"json_schema", "grammar"}, wantFormat: engine.FormatGrammar, wantNext: engine.FormatJSONObject},
		{name: "spaces inside strings are the answer's own", refuse: []string{"json_schema"}, answer: `{"verdict":"it \" passes\\","n":[1,{"a":" "}]}`, req: grammarRequest,
			wantWire: []string{"json_schema", "grammar"}, wantFormat: engine.FormatGrammar, wantNext: engine.FormatGrammar},
		{name: "no grammar schema: json_object for this call", refuse: []string{"json_schema"}, answer: `{"verdict":"pass"}`, req: schemaRequest,
			wantWire: []string{"json_schema", "json_object"}, wantFormat: engine.FormatJSONObject, wantNext: engine.FormatGrammar},
		{name: "a grammar schema without a GBNF form: json_object for this call", refuse: []string{"json_schema"}, answer: `{"verdict":"pass"}`,
			req: func() engine.ChatRequest {
				req := grammarRequest()
				req.GrammarSchema = json.RawMessage(`{"oneOf":[{"type":"string"}]}`)
				return req
			},
			wantWire: []string{"json_schema", "json_object"}, wantFormat: engine.FormatJSONObject, wantNext: engine.FormatGrammar},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(t)
			fake.RefuseFormats(tt.refuse...)
			fake.SetDefault(llmfake.Reply{Content: tt.answer})
			c, _ := newClient(t, fake.URL(), nil)

			resp, err := c.Chat(t.Context(), tt.req())
			if err != nil {
				t.Fatal(err)
			}
			if resp.Format != tt.wantFormat || resp.Content != tt.answer {
				t.Errorf("answer in format %q: %q; want %q and the answer", resp.Format, resp.Content, tt.wantFormat)
			}
			var wire []string
			for _, r := range fake.Requests() {
				wire = append(wire, r.Format)
				var body map[string]json.RawMessage
				if err := json.Unmarshal(r.Raw, &body); err != nil {
					t.Fatal(err)
				}
				_, hasFormat := body["response_format"]
				switch {
				case r.Format == "grammar" && (hasFormat || !strings.Contains(r.Grammar, "root ::=")):
					t.Errorf("a grammar request must carry the grammar and no response_format: %s", r.Raw)
				case r.Format != "grammar" && r.Grammar != "":
					t.Errorf("a %q request carried a grammar", r.Format)
				}
			}
			if strings.Join(wire, ",") != strings.Join(tt.wantWire, ",") {
				t.Errorf("requests by format = %v, want %v", wire, tt.wantWire)
			}
			if got := c.Format("test-model"); got != tt.wantNext {
				t.Errorf("the next call starts at %q, want %q", got, tt.wantNext)
			}
		})
	}
}

// The grammar sent allows the schema's answer spelled compactly, and not
// spaced: llama.cpp's own schema grammars allow whitespace between tokens.
func TestChatGrammarIsCompact(t *testing.T) {
	fake := newFake(t)
	fake.SetDefault(llmfake.Reply{Content: `{"verdict":"pass"}`})
	c, _ := newClient(t, fake.URL(), func(c *openai.Config) { c.Format = engine.FormatGrammar })
	if _, err := c.Chat(t.Context(), grammarRequest()); err != nil {
		t.Fatal(err)
	}
	g := fake.Requests()[0].Grammar
	if !strings.Contains(g, `"{\"verdict\":"`) || strings.Contains(g, "space") {
		t.Errorf("grammar %q does not spell the object compactly", g)
	}
}

// llama-cpp-python reports a grammar it cannot parse as a 500 naming it:
// that refuses the grammar, it is not retried.
func TestChatGrammarRefusedWith500(t *testing.T) {
	fake := newFake(t)
	fake.Enqueue(
		llmfake.Reply{Status: http.StatusInternalServerError, Error: &llmfake.Error{Message: "from_string: error parsing grammar file: parse_space: need newline", Type: "internal_server_error"}},
		llmfake.Reply{Content: `{"verdict":"pass"}`},
	)
	c, w := newClient(t, fake.URL(), func(c *openai.Config) { c.Format = engine.FormatGrammar })
	resp, err := c.Chat(t.Context(), grammarRequest())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Format != engine.FormatJSONObject {
		t.Errorf("format = %q, want json_object after the refusal", resp.Format)
	}
	if got := fake.CountByFormat(); !equalCounts(got, map[string]int{"grammar": 1, "json_object": 1}) {
		t.Errorf("requests by format = %v", got)
	}
	if got := w.get(); len(got) != 0 {
		t.Errorf("waited %v; a format refusal is not retried with backoff", got)
	}
}
