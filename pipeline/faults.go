package pipeline

import "rulevalidator/judging"

// This file holds the Kafka adapter's own errors, each saying whose fault it is to the
// failure table (judging.Classify) through judging.Fault or a sentinel it wraps.

// brokerError marks a failure to publish: the broker's fault, never the message's.
type brokerError struct{ err error }

func (e *brokerError) Error() string      { return "publishing: " + e.err.Error() }
func (e *brokerError) Unwrap() error      { return e.err }
func (e *brokerError) MessageFault() bool { return false }
func (e *brokerError) FaultCause() string { return string(judging.CauseBroker) }

// resultStoreError marks a failure to store a request's result, or to read the usage a
// request's admission needs: never the message's fault, whatever the store says, so the
// request is held rather than dead-lettered. The cause is the store's own (storage_auth, storage_bucket, ...) when it names one.
type resultStoreError struct{ err error }

func (e *resultStoreError) Error() string      { return e.err.Error() }
func (e *resultStoreError) Unwrap() error      { return e.err }
func (e *resultStoreError) MessageFault() bool { return false }
func (e *resultStoreError) FaultCause() string { return string(judging.StorageCause(e.err)) }

// attemptsError says how many attempts a dead-lettered message had; the dead letter records
// it. It wraps judging.ErrTimedOut: every attempt allowed ran out of the request timeout.
type attemptsError struct {
	n   int
	err error
}

func (e *attemptsError) Error() string { return e.err.Error() }
func (e *attemptsError) Unwrap() error { return e.err }
func (e *attemptsError) Attempts() int { return e.n }
