package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"rulevalidator/consumer"
	"rulevalidator/engine"
	"rulevalidator/judging"
	"rulevalidator/registry"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// adapterFault is an adapter error that says whose fault it is, as the model client's do.
type adapterFault struct {
	cause string
	kind  error
}

func (e *adapterFault) Error() string      { return "adapter: " + e.cause }
func (e *adapterFault) Unwrap() error      { return e.kind }
func (e *adapterFault) MessageFault() bool { return e.cause == "" }
func (e *adapterFault) FaultCause() string { return e.cause }

// The adapter's own errors say whose fault they are to the one failure table.
func TestAdapterErrorsClassify(t *testing.T) {
	var _ judging.Fault = (*brokerError)(nil)
	var _ judging.Fault = (*resultStoreError)(nil)
	for _, tc := range []struct {
		name string
		err  error
		want judging.Failure
	}{
		{"broker", &brokerError{errors.New("leader not available")}, judging.Failure{Cause: judging.CauseBroker}},
		{"result store unreachable", &resultStoreError{fmt.Errorf("storing: %w", errors.New("dial tcp: refused"))}, judging.Failure{Cause: judging.CauseStorageUnavailable}},
		{"result store denied", &resultStoreError{&adapterFault{cause: "storage_auth"}}, judging.Failure{Cause: judging.CauseStorageAuth}},
		{"timed out every attempt, the last on a model timeout", &attemptsError{n: 3, err: fmt.Errorf("%w: %w", judging.ErrTimedOut, &adapterFault{cause: "model_unavailable", kind: engine.ErrLLMUnavailable})},
			judging.Failure{Message: true, Reason: schemas.ReasonTimeout}},
		{"invalid request", consumer.Permanent(string(schemas.ReasonInvalidRequest), errors.New("x")), judging.Failure{Message: true, Reason: schemas.ReasonInvalidRequest}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := judging.Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %+v, want %+v", tc.err, got, tc.want)
			}
		})
	}
}

func TestEnvironmentHoldAndRelease(t *testing.T) {
	type change struct {
		cause  string
		active bool
	}
	var changes []change
	env := newEnvironment(func(cause string, active bool) { changes = append(changes, change{cause, active}) })
	if err := env.check(context.Background()); err != nil {
		t.Fatalf("check with no fault: %v", err)
	}
	if !env.hold("requests/0/1", judging.CauseModelAuth, errors.New("401 Unauthorized")) {
		t.Error("first hold of a cause is not reported new")
	}
	if env.hold("requests/1/4", judging.CauseModelAuth, errors.New("401 again")) {
		t.Error("a second message held by the same cause is reported new")
	}
	err := env.check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "model_auth") || !strings.Contains(err.Error(), "API key") ||
		!strings.Contains(err.Error(), "401 again") || !strings.Contains(err.Error(), "2 held") {
		t.Fatalf("check = %v, want the cause, its fix, the messages held and the last error", err)
	}
	// Another message ending (e.g. dead-lettered for its own fault) leaves the fault alone.
	if freed := env.release("requests/2/9"); len(freed) != 0 {
		t.Errorf("releasing a message that held nothing freed %v", freed)
	}
	if freed := env.release("requests/0/1"); len(freed) != 0 {
		t.Errorf("releasing one of two held messages freed %v", freed)
	}
	if env.check(context.Background()) == nil {
		t.Fatal("the fault cleared while a message still holds it")
	}
	// The held message's next attempt fails differently: the cause moves with it.
	if !env.hold("requests/1/4", judging.CauseStorageAuth, errors.New("AccessDenied")) {
		t.Error("a message moving to a new cause does not report it new")
	}
	if freed := env.release("requests/1/4"); fmt.Sprint(freed) != "[storage_auth]" {
		t.Errorf("release = %v, want [storage_auth]", freed)
	}
	if err := env.check(context.Background()); err != nil {
		t.Errorf("check after the last release: %v", err)
	}
	want := []change{{"model_auth", true}, {"model_auth", false}, {"storage_auth", true}, {"storage_auth", false}}
	if fmt.Sprint(changes) != fmt.Sprint(want) {
		t.Errorf("hook calls = %v, want %v", changes, want)
	}
}

