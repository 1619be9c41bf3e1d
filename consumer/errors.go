package consumer

import (
	"errors"
	"fmt"
)

// ReasonInternal is the dead-letter reason for a handler that panicked.
const ReasonInternal = "internal"

// reasonUnspecified stands in for an empty reason, so that every permanent error has a label.
const reasonUnspecified = "unspecified"

// permanentError marks an error that retrying cannot fix: the message is bad, not the world.
type permanentError struct {
	reason string
	err    error
}

func (e *permanentError) Error() string {
	if e.err == nil {
		return "permanent failure (" + e.reason + ")"
	}
	return fmt.Sprintf("permanent failure (%s): %v", e.reason, e.err)
}

func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as permanent: Retry returns it at once and DeadLetter sends the message
// to the dead-letter topic. reason is a short, low-cardinality label such as "undecodable" or
// "unknown_ruleset", fit for a metric label and a dead-letter header; details belong in err.
// Errors not marked this way are transient.
func Permanent(reason string, err error) error {
	if reason == "" {
		reason = reasonUnspecified
	}
	return &permanentError{reason: reason, err: err}
}

// PermanentReason reports whether err, or any error it wraps, was marked with Permanent, and
// with which reason. The outermost mark wins.
func PermanentReason(err error) (reason string, ok bool) {
	var pe *permanentError
	if errors.As(err, &pe) {
		return pe.reason, true
	}
	return "", false
}

// errHandlerPanicked marks a panic that reached the consumer loop because no Recover
// middleware caught it.
var errHandlerPanicked = errors.New("handler panicked")
