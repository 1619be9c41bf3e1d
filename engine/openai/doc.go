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
package openai
