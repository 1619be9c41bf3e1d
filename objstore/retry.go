package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"

	"rulevalidator/internal/backoff"
	"rulevalidator/internal/tlserr"
)

// maxBackoff caps the wait between two attempts.
const maxBackoff = 10 * time.Second

// permanentCodes are S3 error codes that no retry can fix, whatever the HTTP status says.
var permanentCodes = map[string]bool{
	"AccessDenied":          true,
	"InvalidAccessKeyId":    true,
	"SignatureDoesNotMatch": true,
	"NoSuchBucket":          true,
	"NoSuchKey":             true,
	"InvalidArgument":       true,
	"InvalidBucketName":     true,
	"InvalidObjectName":     true,
	"EntityTooLarge":        true,
	"MethodNotAllowed":      true,
	"NotImplemented":        true,
	"PreconditionFailed":    true,
}

// transientCodes are S3 error codes that mean "try again later".
var transientCodes = map[string]bool{
	"SlowDown":             true,
	"SlowDownRead":         true,
	"SlowDownWrite":        true,
	"ServiceUnavailable":   true,
	"InternalError":        true,
	"RequestTimeout":       true,
	"Throttling":           true,
	"ThrottlingException":  true,
	"RequestLimitExceeded": true,
	"RequestThrottled":     true,
	// Two conditional writes of one key raced; the next attempt sees the winner.
	"ConditionalRequestConflict": true,
}

// transient tells whether err is worth another attempt: throttling, a 5xx, or a network
// failure. Everything else, and anything after the caller's context ended, is permanent.
func transient(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch {
		case permanentCodes[resp.Code]:
			return false
		case transientCodes[resp.Code]:
			return true
		default:
			return resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests ||
				resp.StatusCode == http.StatusRequestTimeout
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A per-request timeout inside the HTTP client while the caller still waits.
		return true
	}
	// TLS set up wrongly (an untrusted certificate, https against a plain http port) stays wrong.
	if tlserr.IsSetup(err) {
		return false
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	var netErr net.Error
	var urlErr *url.Error
	return errors.As(err, &netErr) || errors.As(err, &urlErr)
}

// retry runs call up to MaxAttempts times while it fails transiently, with the service's
// one backoff between attempts (internal/backoff). The error says how many attempts were
// made.
func (s *Store) retry(ctx context.Context, op, uri string, call func() error) error {
	policy := backoff.Policy{Initial: s.cfg.BaseDelay, Max: maxBackoff, MaxAttempts: s.cfg.MaxAttempts}
	err := policy.Retry(ctx, func(attempt int) error {
		err := call()
		if err != nil && !transient(ctx, err) {
			return backoff.Permanent(permanentError(op, uri, attempt, err))
		}
		return err
	}, backoff.OnRetry(func(attempt int, delay time.Duration, err error) {
		s.log.WarnContext(ctx, "object storage call failed, retrying",
			"op", op, "uri", uri, "attempt", attempt, "max_attempts", s.cfg.MaxAttempts,
			"delay", delay, "err", err)
	}))
	gaveUp, ok := errors.AsType[*backoff.GiveUpError](err)
	switch {
	case !ok:
		return err
	case errors.Is(gaveUp.Reason, backoff.ErrAttempts):
		return &OpError{Op: op, URI: uri, Attempts: gaveUp.Attempts, Err: gaveUp.Last}
	default:
		return &OpError{Op: op, URI: uri, Attempts: gaveUp.Attempts, Err: fmt.Errorf("%w (gave up waiting to retry: %w)", gaveUp.Last, gaveUp.Reason)}
	}
}

func permanentError(op, uri string, attempts int, err error) error {
	opErr := &OpError{Op: op, URI: uri, Attempts: attempts, Err: err}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch {
		case resp.Code == "NoSuchKey":
			opErr.kind = ErrNotFound
		case resp.Code == "PreconditionFailed" || resp.StatusCode == http.StatusPreconditionFailed:
			opErr.kind = ErrConditionFailed
		}
	}
	return opErr
}
