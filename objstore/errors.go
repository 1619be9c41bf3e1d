package objstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/minio/minio-go/v7"

	"rulevalidator/bucket"
	"rulevalidator/internal/tlserr"
)

// The errors of the object storage contract (package bucket), under the
// names callers already use.
var (
	// ErrNotFound: the object does not exist (S3's NoSuchKey).
	ErrNotFound = bucket.ErrNotFound
	// ErrTooLarge: the object is bigger than Config.MaxObjectBytes allows to read into memory.
	ErrTooLarge = bucket.ErrTooLarge
	// ErrConditionFailed: a conditional write found the object not as required (PutNew: it
	// exists; PutIfMatch: it changed). S3's PreconditionFailed.
	ErrConditionFailed = bucket.ErrConditionFailed
	// ErrClaimRefused: a claim check names an object its tenant may not read: outside the
	// buckets claim checks are read from, or outside the tenant's own claims prefix.
	ErrClaimRefused = bucket.ErrClaimRefused
)

// errNoSuchBucket: the configured bucket does not exist (found by Ping).
var errNoSuchBucket = errors.New("the bucket does not exist")

// OpError is the error of one failed call on the store: which operation, on which object,
// after how many attempts, and the cause (a minio.ErrorResponse for errors the server gave).
type OpError struct {
	Op       string // put, put-new, put-if-match, get, stat, delete, ensure-bucket, ping
	URI      string // s3://bucket/key, or s3://bucket for bucket calls
	Attempts int    // 0 when the call was refused before any request
	Err      error
	kind     error // a sentinel such as ErrNotFound, when one applies
}

func (e *OpError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "objstore: %s %s", e.Op, e.URI)
	if e.kind != nil {
		fmt.Fprintf(&b, ": %v", e.kind)
	}
	fmt.Fprintf(&b, ": %s", describe(e.Err))
	switch {
	case e.Attempts == 1:
		b.WriteString(" (1 attempt)")
	case e.Attempts > 1:
		fmt.Fprintf(&b, " (%d attempts)", e.Attempts)
	}
	return b.String()
}

func (e *OpError) Unwrap() []error {
	if e.kind != nil {
		return []error{e.kind, e.Err}
	}
	return []error{e.Err}
}

// describe adds the S3 error code and HTTP status to minio-go's bare message.
func describe(err error) string {
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) {
		return err.Error()
	}
	var b strings.Builder
	if resp.Code != "" {
		b.WriteString(resp.Code)
	}
	if resp.StatusCode != 0 {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "HTTP %d", resp.StatusCode)
	}
	if b.Len() == 0 {
		return err.Error()
	}
	return fmt.Sprintf("%s (%s)", err.Error(), b.String())
}

// Temporary reports whether err may go away if the call is made again later:
// the store was unreachable, overloaded or failing (after the retries New's
// config allows). A missing object, a refusal, a bad address or a bucket this
// service does not read are not temporary.
func Temporary(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var op *OpError
	if !errors.As(err, &op) || op.kind != nil {
		return false
	}
	return transient(context.Background(), op.Err)
}

// Fault causes an OpError reports for failures the operator must fix or wait out.
const (
	CauseStorageAuth        = "storage_auth"
	CauseStorageBucket      = "storage_bucket"
	CauseStorageUnavailable = "storage_unavailable"
	CauseTLS                = "tls"
	CauseNetwork            = "network"
)

// authCodes are S3 error codes that say this service's credentials are wrong or lack a
// permission: every later call fails the same way until the operator fixes them.
var authCodes = map[string]bool{
	"AccessDenied":          true,
	"InvalidAccessKeyId":    true,
	"SignatureDoesNotMatch": true,
	"InvalidSecurity":       true,
	"ExpiredToken":          true,
	"InvalidToken":          true,
}

// MessageFault reports whether the object named by the caller is to blame (it does not
// exist, is too large, the address is invalid) rather than the store or this service's
// configuration (credentials, bucket, TLS, network, an overloaded store).
func (e *OpError) MessageFault() bool { return e.FaultCause() == "" }

// FaultCause names what the operator must look at when the failure is not the message's
// fault, and is empty when it is.
func (e *OpError) FaultCause() string {
	if e.kind != nil {
		return "" // ErrNotFound, ErrTooLarge, ErrConditionFailed, ErrClaimRefused: the object the request named
	}
	var resp minio.ErrorResponse
	if errors.As(e.Err, &resp) {
		switch {
		case authCodes[resp.Code]:
			return CauseStorageAuth
		case resp.Code == "NoSuchBucket":
			return CauseStorageBucket
		case permanentCodes[resp.Code]:
			return ""
		case transientCodes[resp.Code], resp.StatusCode >= 500, resp.StatusCode == 0,
			resp.StatusCode == 429, resp.StatusCode == 408:
			return CauseStorageUnavailable
		case resp.StatusCode == 401 || resp.StatusCode == 403:
			return CauseStorageAuth
		}
		return ""
	}
	if errors.Is(e.Err, errNoSuchBucket) {
		return CauseStorageBucket
	}
	if tlserr.IsSetup(e.Err) {
		return CauseTLS
	}
	if e.Attempts == 0 {
		return "" // refused before any request: the address the caller gave
	}
	if transient(context.Background(), e.Err) || errors.Is(e.Err, context.DeadlineExceeded) {
		return CauseNetwork
	}
	return ""
}
