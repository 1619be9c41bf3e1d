package openai_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
)

// capacityServer is a model server that serves capacity calls at once, each
// taking 50 to 100 ms, and answers any call past that with 429 and a
// Retry-After, as a shared endpoint's gateway does.
type capacityServer struct {
	capacity   int64
	retryAfter string

	inFlight, peak atomic.Int64
	calls, refused atomic.Int64
}

const completion = `{"id":"c","object":"chat.completion","model":"m",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"{\"verdict\":\"pass\"}"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`

func (s *capacityServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	n := s.inFlight.Add(1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	call := s.calls.Add(1)
	w.Header().Set("Content-Type", "application/json")
	if n > s.capacity {
		s.refused.Add(1)
		s.inFlight.Add(-1)
		w.Header().Set("Retry-After", s.retryAfter)
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"too many requests at once","type":"rate_limit_error"}}`)
		return
	}
	time.Sleep(50*time.Millisecond + time.Duration(call%6)*10*time.Millisecond)
	// Done before the answer is sent: a client sending its next call as
	// soon as it reads this one finds the place free.
	s.inFlight.Add(-1)
	_, _ = io.WriteString(w, completion)
}

// share is the part of the server's calls that met a 429.
func (s *capacityServer) share() float64 {
	return float64(s.refused.Load()) / float64(max(s.calls.Load(), 1))
}

// judgeAll makes calls Chat calls at once through one Client, as that many
// requests' calls reaching the same endpoint, and reports how many failed
// (logging the first failure) and how long they all took.
func judgeAll(t *testing.T, c *openai.Client, calls int) (failed int, took time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range calls {
		wg.Go(func() {
			if _, err := c.Chat(ctx, jsonRequest()); err != nil && n.Add(1) == 1 {
				t.Logf("the first failed Chat call: %v", err)
			}
		})
	}
	wg.Wait()
	return int(n.Load()), time.Since(start)
}

func jsonRequest() engine.ChatRequest {
	return engine.ChatRequest{
		Model:    "m",
		Messages: []engine.Message{{Role: "user", Content: "Is the sky blue?"}},
		Format:   engine.FormatJSONObject,
	}
}

// Against an endpoint that serves 2 calls at once and refuses the rest
// with 429, the adaptive limit keeps the calls offered near 2: few meet a
// 429 and all succeed. The fixed limit (adaptation off) is run beside it
// for comparison.
func TestAdaptiveConcurrencyFindsTheCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("takes seconds: Retry-After pauses of 1s")
	}
	const calls = 40
	type run struct {
		name    string
		fixed   bool
		share   float64
		refused int64
		total   int64
		peak    int // the most calls in flight at once
		failed  int
		took    time.Duration
		final   openai.Concurrency
	}
	runs := []*run{{name: "off (fixed at 16)", fixed: true}, {name: "on (adaptive, 4 to 16)"}}
	for _, r := range runs {
		srv := &capacityServer{capacity: 2, retryAfter: "1"}
		ts := httptest.NewServer(srv)
		c, err := openai.New(openai.Config{
			BaseURL:          ts.URL + "/v1",
			Timeout:          5 * time.Second,
			BaseDelay:        100 * time.Millisecond,
			MaxDelay:         time.Second,
			Logger:           slog.New(slog.DiscardHandler),
			FixedConcurrency: r.fixed,
			OnConcurrency:    func(s openai.Concurrency) { r.peak = max(r.peak, s.InFlight) }, // called under the limiter's lock
		})
		if err != nil {
			t.Fatal(err)
		}
		r.failed, r.took = judgeAll(t, c, calls)
		ts.Close()
		r.share, r.refused, r.total, r.final = srv.share(), srv.refused.Load(), srv.calls.Load(), c.Concurrency()
	}
	for _, r := range runs {
		t.Logf("limiter %-22s %3d of %3d server calls met a 429 (%4.1f%%), at most %2d in flight, %2d of %d Chat calls failed, took %s, limit at the end %d",
			r.name, r.refused, r.total, 100*r.share, r.peak, r.failed, calls, r.took.Round(10*time.Millisecond), r.final.Limit)
	}
	on := runs[1]
	if on.failed > 0 {
		t.Errorf("with the adaptive limit %d of %d calls failed, want all to succeed", on.failed, calls)
	}
	if on.share > 0.15 {
		t.Errorf("with the adaptive limit %.1f%% of the server's calls met a 429, want at most 15%%", 100*on.share)
	}
}

// The limit bounds the requests in flight, the observer hook sees each
// change in order, and Concurrency names the endpoint by its host.
func TestConcurrencyLimitAndObserver(t *testing.T) {
	srv := &capacityServer{capacity: 100, retryAfter: "1"}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	var mu sync.Mutex
	var seen []openai.Concurrency
	c, _ := newClient(t, ts.URL+"/v1", func(cfg *openai.Config) {
		cfg.MaxConcurrency = 3
		cfg.OnConcurrency = func(s openai.Concurrency) {
			mu.Lock()
			seen = append(seen, s)
			mu.Unlock()
		}
	})
	if failed, _ := judgeAll(t, c, 12); failed > 0 {
		t.Fatalf("%d calls failed", failed)
	}
	if p := srv.peak.Load(); p > 3 {
		t.Errorf("the server saw %d calls at once, want at most MaxConcurrency 3", p)
	}
	u, _ := url.Parse(ts.URL)
	want := openai.Concurrency{Endpoint: u.Host, Limit: 3}
	if got := c.Concurrency(); got != want {
		t.Errorf("Concurrency() = %+v, want %+v (started at 3: Initial's default 4 bounded by Max)", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[len(seen)-1] != want {
		t.Fatalf("the hook was told %d states ending %+v, want the last %+v", len(seen), seen[max(len(seen)-1, 0):], want)
	}
	waited := false
	for _, s := range seen {
		if s.Endpoint != u.Host || s.InFlight > s.Limit || s.Limit > 3 {
			t.Errorf("the hook was told %+v", s)
		}
		waited = waited || s.Waiting > 0
	}
	if !waited {
		t.Error("the hook never saw a call waiting, with 12 calls under a limit of 3")
	}
}

// A Retry-After stops every call to the endpoint, not only the one it
// answered, until it passes; and a rate limit spent does the same until its
// reset.
func TestEndpointPauses(t *testing.T) {
	tests := []struct {
		name  string
		first llmfake.Reply
		pause time.Duration
	}{
		{"Retry-After on a 429", llmfake.Reply{Status: http.StatusTooManyRequests, Header: map[string]string{"retry-after-ms": "400"}}, 400 * time.Millisecond},
		{"Retry-After on a 503", llmfake.Reply{Status: http.StatusServiceUnavailable, Header: map[string]string{"Retry-After": "0.4"}}, 400 * time.Millisecond},
		{"requests spent until their reset", llmfake.Reply{Content: `{"verdict":"pass"}`, Header: map[string]string{
			"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "400ms"}}, 400 * time.Millisecond},
		{"tokens spent until their reset", llmfake.Reply{Content: `{"verdict":"pass"}`, Header: map[string]string{
			"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "0.4"}}, 400 * time.Millisecond},
		{"requests left: no pause", llmfake.Reply{Content: `{"verdict":"pass"}`, Header: map[string]string{
			"x-ratelimit-remaining-requests": "1", "x-ratelimit-reset-requests": "10s"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(t)
			fake.Enqueue(tt.first)
			fake.SetDefault(llmfake.Reply{Content: `{"verdict":"pass"}`})
			// One attempt a call: the first call does not retry, so the
			// pause is the second call's to wait.
			c, _ := newClient(t, fake.URL(), func(cfg *openai.Config) { cfg.MaxAttempts = 1 })
			start := time.Now()
			if _, err := c.Chat(t.Context(), schemaRequest()); err != nil && tt.first.Status == 0 {
				t.Fatal(err)
			}
			if _, err := c.Chat(t.Context(), schemaRequest()); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			if took < tt.pause {
				t.Errorf("the calls took %s, want at least the %s pause", took, tt.pause)
			}
			if tt.pause == 0 && took > 2*time.Second {
				t.Errorf("the calls took %s with no pause asked", took)
			}
		})
	}
}

// A slot is held for an attempt only: a call waiting to retry lets another
// call through, though the limit is 1.
func TestSlotNotHeldThroughBackoff(t *testing.T) {
	fake := newFake(t)
	fake.Enqueue(llmfake.Reply{Status: http.StatusInternalServerError}) // no load signal, no pause
	fake.SetDefault(llmfake.Reply{Content: `{"verdict":"pass"}`})
	otherDone := make(chan struct{})
	c, _ := newClient(t, fake.URL(), func(cfg *openai.Config) {
		cfg.MaxConcurrency = 1
		cfg.Sleep = func(ctx context.Context, _ time.Duration) error {
			select { // the backoff ends only once the other call is answered
			case <-otherDone:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := c.Chat(ctx, schemaRequest())
		first <- err
	}()
	for len(fake.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Chat(ctx, schemaRequest()); err != nil {
		t.Fatalf("the other call, while the first waits to retry: %v", err)
	}
	close(otherDone)
	if err := <-first; err != nil {
		t.Fatalf("the first call: %v", err)
	}
}

// The wait for a slot is not part of the attempt's Timeout, and OnAttempt
// reports it apart.
func TestQueueWaitIsNotTheAttemptTimeout(t *testing.T) {
	fake := newFake(t)
	fake.SetDefault(llmfake.Reply{Content: `{"verdict":"pass"}`, Delay: 150 * time.Millisecond})
	rec := &attempts{}
	c, _ := newClient(t, fake.URL(), func(cfg *openai.Config) {
		cfg.MaxConcurrency, cfg.Timeout, cfg.MaxAttempts = 1, 400*time.Millisecond, 1
		cfg.OnAttempt = rec.observe
	})
	if failed, _ := judgeAll(t, c, 4); failed > 0 { // the last waits 450ms
		t.Fatalf("%d calls failed: the wait for a slot counted against the attempt timeout", failed)
	}
	var most time.Duration
	for _, a := range rec.get() {
		most = max(most, a.Queued)
		if a.Took > 400*time.Millisecond {
			t.Errorf("attempt took %s: Took counts the wait for a slot", a.Took)
		}
	}
	if most < 300*time.Millisecond {
		t.Errorf("the longest Queued is %s, want the last call's wait behind three (~450ms)", most)
	}
}

// A call whose context ends while it waits for a slot sends nothing and
// says so.
func TestCancelledWhileQueued(t *testing.T) {
	fake := newFake(t)
	release := make(chan struct{})
	fake.SetDefault(llmfake.Reply{Content: `{"verdict":"pass"}`, Hold: release})
	c, _ := newClient(t, fake.URL(), func(cfg *openai.Config) { cfg.MaxConcurrency = 1 })
	held := make(chan error, 1)
	go func() {
		_, err := c.Chat(t.Context(), schemaRequest())
		held <- err
	}()
	for len(fake.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Chat(ctx, schemaRequest())
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for a slot") {
		t.Errorf("Chat = %v, want a wait for a slot ended by the deadline", err)
	}
	if errors.Is(err, engine.ErrLLMUnavailable) {
		t.Errorf("Chat = %v: a call its caller gave up is not the model's failure", err)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("the server saw %d requests, want 1 (the held call's)", n)
	}
	if s := c.Concurrency(); s.Waiting != 0 || s.InFlight != 1 {
		t.Errorf("Concurrency() = %+v, want the held call alone", s)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if s := c.Concurrency(); s.InFlight != 0 {
		t.Errorf("Concurrency() = %+v after every call, want none in flight", s)
	}
}

func ExampleConfig_concurrency() {
	cfg := openai.Config{
		BaseURL:            "http://127.0.0.1:8080/v1",
		InitialConcurrency: 2,  // start gently
		MaxConcurrency:     32, // never more than this
		OnConcurrency: func(s openai.Concurrency) {
			_ = s // e.g. gauges labelled with s.Endpoint
		},
	}
	c, err := openai.New(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", c.Concurrency())
	// Output: {Endpoint:127.0.0.1:8080 Limit:2 InFlight:0 Waiting:0}
}
