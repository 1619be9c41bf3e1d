package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"strings"
)

// MinStaticTokenLen is the shortest shared token NewStaticToken accepts.
const MinStaticTokenLen = 32

// StaticToken checks the shared bearer token of internal callers. It keeps
// only the token's SHA-256, and prints as redacted.
type StaticToken struct {
	sum [sha256.Size]byte
}

// NewStaticToken refuses tokens shorter than MinStaticTokenLen bytes and tokens
// with surrounding whitespace (usually a newline read along from a file).
func NewStaticToken(token string) (*StaticToken, error) {
	if len(token) < MinStaticTokenLen {
		return nil, fmt.Errorf("static token has %d bytes, fewer than the %d required", len(token), MinStaticTokenLen)
	}
	if strings.TrimSpace(token) != token {
		return nil, fmt.Errorf("static token has surrounding whitespace")
	}
	return &StaticToken{sum: sha256.Sum256([]byte(token))}, nil
}

// Verify compares token with the configured one in constant time. Both sides
// are hashed first, so neither the content nor the length of the secret shows
// in the timing. The error wraps ErrUnauthorized.
func (s *StaticToken) Verify(token string) error {
	if token == "" {
		return unauthorized("empty static token")
	}
	got := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(got[:], s.sum[:]) != 1 {
		return unauthorized("static token does not match")
	}
	return nil
}

// String keeps the token's hash out of logs and error messages.
func (s *StaticToken) String() string { return "StaticToken(redacted)" }

// LogValue keeps the token's hash out of structured logs.
func (s *StaticToken) LogValue() slog.Value { return slog.StringValue(s.String()) }

// GoString keeps the token's hash out of %#v.
func (s *StaticToken) GoString() string { return s.String() }
