package judging

import (
	"context"
	"errors"
	"net"
	"syscall"

	"rulevalidator/bucket"
	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/internal/fault"
	"rulevalidator/internal/tlserr"
	"rulevalidator/schemas"
)

// This file is the failure table: every error a request can end in is either the message's
// fault (it is dead-lettered on the first attempt, with a typed reason) or the environment's
// (consumption holds: the message is retried with backoff and never dead-lettered, until the
// operator fixes what the cause names or the dependency comes back). It reads the adapters'
// sentinels and the permanent mark from package fault, so that it imports none of them.

// Fault is what adapters (the model client, object storage, the broker) implement on their
// errors to say whose fault a failure is. It is found with errors.As.
type Fault interface {
	// MessageFault reports whether the message caused the failure: retrying it will fail the
	// same way, while other messages are unaffected.
	MessageFault() bool
	// FaultCause names, for a failure that is not the message's fault, what the operator
	// must look at: one of the Cause values. Empty for a message fault.
	FaultCause() string
}

// Cause is the bounded label of an environment fault: what is broken outside the message.
type Cause string

const (
	CauseModelAuth          Cause = "model_auth"          // the model server refused the API key (401/403)
	CauseModelNotFound      Cause = "model_not_found"     // the configured model does not exist (404)
	CauseModelUnavailable   Cause = "model_unavailable"   // the model server is down or overloaded
	CauseStorageAuth        Cause = "storage_auth"        // S3 refused the credentials or a permission
	CauseStorageBucket      Cause = "storage_bucket"      // the S3 bucket does not exist
	CauseStorageUnavailable Cause = "storage_unavailable" // S3 is down or overloaded
	CauseTLS                Cause = "tls"                 // a certificate was refused, or no TLS where asked
	CauseBroker             Cause = "broker"              // Kafka (or the schema registry) is failing
	CauseNetwork            Cause = "network"             // a connection failed
	CauseTimeout            Cause = "timeout"             // a request ran out of its request timeout
	CauseOther              Cause = "other"               // an unrecognised error
)

// Causes lists every Cause, for metrics to initialise their series.
var Causes = []Cause{
	CauseModelAuth, CauseModelNotFound, CauseModelUnavailable, CauseStorageAuth, CauseStorageBucket,
	CauseStorageUnavailable, CauseTLS, CauseBroker, CauseNetwork, CauseTimeout, CauseOther,
}

// fixes says what the operator should do about each cause; it goes into the log and /readyz.
var fixes = map[Cause]string{
	CauseModelAuth:          "check the model server's API key (--llm-api-key / OPENAI_API_KEY)",
	CauseModelNotFound:      "check the configured model name (--model) and the model server's base URL",
	CauseModelUnavailable:   "the model server is not answering; check that it is up and reachable",
	CauseStorageAuth:        "check the S3 access key and secret and the bucket policy",
	CauseStorageBucket:      "create the S3 bucket or fix the configured bucket name (--s3-bucket)",
	CauseStorageUnavailable: "object storage is not answering; check that it is up and reachable",
	CauseTLS:                "TLS failed: a certificate was refused, or the address does not speak TLS; check the CA bundle, the server's certificate and the URL's scheme",
	CauseBroker:             "the Kafka broker is failing; check the brokers and the topics",
	CauseNetwork:            "a connection failed; check the network path to the dependency named in the error",
	CauseTimeout:            "requests are running out of --request-timeout; check the model server's speed",
	CauseOther:              "see the error",
}

// Fix says what the operator should do about c.
func (c Cause) Fix() string { return fixes[c] }

// Failure is the table's answer for one error.
type Failure struct {
	// Message: the message is at fault and is dead-lettered with Reason.
	Message bool
	Reason  schemas.Reason
	// Cause names the environment fault when Message is false.
	Cause Cause
}

