package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"rulevalidator/internal/backoff"
)

// Recover turns a panic in the wrapped handler into Permanent(ReasonInternal, ...), logging the
// stack, so that one bad message cannot take the service down and is dead-lettered instead.
func Recover(logger *slog.Logger) Middleware {
	logger = orDiscard(logger)
	return func(next Handler) Handler {
		return func(ctx context.Context, m *Message) (err error) {
			defer func() {
				if v := recover(); v != nil {
					logger.Error("handler panicked", append(logAttrs(m), "panic", v, "stack", string(debug.Stack()))...)
					err = Permanent(ReasonInternal, panicError(m, v))
				}
			}()
			return next(ctx, m)
		}
	}
}

// panicError describes a recovered panic, wrapping it when it is an error.
func panicError(m *Message, v any) error {
	if err, ok := v.(error); ok {
		return fmt.Errorf("%s: handler panicked: %w", where(m), err)
	}
	return fmt.Errorf("%s: handler panicked: %v", where(m), v)
}

// RetryPolicy shapes Retry's capped exponential backoff. Zero fields take the defaults.
type RetryPolicy struct {
	// Initial is the delay before the first retry (default 500ms). Each retry doubles it.
	Initial time.Duration
	// Max caps a single delay (default 30s).
	Max time.Duration
	// MaxElapsed gives up once this much time has passed since the first attempt. The default,
	// 0, retries until the context ends: a broken dependency then holds back consumption instead
	// of failing messages.
	MaxElapsed time.Duration
}

// The defaults of RetryPolicy.
const (
	DefaultRetryInitial = 500 * time.Millisecond
	DefaultRetryMax     = 30 * time.Second
)

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Initial <= 0 {
		p.Initial = DefaultRetryInitial
	}
	if p.Max <= 0 {
		p.Max = DefaultRetryMax
	}
	if p.Max < p.Initial {
		p.Max = p.Initial
	}
	if p.MaxElapsed < 0 {
		p.MaxElapsed = 0
	}
	return p
}

// Retry retries transient errors of the wrapped handler with capped exponential backoff and
// jitter (internal/backoff). The message keeps its in-flight slot while it waits, so a failing
// dependency slows consumption down rather than failing messages. Permanent errors, and errors
// wrapping ErrDraining (the handler gave its message up to the drain), return at once. When ctx
// ends, the consumer starts draining (the wait is cut short, so a SIGTERM never waits out a
// backoff), or MaxElapsed has passed, the last error is returned, still transient: the
// consumer then does not commit the message.
func Retry(p RetryPolicy, logger *slog.Logger) Middleware {
	return RetryWithFilter(p, PermanentReason, logger)
}

// FaultFunc says whose fault err is: the message's (messageFault, with a short reason such as
// "invalid_input") or the environment's. One FaultFunc, given to RetryWithFilter and
// DeadLetterWithFilter alike, decides what is retried and what is dead-lettered, so the two
// cannot disagree. PermanentReason, which reads the marks of Permanent, is the default.
type FaultFunc func(err error) (reason string, messageFault bool)

// RetryWithFilter is Retry with fault deciding which errors are the message's and so
// returned at once.
func RetryWithFilter(p RetryPolicy, fault FaultFunc, logger *slog.Logger) Middleware {
	p = p.withDefaults()
	policy := backoff.Policy{Initial: p.Initial, Max: p.Max, MaxElapsed: p.MaxElapsed}
	logger = orDiscard(logger)
	return func(next Handler) Handler {
		return func(ctx context.Context, m *Message) error {
			attempts := 0
			err := policy.Retry(ctx, func(n int) error {
				attempts = n
				err := next(ctx, m)
				if _, permanent := fault(err); err != nil && permanent || errors.Is(err, ErrDraining) {
					return backoff.Permanent(err)
				}
				if _, ok := deferred(err); ok {
					return backoff.Permanent(err) // the consumer holds it, not the retries
				}
				return err
			},
				backoff.Stop(Draining(ctx), ErrDraining),
				backoff.OnRetry(func(n int, wait time.Duration, err error) {
					logger.Warn("transient error; retrying", append(logAttrs(m), "attempt", n, "retry_in", wait, "err", err)...)
				}))
			gaveUp, ok := errors.AsType[*backoff.GiveUpError](err)
			switch {
			case err == nil:
				if attempts > 1 {
					logger.Info("handled after retrying", append(logAttrs(m), "attempts", attempts)...)
				}
				return nil
			case !ok:
				return err
			case errors.Is(gaveUp.Reason, backoff.ErrElapsed):
				return fmt.Errorf("%s: giving up after %d attempts in %s: %w",
					where(m), gaveUp.Attempts, gaveUp.Elapsed.Round(time.Millisecond), gaveUp.Last)
			default:
				return fmt.Errorf("%s: stopped retrying after %d attempts (%w): %w", where(m), gaveUp.Attempts, gaveUp.Reason, gaveUp.Last)
			}
		}
	}
}

// DeadLetterPublisher sends a message that cannot be processed to the dead-letter topic.
// reason is the permanent error's label; cause is the error itself. An error returned means
// the message was not published; DeadLetter returns it for Retry to retry. Do not mark it
// Permanent: that would stop the consumer (Run returns it) instead of retrying.
type DeadLetterPublisher interface {
	PublishDeadLetter(ctx context.Context, m *Message, reason string, cause error) error
}

// DeadLetter publishes messages whose handler failed permanently to pub and reports them
// handled (nil), so that their offsets are committed and the partition moves on. When
// publishing fails it returns that failure, transient, so that the message is retried and never
// committed unpublished. Transient handler errors pass through untouched.
func DeadLetter(pub DeadLetterPublisher, logger *slog.Logger) Middleware {
	return DeadLetterWithFilter(pub, PermanentReason, logger)
}

// DeadLetterWithFilter is DeadLetter with fault deciding which errors are the message's and
// so dead-lettered, with the reason it names (the shape of watermill's
// PoisonQueueWithFilter).
func DeadLetterWithFilter(pub DeadLetterPublisher, fault FaultFunc, logger *slog.Logger) Middleware {
	logger = orDiscard(logger)
	return func(next Handler) Handler {
		return func(ctx context.Context, m *Message) error {
			err := next(ctx, m)
			if err == nil {
				return nil
			}
			reason, permanent := fault(err)
			if !permanent {
				return err
			}
			if pubErr := pub.PublishDeadLetter(ctx, m, reason, err); pubErr != nil {
				// The handler's error is quoted, not wrapped: wrapping would carry its permanent
				// mark, and Retry would then give up on what is a transient publishing failure.
				return fmt.Errorf("%s: publishing to the dead-letter topic (reason %s, cause: %v): %w",
					where(m), reason, err, pubErr)
			}
			logger.Warn("message dead-lettered", append(logAttrs(m), "reason", reason, "err", err)...)
			return nil
		}
	}
}

// ErrDraining is why a retry stopped when the consumer began draining. A handler that gives
// its message up because Draining is closed returns an error wrapping it: the message is then
// not committed, it is redelivered to the partition's next owner, and the consumer goes on
// instead of stopping as it does for other errors.
var ErrDraining = errors.New("the consumer is draining")

func orDiscard(logger *slog.Logger) *slog.Logger {
	if logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return logger
}
