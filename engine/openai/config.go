package openai

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/trace"

	"rulevalidator/engine"
	"rulevalidator/internal/backoff"
	"rulevalidator/internal/limit"
	"rulevalidator/verdict"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultTimeout     = 120 * time.Second
	DefaultMaxAttempts = 6
	DefaultMaxElapsed  = 5 * time.Minute
	DefaultBaseDelay   = 500 * time.Millisecond
	DefaultMaxDelay    = 30 * time.Second
	// DefaultMaxConcurrency and DefaultInitialConcurrency bound and start
	// the adaptive limit on the calls in flight to the endpoint.
	DefaultMaxConcurrency     = limit.DefaultMax
	DefaultInitialConcurrency = limit.DefaultInitial
)

// Config configures a Client. Zero durations and counts take the defaults above.
type Config struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or
	// http://127.0.0.1:8080/v1; chat completions are posted to
	// BaseURL + "/chat/completions".
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers).
	APIKey string
	// Model is the model this service is configured with. A 404 for it is
	// the operator's to fix (an environment fault); a 404 for a model a
	// request chose is that request's fault. Empty treats every model as
	// chosen by the service.
	Model string
	// Timeout bounds one HTTP attempt (default 120s).
	Timeout time.Duration
	// MaxAttempts bounds the requests sent for one call in one response
	// format when transient failures repeat (default 6; 1 means no
	// retries). A format fallback starts a fresh count; MaxElapsed bounds
	// the call as a whole.
	MaxAttempts int
	// MaxElapsed bounds the time spent retrying one call: no retry starts
	// after it (default 5m).
	MaxElapsed time.Duration
	// BaseDelay and MaxDelay shape the backoff between attempts: the n-th
	// wait is drawn uniformly from [c/2, c], c = min(MaxDelay,
	// BaseDelay·2^(n-1)) (defaults 500ms and 30s; see internal/backoff).
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// Format is the strongest response format to ask for; "" starts at
	// json_schema and falls back as the server requires, along
	// engine.ResponseFormats: json_schema, grammar, json_object, text.
	// json_object never tries the stronger ones; text never sends
	// response_format.
	Format engine.ResponseFormat
	// HTTPClient sends the requests; nil uses a client with a transport of
	// its own (newTransport). Its own Timeout, if any, also applies.
	HTTPClient *http.Client
	// OmitSchemaHint stops the adapter from sending the JSON Schema inside a
	// json_object response_format ({"type":"json_object","schema":{...}}).
	// llama.cpp-based servers (llama-cpp-python) enforce that schema with a
	// grammar although they lack json_schema; most other servers ignore it.
	// Set it for a server that rejects the extra field.
	OmitSchemaHint bool
	// Logger receives retry and fallback logs; nil uses slog.Default().
	Logger *slog.Logger
	// TracerProvider makes a CLIENT span per attempt (see trace.go); nil
	// makes none.
	TracerProvider trace.TracerProvider
	// Sleep waits d or until ctx is done; nil uses backoff.Sleep. Tests
	// inject it.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxConcurrency bounds the chat completion requests this Client has in
	// flight to BaseURL at once, across all its calls (default 16; 0 means
	// the default). Below it the limit adapts to what the server takes
	// (see internal/limit): it starts at InitialConcurrency, grows by one
	// after a round of successes with the limit in use, and halves on a
	// 429, a 503, a 504 or an attempt timeout, never below 1. A Retry-After
	// on a failed request, and a rate limit spent (x-ratelimit-remaining-
	// requests or -tokens at 0) until its x-ratelimit-reset-requests or
	// -tokens, start no new request to the server before they pass (at most
	// MaxElapsed); requests in flight go on. A request waits for a slot in
	// arrival order and holds it for its HTTP attempt only: not while it
	// waits to retry, so every attempt of a call, retries and format
	// fallbacks included, waits anew. The wait is not part of Timeout; it
	// ends with the call's context.
	MaxConcurrency int
	// InitialConcurrency is the limit the Client starts at (default 4, at
	// most MaxConcurrency; 0 means the default). Ignored with
	// FixedConcurrency.
	InitialConcurrency int
	// FixedConcurrency turns adaptation off: the limit is MaxConcurrency,
	// always, and no answer pauses the endpoint (each call still waits a
	// Retry-After it is sent before retrying).
	FixedConcurrency bool
	// OnConcurrency, when set, is told the state of the limit each time it
	// changes: a request taking or giving back a slot, one starting or
	// ending a wait for it, the limit moving. It is meant for gauges (the
	// limit, the requests in flight and waiting, labelled with the
	// Endpoint, a host: low-cardinality). It is called with the limiter's
	// lock held, so that the values arrive in order: it must return quickly
	// and must not call the Client. Client.Concurrency reads the same
	// state on demand.
	OnConcurrency func(Concurrency)
	// OnAttempt, when set, is called once after every HTTP attempt of every
	// Chat call: each retry and each response-format fallback is an attempt
	// of its own, so one call can make several. It is called from the
	// goroutine making the call, so it must be safe for concurrent use, and
	// it should return quickly.
	OnAttempt func(Attempt)
}

