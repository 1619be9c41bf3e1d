package openai_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
)

// TestPermanentErrors: the client's errors say whether the same call would
// fail the same way.
func TestPermanentErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		want   bool
	}{
		{"API key refused", http.StatusUnauthorized, true},
		{"forbidden", http.StatusForbidden, true},
		{"configured model not found", http.StatusNotFound, true},
		{"bad request", http.StatusBadRequest, true},
		{"server unavailable through the retries", http.StatusServiceUnavailable, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(t)
			fake.SetDefault(llmfake.Reply{Status: tt.status})
			client, _ := newClient(t, fake.URL(), func(c *openai.Config) { c.Model = "m"; c.MaxAttempts = 2 })
			_, err := client.Chat(context.Background(), engine.ChatRequest{Model: "m", Messages: []engine.Message{{Role: "user", Content: "hi"}}, Format: engine.FormatText})
			var p interface{ Permanent() bool }
			if !errors.As(err, &p) {
				t.Fatalf("err = %v, does not say whether it is permanent", err)
			}
			if p.Permanent() != tt.want {
				t.Errorf("Permanent() = %v for %v, want %v", p.Permanent(), err, tt.want)
			}
		})
	}
}
