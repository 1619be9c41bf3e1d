package openai_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
	"rulevalidator/internal/logbuf"
)

func discoveryFixture(t *testing.T) (*engine.Ruleset, *engine.Inputs) {
	t.Helper()
	rs, err := engine.ParseRuleset([]byte(`{"id":"nda","version":"1","rules":[{"rule_id":"term","rule_text":"The term is at least five years."}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return rs, &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "nda.txt", Pages: []string{"The obligations last three (3) years."}}}}
}

// TestContextWindowProbedOncePerModel: requests that start together (serve
// at --concurrency 16) share one context-window probe of the server, and its
// log line is written once, not once per request.
func TestContextWindowProbedOncePerModel(t *testing.T) {
	const requests = 16
	fake := newFake(t)
	fake.Answer(llmfake.Verdicts)
	target, err := url.Parse(fake.URL())
	if err != nil {
		t.Fatal(err)
	}
	var probes atomic.Int64
	mux := http.NewServeMux()
	// A server that reports no window, slowly, as a busy one would.
	mux.HandleFunc("GET /props", func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
		time.Sleep(200 * time.Millisecond)
		http.NotFound(w, r)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"m","object":"model"}]}`))
	})
	mux.Handle("/", httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	var logs logbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	client, _ := newClient(t, srv.URL+"/v1", func(c *openai.Config) { c.Logger = logger })
	eng, err := engine.New(client, engine.Config{Model: "m", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	rs, in := discoveryFixture(t)
	var wg sync.WaitGroup
	errs := make(chan error, requests)
	for range requests {
		wg.Go(func() {
			_, err := eng.Evaluate(context.Background(), engine.Task{Ruleset: rs, Inputs: in})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Evaluate: %v", err)
		}
	}
	if n := probes.Load(); n != 1 {
		t.Errorf("%d context-window probes for %d requests on one model, want 1", n, requests)
	}
	if n := strings.Count(logs.String(), "context window not reported"); n != 1 {
		t.Errorf("%d log lines about the context window, want 1:\n%s", n, logs.String())
	}
}

// TestRefusedKeyOnTheProbeEndsTheRun: a server that refuses the API key
// refuses the context-window probe first; that answer is the run's, at once:
// no second probe, no instruction decision, no judging call.
func TestRefusedKeyOnTheProbeEndsTheRun(t *testing.T) {
	var calls []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`))
	}))
	defer srv.Close()
	client, _ := newClient(t, srv.URL+"/v1", nil)
	eng, err := engine.New(client, engine.Config{Model: "m", Instructions: engine.InstructionsAuto, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rs, in := discoveryFixture(t)
	_, err = eng.Evaluate(context.Background(), engine.Task{Ruleset: rs, Inputs: in})

	var fault interface {
		Permanent() bool
		FaultCause() string
	}
	if !errors.Is(err, engine.ErrLLMUnavailable) || !errors.As(err, &fault) || !fault.Permanent() || fault.FaultCause() != openai.CauseModelAuth {
		t.Fatalf("err = %v, want the refused key, permanent, with cause %s", err, openai.CauseModelAuth)
	}
	if !strings.Contains(err.Error(), "the server refused the API key (401: Incorrect API key provided)") {
		t.Errorf("err = %v, want it to quote the server", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 {
		t.Errorf("the server saw %v, want the one probe", calls)
	}
}
