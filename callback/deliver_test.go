package callback

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// Deliver tries a notification in the caller's goroutine and says how it
// ended: delivered, given up (never to be tried again) or interrupted (to be
// tried again by whoever holds it durably). A wait to retry ends at once when
// stopRetrying closes; an attempt under way does not.
func TestDeliver(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	tests := []struct {
		name         string
		statuses     []int
		privateOK    bool
		maxAttempts  int
		baseDelay    time.Duration
		stopRetrying <-chan struct{}
		cancelled    bool

		wantDelivered, wantInterrupted, wantRefused bool
		wantAttempts, wantRequests                  int
	}{
		{name: "delivered after a transient failure", statuses: []int{503, 200}, privateOK: true, wantDelivered: true, wantAttempts: 2, wantRequests: 2},
		{name: "a 4xx is given up at once", statuses: []int{400}, privateOK: true, wantAttempts: 1, wantRequests: 1},
		{name: "out of attempts", statuses: []int{503}, privateOK: true, maxAttempts: 3, wantAttempts: 3, wantRequests: 3},
		{name: "an internal address is refused without a request", statuses: []int{200}, wantRefused: true, wantRequests: 0},
		{name: "the wait to retry ends when stopRetrying closes", statuses: []int{503, 200}, privateOK: true, baseDelay: time.Hour, stopRetrying: closed, wantInterrupted: true, wantAttempts: 1, wantRequests: 1},
		{name: "an attempt finishes although stopRetrying is closed", statuses: []int{204}, privateOK: true, stopRetrying: closed, wantDelivered: true, wantAttempts: 1, wantRequests: 1},
		{name: "a cancelled context interrupts", statuses: []int{200}, privateOK: true, cancelled: true, wantInterrupted: true, wantAttempts: 1, wantRequests: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, tc.statuses...)
			var told []Delivery
			cfg := Config{
				Secret: testSecret, AllowPrivate: tc.privateOK, MaxAttempts: tc.maxAttempts,
				BaseDelay: 5 * time.Millisecond, MaxDelay: 20 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				OnDone: func(d Delivery) { told = append(told, d) },
			}
			if tc.baseDelay > 0 {
				cfg.BaseDelay, cfg.MaxDelay = tc.baseDelay, tc.baseDelay
			}
			n, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			start := time.Now()
			d := n.Deliver(ctx, rcv.srv.URL+"/hook", []byte(`{"a":1}`), "t/req-1", tc.stopRetrying)
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("Deliver took %s", took)
			}
			if d.Delivered != tc.wantDelivered || d.Interrupted() != tc.wantInterrupted || errors.Is(d.Err, ErrTargetRefused) != tc.wantRefused {
				t.Errorf("outcome %+v: delivered %v interrupted %v refused %v, want %v %v %v",
					d, d.Delivered, d.Interrupted(), errors.Is(d.Err, ErrTargetRefused), tc.wantDelivered, tc.wantInterrupted, tc.wantRefused)
			}
			if d.Delivered != (d.Err == nil) {
				t.Errorf("delivered %v with error %v", d.Delivered, d.Err)
			}
			if d.Attempts != tc.wantAttempts || len(rcv.requests()) != tc.wantRequests {
				t.Errorf("%d attempts, %d requests received; want %d and %d", d.Attempts, len(rcv.requests()), tc.wantAttempts, tc.wantRequests)
			}
			if len(told) != 1 || told[0].EventID != "t/req-1" || told[0].Delivered != d.Delivered {
				t.Errorf("OnDone told %+v, want the one outcome", told)
			}
			for _, r := range rcv.requests() {
				if r.header.Get(HeaderEventID) != "t/req-1" {
					t.Errorf("%s: %q", HeaderEventID, r.header.Get(HeaderEventID))
				}
				if err := Verify(testSecret, r.header.Get(HeaderTimestamp), r.header.Get(HeaderSignature), r.body, time.Now(), time.Minute); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
