package backoff

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var errFlaky = errors.New("flaky")

func TestDelayDoublesUpToMaxWithEqualJitter(t *testing.T) {
	tests := []struct {
		name    string
		p       Policy
		attempt int
		ceiling time.Duration
	}{
		{"first", Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}, 1, 100 * time.Millisecond},
		{"doubled", Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}, 4, 800 * time.Millisecond},
		{"capped", Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}, 7, 5 * time.Second},
		{"no overflow", Policy{Initial: 500 * time.Millisecond, Max: 30 * time.Second}, 1000, 30 * time.Second},
		{"Max below Initial is Initial", Policy{Initial: time.Second, Max: time.Millisecond}, 5, time.Second},
		{"no Max is Initial", Policy{Initial: time.Second}, 3, time.Second},
		{"zero", Policy{}, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.ceiling(tt.attempt); got != tt.ceiling {
				t.Fatalf("ceiling(%d) = %s, want %s", tt.attempt, got, tt.ceiling)
			}
			var largest time.Duration
			for range 200 {
				d := tt.p.Delay(tt.attempt)
				if d < tt.ceiling/2 || d > tt.ceiling {
					t.Fatalf("Delay(%d) = %s, want within [%s, %s]", tt.attempt, d, tt.ceiling/2, tt.ceiling)
				}
				largest = max(largest, d)
			}
			// 200 draws all in the lower quarter of the range would mean no jitter upwards.
			if tt.ceiling > time.Millisecond && largest < tt.ceiling*3/4 {
				t.Errorf("Delay(%d): largest of 200 draws %s, want some above %s", tt.attempt, largest, tt.ceiling*3/4)
			}
		})
	}
}

// recorder fails op a scripted number of times and records the waits asked for, without
// sleeping.
type recorder struct {
	waits []time.Duration
}

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.waits = append(r.waits, d)
	return context.Cause(ctx)
}

func TestRetry(t *testing.T) {
	permanent := errors.New("refused")
	tests := []struct {
		name string
		p    Policy
		// errs are op's answers, one per attempt; the last repeats.
		errs []error
		opts []Option

		wantErr      error // nil: success; else what errors.Is must find
		wantReason   error // for a *GiveUpError
		wantAttempts int
		wantWaits    []time.Duration // exact; nil: checked by wantWaitsIn
		wantWaitsIn  [][2]time.Duration
	}{
		{
			name: "succeeds after transient failures",
			p:    Policy{Initial: 100 * time.Millisecond, Max: time.Second},
			errs: []error{errFlaky, errFlaky, nil}, wantAttempts: 3,
			wantWaitsIn: [][2]time.Duration{{50 * time.Millisecond, 100 * time.Millisecond}, {100 * time.Millisecond, 200 * time.Millisecond}},
		},
		{
			name: "a permanent error returns itself at once",
			p:    Policy{Initial: time.Second},
			errs: []error{Permanent(permanent)}, wantErr: permanent, wantAttempts: 1, wantWaits: []time.Duration{},
		},
		{
			name: "attempts spent",
			p:    Policy{Initial: time.Second, Max: time.Minute, MaxAttempts: 3},
			errs: []error{errFlaky}, wantErr: errFlaky, wantReason: ErrAttempts, wantAttempts: 3,
			wantWaitsIn: [][2]time.Duration{{500 * time.Millisecond, time.Second}, {time.Second, 2 * time.Second}},
		},
		{
			name: "a Retry-After longer than the backoff is honoured, above Max too",
			p:    Policy{Initial: 100 * time.Millisecond, Max: time.Second},
			errs: []error{RetryAfter(errFlaky, 45*time.Second), nil}, wantAttempts: 2,
			wantWaits: []time.Duration{45 * time.Second},
		},
		{
			name: "a Retry-After shorter than the backoff waits the backoff",
			p:    Policy{Initial: 10 * time.Second, Max: time.Minute},
			errs: []error{RetryAfter(errFlaky, time.Millisecond), nil}, wantAttempts: 2,
			wantWaitsIn: [][2]time.Duration{{5 * time.Second, 10 * time.Second}},
		},
		{
			name: "a Retry-After past the budget gives up at once",
			p:    Policy{Initial: 100 * time.Millisecond, MaxElapsed: time.Minute},
			errs: []error{RetryAfter(errFlaky, time.Hour)}, wantErr: errFlaky, wantReason: ErrElapsed, wantAttempts: 1,
			wantWaits: []time.Duration{},
		},
		{
			name: "a wait is trimmed to the budget left",
			p:    Policy{Initial: time.Hour, MaxElapsed: 2 * time.Second},
			errs: []error{errFlaky, nil}, wantAttempts: 2,
			wantWaitsIn: [][2]time.Duration{{time.Second, 2 * time.Second}},
		},
		{
			name: "a budget spent before the loop gives up after one attempt",
			p:    Policy{Initial: time.Millisecond, MaxElapsed: time.Second},
			errs: []error{errFlaky}, opts: []Option{Since(time.Now().Add(-time.Hour))},
			wantErr: errFlaky, wantReason: ErrElapsed, wantAttempts: 1, wantWaits: []time.Duration{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			attempts := 0
			var notified []time.Duration
			opts := append([]Option{WithSleep(rec.sleep), OnRetry(func(n int, wait time.Duration, err error) {
				if n != attempts || !errors.Is(err, errFlaky) {
					t.Errorf("OnRetry(%d, %s, %v) after attempt %d", n, wait, err, attempts)
				}
				notified = append(notified, wait)
			})}, tt.opts...)
			err := tt.p.Retry(context.Background(), func(n int) error {
				attempts++
				if n != attempts {
					t.Errorf("attempt numbered %d, want %d", n, attempts)
				}
				return tt.errs[min(n, len(tt.errs))-1]
			}, opts...)

			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("Retry = %v, want success", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("Retry = %v, want it to wrap %v", err, tt.wantErr)
			}
			gu, isGiveUp := errors.AsType[*GiveUpError](err)
			if isGiveUp != (tt.wantReason != nil) {
				t.Fatalf("Retry = %v (%T), want a give-up: %v", err, err, tt.wantReason != nil)
			}
			if isGiveUp {
				if gu.Reason != tt.wantReason || gu.Attempts != tt.wantAttempts || gu.Last != errFlaky {
					t.Errorf("give-up %+v, want reason %v after %d attempts, last %v", gu, tt.wantReason, tt.wantAttempts, errFlaky)
				}
			}
			if attempts != tt.wantAttempts {
				t.Errorf("%d attempts, want %d", attempts, tt.wantAttempts)
			}
			if tt.wantWaits != nil {
				if len(rec.waits) != len(tt.wantWaits) {
					t.Fatalf("waits %v, want %v", rec.waits, tt.wantWaits)
				}
				for i := range tt.wantWaits {
					if rec.waits[i] != tt.wantWaits[i] {
						t.Errorf("waits %v, want %v", rec.waits, tt.wantWaits)
					}
				}
			} else {
				if len(rec.waits) != len(tt.wantWaitsIn) {
					t.Fatalf("waits %v, want %d within %v", rec.waits, len(tt.wantWaitsIn), tt.wantWaitsIn)
				}
				for i, in := range tt.wantWaitsIn {
					if rec.waits[i] < in[0] || rec.waits[i] > in[1] {
						t.Errorf("wait %d = %s, want within %v", i+1, rec.waits[i], in)
					}
				}
			}
			if len(notified) != len(rec.waits) {
				t.Errorf("OnRetry saw %v, the waits were %v", notified, rec.waits)
			}
		})
	}
}

