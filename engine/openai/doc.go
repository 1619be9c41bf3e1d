// Package openai adapts an OpenAI-compatible chat completions endpoint
// (OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp's server) to the engine's
// LLM port, using github.com/sashabaranov/go-openai for the wire format.
//
// # Response formats
//
// A call asks for the strongest format allowed: the request's own Format, the
// Config's Format, and whatever the server has refused before, whichever is
// weakest. A request without a Format asks for json_schema when it carries a
// Schema, else json_object. json_schema sends the request's Schema with strict set; json_object
// asks for any JSON object; text sends no response_format at all.
//
// A server that lacks structured output answers 400 or 422. Such an answer
// counts as a refusal of the format only when it points at it: param
// "response_format", or a message mentioning response_format, json_schema,
// json_object, schema, grammar or structured output. The call then retries
// at once with the next weaker format (json_schema → json_object → text) and
// the Client remembers, per model, to start there from then on. Any other 400
// is a bad request: falling back on it would give up structured output for
// every later call because of one malformed request. The format that worked
// is reported in ChatResponse.Format.
//
// # Failures
//
// Transient failures are retried: 408, 429 and 5xx (except 501 and 505),
// attempt timeouts, refused or reset connections, and responses cut off
// mid-body. Waits use the service's one backoff (internal/backoff): capped
// exponential with equal jitter, never shorter than a Retry-After (or
// retry-after-ms) header asks, even above MaxDelay; when it asks for more
// than the retry budget has left, the call gives up at once. When MaxAttempts or MaxElapsed run out the error
// wraps engine.ErrLLMUnavailable and says what happened last.
//
// Everything else fails on the first attempt with an error wrapping
// engine.ErrLLMRejected: a refused API key (401/403), an unknown model (404),
// an input longer than the model's context window (code
// context_length_exceeded, or a message about the context length, at any
// status), any other 4xx, and requests that cannot be sent as built. A
// refusal for the context length also wraps a *ContextLengthError with the
// window and the prompt's tokens where the server named them, which the
// engine reads (engine.ContextWindowError) to judge again within the window.
//
// When ctx ends, Chat returns promptly with an error wrapping ctx.Err().
//
// # Concurrency
//
// Every chat completion request a Client sends (first attempts, retries,
// format fallbacks: the engine's chat calls, checks, samples and verify
// calls alike) takes a slot under a limit on the requests in flight to its
// server, and holds it for that HTTP attempt only, not while it waits to
// retry. The limit adapts (AIMD, internal/limit): it starts at
// Config.InitialConcurrency (4), grows by one after a round of successes
// with the limit in use, up to Config.MaxConcurrency (16), and halves, never
// below 1, on a 429, a 503, a 504 or an attempt timeout; growing back to the
// level that last overloaded takes longer each time it overloads again, so
// a server of fixed capacity sees few 429s. A Retry-After on a failed
// request, and a rate limit spent (x-ratelimit-remaining-requests or
// x-ratelimit-remaining-tokens at 0) until its x-ratelimit-reset-requests
// or x-ratelimit-reset-tokens, start no new request to the server before
// they pass. Requests wait for a slot in arrival order; the wait ends with
// the call's context and is not part of the attempt's Timeout.
// Config.FixedConcurrency turns adaptation off (a fixed limit of
// MaxConcurrency, no pauses); Config.OnConcurrency and Client.Concurrency
// tell the limit, the requests in flight and those waiting, for gauges.
// The context-window probes (ContextWindow) are not limited: they are not
// model calls.
package openai
