// Package limit bounds the calls in flight to one endpoint with a limit that
// adapts to what the endpoint can take: it grows while calls succeed with the
// limit in use and is halved when the endpoint says it is overloaded. It
// knows nothing of HTTP: callers tell it each call's Outcome and any pause
// the endpoint asked for (a Retry-After, a rate limit's reset).
//
// # Algorithm
//
// AIMD (additive increase, multiplicative decrease), as TCP's congestion
// avoidance and Netflix's concurrency-limits AIMD do it, on explicit overload
// signals (429, 503, timeouts) rather than on latency: a model call's
// latency follows the tokens it generates, so latency gradients (Vegas,
// Gradient2, Envoy's minRTT sampling) would read a long answer as
// congestion.
//
//   - Increase: after a window of successes at the limit the limit grows by
//     one, up to Max. A window is Limit successes of calls that started
//     under the current limit and were in flight while it was in use (all
//     slots taken, or callers waiting): a limit that is not used is no
//     evidence that a higher one would hold, and one round of calls at the
//     limit is.
//   - Decrease: an overload halves the limit (floor 1). The overloads of
//     calls that started before the last decrease are the same congestion
//     event, told late, and do not cut again.
//   - Probing: the limit at which the last overload came is remembered (the
//     ceiling). Growing back to it takes ProbeWindow times longer (a window
//     of Limit × probe successes), and each overload at or above the
//     ceiling again doubles that factor (up to 64): against an endpoint of
//     fixed capacity the limit sits just below it and probes past it ever
//     more rarely, so few calls meet a 429. A window of successes at the
//     ceiling itself shows the endpoint now takes more: the ceiling is
//     forgotten and growth is quick again. An overload below the ceiling
//     (the endpoint took less than before) sets it there and starts the
//     factor afresh.
//   - Pauses: a Result's Pause (a Retry-After, a rate limit spent until its
//     reset) starts no new call before it passes, up to MaxPause; calls in
//     flight go on.
//
// Callers wait for a slot in arrival order (FIFO, so none starves); a wait
// ends with its context. Fixed turns adaptation off: the limit stays at Max
// and outcomes and pauses are ignored.
package limit

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultInitial     = 4
	DefaultMax         = 16
	DefaultMaxPause    = 5 * time.Minute
	DefaultProbeWindow = 4
)

const (
	// backoff is the factor an overload multiplies the limit by.
	backoff = 0.5
	// maxProbe bounds the probe factor's doubling: an endpoint that keeps
	// refusing the same level is still probed every 64 windows, so a
	// capacity that grew is found.
	maxProbe = 64
)

// Config configures a Limiter. Zero fields take the defaults above.
type Config struct {
	// Initial is the limit to start at (default 4), at most Max.
	Initial int
	// Max bounds the limit (default 16); with Fixed it is the limit.
	Max int
	// Fixed turns adaptation off: the limit is Max, always, and results
	// change nothing (no growth, no cut, no pause).
	Fixed bool
	// MaxPause bounds the pause one Result can ask for (default 5m): an
	// endpoint asking for an hour would otherwise stop every caller.
	MaxPause time.Duration
	// ProbeWindow is the factor, from 2, by which growing back to the
	// limit that last overloaded takes longer than other growth (default
	// 4); see the package doc.
	ProbeWindow int
	// OnChange, when set, is told the Limiter's state each time it
	// changes: a slot taken or given back, a caller starting or ending a
	// wait, the limit or the pause changing. It is called with the
	// Limiter's lock held, so that a gauge set from it never goes back to
	// a stale value: it must return quickly and must not call the Limiter.
	OnChange func(State)
}

// State is a Limiter's state at one moment.
type State struct {
	// Limit is the calls in flight allowed now.
	Limit int
	// InFlight is the calls holding a slot; above Limit just after a cut,
	// until they end.
	InFlight int
	// Waiting is the callers waiting for a slot.
	Waiting int
	// PausedUntil is when the pause an endpoint asked for ends; zero when
	// none was asked for (it may be in the past).
	PausedUntil time.Time
}

