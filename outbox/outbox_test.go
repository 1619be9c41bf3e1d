package outbox

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"rulevalidator/callback"
	"rulevalidator/consumer"
	"rulevalidator/producer"
	"rulevalidator/stream"
)

var secret = []byte("0123456789abcdef0123456789abcdef-outbox")

// receiver answers each POST with the next scripted status (the last one
// repeats) and keeps what it received.
type receiver struct {
	mu       sync.Mutex
	statuses []int
	got      []*http.Request
	bodies   [][]byte
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.got = append(r.got, req)
	r.bodies = append(r.bodies, body)
	status := r.statuses[min(len(r.got), len(r.statuses))-1]
	r.mu.Unlock()
	w.WriteHeader(status)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// The handler's result decides the commit: nil (committed) once a callback is
// delivered or given up for good, an error wrapping consumer.ErrDraining (not
// committed, redelivered, the consumer goes on) when the drain or shutdown
// interrupts it, and never a permanent error.
func TestHandlerCommitSemantics(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	tests := []struct {
		name      string
		statuses  []int
		noURL     bool
		draining  <-chan struct{}
		cancelled bool

		wantCommit   bool
		wantOutcome  string // delivered, given_up, interrupted
		wantRequests int
	}{
		{name: "delivered", statuses: []int{200}, wantCommit: true, wantOutcome: "delivered", wantRequests: 1},
		{name: "delivered after retrying", statuses: []int{503, 429, 204}, wantCommit: true, wantOutcome: "delivered", wantRequests: 3},
		{name: "4xx: given up", statuses: []int{410}, wantCommit: true, wantOutcome: "given_up", wantRequests: 1},
		{name: "out of attempts: given up", statuses: []int{503}, wantCommit: true, wantOutcome: "given_up", wantRequests: 3},
		{name: "no URL: given up", statuses: []int{200}, noURL: true, wantCommit: true, wantOutcome: "given_up", wantRequests: 0},
		{name: "draining while waiting to retry: not committed", statuses: []int{503}, draining: closed, wantOutcome: "interrupted", wantRequests: 1},
		{name: "draining does not cut a delivery short", statuses: []int{200}, draining: closed, wantCommit: true, wantOutcome: "delivered", wantRequests: 1},
		{name: "drain deadline: not committed", statuses: []int{200}, cancelled: true, wantOutcome: "interrupted", wantRequests: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rcv := &receiver{statuses: tc.statuses}
			srv := httptest.NewServer(rcv)
			defer srv.Close()
			var outcomes []callback.Delivery
			var mu sync.Mutex
			// While draining, a wait to retry must end at once, whatever the backoff.
			delay := 5 * time.Millisecond
			if tc.draining != nil {
				delay = time.Hour
			}
			n, err := callback.New(callback.Config{
				Secret: secret, AllowPrivate: true, MaxAttempts: 3, BaseDelay: delay, MaxDelay: delay,
				Logger: slog.New(slog.DiscardHandler),
				OnDone: func(d callback.Delivery) { mu.Lock(); outcomes = append(outcomes, d); mu.Unlock() },
			})
			if err != nil {
				t.Fatal(err)
			}
			h := handler{d: n, log: slog.New(slog.DiscardHandler), draining: func(context.Context) <-chan struct{} { return tc.draining }}
			m := &consumer.Message{Topic: "rv.callbacks", Partition: 1, Offset: 7, Key: []byte("acme/req-1"), Value: []byte(`{"request_id":"req-1"}`),
				Headers: []stream.Header{{Key: producer.HeaderEventID, Value: []byte("acme/req-1")}}}
			if !tc.noURL {
				m.Headers = append(m.Headers, stream.Header{Key: producer.HeaderCallbackURL, Value: []byte(srv.URL + "/hook")})
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			start := time.Now()
			err = h.handle(ctx, m)
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the handler took %s", took)
			}
			if (err == nil) != tc.wantCommit {
				t.Fatalf("handler returned %v; want commit %v", err, tc.wantCommit)
			}
			if err != nil && !errors.Is(err, consumer.ErrDraining) {
				t.Errorf("handler error %v does not wrap consumer.ErrDraining: the consumer would stop", err)
			}
			if _, permanent := consumer.PermanentReason(err); permanent {
				t.Errorf("handler error %v is permanent", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(outcomes) != 1 {
				t.Fatalf("%d outcomes, want 1", len(outcomes))
			}
			d := outcomes[0]
			got := "given_up"
			switch {
			case d.Delivered:
				got = "delivered"
			case d.Interrupted():
				got = "interrupted"
			}
			if got != tc.wantOutcome || d.EventID != "acme/req-1" {
				t.Errorf("outcome %s for %q (%+v), want %s for acme/req-1", got, d.EventID, d, tc.wantOutcome)
			}
			if rcv.count() != tc.wantRequests {
				t.Errorf("the receiver saw %d requests, want %d", rcv.count(), tc.wantRequests)
			}
			for i, req := range rcv.got {
				if req.Header.Get(callback.HeaderEventID) != "acme/req-1" {
					t.Errorf("request %d: event id %q", i, req.Header.Get(callback.HeaderEventID))
				}
				if err := callback.Verify(secret, req.Header.Get(callback.HeaderTimestamp), req.Header.Get(callback.HeaderSignature), rcv.bodies[i], time.Now(), time.Minute); err != nil {
					t.Errorf("request %d: %v", i, err)
				}
			}
		})
	}
}

// panickingDeliverer fails as a bug in delivery would.
type panickingDeliverer struct{}

func (panickingDeliverer) Deliver(context.Context, string, []byte, string, <-chan struct{}) callback.Delivery {
	panic("a bug in delivery")
}

// deadLetters records what is dead-lettered; it fails the first failFirst publishes.
type deadLetters struct {
	mu        sync.Mutex
	failFirst int
	reasons   []string
	offsets   []int64
}

func (d *deadLetters) PublishDeadLetter(_ context.Context, m *consumer.Message, reason string, _ error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failFirst > 0 {
		d.failFirst--
		return errors.New("broker unavailable")
	}
	d.reasons, d.offsets = append(d.reasons, reason), append(d.offsets, m.Offset)
	return nil
}

// A record whose delivery panics is handled as a request that panics is:
// dead-lettered with reason internal (the publish retried while it fails) and
// committed, instead of stopping the consumer, which would restart the
// service onto the same record forever.
func TestHandlerDeadLettersAPanickingDelivery(t *testing.T) {
	dl := &deadLetters{failFirst: 1}
	h := Handler(panickingDeliverer{}, dl, consumer.RetryPolicy{Initial: time.Millisecond, Max: time.Millisecond}, slog.New(slog.DiscardHandler))
	m := &consumer.Message{Topic: "rv.callbacks", Partition: 0, Offset: 41, Key: []byte("acme/req-1"), Value: []byte(`{}`),
		Headers: []stream.Header{{Key: producer.HeaderCallbackURL, Value: []byte("https://hooks.example.com/rv")}}}
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Fatalf("the panic escaped the handler: %v", v)
			}
		}()
		err = h(t.Context(), m)
	}()
	if err != nil {
		t.Fatalf("handler returned %v; want nil, the record dead-lettered and committed", err)
	}
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if len(dl.reasons) != 1 || dl.reasons[0] != consumer.ReasonInternal || dl.offsets[0] != 41 {
		t.Errorf("dead-lettered %v at %v, want offset 41 once with reason %q", dl.reasons, dl.offsets, consumer.ReasonInternal)
	}
}
