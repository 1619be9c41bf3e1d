package openai_test

import (
	"errors"
	"net/http"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
)

// TestContextLengthError: a refusal for the context length comes back as a ContextLengthError
// holding what the server said of the window and the prompt, however the server words it,
// and as the engine's ContextWindowError.
func TestContextLengthError(t *testing.T) {
	tests := []struct {
		name             string
		reply            llmfake.Reply
		limit, requested int
	}{
		{"llama-cpp-python", llmfake.Reply{Status: http.StatusBadRequest, Error: &llmfake.Error{
			Message: "Requested tokens (6012) exceed context window of 2048", Type: "invalid_request_error"}}, 2048, 6012},
		{"OpenAI", llmfake.Reply{Status: http.StatusBadRequest, Error: &llmfake.Error{
			Message: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
			Code:    "context_length_exceeded"}}, 8192, 9000},
		{"llama.cpp server, numbers beside the message", llmfake.Reply{Status: http.StatusBadRequest,
			Body: `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":4096}}`},
			4096, 9000},
		{"not an OpenAI error body", llmfake.Reply{Status: http.StatusBadRequest,
			Body: `<html>maximum context length is 1024 tokens</html>`}, 1024, 0},
		{"the code alone", llmfake.Reply{Status: http.StatusBadRequest, Error: &llmfake.Error{
			Message: "Please reduce the length of the messages.", Code: "context_length_exceeded"}}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(t)
			fake.Enqueue(tt.reply)
			c, _ := newClient(t, fake.URL(), nil)
			_, err := c.Chat(t.Context(), schemaRequest())
			if !errors.Is(err, engine.ErrLLMRejected) {
				t.Fatalf("Chat = %v, want ErrLLMRejected", err)
			}
			var cl *openai.ContextLengthError
			if !errors.As(err, &cl) {
				t.Fatalf("Chat = %v, want a ContextLengthError in it", err)
			}
			if cl.Limit != tt.limit || cl.Requested != tt.requested {
				t.Errorf("limit %d, requested %d; want %d and %d", cl.Limit, cl.Requested, tt.limit, tt.requested)
			}
			var cw engine.ContextWindowError
			if !errors.As(err, &cw) || cw.ContextWindow() != tt.limit {
				t.Errorf("as the engine sees it: %v", cw)
			}
		})
	}
}

func TestOtherRefusalsAreNoContextLengthError(t *testing.T) {
	fake := newFake(t)
	fake.Enqueue(llmfake.Reply{Status: http.StatusBadRequest, Error: &llmfake.Error{Message: "messages[1].role must be one of system, user, assistant"}})
	c, _ := newClient(t, fake.URL(), nil)
	_, err := c.Chat(t.Context(), schemaRequest())
	var cw engine.ContextWindowError
	if !errors.Is(err, engine.ErrLLMRejected) || errors.As(err, &cw) {
		t.Errorf("Chat = %v: want a refusal that is no ContextWindowError", err)
	}
}
