package judging

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"

	"rulevalidator/bucket"
	"rulevalidator/consumer"
	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/internal/fault"
	"rulevalidator/objstore"
	"rulevalidator/registry"
	"rulevalidator/schemas"
)

// adapterFault is an adapter error that says whose fault it is, as the model client's do.
type adapterFault struct {
	cause string
	kind  error
}

func (e *adapterFault) Error() string      { return "adapter: " + e.cause }
func (e *adapterFault) Unwrap() error      { return e.kind }
func (e *adapterFault) MessageFault() bool { return e.cause == "" }
func (e *adapterFault) FaultCause() string { return e.cause }

func s3Error(code string, status int) error {
	return &objstore.OpError{Op: "get", URI: "s3://docs/a.txt", Attempts: 1, Err: minio.ErrorResponse{Code: code, StatusCode: status}}
}

func TestClassify(t *testing.T) {
	message := func(r schemas.Reason) Failure { return Failure{Message: true, Reason: r} }
	env := func(c Cause) Failure { return Failure{Cause: c} }
	for _, tc := range []struct {
		name string
		err  error
		want Failure
	}{
		// Message faults: dead-lettered at once.
		{"undecodable", &schemas.DecodeError{Problem: "x"}, message(schemas.ReasonUndecodable)},
		{"invalid request", &schemas.RequestError{Problems: []string{"x"}}, message(schemas.ReasonInvalidRequest)},
		{"invalid ruleset", fmt.Errorf("resolve: %w", engine.ErrInvalidRuleset), message(schemas.ReasonInvalidRuleset)},
		{"unknown ruleset", fmt.Errorf("resolving: %w", registry.ErrUnknownRuleset), message(schemas.ReasonUnknownRuleset)},
		{"invalid input", &engine.InputError{Problem: "x"}, message(schemas.ReasonInvalidInput)},
		{"unresolved uri", fmt.Errorf("x: %w", schemas.ErrUnresolvedURI), message(schemas.ReasonInvalidInput)},
		{"input too large", fmt.Errorf("x: %w", engine.ErrInputTooLarge), message(schemas.ReasonOversized)},
		{"unreadable document", fmt.Errorf("x: %w", &docread.Error{Document: "a.pdf", Kind: docread.ErrEncrypted}), message(schemas.ReasonUnreadableDocument)},
		{"document over the page limit", &docread.Error{Document: "a.pdf", Kind: docread.ErrTooManyPages}, message(schemas.ReasonUnreadableDocument)},
		{"object too large", fmt.Errorf("x: %w", bucket.ErrTooLarge), message(schemas.ReasonOversized)},
		{"object missing", s3Error("NoSuchKey", 404), message(schemas.ReasonInvalidInput)},
		{"object name invalid", s3Error("InvalidObjectName", 400), message(schemas.ReasonInvalidInput)},
		{"a bucket this service does not read", &objstore.OpError{Op: "get", URI: "s3://other/k", Err: errors.New(`bucket "other" is not one this service reads`)}, message(schemas.ReasonInvalidInput)},
		{"model rejected the request", &adapterFault{kind: engine.ErrLLMRejected}, message(schemas.ReasonModelRejected)},
		{"output still invalid", fmt.Errorf("x: %w", engine.ErrInvalidOutput), message(schemas.ReasonInvalidOutput)},
		{"timed out every attempt", fmt.Errorf("x: %w", ErrTimedOut), message(schemas.ReasonTimeout)},
		{"timed out every attempt, the last on a model timeout", fmt.Errorf("%w: %w", ErrTimedOut, &adapterFault{cause: "model_unavailable", kind: engine.ErrLLMUnavailable}), message(schemas.ReasonTimeout)},
		{"already marked", fault.Permanent("report_failed", errors.New("x")), message(schemas.ReasonReportFailed)},
		{"already marked by the consumer", consumer.Permanent("internal", errors.New("panic")), message(schemas.ReasonInternal)},
		{"report not stored", &reportError{errors.New("the writer gave up")}, message(schemas.ReasonReportFailed)},
		{"report too large to store", &reportError{fmt.Errorf("x: %w", bucket.ErrTooLarge)}, message(schemas.ReasonReportFailed)},
		{"report refused by a model fault", &reportError{&adapterFault{kind: engine.ErrLLMRejected}}, message(schemas.ReasonReportFailed)},

		// Environment faults: held, never dead-lettered.
		{"model auth", &adapterFault{cause: "model_auth", kind: engine.ErrLLMUnavailable}, env(CauseModelAuth)},
		{"configured model not found", &adapterFault{cause: "model_not_found", kind: engine.ErrLLMUnavailable}, env(CauseModelNotFound)},
		{"model down", fmt.Errorf("x: %w", engine.ErrLLMUnavailable), env(CauseModelUnavailable)},
		{"storage access denied", s3Error("AccessDenied", 403), env(CauseStorageAuth)},
		{"storage key unknown", s3Error("InvalidAccessKeyId", 403), env(CauseStorageAuth)},
		{"storage secret wrong", s3Error("SignatureDoesNotMatch", 403), env(CauseStorageAuth)},
		{"bucket missing", s3Error("NoSuchBucket", 404), env(CauseStorageBucket)},
		{"storage overloaded", s3Error("SlowDown", 503), env(CauseStorageUnavailable)},
		{"storage certificate", &objstore.OpError{Op: "get", Attempts: 1, Err: x509.UnknownAuthorityError{}}, env(CauseTLS)},
		{"certificate", fmt.Errorf("x: %w", x509.UnknownAuthorityError{}), env(CauseTLS)},
		{"report storage denied", &reportError{s3Error("AccessDenied", 403)}, env(CauseStorageAuth)},
		{"report bucket missing", fmt.Errorf("judging: %w", &reportError{s3Error("NoSuchBucket", 404)}), env(CauseStorageBucket)},
		{"report storage certificate", &reportError{x509.UnknownAuthorityError{}}, env(CauseTLS)},
		{"verdict cache storage denied", fmt.Errorf("%w: %w", engine.ErrCacheUnavailable, s3Error("AccessDenied", 403)), env(CauseStorageAuth)},
		{"verdict cache bucket missing", fmt.Errorf("%w: %w", engine.ErrCacheUnavailable, s3Error("NoSuchBucket", 404)), env(CauseStorageBucket)},
		{"verdict cache entry refused, never the message's", fmt.Errorf("%w: %w", engine.ErrCacheUnavailable, s3Error("InvalidObjectName", 400)), env(CauseStorageUnavailable)},
		{"verdict cache unreachable", fmt.Errorf("%w: dial: %w", engine.ErrCacheUnavailable, syscall.ECONNREFUSED), env(CauseNetwork)},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), env(CauseNetwork)},
		{"net error", &net.OpError{Op: "dial", Err: errors.New("no route")}, env(CauseNetwork)},
		{"unknown", errors.New("disk on fire"), env(CauseOther)},
		{"unknown adapter cause", &adapterFault{cause: "cosmic rays"}, env(CauseOther)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %+v, want %+v", tc.err, got, tc.want)
			}
		})
	}
}

