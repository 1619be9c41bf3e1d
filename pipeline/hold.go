package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"rulevalidator/consumer"
	"rulevalidator/judging"
)

// This file is the hold: what the pipeline does with an environment fault once the failure
// table (judging.Classify) has put an error on the environment. Consumption holds while a fault
// lasts, readiness and a metric name the cause, and the hold ends by itself when the messages
// that hit the fault end.

// environment tracks the environment faults holding consumption, for /readyz, the
// rulevalidator_environment_fault metric and the log. A fault is held by the messages it
// stopped: a cause is active while at least one message's last attempt failed with it, and it
// clears when the last of them ends (handled, dead-lettered for its own fault, or given up at a
// drain). Other messages ending, a dead-lettered one included, leave it alone, so the metric
// and its alert stay steady for as long as the fault lasts.
type environment struct {
	mu      sync.Mutex
	held    map[string]judging.Cause // message position → the cause its last attempt failed with
	lastErr map[judging.Cause]string // cause → the last error seen with it
	hook    func(cause string, active bool)
}

func newEnvironment(hook func(cause string, active bool)) *environment {
	return &environment{held: map[string]judging.Cause{}, lastErr: map[judging.Cause]string{}, hook: hook}
}

// hold records that the message at position failed with an environment fault; it reports
// whether the cause became active.
func (e *environment) hold(position string, c judging.Cause, err error) bool {
	e.mu.Lock()
	prev, had := e.held[position]
	became := !e.holds(c)
	e.held[position] = c
	e.lastErr[c] = err.Error()
	var freed []judging.Cause
	if had && prev != c && !e.holds(prev) {
		freed = append(freed, prev)
		delete(e.lastErr, prev)
	}
	e.mu.Unlock()
	e.notify(freed, became, c)
	return became
}

// release forgets the message at position; it returns the causes that no message holds any
// more.
func (e *environment) release(position string) []judging.Cause {
	e.mu.Lock()
	c, had := e.held[position]
	delete(e.held, position)
	var freed []judging.Cause
	if had && !e.holds(c) {
		freed = append(freed, c)
		delete(e.lastErr, c)
	}
	e.mu.Unlock()
	e.notify(freed, false, "")
	return freed
}

// holds reports whether any message holds c; e.mu is held.
func (e *environment) holds(c judging.Cause) bool {
	for _, h := range e.held {
		if h == c {
			return true
		}
	}
	return false
}

func (e *environment) notify(freed []judging.Cause, became bool, c judging.Cause) {
	if e.hook == nil {
		return
	}
	for _, f := range freed {
		e.hook(string(f), false)
	}
	if became {
		e.hook(string(c), true)
	}
}

// check fails while a fault holds consumption, naming the causes, their fixes, how many
// messages each holds and the last error.
func (e *environment) check(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.held) == 0 {
		return nil
	}
	count := map[judging.Cause]int{}
	for _, c := range e.held {
		count[c]++
	}
	causes := make([]string, 0, len(count))
	for c := range count {
		causes = append(causes, string(c))
	}
	sort.Strings(causes)
	parts := make([]string, len(causes))
	for i, c := range causes {
		parts[i] = fmt.Sprintf("%s: %s (%d held; last error: %s)", c, judging.Cause(c).Fix(), count[judging.Cause(c)], e.lastErr[judging.Cause(c)])
	}
	return fmt.Errorf("consumption held by an environment fault: %s", strings.Join(parts, "; "))
}

// observeEnvironment keeps the environment-fault state: an attempt that fails with a fault
// the table puts on the environment holds it (readiness fails, the metric and the log name the
// cause) until the message's handling ends; any other end of an attempt releases the message.
func (p *Pipeline) observeEnvironment(ctx context.Context, m *consumer.Message, err error) {
	_, deferred := errors.AsType[*consumer.DeferredError](err)
	if err != nil && ctx.Err() == nil && !errors.Is(err, judging.ErrRequestTimeout) && !errors.Is(err, consumer.ErrDraining) && !deferred {
		if f := judging.Classify(err); !f.Message {
			if p.env.hold(position(m), f.Cause, err) {
				p.cfg.Logger.ErrorContext(ctx, "environment fault: consumption is held until it is fixed; no message is dead-lettered for it",
					"cause", f.Cause, "fix", f.Cause.Fix(), "position", position(m), "err", err)
			}
			return
		}
	}
	// A timeout is counted per message (TimeoutAttempts), and a cancelled attempt, or one
	// that gave up waiting for memory at a drain, is the shutdown's or the rebalance's:
	// none is the environment's fault.
	p.releaseHold(ctx, m)
}

// ReleaseHolds is the consumer middleware that forgets what the pipeline keeps about a
// message in flight once its handling ends, however it ends: handled, dead-lettered, or given
// up uncommitted at a drain (then no attempt of the pipeline sees the end, and the message may
// be judged by the partition's next owner). It ends the message's hold on the environment
// faults it hit and drops the count of its timed-out attempts. Put it outermost:
// consumer.Chain(p.Handle, p.ReleaseHolds, consumer.Retry(…), …).
func (p *Pipeline) ReleaseHolds(next consumer.Handler) consumer.Handler {
	return func(ctx context.Context, m *consumer.Message) error {
		defer p.forgetTimeouts(m)
		defer p.releaseHold(ctx, m)
		return next(ctx, m)
	}
}

func (p *Pipeline) releaseHold(ctx context.Context, m *consumer.Message) {
	if cleared := p.env.release(position(m)); len(cleared) > 0 {
		p.cfg.Logger.InfoContext(ctx, "environment fault cleared: consumption resumed", "causes", cleared, "position", position(m))
	}
}
