package callback

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers every delivery carries.
const (
	HeaderEventID   = "X-Rulevalidator-Event-Id"
	HeaderTimestamp = "X-Rulevalidator-Timestamp"
	HeaderSignature = "X-Rulevalidator-Signature"
)

// signatureVersion prefixes the signature; a new scheme gets a new version
// and receivers accept whichever they know.
const signatureVersion = "v1"

// ErrInvalidSignature marks a delivery whose signature, timestamp or body
// does not check out.
var ErrInvalidSignature = errors.New("callback: invalid signature")

// Sign is the X-Rulevalidator-Signature value for body sent at timestamp
// (unix seconds): v1=<hex HMAC-SHA256(secret, timestamp + "." + body)>.
// Signing the timestamp with the body lets a receiver refuse replays.
func Sign(secret []byte, timestamp string, body []byte) string {
	return signatureVersion + "=" + hex.EncodeToString(mac(secret, timestamp, body))
}

func mac(secret []byte, timestamp string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(timestamp))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a delivery as a receiver does: timestamp is the
// X-Rulevalidator-Timestamp header, signature the X-Rulevalidator-Signature
// header (one or more comma-separated v1=<hex> entries, so that a sender
// may sign with an old and a new secret while they rotate) and body the raw
// request body. The timestamp must be within tolerance of now. Errors match
// ErrInvalidSignature and say which check failed. The comparison takes
// constant time.
func Verify(secret []byte, timestamp, signature string, body []byte, now time.Time, tolerance time.Duration) error {
	secs, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q is not unix seconds", ErrInvalidSignature, timestamp)
	}
	sent := time.Unix(secs, 0)
	if skew := now.Sub(sent); skew > tolerance || skew < -tolerance {
		return fmt.Errorf("%w: timestamp %s is %v away from now, over the tolerance of %v", ErrInvalidSignature, sent.UTC().Format(time.RFC3339), skew.Round(time.Second), tolerance)
	}
	want := mac(secret, timestamp, body)
	found := false
	for entry := range strings.SplitSeq(signature, ",") {
		version, value, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok || version != signatureVersion {
			continue
		}
		found = true
		got, err := hex.DecodeString(value)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	if !found {
		return fmt.Errorf("%w: no %s= entry in %q", ErrInvalidSignature, signatureVersion, signature)
	}
	return fmt.Errorf("%w: no %s signature matches the body", ErrInvalidSignature, signatureVersion)
}