// The waits end with the context or a Stop, at once, and say why; an attempt is never cut
// short by a Stop.
func TestRetryInterrupted(t *testing.T) {
	errStopped := errors.New("draining")
	t.Run("context cancelled by an attempt", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		cause := errors.New("shutting down")
		err := Policy{Initial: time.Hour}.Retry(ctx, func(int) error { cancel(cause); return errFlaky })
		gu, ok := errors.AsType[*GiveUpError](err)
		if !ok || gu.Reason != cause || gu.Attempts != 1 || !errors.Is(err, errFlaky) {
			t.Fatalf("Retry = %v, want a give-up for %v after 1 attempt, wrapping %v", err, cause, errFlaky)
		}
	})
	for _, tc := range []struct {
		name   string
		stop   bool
		reason error
	}{
		{"stop closed while waiting", true, errStopped},
		{"context cancelled while waiting", false, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				stop := make(chan struct{})
				done := make(chan error, 1)
				go func() {
					done <- Policy{Initial: time.Hour}.Retry(ctx, func(int) error { return errFlaky }, Stop(stop, errStopped))
				}()
				synctest.Wait() // asleep in its hour-long wait
				began := time.Now()
				if tc.stop {
					close(stop)
				} else {
					cancel()
				}
				err := <-done
				if slept := time.Since(began); slept != 0 {
					t.Errorf("the wait went on for %s", slept)
				}
				gu, ok := errors.AsType[*GiveUpError](err)
				if !ok || gu.Reason != tc.reason || !errors.Is(err, errFlaky) {
					t.Fatalf("Retry = %v, want a give-up for %v wrapping %v", err, tc.reason, errFlaky)
				}
			})
		})
	}
	t.Run("a closed stop lets the first attempt run", func(t *testing.T) {
		stop := make(chan struct{})
		close(stop)
		calls := 0
		err := Policy{Initial: time.Hour}.Retry(context.Background(), func(int) error { calls++; return nil }, Stop(stop, errStopped))
		if err != nil || calls != 1 {
			t.Fatalf("Retry = %v after %d calls, want success after 1", err, calls)
		}
	})
}

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(context.Background(), time.Minute); err != nil || time.Since(start) != time.Minute {
			t.Fatalf("Sleep = %v after %s, want nil after 1m", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		if err := Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Fatalf("Sleep = %v after %s, want the deadline after 1s", err, time.Since(start))
		}
		if err := Sleep(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Sleep(0) on an ended context = %v", err)
		}
	})
}

func TestGiveUpErrorMessage(t *testing.T) {
	err := &GiveUpError{Attempts: 3, Elapsed: 1234567 * time.Microsecond, Reason: ErrAttempts, Last: errFlaky}
	if got, want := err.Error(), "gave up after 3 attempts over 1.235s (attempts spent): flaky"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !strings.Contains((&GiveUpError{Attempts: 1, Reason: ErrElapsed, Last: errFlaky}).Error(), "1 attempt over") {
		t.Error("one attempt is not spelled in the singular")
	}
}

func TestMarksOfNil(t *testing.T) {
	if Permanent(nil) != nil || RetryAfter(nil, time.Second) != nil {
		t.Error("a mark on a nil error is not nil")
	}
	if RetryAfter(errFlaky, 0) != errFlaky {
		t.Error("RetryAfter without a wait changed the error")
	}
}
