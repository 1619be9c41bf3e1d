package api

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Error codes of the API. Clients branch on the code, never on the message;
// the set only grows.
const (
	CodeUnauthorized     = "unauthorized"        // 401: no or bad credentials
	CodeForbidden        = "forbidden"           // 403: credentials fine, action not allowed
	CodeNotFound         = "not_found"           // 404: no such resource for this caller
	CodeMethodNotAllowed = "method_not_allowed"  // 405: see the Allow header
	CodeInvalidRequest   = "invalid_request"     // 400: the message names the problem
	CodeConflict         = "conflict"            // 409: the resource's state refuses it (a review id taken by another review)
	CodeUnreadable       = "unreadable_document" // 422: a document's file cannot be read; the message names it
	CodeTooLarge         = "too_large"           // 413: body over the limit
	CodeRateLimited      = "rate_limited"        // 429: the tenant is over its rate of submissions; see Retry-After, the message names the limit
	CodeBusy             = "busy"                // 503: at capacity; see Retry-After (not answered now; kept, as codes are never withdrawn)
	CodeUnavailable      = "unavailable"         // 503: a dependency (broker, storage) is down
	CodeInternal         = "internal"            // 500: a bug; logged
)

// errorBody is every error response: {"error":{"code":...,"message":...}},
// with details listing each problem of an invalid request.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Details []string `json:"details,omitempty"`
}

// writeJSON writes v as the JSON body with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":{"code":"internal","message":"the response could not be encoded"}}`)
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, status int, code, message string, details ...string) {
	writeJSON(w, status, errorBody{Error: errorDetail{Code: code, Message: message, Details: details}})
}

// Messages shared by responses that must not be told apart.
const (
	msgReportNotFound     = "report not found"
	msgValidationNotFound = "validation not found"
)

// writeUnauthorized answers 401 with the RFC 6750 challenge; tokenGiven
// adds error="invalid_token". Why the credentials were refused is logged,
// not told.
func writeUnauthorized(w http.ResponseWriter, tokenGiven bool) {
	challenge := `Bearer realm="rulevalidator"`
	if tokenGiven {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	writeError(w, http.StatusUnauthorized, CodeUnauthorized, "missing or invalid bearer token")
}
