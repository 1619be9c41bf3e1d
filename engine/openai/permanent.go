package openai

import "rulevalidator/engine"

// Permanent reports whether the same call would fail the same way until
// something outside the request changes: the server refused the request
// (engine.ErrLLMRejected), or this service's configuration is wrong (a
// refused API key, an unknown configured model, an untrusted certificate).
// A server that stayed unreachable through the retry budget is not
// permanent: a later call may find it back. The engine reads it to stop
// asking a server that cannot answer.
func (e *chatError) Permanent() bool {
	return e.kind == engine.ErrLLMRejected || (e.fault != "" && e.fault != CauseModelUnavailable)
}
