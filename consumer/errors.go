package consumer

import (
	"errors"

	"rulevalidator/internal/fault"
)

// ReasonInternal is the dead-letter reason for a handler that panicked.
const ReasonInternal = "internal"

// Permanent marks err as permanent: Retry returns it at once and DeadLetter sends the message
// to the dead-letter topic. reason is a short, low-cardinality label such as "undecodable" or
// "unknown_ruleset", fit for a metric label and a dead-letter header; details belong in err.
// Errors not marked this way are transient. The mark is fault.Permanent's, the one the failure
// table (judging.Classify) reads.
func Permanent(reason string, err error) error { return fault.Permanent(reason, err) }

// PermanentReason reports whether err, or any error it wraps, was marked with Permanent, and
// with which reason. The outermost mark wins.
func PermanentReason(err error) (reason string, ok bool) { return fault.PermanentReason(err) }

// errHandlerPanicked marks a panic that reached the consumer loop because no Recover
// middleware caught it.
var errHandlerPanicked = errors.New("handler panicked")