// scriptedEngine fails with errs in turn, then answers res; a nil error in errs blocks until
// the request's context ends (a model slower than the request timeout).
type scriptedEngine struct {
	mu    sync.Mutex
	errs  []error
	block int
	res   *engine.Result
	calls int
}

func (s *scriptedEngine) Evaluate(ctx context.Context, _ engine.Task) (*engine.Result, error) {
	s.mu.Lock()
	s.calls++
	if s.block > 0 {
		s.block--
		s.mu.Unlock()
		<-ctx.Done()
		return nil, fmt.Errorf("model call abandoned: %w", ctx.Err())
	}
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	return s.res, nil
}

func handleFixture(t *testing.T, eng judging.Evaluator, mut func(*Config)) (*Pipeline, *flakyPublisher, *consumer.Message) {
	t.Helper()
	rs := &engine.Ruleset{ID: "rs", Version: "1", Rules: []engine.Rule{{RuleID: "r1", RuleText: "text"}}}
	static, err := registry.NewStatic(rs)
	if err != nil {
		t.Fatal(err)
	}
	serde, err := schemas.NewSerde(context.Background(), schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pub := &flakyPublisher{}
	cfg := Config{Judging: judging.Config{Engine: eng, Rulesets: static}, Serde: serde, Publisher: pub, CacheEntries: -1}
	if mut != nil {
		mut(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req := &schemas.Request{RequestID: "req-1", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"}, TextInput: ptr("hello"), SubmittedAt: time.Now()}
	m := requestMessage(t, serde, req)
	m.Partition, m.Offset = 2, 7
	return p, pub, m
}

func passResult() *engine.Result {
	pass := true
	return &engine.Result{RulesetID: "rs", Model: "m", Rules: []engine.Verdict{{RuleID: "r1", Type: verdict.Boolean, DataSufficiency: true, Rationale: "x", BooleanOutput: &pass, Evidences: []verdict.Evidence{}}}}
}

// TestEnvironmentFaultHoldsThenResumes: a refused API key is never the message's fault: the
// message is retried (never permanent), readiness fails naming the cause while it lasts, and
// the first request past it clears the fault.
func TestEnvironmentFaultHoldsThenResumes(t *testing.T) {
	refused := &adapterFault{cause: "model_auth", kind: engine.ErrLLMUnavailable}
	eng := &scriptedEngine{errs: []error{refused, refused, refused}, res: passResult()}
	active := map[string]bool{}
	var mu sync.Mutex
	p, pub, m := handleFixture(t, eng, func(c *Config) {
		c.Hooks.EnvironmentFault = func(cause string, on bool) { mu.Lock(); active[cause] = on; mu.Unlock() }
	})
	for attempt := 1; attempt <= 3; attempt++ {
		err := p.Handle(context.Background(), m)
		if _, permanent := judging.MessageFault(err); err == nil || permanent {
			t.Fatalf("attempt %d with the key refused: %v, want a transient error", attempt, err)
		}
		if err := p.EnvironmentCheck(context.Background()); err == nil || !strings.Contains(err.Error(), "model_auth") {
			t.Fatalf("readiness while the key is refused = %v, want it to name model_auth", err)
		}
		if !active["model_auth"] {
			t.Fatal("the environment-fault hook does not report model_auth active")
		}
	}
	if err := p.Handle(context.Background(), m); err != nil {
		t.Fatalf("once the key is accepted: %v", err)
	}
	if err := p.EnvironmentCheck(context.Background()); err != nil {
		t.Errorf("readiness after the fault cleared: %v", err)
	}
	if active["model_auth"] {
		t.Error("the environment-fault hook still reports model_auth active")
	}
	if len(pub.written) != 1 || eng.calls != 4 {
		t.Errorf("%d writes and %d engine calls, want 1 and 4", len(pub.written), eng.calls)
	}
}

// TestRequestTimeoutIsBounded: a request that runs out of the request timeout is retried up to
// TimeoutAttempts times, then dead-lettered with reason timeout after its failed summary is
// published; readiness is not held by it.
func TestRequestTimeoutIsBounded(t *testing.T) {
	eng := &scriptedEngine{block: 100}
	p, pub, m := handleFixture(t, eng, func(c *Config) {
		c.RequestTimeout = 20 * time.Millisecond
		c.TimeoutAttempts = 3
	})
	for attempt := 1; attempt <= 2; attempt++ {
		err := p.Handle(context.Background(), m)
		if _, permanent := judging.MessageFault(err); err == nil || permanent {
			t.Fatalf("attempt %d: %v, want a transient error", attempt, err)
		}
	}
	if err := p.EnvironmentCheck(context.Background()); err != nil {
		t.Errorf("readiness held by a request's timeouts: %v", err)
	}
	err := p.Handle(context.Background(), m)
	if reason, _ := judging.MessageFault(err); reason != string(schemas.ReasonTimeout) {
		t.Fatalf("attempt 3: %v, want reason timeout", err)
	}
	var a interface{ Attempts() int }
	if !strings.Contains(err.Error(), "3 attempts") || !errors.As(err, &a) || a.Attempts() != 3 {
		t.Errorf("error %q does not say how many attempts (3)", err)
	}
	if len(pub.written) != 1 || len(pub.written[0]) != 1 || !strings.HasPrefix(string(pub.written[0][0].Value), "failed/") {
		t.Errorf("written %v, want one failed summary", pub.written)
	}
	if eng.calls != 3 {
		t.Errorf("engine called %d times, want 3", eng.calls)
	}
	if len(p.timeouts) != 0 {
		t.Errorf("timeout counts kept after the message was dead-lettered: %v", p.timeouts)
	}
}

// TestTimeoutCountsEndWithTheHandling: a message that timed out and was then given up at a
// drain (a rebalance moved its partition to another replica, which judges it) leaves no count
// behind: ReleaseHolds forgets it when the handling ends, however it ends.
func TestTimeoutCountsEndWithTheHandling(t *testing.T) {
	eng := &scriptedEngine{block: 100}
	p, _, m := handleFixture(t, eng, func(c *Config) {
		c.RequestTimeout = 20 * time.Millisecond
		c.TimeoutAttempts = 3
	})
	handle := consumer.Chain(p.Handle, p.ReleaseHolds)
	err := handle(context.Background(), m)
	if _, permanent := judging.MessageFault(err); err == nil || permanent {
		t.Fatalf("a timed-out attempt: %v, want a transient error", err)
	}
	p.timeoutsMu.Lock()
	defer p.timeoutsMu.Unlock()
	if len(p.timeouts) != 0 {
		t.Errorf("timeout counts kept after the message's handling ended: %v", p.timeouts)
	}
}

// TestEnvironmentFaultOutlastsOtherMessages: while a refused key holds one message, another
// message dead-lettered for its own fault does not clear the fault (the alert would never see
// it last); the hold ends when the held message's handling ends, here given up at a drain.
func TestEnvironmentFaultOutlastsOtherMessages(t *testing.T) {
	refused := &adapterFault{cause: "model_auth", kind: engine.ErrLLMUnavailable}
	eng := &scriptedEngine{errs: []error{refused, refused}, res: passResult()}
	p, _, held := handleFixture(t, eng, nil)
	// The retry loop around the held message gives up after two attempts, as it does when
	// the consumer starts draining.
	attempts := 0
	abandoned := p.ReleaseHolds(func(ctx context.Context, m *consumer.Message) error {
		var err error
		for range 2 {
			attempts++
			if err = p.Handle(ctx, m); err == nil {
				return nil
			}
			if attempts == 1 {
				junk := &consumer.Message{Topic: "requests", Partition: 0, Offset: 3, Value: []byte("not avro")}
				if _, permanent := judging.MessageFault(p.Handle(ctx, junk)); !permanent {
					t.Fatal("an undecodable message is not a message fault")
				}
				if err := p.EnvironmentCheck(ctx); err == nil || !strings.Contains(err.Error(), "model_auth") {
					t.Fatalf("readiness after another message was dead-lettered = %v, want model_auth still held", err)
				}
			}
		}
		return err
	})
	if err := abandoned(context.Background(), held); err == nil {
		t.Fatal("the held message succeeded with the key refused")
	}
	if err := p.EnvironmentCheck(context.Background()); err != nil {
		t.Errorf("readiness after the held message was given up: %v", err)
	}
}
