package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var errFlaky = errors.New("dependency unavailable")

func testMessage() *Message {
	return &Message{Topic: "requests", Partition: 2, Offset: 41, Value: []byte("v")}
}

// fastRetry keeps unit tests quick.
var fastRetry = RetryPolicy{Initial: time.Millisecond, Max: 4 * time.Millisecond}

func TestChainOrder(t *testing.T) {
	var trace []string
	mark := func(name string) Middleware {
		return func(next Handler) Handler {
			return func(ctx context.Context, m *Message) error {
				trace = append(trace, name+" in")
				err := next(ctx, m)
				trace = append(trace, name+" out")
				return err
			}
		}
	}
	h := Chain(func(context.Context, *Message) error { trace = append(trace, "handler"); return nil }, mark("a"), mark("b"))
	if err := h(context.Background(), testMessage()); err != nil {
		t.Fatal(err)
	}
	want := "a in,b in,handler,b out,a out"
	if got := strings.Join(trace, ","); got != want {
		t.Errorf("trace = %s, want %s", got, want)
	}
}

func TestPermanentReason(t *testing.T) {
	cause := errors.New("bad magic byte")
	tests := []struct {
		name       string
		err        error
		wantReason string
		wantOK     bool
	}{
		{"nil", nil, "", false},
		{"plain error is transient", cause, "", false},
		{"marked", Permanent("undecodable", cause), "undecodable", true},
		{"marked and wrapped", fmt.Errorf("decoding: %w", Permanent("undecodable", cause)), "undecodable", true},
		{"empty reason gets a label", Permanent("", cause), "unspecified", true},
		{"no cause", Permanent("unknown_ruleset", nil), "unknown_ruleset", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, ok := PermanentReason(tt.err)
			if reason != tt.wantReason || ok != tt.wantOK {
				t.Errorf("PermanentReason(%v) = %q, %v; want %q, %v", tt.err, reason, ok, tt.wantReason, tt.wantOK)
			}
		})
	}
	if err := Permanent("undecodable", cause); !errors.Is(err, cause) || !strings.Contains(err.Error(), "bad magic byte") {
		t.Errorf("Permanent hides its cause: %v", err)
	}
}

func TestRecover(t *testing.T) {
	sentinel := errors.New("nil map write")
	tests := []struct {
		name    string
		handler Handler
		check   func(t *testing.T, err error)
	}{
		{"no panic passes the result through", func(context.Context, *Message) error { return errFlaky },
			func(t *testing.T, err error) {
				if !errors.Is(err, errFlaky) {
					t.Errorf("err = %v, want %v", err, errFlaky)
				}
				if _, ok := PermanentReason(err); ok {
					t.Error("a transient error became permanent")
				}
			}},
		{"panic with a value", func(context.Context, *Message) error { panic("boom") },
			func(t *testing.T, err error) {
				if reason, ok := PermanentReason(err); !ok || reason != ReasonInternal {
					t.Errorf("PermanentReason = %q, %v; want %q", reason, ok, ReasonInternal)
				}
				if !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "partition 2 offset 41") {
					t.Errorf("err %q should name the panic and the offset", err)
				}
			}},
		{"panic with an error", func(context.Context, *Message) error { panic(sentinel) },
			func(t *testing.T, err error) {
				if !errors.Is(err, sentinel) {
					t.Errorf("err = %v, want it to wrap %v", err, sentinel)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, Recover(nil)(tt.handler)(context.Background(), testMessage()))
		})
	}
}

