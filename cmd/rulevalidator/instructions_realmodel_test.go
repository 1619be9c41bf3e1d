package main

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"rulevalidator/internal/llmfake"
	"rulevalidator/internal/testtier"
)

// decisionLine is the log line of the instruction decision in auto mode.
var decisionLine = regexp.MustCompile(`msg="[^"]*" model=\S+ instructions=(\w+) decided_by=(\w+)(?: prompt_tokens_with_system=(\d+) prompt_tokens_without=(\d+))?`)

// TestInstructionModeSameEveryValidateRun runs `rulevalidator validate` on
// the example request ten times in a row, each run a process of its own,
// against the local model in auto instruction mode, and holds every run to
// the same decision: made from the prompt tokens the server counts (never
// from the model's answer to the code word), with the same counts, and the
// judging call sent as decided. On the local stack (ops/llm.sh serves Gemma
// with a chat template that folds system messages into the first user turn)
// the system message is rendered, so the decision is system.
//
// Only how the instructions are sent is asserted, so each run caps the
// model's answer at one token and makes no re-ask: the run ends in an invalid
// answer (exit 1) within seconds instead of minutes.
//
// Real-model tier: it runs only with RULEVALIDATOR_REAL_MODEL=1 (ops/test.sh
// --real-model) and OPENAI_BASE_URL set to the local model. A release, and
// any change to the prompt, the local model stack (ops/llm.sh, ops/llm/) or
// the checks, must pass it.
func TestInstructionModeSameEveryValidateRun(t *testing.T) {
	testtier.RequireRealModel(t)
	baseURL := realModelURL(t)
	rec, err := llmfake.NewRecorder(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Close)
	bin := serviceBinary(t)

	const runs = 10
	var first []string
	for i := range runs {
		rec.Reset()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, bin, "validate", "--ruleset", exampleRuleset, "--input", exampleInput, "--json", "-v",
			"--llm-base-url", rec.URL(), "--llm-instructions", "auto", "--output-retries", "0", "--max-tokens", "1")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		err := cmd.Run()
		cancel()
		code := cmd.ProcessState.ExitCode()
		if code != exitOK && code != exitFailure {
			t.Fatalf("run %d: exit %d (%v)\n%s", i+1, code, err, stderr.String())
		}
		decisions := decisionLine.FindAllStringSubmatch(stderr.String(), -1)
		if len(decisions) != 1 {
			t.Fatalf("run %d: %d instruction decisions logged, want 1\n%s", i+1, len(decisions), stderr.String())
		}
		got := decisions[0][1:]
		t.Logf("run %d: instructions=%s decided_by=%s prompt tokens with a system message %s, without %s; judging calls' roles %v",
			i+1, got[0], got[1], got[2], got[3], judgingRoles(rec))
		if got[1] != "prompt_tokens" {
			t.Errorf("run %d decided by %s, want by the prompt tokens the server counts\n%s", i+1, got[1], stderr.String())
		}
		wantRoles := "[user]"
		if got[0] == "system" {
			wantRoles = "[system user]"
		}
		roles := judgingRoles(rec)
		if len(roles) == 0 {
			t.Errorf("run %d sent no judging call\n%s", i+1, stderr.String())
		}
		for _, r := range roles {
			if r != wantRoles {
				t.Errorf("run %d decided %s but sent a judging call with roles %s", i+1, got[0], r)
			}
		}
		if first == nil {
			first = got
			continue
		}
		if strings.Join(got, " ") != strings.Join(first, " ") {
			t.Errorf("run %d decided %v, run 1 %v: the decision must be the same every run", i+1, got, first)
		}
	}
	if first != nil && first[0] != "system" {
		t.Errorf("every run folded the instructions, but the local chat template renders system messages: want system")
	}
}

// judgingRoles is the roles of the messages of each judging call (one
// carrying the material) rec forwarded, as "[system user]".
func judgingRoles(rec *llmfake.Recorder) []string {
	var out []string
	for _, msgs := range rec.Sent() {
		var roles []string
		judging := false
		for _, m := range msgs {
			roles = append(roles, m.Role)
			judging = judging || strings.Contains(m.Content, "<------- Start of Document:")
		}
		if judging {
			out = append(out, "["+strings.Join(roles, " ")+"]")
		}
	}
	return out
}