// Classify is the failure table. In order: an error already marked permanent
// (fault.Permanent, consumer.Permanent) keeps its reason; every attempt run out of the request
// timeout (ErrTimedOut) is the message's; a report that could not be stored is the environment's when storage named what
// is wrong with it, else the message's (report_failed); a verdict cache that could not be read
// is the environment's (its storage cause); an adapter's Fault decides whose fault it is; the
// contracts' and the engine's sentinels name message faults; what is left is the
// environment's, its cause guessed from the error's type.
func Classify(err error) Failure {
	if reason, ok := fault.PermanentReason(err); ok {
		return Failure{Message: true, Reason: schemas.Reason(reason)}
	}
	if errors.Is(err, ErrTimedOut) {
		// Every attempt allowed ran out of time: the message's, whatever
		// the last attempt's own cause (the model adapter's timeout).
		return Failure{Message: true, Reason: schemas.ReasonTimeout}
	}
	var report *reportError
	if errors.As(err, &report) {
		// Storage misconfigured or down is held; anything else the writer could not get past
		// after its own retries fails the request.
		if f := Classify(report.err); !f.Message && f.Cause != CauseOther {
			return f
		}
		return Failure{Message: true, Reason: schemas.ReasonReportFailed}
	}
	if errors.Is(err, engine.ErrCacheUnavailable) {
		// The verdict cache could not be read: held, as for reports and job status, whatever
		// the store says of the object (asking the model instead would pay again for every
		// verdict the cache holds).
		return Failure{Cause: StorageCause(err)}
	}
	var f Fault
	if errors.As(err, &f) && !f.MessageFault() {
		return Failure{Cause: boundCause(f.FaultCause())}
	}
	if reason, ok := messageReason(err); ok {
		return Failure{Message: true, Reason: reason}
	}
	if f != nil {
		// The adapter blames the message without a sentinel naming how.
		return Failure{Message: true, Reason: schemas.ReasonInvalidInput}
	}
	return Failure{Cause: environmentCause(err)}
}

// MessageFault is the one predicate of whose fault an error is, for serve's consumer's retry
// and dead-letter middleware (consumer.RetryWithFilter, consumer.DeadLetterWithFilter) and the
// pipeline alike: the failure table's answer (Classify), with the dead-letter reason when the
// message is at fault. An attempt that ran out of the request timeout (ErrRequestTimeout) is
// nobody's fault yet: it is retried until the transport gives up on it (ErrTimedOut), and then
// its error is the message's (timeout).
func MessageFault(err error) (reason string, messageFault bool) {
	if err == nil || errors.Is(err, ErrRequestTimeout) && !errors.Is(err, ErrTimedOut) {
		return "", false
	}
	f := Classify(err)
	return string(f.Reason), f.Message
}

// messageReason names the dead-letter reason of the message faults the contracts and the
// engine define.
func messageReason(err error) (schemas.Reason, bool) {
	switch {
	case errors.Is(err, schemas.ErrUndecodable):
		return schemas.ReasonUndecodable, true
	case errors.Is(err, schemas.ErrInvalidRequest):
		return schemas.ReasonInvalidRequest, true
	case errors.Is(err, fault.ErrUnknownRuleset):
		return schemas.ReasonUnknownRuleset, true
	case errors.Is(err, engine.ErrInvalidRuleset):
		return schemas.ReasonInvalidRuleset, true
	case errors.Is(err, bucket.ErrClaimRefused):
		return schemas.ReasonClaimRefused, true
	case errors.Is(err, docread.ErrUnreadable):
		return schemas.ReasonUnreadableDocument, true
	case errors.Is(err, engine.ErrInputTooLarge), errors.Is(err, bucket.ErrTooLarge):
		return schemas.ReasonOversized, true
	case errors.Is(err, engine.ErrInvalidInput), errors.Is(err, schemas.ErrUnresolvedURI), errors.Is(err, bucket.ErrNotFound):
		return schemas.ReasonInvalidInput, true
	case errors.Is(err, engine.ErrLLMRejected):
		return schemas.ReasonModelRejected, true
	case errors.Is(err, engine.ErrInvalidOutput):
		return schemas.ReasonInvalidOutput, true
	}
	return "", false
}

// environmentCause guesses the cause of an error no adapter classified.
func environmentCause(err error) Cause {
	var netErr net.Error
	switch {
	case tlserr.IsSetup(err):
		return CauseTLS
	case errors.Is(err, engine.ErrLLMUnavailable):
		return CauseModelUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return CauseTimeout
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.As(err, &netErr):
		return CauseNetwork
	}
	return CauseOther
}

func boundCause(s string) Cause {
	for _, c := range Causes {
		if string(c) == s {
			return c
		}
	}
	return CauseOther
}

// StorageCause is the cause of a storage failure that is never the message's (the verdict
// cache's, serve's result store's): the store's own (storage_auth, storage_bucket, ...) when
// it names one, else the network's or TLS's, else storage_unavailable.
func StorageCause(err error) Cause {
	var f Fault
	if errors.As(err, &f) && f.FaultCause() != "" {
		return boundCause(f.FaultCause())
	}
	if c := environmentCause(err); c != CauseOther {
		return c
	}
	return CauseStorageUnavailable
}

// reportError marks a failure to store a request's report; the table decides whose fault it is.
type reportError struct{ err error }

func (e *reportError) Error() string { return "storing the report: " + e.err.Error() }
func (e *reportError) Unwrap() error { return e.err }

// ErrTimedOut marks a request given up on because it ran out of the request timeout
// (ErrRequestTimeout) on every attempt its transport allows (serve's
// --request-timeout-attempts): the message's fault, reason timeout.
var ErrTimedOut = errors.New("request timed out on every attempt")
