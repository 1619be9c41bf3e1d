package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/internal/llmfake"
)

func TestAppendEscapedMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		"", "plain text", `quotes " and \ backslashes`, "new\nline\r\ttab", "\x00\x01\x1f\x7f",
		"<html> & ‹markers›", "line\u2028para\u2029", "bad utf-8: \xff\xfe end", "emoji 🦫 and ü",
		strings.Repeat("long ", 1000) + "\"",
	} {
		got := appendEscaped(nil, s)
		if len(got) != escapedLen(s) {
			t.Errorf("escapedLen(%q) = %d, appendEscaped wrote %d bytes", s, escapedLen(s), len(got))
		}
		var back string
		if err := json.Unmarshal([]byte(`"`+string(got)+`"`), &back); err != nil {
			t.Fatalf("appendEscaped(%q) = %q is not a JSON string: %v", s, got, err)
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("appendEscaped(%q) decodes to %q, encoding/json's to %q", s, back, wantBack)
		}
	}
}

// TestLongMessagesReachTheServerIntact: a message long enough to be spliced
// into the body arrives byte for byte, next to short ones, in every format,
// even when it holds what looks like a placeholder.
func TestLongMessagesReachTheServerIntact(t *testing.T) {
	long := strings.Repeat("Clause \"7\" \\ limits <liability>\n\t\x01 🦫 \u2028 ", spliceMin/30+10) + "rulevalidator-content-00-0\""
	for _, format := range []engine.ResponseFormat{engine.FormatJSONSchema, engine.FormatJSONObject, engine.FormatText} {
		t.Run(string(format), func(t *testing.T) {
			fake := llmfake.New()
			defer fake.Close()
			fake.SetDefault(llmfake.Reply{Content: `{"rules":[]}`})
			c, err := New(Config{BaseURL: fake.URL(), Format: format})
			if err != nil {
				t.Fatal(err)
			}
			msgs := []engine.Message{{Role: "system", Content: "short \"system\" prompt"}, {Role: "user", Content: long}, {Role: "user", Content: long + "again"}}
			if _, err := c.Chat(context.Background(), engine.ChatRequest{Model: "m", Messages: msgs, Format: format,
				SchemaName: "s", Schema: json.RawMessage(`{"type":"object"}`)}); err != nil {
				t.Fatal(err)
			}
			reqs := fake.Requests()
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests, want 1", len(reqs))
			}
			if len(reqs[0].Messages) != len(msgs) {
				t.Fatalf("server saw %d messages, want %d", len(reqs[0].Messages), len(msgs))
			}
			for i, m := range reqs[0].Messages {
				if m.Content != msgs[i].Content || m.Role != msgs[i].Role {
					t.Errorf("message %d arrived as %s with %d bytes, want %s with %d bytes, the same", i, m.Role, len(m.Content), msgs[i].Role, len(msgs[i].Content))
				}
			}
		})
	}
}

// TestReleaseBodyLetsGoOnceSent: the request's body is dropped at its end or on close, and the
// request cannot be replayed from a copy of it.
func TestReleaseBodyLetsGoOnceSent(t *testing.T) {
	for _, how := range []string{"read to the end", "closed"} {
		t.Run(how, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:9/v1/chat/completions", bytes.NewBufferString(`{"model":"m"}`))
			if err != nil {
				t.Fatal(err)
			}
			releaseBody(req)
			if req.GetBody != nil {
				t.Error("GetBody still holds a copy of the body")
			}
			body := req.Body.(*sentBody)
			if how == "closed" {
				if err := req.Body.Close(); err != nil {
					t.Fatal(err)
				}
			} else if data, err := io.ReadAll(req.Body); err != nil || string(data) != `{"model":"m"}` {
				t.Fatalf("body read as %q, %v", data, err)
			}
			if body.rc != nil {
				t.Error("the body is still held once sent")
			}
			if n, err := req.Body.Read(make([]byte, 8)); n != 0 || err != io.EOF {
				t.Errorf("reading a released body = %d, %v; want 0, EOF", n, err)
			}
		})
	}
}
