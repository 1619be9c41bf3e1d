package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"

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

// retry runs call up to MaxAttempts times while it fails transiently, waiting an
// exponentially growing, jittered delay between attempts. The error says how many
// attempts were made.
func (s *Store) retry(ctx context.Context, op, uri string, call func() error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = call()
		if err == nil {
			return nil
		}
		if !transient(ctx, err) {
			return permanentError(op, uri, attempt, err)
		}
		if attempt >= s.cfg.MaxAttempts {
			return &OpError{Op: op, URI: uri, Attempts: attempt, Err: err}
		}
		delay := backoff(s.cfg.BaseDelay, attempt)
		s.log.WarnContext(ctx, "object storage call failed, retrying",
			"op", op, "uri", uri, "attempt", attempt, "max_attempts", s.cfg.MaxAttempts,
			"delay", delay, "err", err)
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return &OpError{Op: op, URI: uri, Attempts: attempt, Err: fmt.Errorf("%w (gave up waiting to retry: %w)", err, context.Cause(ctx))}
		case <-timer.C:
		}
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

// backoff is base·2^(attempt-1), capped, with the upper half jittered so that clients that
// failed together don't retry together.
func backoff(base time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, maxBackoff)
	if half := d / 2; half > 0 {
		d = half + rand.N(half+1)
	}
	return d
}
