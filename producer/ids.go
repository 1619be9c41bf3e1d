package producer

import "rulevalidator/internal/ids"

// NewRequestID is a random UUID (version 4), the request id given to a
// request submitted without one (ids.NewRequestID).
func NewRequestID() string { return ids.NewRequestID() }

// CheckTraceparent checks the W3C Trace Context form
// version-traceid-parentid-flags, and says what is wrong
// (ids.CheckTraceparent).
func CheckTraceparent(s string) error { return ids.CheckTraceparent(s) }

// NewTraceparent starts a new sampled trace (ids.NewTraceparent).
func NewTraceparent() string { return ids.NewTraceparent() }
