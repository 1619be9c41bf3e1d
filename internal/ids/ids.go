// Package ids makes and checks the ids a request carries: its request id
// when the submitter gives none, and its W3C trace context (traceparent).
// It knows no transport: the API and the producers share it.
package ids

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// NewRequestID is a random UUID (version 4), the request id given to a
// request submitted without one.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

var traceparentPattern = regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$`)

// CheckTraceparent checks the W3C Trace Context form
// version-traceid-parentid-flags, and says what is wrong.
func CheckTraceparent(s string) error {
	m := traceparentPattern.FindStringSubmatch(s)
	switch {
	case m == nil:
		return fmt.Errorf("%q is not 00-<32 hex digits>-<16 hex digits>-<2 hex digits> in lower case", s)
	case strings.HasPrefix(s, "ff"):
		return fmt.Errorf("%q: version ff is invalid", s)
	case strings.Trim(m[1], "0") == "":
		return fmt.Errorf("%q: the trace id is all zeros", s)
	case strings.Trim(m[2], "0") == "":
		return fmt.Errorf("%q: the parent id is all zeros", s)
	}
	return nil
}

// NewTraceparent starts a new sampled trace.
func NewTraceparent() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("00-%x-%x-01", b[:16], b[16:])
}