func TestRetry(t *testing.T) {
	failTimes := func(n int, calls *int) Handler {
		return func(context.Context, *Message) error {
			*calls++
			if *calls <= n {
				return errFlaky
			}
			return nil
		}
	}
	t.Run("transient errors are retried until success", func(t *testing.T) {
		calls := 0
		if err := Retry(fastRetry, nil)(failTimes(3, &calls))(context.Background(), testMessage()); err != nil {
			t.Fatalf("err = %v", err)
		}
		if calls != 4 {
			t.Errorf("calls = %d, want 4", calls)
		}
	})
	t.Run("permanent errors return at once", func(t *testing.T) {
		calls := 0
		perm := Permanent("undecodable", errors.New("not Avro"))
		h := func(context.Context, *Message) error { calls++; return perm }
		if err := Retry(fastRetry, nil)(h)(context.Background(), testMessage()); err != perm {
			t.Fatalf("err = %v, want %v", err, perm)
		}
		if calls != 1 {
			t.Errorf("calls = %d, want 1", calls)
		}
	})
	t.Run("retrying stops when the context ends, the error still transient", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		h := func(context.Context, *Message) error {
			calls++
			if calls == 3 {
				cancel()
			}
			return errFlaky
		}
		err := Retry(fastRetry, nil)(h)(ctx, testMessage())
		if !errors.Is(err, errFlaky) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want it to wrap %v and context.Canceled", err, errFlaky)
		}
		if _, ok := PermanentReason(err); ok {
			t.Error("giving up made the error permanent")
		}
		if calls != 3 {
			t.Errorf("calls = %d, want 3", calls)
		}
	})
	t.Run("a long backoff wakes when the consumer starts draining", func(t *testing.T) {
		// On a synctest clock: the drain begins once the retry is asleep in its hour-long
		// backoff, and the retry must return without the clock moving on.
		synctest.Test(t, func(t *testing.T) {
			draining := make(chan struct{})
			ctx := context.WithValue(context.Background(), drainingKey{}, (<-chan struct{})(draining))
			calls := 0
			h := func(context.Context, *Message) error { calls++; return errFlaky }
			done := make(chan error, 1)
			go func() { done <- Retry(RetryPolicy{Initial: time.Hour, Max: time.Hour}, nil)(h)(ctx, testMessage()) }()
			synctest.Wait()
			began := time.Now()
			close(draining)
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("the retry kept sleeping after the drain began")
			}
			if !errors.Is(err, errFlaky) || !errors.Is(err, ErrDraining) {
				t.Fatalf("err = %v, want it to wrap %v and ErrDraining", err, errFlaky)
			}
			if _, ok := PermanentReason(err); ok {
				t.Error("the drain made the error permanent")
			}
			if slept := time.Since(began); slept != 0 {
				t.Errorf("the retry slept %s after the drain began", slept)
			}
			if calls != 1 {
				t.Errorf("calls = %d, want 1", calls)
			}
		})
	})
	t.Run("a message given up to the drain is not retried", func(t *testing.T) {
		calls := 0
		drained := fmt.Errorf("callback interrupted: %w", ErrDraining)
		h := func(context.Context, *Message) error { calls++; return drained }
		if err := Retry(RetryPolicy{Initial: time.Hour}, nil)(h)(context.Background(), testMessage()); err != drained {
			t.Fatalf("err = %v, want %v", err, drained)
		}
		if calls != 1 {
			t.Errorf("calls = %d, want 1", calls)
		}
	})
	t.Run("MaxElapsed gives up", func(t *testing.T) {
		calls := 0
		p := RetryPolicy{Initial: 5 * time.Millisecond, Max: 5 * time.Millisecond, MaxElapsed: 30 * time.Millisecond}
		err := Retry(p, nil)(failTimes(1000, &calls))(context.Background(), testMessage())
		if !errors.Is(err, errFlaky) || !strings.Contains(err.Error(), "giving up after") {
			t.Fatalf("err = %v, want a give-up wrapping %v", err, errFlaky)
		}
		if calls < 2 || calls > 10 {
			t.Errorf("calls = %d, want a handful within 30ms of 2.5-5ms waits", calls)
		}
	})
}

func TestRetryPolicyDefaults(t *testing.T) {
	p := RetryPolicy{}.withDefaults()
	if p.Initial != 500*time.Millisecond || p.Max != 30*time.Second || p.MaxElapsed != 0 {
		t.Fatalf("defaults = %+v", p)
	}
	if p := (RetryPolicy{Initial: time.Minute, Max: time.Second}).withDefaults(); p.Max != time.Minute {
		t.Errorf("Max below Initial: %+v, want Max raised to Initial", p)
	}
}

// deadLetters records dead-lettered messages; it fails the first failFirst publications.
type deadLetters struct {
	mu        sync.Mutex
	failFirst int
	attempts  int
	got       []deadLetter
}

type deadLetter struct {
	partition int
	offset    int64
	reason    string
	cause     error
}

var errDeadLetterDown = errors.New("dead-letter topic unavailable")

func (d *deadLetters) PublishDeadLetter(_ context.Context, m *Message, reason string, cause error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.attempts++
	if d.attempts <= d.failFirst {
		return errDeadLetterDown
	}
	d.got = append(d.got, deadLetter{partition: m.Partition, offset: m.Offset, reason: reason, cause: cause})
	return nil
}

func (d *deadLetters) published() []deadLetter {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]deadLetter(nil), d.got...)
}