// Attempt is one HTTP request sent for a Chat call, as Config.OnAttempt
// sees it.
type Attempt struct {
	// Model is the model asked for; Format the response format sent.
	Model  string
	Format engine.ResponseFormat
	// N numbers the attempts of one call in one format from 1; a response
	// format fallback starts again at 1.
	N int
	// Status is the HTTP status of the response; 0 when none arrived (the
	// connection failed, the attempt timed out, the request was refused
	// before it was sent).
	Status int
	// Took is the attempt's time, from sending the request to reading the
	// answer or failing; the waits between attempts are not part of it.
	Took time.Duration
	// Queued is the time the attempt waited for a slot under the
	// endpoint's concurrency limit before it was sent (see
	// Config.MaxConcurrency); not part of Took.
	Queued time.Duration
	// Usage holds the tokens the server reported for a successful attempt;
	// zero for a failed one. Its LLMCalls is 0: an attempt is not a call.
	Usage verdict.Usage
	// Err is nil for a successful attempt, else what went wrong.
	Err error
	// FormatRefused says the server refused Format; the call falls back to
	// a weaker one.
	FormatRefused bool
}

func (c *Config) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxElapsed == 0 {
		c.MaxElapsed = DefaultMaxElapsed
	}
	if c.BaseDelay == 0 {
		c.BaseDelay = DefaultBaseDelay
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = DefaultMaxDelay
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	if c.InitialConcurrency == 0 {
		c.InitialConcurrency = min(DefaultInitialConcurrency, c.MaxConcurrency)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: newTransport()}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Sleep == nil {
		c.Sleep = backoff.Sleep
	}
}

// Validate reports the first thing wrong with c. Zero fields are valid: New
// fills them with defaults.
func (c Config) Validate() error {
	if c.BaseURL == "" {
		return errors.New("openai: BaseURL is required")
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("openai: BaseURL %q is not an absolute http(s) URL", c.BaseURL)
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"Timeout", c.Timeout},
		{"MaxElapsed", c.MaxElapsed},
		{"BaseDelay", c.BaseDelay},
		{"MaxDelay", c.MaxDelay},
	} {
		if d.value < 0 {
			return fmt.Errorf("openai: %s must not be negative, got %s", d.name, d.value)
		}
	}
	for _, n := range []struct {
		name  string
		value int
	}{
		{"MaxAttempts", c.MaxAttempts},
		{"MaxConcurrency", c.MaxConcurrency},
		{"InitialConcurrency", c.InitialConcurrency},
	} {
		if n.value < 0 {
			return fmt.Errorf("openai: %s must not be negative, got %d", n.name, n.value)
		}
	}
	if c.InitialConcurrency > 0 && c.MaxConcurrency > 0 && c.InitialConcurrency > c.MaxConcurrency {
		return fmt.Errorf("openai: InitialConcurrency %d exceeds MaxConcurrency %d", c.InitialConcurrency, c.MaxConcurrency)
	}
	if c.BaseDelay > 0 && c.MaxDelay > 0 && c.BaseDelay > c.MaxDelay {
		return fmt.Errorf("openai: BaseDelay %s exceeds MaxDelay %s", c.BaseDelay, c.MaxDelay)
	}
	if c.Format != "" {
		if err := engine.ValidateFormat(c.Format); err != nil {
			return fmt.Errorf("openai: Format %w", err)
		}
	}
	return nil
}

// Concurrency is the state of a Client's limit on the requests in flight to
// its server, as Config.OnConcurrency and Client.Concurrency tell it.
type Concurrency struct {
	// Endpoint is the server's host (host:port, from BaseURL).
	Endpoint string
	// Limit is the requests allowed in flight now; InFlight those sent and
	// not yet answered (above Limit for a while after it is cut); Waiting
	// those waiting for a slot.
	Limit, InFlight, Waiting int
}

// maxIdleConnsPerHost keeps a connection for each call in flight to the
// model server: calls run side by side (requests at once times calls per
// request), and net/http's default keeps two, so the rest would dial anew.
const maxIdleConnsPerHost = 64

// newTransport is net/http's default transport, cloned: a client's
// connections are its own, not shared with (and closed by) whatever else in
// the process uses http.DefaultTransport.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = maxIdleConnsPerHost
	return t
}
