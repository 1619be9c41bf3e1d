package openai_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
	"rulevalidator/internal/opsscript"
	"rulevalidator/verdict"
)

// smokeNDA is a short agreement that answers the smoke test's rule plainly.
const smokeNDA = `MUTUAL NON-DISCLOSURE AGREEMENT

1. Confidential Information. Each party shall keep the other party's Confidential Information secret and use it only to evaluate the proposed business relationship.

2. Term. The obligations of this Agreement last three (3) years from the Effective Date.

3. Governing Law. This Agreement is governed by the laws of the State of California.`

// TestSmokeLocalModel is the integration tier's one test against the local model
// (ops/llm.sh, which ops/test.sh starts): one rule judged in one call, with one corrective
// re-ask at most. The messages the first call sent (recorded on the way) must hold the rule
// and the document, and the prompt tokens the server reports for that call must cover them
// all, as the server's own tokenizer counts them; and the answer
// must pass the answer checks: the request completes with one verdict, for the ruleset's rule,
// of its type, with a rationale. The content checks run on it as well; a verdict that fails
// them (a 270M model seldom cites the deciding passage) must be kept as the engine promises,
// its problems named. Confidence is off: llama-cpp-python's log-probabilities cost time
// that grows with the square of the answer's length, and this test is about the mechanics;
// the real-model tier asks for them. The longer
// tests against the model are in the real-model tier (bash ops/test.sh --real-model).
func TestSmokeLocalModel(t *testing.T) {
	srv, ok := localModel(t)
	if !ok {
		return
	}
	baseURL, root, model, overhead := srv.baseURL, srv.root, srv.model, srv.overhead

	// A rule the document plainly does not meet: a verdict that it is not met claims
	// nothing, so it needs no verbatim quote from a 270M model to pass the checks.
	rs, err := engine.ParseRuleset([]byte(`{"id":"nda-smoke","version":"1","rules":[
		{"rule_id":"governing-law","rule_text":"The agreement is governed by the laws of New York."}]}`))
	if err != nil {
		t.Fatal(err)
	}
	in := &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "nda.txt", Pages: []string{smokeNDA}}}}
	// Folded into the user message: the same prompt whatever the probe would decide, and no
	// probe call.
	const mode = engine.InstructionsUser
	rec, err := llmfake.NewRecorder(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Close)

	var mu sync.Mutex
	var calls []verdict.Usage
	client, err := openai.New(openai.Config{BaseURL: rec.URL(), Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(client, engine.Config{
		Model: model, Instructions: mode, OutputRetries: 1, MaxTokens: 400, Confidence: engine.ConfidenceOff,
		Hooks: engine.Hooks{LLMCall: func(_ context.Context, _ string, _ engine.CallPurpose, _ time.Duration, u verdict.Usage, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				calls = append(calls, u)
			}
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := eng.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.MarshalIndent(res, "", "  ")
	t.Logf("result:\n%s", out)

	mu.Lock()
	defer mu.Unlock()
	if len(calls) == 0 || len(calls) > 2 {
		t.Fatalf("%d successful model calls, want 1, or 2 with the re-ask", len(calls))
	}
	// What the first call sent holds the rule and the document, and the prompt the server
	// counted covers every message: a chat template that dropped the instructions would
	// report about the document's count alone.
	recorded := rec.Sent()
	if len(recorded) == 0 {
		t.Fatal("no chat completion request reached the server")
	}
	sent := recorded[0]
	var text strings.Builder
	want := 0
	for _, m := range sent {
		n, err := tokenize(root, m.Content)
		if err != nil {
			t.Fatal(err)
		}
		want += n - overhead
		text.WriteString(m.Content)
	}
	for _, part := range []string{"governed by the laws of New York", "laws of the State of California"} {
		if !strings.Contains(text.String(), part) {
			t.Errorf("the messages sent lack %q:\n%s", part, text.String())
		}
	}
	got := calls[0].PromptTokens
	t.Logf("the server reported %d prompt tokens for the first call; its %d messages alone are %d", got, len(sent), want)
	if got < want-8 || got > want+80 {
		t.Errorf("prompt tokens %d, want between %d and %d: the instructions and the document did not reach the model whole", got, want-8, want+80)
	}
	if len(res.Rules) != 1 {
		t.Fatalf("%d verdicts for one rule", len(res.Rules))
	}
	v := res.Rules[0]
	if v.RuleID != "governing-law" || v.Type != verdict.Boolean || strings.TrimSpace(v.Rationale) == "" {
		t.Errorf("verdict %+v, want rule governing-law, boolean, with a rationale", v)
	}
	if v.BooleanOutput == nil && !v.NotApplicable {
		t.Errorf("verdict %+v has no boolean_output", v)
	}
	if len(v.Problems) == 0 {
		t.Logf("the answer passed the content checks too, after %d calls", len(calls))
	} else {
		t.Logf("kept with problems after %d calls, as the engine promises: %q", len(calls), v.Problems)
	}
}

// modelServer is the local model server the integration tests call.
type modelServer struct {
	baseURL string // OPENAI_BASE_URL
	root    string // without "/v1", where llama-cpp-python's /extras live
	model   string
	// overhead is the tokens the server's tokenizer adds to any text.
	overhead int
}

// localModel finds the model server from OPENAI_BASE_URL and
// RULEVALIDATOR_MODEL; ok is false, the test already failed or skipped as
// opsscript.Unavailable decides, when there is none to call.
func localModel(t *testing.T) (modelServer, bool) {
	t.Helper()
	s := modelServer{baseURL: os.Getenv("OPENAI_BASE_URL"), model: os.Getenv("RULEVALIDATOR_MODEL")}
	if s.baseURL == "" {
		opsscript.Unavailable(t, "Model server", "OPENAI_BASE_URL is not set (run ops/llm.sh start and export OPENAI_BASE_URL=$(ops/llm.sh url))")
		return s, false
	}
	s.root = strings.TrimSuffix(strings.TrimRight(s.baseURL, "/"), "/v1")
	var err error
	if s.overhead, err = tokenize(s.root, ""); err != nil {
		opsscript.Unavailable(t, "Model server", "tokenizing at %s (llama-cpp-python's /extras/tokenize): %v", s.root, err)
		return s, false
	}
	if s.model == "" {
		s.model = "gemma-3-270m"
	}
	return s, true
}
