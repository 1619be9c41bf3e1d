package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
)

// TestVerifyConfidenceLocalModel: against the local server (ops/llm.sh), the verify
// confidence source checks the verdict in a call of its own after the judging calls, and
// the verdict gets a confidence between 0 and 1. What it proves beyond the unit tests: the
// server gives log-probabilities for an answer its grammar constrains, and the engine finds
// the check's value among the tokens the server's tokenizer made of it.
func TestVerifyConfidenceLocalModel(t *testing.T) {
	srv, ok := localModel(t)
	if !ok {
		return
	}
	rs, err := engine.ParseRuleset([]byte(`{"id":"nda-verify","version":"1","rules":[
		{"rule_id":"governing-law","rule_text":"The agreement is governed by the laws of New York."}]}`))
	if err != nil {
		t.Fatal(err)
	}
	in := &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "nda.txt", Pages: []string{smokeNDA}}}}
	rec, err := llmfake.NewRecorder(srv.baseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Close)
	client, err := openai.New(openai.Config{BaseURL: rec.URL(), Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(client, engine.Config{
		// The smoke test's rule and settings: a rule the document plainly does not meet,
		// whose verdict needs no quote to pass the checks, and one re-ask for an answer
		// that runs to its bound.
		Model: srv.model, Instructions: engine.InstructionsUser, OutputRetries: 1, MaxTokens: 400,
		Confidence: engine.ConfidenceVerify,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := eng.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in})
	if oe := (*engine.OutputError)(nil); errors.As(err, &oe) {
		// The smoke test holds the judging to account; without a verdict there is
		// nothing to check.
		t.Skipf("the model gave no readable answer, so there is no verdict to check: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.MarshalIndent(res.Rules, "", "  ")
	t.Logf("verdicts:\n%s", out)

	sent := rec.Sent()
	if len(sent) < 2 {
		t.Fatalf("%d calls reached the server, want the judging call and the check", len(sent))
	}
	check := sent[len(sent)-1]
	if last := check[len(check)-1].Content; !strings.Contains(last, "Rule: The agreement is governed by the laws of New York.") || !strings.Contains(last, "Question: ") {
		t.Errorf("the last call is not the check of the verdict:\n%s", last)
	}
	v := res.Rules[0]
	if v.Confidence == nil || *v.Confidence < 0 || *v.Confidence > 1 {
		t.Fatalf("confidence %v, want one between 0 and 1 from the check's log-probabilities", v.Confidence)
	}
	t.Logf("confidence %.3f after %d calls", *v.Confidence, len(sent))
}
