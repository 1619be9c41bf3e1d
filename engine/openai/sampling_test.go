package openai_test

import (
	"bytes"
	"log/slog"
	"math"
	"strings"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
)

// TestChatSendsTemperatureZero: a temperature of 0 is sent on the wire (the
// OpenAI client leaves a zero out, and the server would sample at its own
// default); no temperature leaves the field out.
func TestChatSendsTemperatureZero(t *testing.T) {
	for _, tt := range []struct {
		name string
		temp *float32
		want float64 // -1: none sent
	}{
		{"zero", engine.Temperature(0), 0},
		{"set", engine.Temperature(0.7), 0.7},
		{"unset", nil, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(t)
			fake.Enqueue(llmfake.Reply{Content: `{"verdict":"pass"}`})
			c, _ := newClient(t, fake.URL(), nil)
			req := schemaRequest()
			req.Temperature = tt.temp
			if _, err := c.Chat(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			got := -1.0
			if tp := fake.Requests()[0].Temperature; tp != nil {
				got = *tp
			}
			if math.Abs(got-tt.want) > 1e-6 {
				t.Errorf("temperature on the wire %v, want %v (-1: none)", got, tt.want)
			}
		})
	}
}

// TestChatReturnsLogProbs: asked for, log-probabilities come back with each
// token's alternatives; a server that refuses them is asked again without,
// once, and said so once.
func TestChatReturnsLogProbs(t *testing.T) {
	fake := newFake(t)
	content := `{"boolean_output":true}`
	fake.Enqueue(llmfake.Reply{Content: content, ValueProbs: []float64{0.75}})
	c, _ := newClient(t, fake.URL(), nil)
	req := schemaRequest()
	req.LogProbs = true
	resp, err := c.Chat(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if r := fake.Requests()[0]; !r.LogProbs || r.TopLogProbs != 5 {
		t.Errorf("logprobs %v, top_logprobs %d asked; want true, 5", r.LogProbs, r.TopLogProbs)
	}
	var text strings.Builder
	var value *engine.TokenLogProb
	for i, tok := range resp.Tokens {
		text.WriteString(tok.Text)
		if tok.Text == "true" {
			value = &resp.Tokens[i]
		}
	}
	if text.String() != content || value == nil || math.Abs(math.Exp(value.LogProb)-0.75) > 1e-9 || len(value.Top) != 2 {
		t.Errorf("tokens %+v do not spell the answer with the value's probability 0.75", resp.Tokens)
	}
}

func TestChatFallsBackWithoutLogProbsOnce(t *testing.T) {
	fake := newFake(t)
	refusal := llmfake.Reply{Status: 400, Error: &llmfake.Error{Message: "logprobs is not supported by this model", Type: "invalid_request_error"}}
	fake.Enqueue(refusal, llmfake.Reply{Content: `{"verdict":"pass"}`}, llmfake.Reply{Content: `{"verdict":"pass"}`})
	var logs bytes.Buffer
	c, _ := newClient(t, fake.URL(), func(cfg *openai.Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	req := schemaRequest()
	req.LogProbs = true
	for range 2 {
		if _, err := c.Chat(t.Context(), req); err != nil {
			t.Fatalf("a refusal of log-probabilities failed the call: %v", err)
		}
	}
	reqs := fake.Requests()
	if len(reqs) != 3 || !reqs[0].LogProbs || reqs[1].LogProbs || reqs[2].LogProbs {
		t.Errorf("requests asked logprobs %v, want the first only", func() []bool {
			var out []bool
			for _, r := range reqs {
				out = append(out, r.LogProbs)
			}
			return out
		}())
	}
	if n := strings.Count(logs.String(), "gives no log-probabilities"); n != 1 || strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("the fallback was logged %d times (want once, at info):\n%s", n, logs.String())
	}
}

// TestChatFormatFallbackIsSaidOnceInOneLine: a server that refuses a
// response format with a traceback is told about once, at info, in one
// line without the traceback.
func TestChatFormatFallbackIsSaidOnceInOneLine(t *testing.T) {
	fake := newFake(t)
	traceback := "Input should be 'text' or 'json_object' at body.response_format.type\nTraceback (most recent call last):\n  File \"app.py\", line 376"
	refusal := llmfake.Reply{Status: 500, Error: &llmfake.Error{Message: "response_format: " + traceback}}
	fake.Enqueue(refusal, llmfake.Reply{Content: `{"verdict":"pass"}`}, llmfake.Reply{Content: `{"verdict":"pass"}`})
	var logs bytes.Buffer
	c, _ := newClient(t, fake.URL(), func(cfg *openai.Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	for range 2 {
		if _, err := c.Chat(t.Context(), schemaRequest()); err != nil {
			t.Fatal(err)
		}
	}
	out := logs.String()
	if n := strings.Count(out, "does not take this response format"); n != 1 || strings.Contains(out, "Traceback") || strings.Contains(out, "level=WARN") {
		t.Errorf("fallback logged %d times, want once at info without the traceback:\n%s", n, out)
	}
}
