// Package backoff is the service's one retry loop: capped exponential backoff with equal
// jitter, bounded by attempts and by time, honouring the wait a server asks for
// (Retry-After), with waits that end when the caller's context ends or a stop signal (a
// consumer's drain) arrives. Every component that retries does it through Policy.Retry, so
// the rules below hold everywhere:
//
//   - the wait after the n-th failed attempt is Initial·2^(n-1), capped at Max, then
//     jittered into its upper half (Jitter), so that clients failing together do not retry
//     together;
//   - a wait a server asked for (RetryAfter) is honoured: the wait is the longer of the two,
//     never shortened by Max; the caller bounds what it accepts from a server;
//   - MaxAttempts counts attempts, the first included; MaxElapsed bounds the time from the
//     first attempt to the start of the last: a wait is trimmed to what is left of it, and
//     a server asking for longer than what is left gives up at once rather than after a
//     doomed wait;
//   - an error marked Permanent, the context ending or a Stop closing ends the loop at once.
package backoff

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Policy says how a failing operation is retried. The zero value retries forever, at once;
// give Initial at least.
type Policy struct {
	// Initial is the wait after the first failed attempt; it doubles after each further one.
	Initial time.Duration
	// Max caps one wait, before jitter (a Retry-After may ask for longer). Below Initial it
	// is Initial.
	Max time.Duration
	// MaxAttempts bounds the attempts, the first included; 0 is unbounded.
	MaxAttempts int
	// MaxElapsed bounds the time from the first attempt to the start of the last; 0 is
	// unbounded.
	MaxElapsed time.Duration
}

// Delay is the wait after the n-th failed attempt (n from 1), jittered.
func (p Policy) Delay(n int) time.Duration { return Jitter(p.ceiling(n)) }

// ceiling is the wait after the n-th failure before jitter: Initial doubled n-1 times, at
// most Max.
func (p Policy) ceiling(n int) time.Duration {
	limit := max(p.Max, p.Initial)
	d := p.Initial
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Jitter picks a duration uniformly in [d/2, d] ("equal jitter"): spread enough that
// clients failing together do not retry together, yet never much shorter than the backoff.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// Sleep waits d, or until ctx ends. It returns nil after the full wait, else ctx's cause.
func Sleep(ctx context.Context, d time.Duration) error { return sleep(ctx, d, nil, nil) }

// sleep is Sleep that also ends when stop closes, returning stopCause.
func sleep(ctx context.Context, d time.Duration, stop <-chan struct{}, stopCause error) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	select {
	case <-stop:
		return stopCause
	default:
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-stop:
		return stopCause
	}
}

// Reasons a GiveUpError gives besides the context's cause and a Stop's cause.
var (
	// ErrAttempts: MaxAttempts attempts failed.
	ErrAttempts = errors.New("attempts spent")
	// ErrElapsed: MaxElapsed has passed, or a server asked to wait past it.
	ErrElapsed = errors.New("retry budget spent")
)

// GiveUpError is Retry's answer when op neither succeeded nor failed permanently.
type GiveUpError struct {
	// Attempts is how many times op ran.
	Attempts int
	// Elapsed is the time from the start of the budget (the first attempt, or Since) to now.
	Elapsed time.Duration
	// Reason is why retrying stopped: ErrAttempts, ErrElapsed, the context's cause, or the
	// cause given to Stop.
	Reason error
	// RetryAfter is the wait a server asked for that did not fit MaxElapsed; 0 otherwise.
	RetryAfter time.Duration
	// Last is op's last error, without its RetryAfter mark.
	Last error
}

func (e *GiveUpError) Error() string {
	attempts := "attempts"
	if e.Attempts == 1 {
		attempts = "attempt"
	}
	return fmt.Sprintf("gave up after %d %s over %s (%v): %v", e.Attempts, attempts, e.Elapsed.Round(time.Millisecond), e.Reason, e.Last)
}

// Unwrap lets errors.Is and errors.As see both the reason and op's last error.
func (e *GiveUpError) Unwrap() []error { return []error{e.Reason, e.Last} }

// Permanent marks err as one no retry can fix: Retry returns err itself at once. It returns
// nil for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// RetryAfter marks err as transient with the wait the server asked for (a Retry-After
// header): the next wait is at least d. It returns err unchanged when d is not positive.
func RetryAfter(err error, d time.Duration) error {
	if err == nil || d <= 0 {
		return err
	}
	return &retryAfterError{err: err, wait: d}
}

type retryAfterError struct {
	err  error
	wait time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// Option adjusts one Retry call.
type Option func(*options)

type options struct {
	stop      <-chan struct{}
	stopCause error
	onRetry   func(attempt int, wait time.Duration, err error)
	sleep     func(ctx context.Context, d time.Duration) error
	since     time.Time
}

// Stop ends the waits between attempts when ch closes (an attempt under way finishes):
// Retry then gives up with cause as the Reason.
func Stop(ch <-chan struct{}, cause error) Option {
	return func(o *options) { o.stop, o.stopCause = ch, cause }
}

// OnRetry calls f before each wait with the attempt that failed, the wait and its error
// (for logs and metrics).
func OnRetry(f func(attempt int, wait time.Duration, err error)) Option {
	return func(o *options) { o.onRetry = f }
}

// WithSleep replaces the wait between attempts, Stop included (tests record waits with it).
func WithSleep(f func(ctx context.Context, d time.Duration) error) Option {
	return func(o *options) { o.sleep = f }
}

// Since counts MaxElapsed from start instead of from the first attempt, for an operation
// whose budget began earlier (a call that already retried in another form).
func Since(start time.Time) Option {
	return func(o *options) { o.since = start }
}

// Retry runs op, passing it the attempt number from 1, until it returns nil, returns an
// error marked Permanent, or retrying stops (see the package doc). It returns nil, the
// Permanent error itself (unmarked), or a *GiveUpError holding op's last error.
func (p Policy) Retry(ctx context.Context, op func(attempt int) error, opts ...Option) error {
	o := options{since: time.Now()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.sleep == nil {
		o.sleep = func(ctx context.Context, d time.Duration) error { return sleep(ctx, d, o.stop, o.stopCause) }
	}
	for n := 1; ; n++ {
		err := op(n)
		if err == nil {
			return nil
		}
		if perm, ok := errors.AsType[*permanentError](err); ok {
			return perm.err
		}
		var asked time.Duration
		if ra, ok := errors.AsType[*retryAfterError](err); ok {
			err, asked = ra.err, ra.wait
		}
		giveUp := func(reason error, retryAfter time.Duration) error {
			return &GiveUpError{Attempts: n, Elapsed: time.Since(o.since), Reason: reason, RetryAfter: retryAfter, Last: err}
		}
		if cause := context.Cause(ctx); cause != nil {
			return giveUp(cause, 0)
		}
		if p.MaxAttempts > 0 && n >= p.MaxAttempts {
			return giveUp(ErrAttempts, 0)
		}
		wait := max(p.Delay(n), asked)
		if p.MaxElapsed > 0 {
			left := p.MaxElapsed - time.Since(o.since)
			switch {
			case left <= 0:
				return giveUp(ErrElapsed, 0)
			case asked > left:
				return giveUp(ErrElapsed, asked)
			}
			wait = min(wait, left)
		}
		if o.onRetry != nil {
			o.onRetry(n, wait, err)
		}
		if werr := o.sleep(ctx, wait); werr != nil {
			return giveUp(werr, 0)
		}
	}
}
