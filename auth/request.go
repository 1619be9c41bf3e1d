package auth

import (
	"fmt"
	"net/http"
	"strings"
)

// ErrNoToken says a request carried no Authorization header at all, which an
// HTTP layer may answer without error details (RFC 6750 §3.1). It wraps
// ErrUnauthorized.
var ErrNoToken = fmt.Errorf("%w: no Authorization header", ErrUnauthorized)

// FromRequest returns the token of the request's "Authorization: Bearer
// <token>" header; the scheme is matched case-insensitively. Tokens in query
// strings or bodies are not looked for. Errors wrap ErrUnauthorized.
func FromRequest(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return "", ErrNoToken
	case 1:
	default:
		return "", unauthorized("%d Authorization headers, want one", len(values))
	}
	header := values[0]
	if strings.TrimSpace(header) == "" {
		return "", unauthorized("empty Authorization header")
	}
	scheme, token, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", unauthorized("Authorization scheme is not Bearer")
	}
	token = strings.TrimLeft(token, " ")
	if token == "" {
		return "", unauthorized("Bearer token is empty")
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return "", unauthorized("Bearer token holds whitespace")
	}
	return token, nil
}
