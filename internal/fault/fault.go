// Package fault holds the marks and sentinels by which an error says whose fault it is,
// shared by the adapters that make such errors (consumer, registry) and the failure table
// that reads them (judging.Classify). They are declared here, in a package that imports
// nothing of the module, so that the table imports no broker client: consumer.Permanent is
// Permanent, and registry.ErrUnknownRuleset is ErrUnknownRuleset under its adapter's name.
// Object storage's errors are package bucket's, which holds no client either.
package fault

import (
	"errors"
	"fmt"
)

var (
	// ErrUnknownRuleset: a ruleset id or version no resolver knows (registry.ErrUnknownRuleset).
	ErrUnknownRuleset = errors.New("unknown ruleset")
)

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

// Permanent marks err as permanent, the message's fault: retrying it will fail the same way.
// reason is a short, low-cardinality label such as "undecodable" or "unknown_ruleset", fit for
// a metric label and a dead-letter header; details belong in err. Errors not marked this way
// are transient unless the failure table says otherwise.
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
