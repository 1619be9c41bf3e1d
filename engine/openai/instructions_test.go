package openai_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
)

// template is how a scripted server's chat template treats a system message.
type template int

const (
	rendersSystem    template = iota // counted into the prompt (folded or as a turn)
	dropsSystem                      // left out of the prompt
	refusesSystem400                 // a 400 naming the system role
	refusesSystem500                 // a 500 naming it, as llama.cpp answers a template's exception
	noUsage                          // rendered, but no usage reported
	refusesKey                       // every request answered 401
)

// templateServer answers as a server with template t: the instruction
// decision's short calls get a count of the words rendered as their prompt
// tokens, and judging calls a well-formed verdict for every rule.
func templateServer(t *testing.T, tmpl template) *llmfake.Server {
	t.Helper()
	fake := newFake(t)
	fake.Answer(func(req llmfake.Call) llmfake.Reply {
		hasSystem := req.Messages[0].Role == "system"
		switch {
		case tmpl == refusesKey:
			return llmfake.Reply{Status: http.StatusUnauthorized, Error: &llmfake.Error{Message: "Incorrect API key provided", Type: "invalid_request_error"}}
		case tmpl == refusesSystem400 && hasSystem:
			return llmfake.Reply{Status: http.StatusBadRequest, Error: &llmfake.Error{Message: "System role not supported", Type: "invalid_request_error"}}
		case tmpl == refusesSystem500 && hasSystem:
			return llmfake.Reply{Status: http.StatusInternalServerError, Error: &llmfake.Error{Message: "System role not supported", Type: "server_error"}}
		case req.Format != "":
			return llmfake.Verdicts(req)
		}
		tokens := 1
		for _, m := range req.Messages {
			if m.Role != "system" || tmpl != dropsSystem {
				tokens += 3 + len(strings.Fields(m.Content))
			}
		}
		if tmpl == noUsage {
			tokens = 0
		}
		return llmfake.Reply{Content: "ready", PromptTokens: tokens, CompletionTokens: 1}
	})
	return fake
}

// TestAutoInstructionsThroughTheClient decides the instruction mode against
// scripted servers through the real client, as serve and validate do, and
// checks what the judging call was sent.
func TestAutoInstructionsThroughTheClient(t *testing.T) {
	rs, err := engine.ParseRuleset([]byte(`{"id":"nda","version":"1","rules":[{"rule_id":"term","rule_text":"The term is at least five years."}]}`))
	if err != nil {
		t.Fatal(err)
	}
	in := &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "nda.txt", Pages: []string{"The obligations last three (3) years."}}}}
	tests := []struct {
		name      string
		template  template
		wantRoles []string // of the judging call; nil: the request fails before it
		wantCalls int      // decision calls the server saw
		wantLog   string
	}{
		{"system counted", rendersSystem, []string{"system", "user"}, 2, "instructions=system decided_by=prompt_tokens"},
		{"system dropped", dropsSystem, []string{"user"}, 2, "instructions=user decided_by=prompt_tokens"},
		{"system refused", refusesSystem400, []string{"user"}, 2, "instructions=user decided_by=refusal"},
		// The 500 is retried as any server error is, then read as a refusal.
		{"system refused with a server error", refusesSystem500, []string{"user"}, 1 + openai.DefaultMaxAttempts, "instructions=user decided_by=refusal"},
		{"no usage reported", noUsage, []string{"user"}, 3, "instructions=user decided_by=code_word"},
		{"API key refused", refusesKey, nil, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := templateServer(t, tt.template)
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			client, _ := newClient(t, fake.URL(), func(c *openai.Config) { c.Logger = logger })
			eng, err := engine.New(client, engine.Config{Model: "m", Instructions: engine.InstructionsAuto, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			res, err := eng.Evaluate(context.Background(), engine.Task{Ruleset: rs, Inputs: in})

			var decisions, judging []llmfake.Call
			for _, r := range fake.Requests() {
				if r.Format == "" {
					decisions = append(decisions, r)
				} else {
					judging = append(judging, r)
				}
			}
			if len(decisions) != tt.wantCalls {
				t.Errorf("%d decision calls, want %d", len(decisions), tt.wantCalls)
			}
			if tt.wantRoles == nil {
				var fault interface {
					Permanent() bool
					FaultCause() string
				}
				if !errors.Is(err, engine.ErrLLMUnavailable) || !errors.As(err, &fault) || !fault.Permanent() || fault.FaultCause() != openai.CauseModelAuth {
					t.Errorf("err = %v, want the refused key, permanent, with its cause", err)
				}
				if len(judging) != 0 {
					t.Errorf("%d judging calls after the key was refused, want none", len(judging))
				}
				return
			}
			if err != nil {
				t.Fatalf("Evaluate: %v\n%s", err, logs.String())
			}
			if len(res.Rules) != 1 || len(judging) != 1 {
				t.Fatalf("%d verdicts from %d judging calls, want 1 from 1", len(res.Rules), len(judging))
			}
			var roles []string
			for _, m := range judging[0].Messages {
				roles = append(roles, m.Role)
			}
			if strings.Join(roles, " ") != strings.Join(tt.wantRoles, " ") {
				t.Errorf("judging call roles %v, want %v", roles, tt.wantRoles)
			}
			if !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log lacks %q:\n%s", tt.wantLog, logs.String())
			}
		})
	}
}
