package openai

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"rulevalidator/engine"
	"rulevalidator/internal/backoff"
	"rulevalidator/verdict"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultTimeout     = 120 * time.Second
	DefaultMaxAttempts = 6
	DefaultMaxElapsed  = 5 * time.Minute
	DefaultBaseDelay   = 500 * time.Millisecond
	DefaultMaxDelay    = 30 * time.Second
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
	// Sleep waits d or until ctx is done; nil uses backoff.Sleep. Tests
	// inject it.
	Sleep func(ctx context.Context, d time.Duration) error
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
	if c.MaxAttempts < 0 {
		return fmt.Errorf("openai: MaxAttempts must not be negative, got %d", c.MaxAttempts)
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
