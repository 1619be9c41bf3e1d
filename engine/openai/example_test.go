package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
)

// A server without structured output that is briefly overloaded: the client
// waits out the 503, falls back from json_schema to json_object, and reports
// the format it got.
func ExampleClient_Chat() {
	server := llmfake.New()
	defer server.Close()
	server.RefuseFormats("json_schema")
	server.Enqueue(
		llmfake.Reply{Status: http.StatusServiceUnavailable, Header: map[string]string{"Retry-After": "0"}},
		llmfake.Reply{Content: `{"verdict":"pass"}`, PromptTokens: 42, CompletionTokens: 5},
	)

	llm, err := openai.New(openai.Config{
		BaseURL: server.URL(),
		Timeout: 10 * time.Second,
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := llm.Chat(context.Background(), engine.ChatRequest{
		Model:      "gemma-3-270m",
		Messages:   []engine.Message{{Role: "user", Content: "Is the sky blue? Answer in JSON."}},
		SchemaName: "verdict",
		Schema:     json.RawMessage(`{"type":"object","properties":{"verdict":{"type":"string"}}}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Content)
	fmt.Println(resp.Format, resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.LLMCalls)
	fmt.Println(server.CountByFormat())
	// Output:
	// {"verdict":"pass"}
	// json_object 42 5 1
	// map[json_object:2 json_schema:1]
}
