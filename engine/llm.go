package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"rulevalidator/verdict"
)

// ResponseFormat is how strictly the model is asked to shape its answer.
type ResponseFormat string

const (
	// FormatJSONSchema: structured output constrained by a JSON Schema.
	FormatJSONSchema ResponseFormat = "json_schema"
	// FormatGrammar: a llama.cpp GBNF grammar rendered from the request's
	// GrammarSchema, for llama.cpp-family servers that lack json_schema. It
	// allows one spelling of each answer, compact JSON, where the servers'
	// own schema grammars allow whitespace between every token, which a
	// small model spends a quarter of its output on.
	FormatGrammar ResponseFormat = "grammar"
	// FormatJSONObject: any JSON object.
	FormatJSONObject ResponseFormat = "json_object"
	// FormatText: plain text; the output contract in the prompt is all there is.
	FormatText ResponseFormat = "text"
)

// ResponseFormats are the response formats, strongest first: the order an
// LLM falls back along when a server refuses one.
func ResponseFormats() []ResponseFormat {
	return []ResponseFormat{FormatJSONSchema, FormatGrammar, FormatJSONObject, FormatText}
}

// ValidateFormat reports whether f is one of ResponseFormats, naming them
// when it is not.
func ValidateFormat(f ResponseFormat) error {
	all := ResponseFormats()
	if slices.Contains(all, f) {
		return nil
	}
	names := make([]string, len(all))
	for i, known := range all {
		names[i] = string(known)
	}
	return fmt.Errorf("%q is not one of %s", f, strings.Join(names, ", "))
}

// EvidenceMode is how the model is asked to give its evidence.
type EvidenceMode string

const (
	// EvidenceCite shows the material as passages behind short ids and asks
	// for the id of each passage a verdict rests on (optionally with the
	// exact words inside it): the engine copies the text, so evidence is
	// verbatim by construction, and a grammar-constrained server can only
	// cite ids that exist.
	EvidenceCite EvidenceMode = "cite"
	// EvidenceQuote shows the material as it is and asks for verbatim
	// quotes, which are anchored to the documents (exact, normalised,
	// fuzzy, elided).
	EvidenceQuote EvidenceMode = "quote"
)

func (m EvidenceMode) validate() error {
	switch m {
	case EvidenceCite, EvidenceQuote:
		return nil
	}
	return fmt.Errorf("engine: Evidence %q is not one of cite, quote", m)
}

// Message is one chat message.
type Message struct {
	Role    string // "system", "user" or "assistant"
	Content string
}

// CallPurpose says what a model call is for, so that where a request's
// model time goes can be told apart: its judging, its re-asks, its checks.
type CallPurpose string

// The purposes of the engine's calls.
const (
	// PurposeJudge is a call's first ask of its rules.
	PurposeJudge CallPurpose = "judge"
	// PurposeReask asks again for the rules whose answer failed the checks.
	PurposeReask CallPurpose = "reask"
	// PurposeRationale asks for the rationales of verdicts that stand.
	PurposeRationale CallPurpose = "rationale"
	// PurposeSample asks a call's question again at the sampling
	// temperature (ConfidenceSamples).
	PurposeSample CallPurpose = "sample"
	// PurposeCheck is a verdict's check (ConfidenceVerify).
	PurposeCheck CallPurpose = "check"
	// PurposeProbe is a short call of the instruction-placement decision.
	PurposeProbe CallPurpose = "probe"
)

// CallPurposes is every purpose, in the order a request's calls come: its
// own asks, what asks again, then the calls around them.
func CallPurposes() []CallPurpose {
	return []CallPurpose{PurposeJudge, PurposeReask, PurposeRationale, PurposeSample, PurposeCheck, PurposeProbe}
}

// ChatRequest is one call to the model.
type ChatRequest struct {
	// Purpose says what the call is for; it is not sent to the server.
	Purpose  CallPurpose
	Model    string
	Messages []Message
	// Format is the preferred response format; an LLM may fall back to a weaker
	// one when the server refuses it, and reports the one used.
	Format ResponseFormat
	// Schema constrains the answer when Format is FormatJSONSchema.
	SchemaName string
	Schema     json.RawMessage
	// GrammarSchema is a stricter schema for servers that enforce one with a
	// grammar (llama.cpp); an LLM may send it where the API has no schema
	// support of its own. Optional.
	GrammarSchema json.RawMessage
	// Temperature, when set, is sent with the call, 0 included (the
	// OpenAI client leaves a zero out, and a server then samples at its
	// default); nil leaves the server's default. Models that take no
	// sampling parameters (OpenAI's reasoning models) are sent none.
	Temperature *float32
	// MaxTokens caps the answer when non-zero.
	MaxTokens int
	// LogProbs asks for the log-probability of each token of the answer,
	// with the likeliest alternatives at its position, where the server
	// gives them (ChatResponse.Tokens).
	LogProbs bool
}

// Temperature is t as a ChatRequest's Temperature.
func Temperature(t float32) *float32 { return &t }

// ChatResponse is the model's answer to one call.
type ChatResponse struct {
	Content string
	// Format is the response format the server accepted.
	Format ResponseFormat
	Model  string
	// Usage counts this call's tokens (LLMCalls is 1).
	Usage verdict.Usage
	// Tokens are the answer's tokens with their log-probabilities, in
	// order, when the request asked for them and the server gave them;
	// nil otherwise.
	Tokens []TokenLogProb
}

// TokenLogProb is one token of an answer: its text, its natural-log
// probability, and the likeliest tokens the model weighed at its place
// (the chosen one among them, as servers list it).
type TokenLogProb struct {
	Text    string
	LogProb float64
	Top     []TokenAlternative
}

// TokenAlternative is a token the model weighed at a place of its answer.
type TokenAlternative struct {
	Text    string
	LogProb float64
}

// LLM is the port the engine judges through. Implementations retry transient
// transport failures themselves and return errors wrapping ErrLLMUnavailable
// (the model could not be reached; try again later) or ErrLLMRejected (the
// request itself was refused; trying again will not help).
type LLM interface {
	Chat(ctx context.Context, req ChatRequest) (ChatResponse, error)
}

// ContextWindowError is what an LLM's error implements, besides wrapping ErrLLMRejected, when
// the server refused a prompt too long for the model's context window. ContextWindow is the
// window the server named, in tokens, 0 when it named none. The engine finds it with
// errors.As and, when it names a window smaller than the one assumed, judges again within it.
type ContextWindowError interface {
	error
	ContextWindow() int
}

var (
	// ErrLLMUnavailable: transport failures outlasted the retry budget.
	ErrLLMUnavailable = errors.New("model unavailable")
	// ErrLLMRejected: the server refused the request permanently (bad
	// credentials, bad request, context length exceeded).
	ErrLLMRejected = errors.New("model rejected the request")
	// ErrInvalidOutput: the model's answer still had problems when the
	// output-retry budget ran out.
	ErrInvalidOutput = errors.New("model output invalid")
	// ErrInvalidRuleset and ErrInvalidInput mark bad requests; no model call is made.
	ErrInvalidRuleset = errors.New("invalid ruleset")
	ErrInvalidInput   = errors.New("invalid input")
)