// Every adapter error type implements Fault, so the table finds it with errors.As.
func TestAdapterErrorsAreFaults(t *testing.T) {
	var f Fault
	if !errors.As(fmt.Errorf("wrapped: %w", s3Error("AccessDenied", 403)), &f) || f.MessageFault() {
		t.Errorf("objstore.OpError does not report an environment fault through Fault")
	}
}

// MessageFault: an attempt that ran out of the request timeout is nobody's fault yet; once
// the transport gives up on it, it is the message's (timeout).
func TestMessageFaultOfTimeouts(t *testing.T) {
	attempt := fmt.Errorf("%w 10m: model call abandoned: %w", ErrRequestTimeout, context.DeadlineExceeded)
	if reason, message := MessageFault(attempt); message || reason != "" {
		t.Errorf("MessageFault(one timed-out attempt) = %q, %v; want nobody's fault yet", reason, message)
	}
	if reason, message := MessageFault(fmt.Errorf("%w (3 attempts of 10m): %w", ErrTimedOut, attempt)); !message || reason != string(schemas.ReasonTimeout) {
		t.Errorf("MessageFault(every attempt timed out) = %q, %v; want timeout", reason, message)
	}
	if _, message := MessageFault(nil); message {
		t.Error("MessageFault(nil) is a message fault")
	}
}

func TestEveryCauseHasAFix(t *testing.T) {
	for _, c := range Causes {
		if c.Fix() == "" {
			t.Errorf("cause %s has no fix", c)
		}
	}
}