func TestDeadLetter(t *testing.T) {
	notAvro := errors.New("not Avro")
	t.Run("permanent errors are published and count as handled", func(t *testing.T) {
		dl := &deadLetters{}
		h := func(context.Context, *Message) error { return Permanent("undecodable", notAvro) }
		if err := DeadLetter(dl, nil)(h)(context.Background(), testMessage()); err != nil {
			t.Fatalf("err = %v, want nil", err)
		}
		got := dl.published()
		if len(got) != 1 || got[0].reason != "undecodable" || got[0].offset != 41 || !errors.Is(got[0].cause, notAvro) {
			t.Fatalf("published %+v, want offset 41 with reason undecodable and its cause", got)
		}
	})
	t.Run("transient errors and successes are not published", func(t *testing.T) {
		dl := &deadLetters{}
		for _, want := range []error{errFlaky, nil} {
			h := func(context.Context, *Message) error { return want }
			if err := DeadLetter(dl, nil)(h)(context.Background(), testMessage()); err != want {
				t.Errorf("err = %v, want %v", err, want)
			}
		}
		if got := dl.published(); len(got) != 0 {
			t.Errorf("published %+v, want nothing", got)
		}
	})
	t.Run("a failed publish is a transient error", func(t *testing.T) {
		dl := &deadLetters{failFirst: 1}
		h := func(context.Context, *Message) error { return Permanent("undecodable", notAvro) }
		err := DeadLetter(dl, nil)(h)(context.Background(), testMessage())
		if !errors.Is(err, errDeadLetterDown) {
			t.Fatalf("err = %v, want it to wrap %v", err, errDeadLetterDown)
		}
		if _, ok := PermanentReason(err); ok {
			t.Errorf("a failed publish is permanent: %v", err)
		}
		if !strings.Contains(err.Error(), "not Avro") || !strings.Contains(err.Error(), "offset 41") {
			t.Errorf("err %q should quote the cause and name the offset", err)
		}
	})
}

// TestRecommendedChain checks the documented composition: a panicking handler is
// dead-lettered as "internal", and a dead-letter topic that fails once delays that (the
// handler runs again) rather than losing the message.
func TestRecommendedChain(t *testing.T) {
	dl := &deadLetters{failFirst: 1}
	calls := 0
	h := func(context.Context, *Message) error { calls++; panic("nil pointer") }
	chained := Chain(h, Retry(fastRetry, nil), DeadLetter(dl, nil), Recover(nil))
	if err := chained(context.Background(), testMessage()); err != nil {
		t.Fatalf("err = %v, want nil", err)
	}
	got := dl.published()
	if len(got) != 1 || got[0].reason != ReasonInternal {
		t.Fatalf("published %+v, want one with reason %q", got, ReasonInternal)
	}
	if calls != 2 {
		t.Errorf("handler calls = %d, want 2 (the first dead-letter publish failed)", calls)
	}
}

// One injected predicate decides for both middlewares: what it calls the message's fault is
// dead-lettered with its reason at the first attempt, unmarked; what it does not is retried.
func TestOneFaultPredicateDecidesRetryAndDeadLetter(t *testing.T) {
	badInput := errors.New("bad input")
	fault := func(err error) (string, bool) {
		if errors.Is(err, badInput) {
			return "invalid_input", true
		}
		return "", false
	}
	policy := RetryPolicy{Initial: time.Millisecond, Max: time.Millisecond, MaxElapsed: time.Second}
	for _, tc := range []struct {
		name         string
		fails        []error // what each attempt returns, then nil
		wantAttempts int
		wantReason   string
	}{
		{"the message's fault", []error{badInput}, 1, "invalid_input"},
		{"the environment's, then fine", []error{errFlaky, errFlaky}, 3, ""},
		{"a mark the predicate does not share is not its business", []error{Permanent("undecodable", errFlaky), Permanent("undecodable", errFlaky)}, 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dl := &deadLetters{}
			attempts := 0
			h := func(context.Context, *Message) error {
				attempts++
				if attempts <= len(tc.fails) {
					return tc.fails[attempts-1]
				}
				return nil
			}
			handler := Chain(h, RetryWithFilter(policy, fault, nil), DeadLetterWithFilter(dl, fault, nil))
			if err := handler(context.Background(), testMessage()); err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if attempts != tc.wantAttempts {
				t.Errorf("%d attempts, want %d", attempts, tc.wantAttempts)
			}
			got := dl.published()
			switch {
			case tc.wantReason == "" && len(got) != 0:
				t.Errorf("dead-lettered %+v, want nothing", got)
			case tc.wantReason != "" && (len(got) != 1 || got[0].reason != tc.wantReason):
				t.Errorf("dead-lettered %+v, want one with reason %s", got, tc.wantReason)
			}
		})
	}
}