// Outcome is what a call's end says about the endpoint's load.
type Outcome int

const (
	// Ignored says nothing about the load: a refused request, a call its
	// caller abandoned, a connection that failed. The slot is given back
	// and nothing else changes.
	Ignored Outcome = iota
	// Succeeded: the endpoint served the call.
	Succeeded
	// Overloaded: the endpoint said it is overloaded (429, 503) or the
	// call timed out.
	Overloaded
)

func (o Outcome) String() string {
	switch o {
	case Ignored:
		return "ignored"
	case Succeeded:
		return "succeeded"
	case Overloaded:
		return "overloaded"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is how a call ended, as the Limiter reads it.
type Result struct {
	Outcome Outcome
	// Pause, when positive, is how long no new call may start (a
	// Retry-After, a rate limit's reset), counted from the Release.
	Pause time.Duration
}

// Limiter bounds the calls in flight to one endpoint. It is safe for
// concurrent use.
type Limiter struct {
	cfg Config

	mu       sync.Mutex
	limit    int
	inFlight int
	waiters  list.List // of *waiter, oldest first
	// successes counts the successes at the limit since it last changed.
	successes int
	// saturations counts the times the limit came into use: a slot taken
	// up to it, or a caller queued for lack of one.
	saturations uint64
	// changes counts the limit's changes, cuts its decreases: a slot
	// carries both from its start, so that news from before a change is
	// told apart.
	changes, cuts uint64
	// ceiling is the limit at which the last overload came, 0 when none
	// binds; probe is the factor growing back to it takes longer by.
	ceiling, probe int
	pausedUntil    time.Time
	timer          *time.Timer
}

type waiter struct {
	ready chan struct{}
	slot  *Slot // set, under the lock, when granted
	elem  *list.Element
}

// New returns a Limiter for cfg, zero fields taking defaults and Initial
// bounded by Max.
func New(cfg Config) *Limiter {
	if cfg.Max <= 0 {
		cfg.Max = DefaultMax
	}
	if cfg.Initial <= 0 {
		cfg.Initial = DefaultInitial
	}
	cfg.Initial = min(cfg.Initial, cfg.Max)
	if cfg.MaxPause <= 0 {
		cfg.MaxPause = DefaultMaxPause
	}
	if cfg.ProbeWindow < 2 {
		cfg.ProbeWindow = DefaultProbeWindow
	}
	l := &Limiter{cfg: cfg, limit: cfg.Initial}
	if cfg.Fixed {
		l.limit = cfg.Max
	}
	return l
}

// Slot is the right to one call in flight, from Acquire to Release.
type Slot struct {
	l             *Limiter
	changes, cuts uint64
	// saturations is the Limiter's count when the call started: a count
	// that moved since, or full, says the limit was in use while the call
	// was in flight.
	saturations uint64
	full        bool
	released    atomic.Bool
}

// Release gives the slot back with what the call's end says about the
// endpoint. Only the first Release of a slot counts, so a deferred
// Release(Result{}) guards the paths that release nothing (a panic, an
// early return). Release of a nil Slot does nothing.
func (s *Slot) Release(r Result) {
	if s == nil || !s.released.CompareAndSwap(false, true) {
		return
	}
	s.l.release(s, r)
}

// Acquire waits for a slot: one is free, no caller waiting before this one,
// and no pause under way. It returns ctx's error when ctx ends first, and
// then holds no slot.
func (l *Limiter) Acquire(ctx context.Context) (*Slot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	if l.waiters.Len() == 0 && l.inFlight < l.limit && !l.pausedLocked(time.Now()) {
		s := l.grantLocked()
		l.notifyLocked()
		l.mu.Unlock()
		return s, nil
	}
	w := &waiter{ready: make(chan struct{})}
	w.elem = l.waiters.PushBack(w)
	l.saturations++
	l.dispatchLocked()
	l.notifyLocked()
	l.mu.Unlock()

	select {
	case <-w.ready:
		return w.slot, nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	if s := w.slot; s != nil {
		// Granted as ctx ended: hand it on to the next caller.
		l.mu.Unlock()
		s.Release(Result{})
	} else {
		l.waiters.Remove(w.elem)
		l.notifyLocked()
		l.mu.Unlock()
	}
	return nil, ctx.Err()
}

// Do runs f holding a slot and gives it back with f's Result. A panic in f
// gives the slot back as Ignored and goes on. Do returns ctx's error, without
// running f, when ctx ends before a slot is free.
func (l *Limiter) Do(ctx context.Context, f func() Result) error {
	s, err := l.Acquire(ctx)
	if err != nil {
		return err
	}
	defer s.Release(Result{})
	s.Release(f())
	return nil
}

// State is the Limiter's state now.
func (l *Limiter) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stateLocked()
}

func (l *Limiter) stateLocked() State {
	return State{Limit: l.limit, InFlight: l.inFlight, Waiting: l.waiters.Len(), PausedUntil: l.pausedUntil}
}

func (l *Limiter) notifyLocked() {
	if l.cfg.OnChange != nil {
		l.cfg.OnChange(l.stateLocked())
	}
}

func (l *Limiter) pausedLocked(now time.Time) bool { return now.Before(l.pausedUntil) }

// grantLocked takes a slot.
func (l *Limiter) grantLocked() *Slot {
	l.inFlight++
	full := l.inFlight >= l.limit || l.waiters.Len() > 0
	if full {
		l.saturations++
	}
	return &Slot{l: l, changes: l.changes, cuts: l.cuts, saturations: l.saturations, full: full}
}

// dispatchLocked grants slots to the waiters, oldest first, while the limit
// allows; during a pause it sets a timer for its end instead.
func (l *Limiter) dispatchLocked() {
	if l.waiters.Len() == 0 {
		return
	}
	now := time.Now()
	if l.pausedLocked(now) {
		d := l.pausedUntil.Sub(now)
		if l.timer == nil {
			l.timer = time.AfterFunc(d, l.wake)
		} else {
			l.timer.Reset(d)
		}
		return
	}
	for l.waiters.Len() > 0 && l.inFlight < l.limit {
		w := l.waiters.Remove(l.waiters.Front()).(*waiter)
		w.slot = l.grantLocked()
		close(w.ready)
	}
}

// wake ends a pause for the waiters.
func (l *Limiter) wake() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dispatchLocked()
	l.notifyLocked()
}

func (l *Limiter) release(s *Slot, r Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	if !l.cfg.Fixed {
		l.adaptLocked(s, r)
	}
	l.dispatchLocked()
	l.notifyLocked()
}

// adaptLocked moves the limit and the pause on r (see the package doc).
func (l *Limiter) adaptLocked(s *Slot, r Result) {
	if r.Pause > 0 {
		if until := time.Now().Add(min(r.Pause, l.cfg.MaxPause)); until.After(l.pausedUntil) {
			l.pausedUntil = until
		}
	}
	switch r.Outcome {
	case Succeeded:
		atLimit := s.full || s.saturations != l.saturations
		if !atLimit || s.changes != l.changes || l.limit >= l.cfg.Max {
			return
		}
		l.successes++
		window := l.limit
		probing := l.ceiling > 0 && l.limit+1 >= l.ceiling
		if probing {
			window *= l.probe
		}
		if l.successes < window {
			return
		}
		l.setLocked(l.limit + 1)
		if l.ceiling > 0 && l.limit > l.ceiling {
			l.ceiling, l.probe = 0, 0
		}
	case Overloaded:
		if s.cuts != l.cuts {
			return
		}
		if l.ceiling > 0 && l.limit >= l.ceiling {
			l.probe = min(l.probe*2, maxProbe)
		} else {
			l.probe = l.cfg.ProbeWindow
		}
		l.ceiling = l.limit
		l.cuts++
		l.setLocked(max(1, int(float64(l.limit)*backoff)))
	}
}

func (l *Limiter) setLocked(n int) {
	l.limit = n
	l.changes++
	l.successes = 0
}
