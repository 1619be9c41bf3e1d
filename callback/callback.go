// Package callback delivers signed webhook notifications: a JSON body POSTed
// to a URL the requester chose, signed with HMAC-SHA256 over the timestamp
// and the body, retried with capped exponential backoff on transient
// failures, and refused when the URL points at an internal address. The
// callbacks come from the callbacks topic (package outbox), which calls
// Deliver for each; the API only checks a URL with CheckURL.
//
// Receivers check deliveries with Verify and de-duplicate on the
// X-Rulevalidator-Event-Id header: delivery is at least once.
package callback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"rulevalidator/internal/backoff"
	"rulevalidator/internal/tracing"
)

// minSecretBytes is the shortest secret accepted: HMAC-SHA256's block of
// entropy, so that the signature cannot be forged by guessing the secret.
const minSecretBytes = 32

// Config configures a Notifier. Zero values take the documented defaults.
type Config struct {
	// Secret signs every delivery; at least 32 bytes. Required.
	Secret []byte
	// AllowHosts limits the hosts callbacks may go to: exact names or
	// *.domain patterns (any subdomain of domain, not domain itself),
	// case-insensitive. Empty allows any host.
	AllowHosts []string
	// AllowPrivate permits loopback, private, link-local and other internal
	// addresses. Off by default, so that a requester cannot aim the service
	// at its own network; the check runs on the address actually dialled,
	// after DNS resolution, which also defeats DNS rebinding.
	AllowPrivate bool
	// MaxAttempts is how many times one notification is tried (default 6).
	MaxAttempts int
	// BaseDelay is the wait after the first failed attempt, doubled after
	// each further one (default 1s), up to MaxDelay (default 1m). A
	// Retry-After longer than the backoff is honoured up to MaxDelay.
	BaseDelay, MaxDelay time.Duration
	// Timeout bounds one attempt, connecting included (default 10s).
	Timeout time.Duration
	// HTTPClient replaces the built-in client, and with it the dial-time
	// refusal of internal addresses: leave it nil outside tests.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Now is the clock used for the signed timestamp (tests).
	Now func() time.Time
	// OnDone, when set, is told the outcome of every notification once it is
	// delivered or given up (metrics, tests). It must not block.
	OnDone func(Delivery)
	// TracerProvider makes a CLIENT span per attempt (see trace.go), a child
	// of the span in Deliver's context; nil makes none. Every attempt
	// carries the trace context in traceparent either way.
	TracerProvider trace.TracerProvider
}

func (c *Config) setDefaults() {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 6
	}
	if c.BaseDelay == 0 {
		c.BaseDelay = time.Second
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = time.Minute
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports the first problem with the configuration.
func (c *Config) Validate() error {
	switch {
	case len(c.Secret) < minSecretBytes:
		return fmt.Errorf("callback: Secret is %d bytes; at least %d are required", len(c.Secret), minSecretBytes)
	case c.MaxAttempts < 1:
		return fmt.Errorf("callback: MaxAttempts %d must be at least 1", c.MaxAttempts)
	case c.BaseDelay <= 0 || c.MaxDelay < c.BaseDelay:
		return fmt.Errorf("callback: BaseDelay %v must be positive and MaxDelay %v at least BaseDelay", c.BaseDelay, c.MaxDelay)
	case c.Timeout <= 0:
		return fmt.Errorf("callback: Timeout %v must be positive", c.Timeout)
	}
	return nil
}

// Delivery is the outcome of one notification.
type Delivery struct {
	URL     string
	EventID string
	// Delivered is true when the receiver answered 2xx.
	Delivered bool
	Attempts  int
	// Status is the last HTTP status received, 0 when none was.
	Status int
	// Err says why the notification was given up; nil when delivered. It
	// matches ErrInterrupted when the process stopped first, ErrTargetRefused
	// when the URL or its address is not allowed.
	Err error
}

// Interrupted reports whether the notification was neither delivered nor
// given up, because the process was stopping (see Deliver).
func (d Delivery) Interrupted() bool { return errors.Is(d.Err, ErrInterrupted) }

// job is one notification being delivered.
type job struct {
	url     *url.URL
	payload []byte
	eventID string
}

// Notifier delivers notifications, each in its caller's goroutine (Deliver).
// It is safe for concurrent use.
type Notifier struct {
	cfg    Config
	policy *targetPolicy
	client *http.Client
	tracer trace.Tracer
}

// maxIdleConns is how many idle connections the built-in client keeps
// across receivers.
const maxIdleConns = 8

// New checks cfg (after filling in defaults) and returns a Notifier.
func New(cfg Config) (*Notifier, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	policy, err := newTargetPolicy(cfg.AllowHosts, cfg.AllowPrivate)
	if err != nil {
		return nil, err
	}
	cfg.Secret = bytes.Clone(cfg.Secret)
	client := cfg.HTTPClient
	if client == nil {
		dialer := policy.dialer()
		dialer.Timeout = cfg.Timeout
		client = &http.Client{
			Transport: &http.Transport{
				// No proxy: the dial check must see the receiver's address.
				Proxy:                 nil,
				DialContext:           dialer.DialContext,
				ForceAttemptHTTP2:     true,
				MaxIdleConns:          maxIdleConns,
				IdleConnTimeout:       90 * time.Second,
				TLSHandshakeTimeout:   cfg.Timeout,
				ResponseHeaderTimeout: cfg.Timeout,
			},
			// Redirects are not followed: they would lead past the host
			// allow-list. A 3xx counts as a refusal.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return &Notifier{cfg: cfg, policy: policy, client: client, tracer: tracing.OrNoop(cfg.TracerProvider).Tracer(tracerName)}, nil
}

// CheckURL reports whether rawURL may receive callbacks, as Deliver checks
// it: http or https, no user info, an allowed host and, unless
// AllowPrivate, no literal internal address. Errors match ErrTargetRefused.
// A name that resolves to an internal address passes here and is refused
// when delivering.
func (n *Notifier) CheckURL(rawURL string) error {
	_, err := n.policy.checkURL(rawURL)
	return err
}

// Deliver tries one notification now, in the calling goroutine, and returns
// its outcome once it is delivered, given up (the URL refused, an answer
// retrying will not change, or MaxAttempts spent) or interrupted. eventID is
// sent in the X-Rulevalidator-Event-Id header for receivers to de-duplicate
// on. It is interrupted, Err
// matching ErrInterrupted, when ctx ends, or when stopRetrying is closed
// while it waits to retry: an attempt under way when stopRetrying closes
// still finishes (within Timeout), so that a delivery is not cut off half
// sent. A nil stopRetrying never closes. OnDone is told the outcome too.
func (n *Notifier) Deliver(ctx context.Context, rawURL string, payload []byte, eventID string, stopRetrying <-chan struct{}) Delivery {
	u, err := n.policy.checkURL(rawURL)
	if err != nil {
		n.cfg.Logger.Warn("callback given up", "event_id", eventID, "reason", "refused", "err", err)
		d := Delivery{URL: rawURL, EventID: eventID, Err: err}
		n.done(d)
		return d
	}
	d := n.deliver(ctx, job{url: u, payload: payload, eventID: eventID}, stopRetrying)
	n.done(d)
	return d
}

// ErrInterrupted marks a notification given up because the process is
// stopping, not because of the receiver: see Deliver.
var ErrInterrupted = errors.New("callback: interrupted by shutdown")

// deliver tries one notification until it is delivered, refused, out of
// attempts, or interrupted by ctx or stopRetrying.
func (n *Notifier) deliver(ctx context.Context, j job, stopRetrying <-chan struct{}) Delivery {
	log := n.cfg.Logger.With("event_id", j.eventID, "url", logURL(j.url))
	d := Delivery{URL: j.url.String(), EventID: j.eventID}
	interrupted := func(err error) Delivery {
		log.Warn("callback interrupted by shutdown", "attempts", d.Attempts, "err", err)
		d.Err = fmt.Errorf("%w after %d attempts: %w", ErrInterrupted, d.Attempts, err)
		return d
	}
	policy := backoff.Policy{Initial: n.cfg.BaseDelay, Max: n.cfg.MaxDelay, MaxAttempts: n.cfg.MaxAttempts}
	err := policy.Retry(ctx, func(int) error {
		d.Attempts++
		status, retryAfter, err := n.attempt(ctx, j, d.Attempts)
		d.Status = status
		var retry retryableError
		switch {
		case err == nil, ctx.Err() != nil:
			return err
		case !errors.As(err, &retry):
			return backoff.Permanent(err)
		}
		// MaxDelay bounds the wait, a longer Retry-After included.
		return backoff.RetryAfter(err, min(retryAfter, n.cfg.MaxDelay))
	},
		backoff.Stop(stopRetrying, ErrInterrupted),
		backoff.OnRetry(func(attempt int, wait time.Duration, err error) {
			log.Info("callback attempt failed; retrying", "attempt", attempt, "status", d.Status, "err", err, "retry_in", wait)
		}))
	gaveUp, retried := errors.AsType[*backoff.GiveUpError](err)
	reason := "refused"
	switch {
	case err == nil:
		d.Delivered = true
		log.Debug("callback delivered", "attempts", d.Attempts, "status", d.Status)
		return d
	case retried && !errors.Is(gaveUp.Reason, backoff.ErrAttempts):
		return interrupted(gaveUp.Last)
	case retried:
		reason, err = "out of attempts", gaveUp.Last
	}
	log.Warn("callback given up", "reason", reason, "attempts", d.Attempts, "status", d.Status, "err", err)
	d.Err = err
	return d
}

func (n *Notifier) done(d Delivery) {
	if n.cfg.OnDone != nil {
		n.cfg.OnDone(d)
	}
}

// retryableError marks a failure another attempt may cure.
type retryableError struct{ err error }

func (e retryableError) Error() string { return e.err.Error() }
func (e retryableError) Unwrap() error { return e.err }

// maxDrainBytes is how much of a response body is read so that the
// connection can be reused; receivers are not expected to say much.
const maxDrainBytes = 64 << 10

// attempt POSTs once, the n-th time, in a span of its own. It returns the
// status (0 when none came back), the receiver's Retry-After (0 when none)
// and nil on 2xx, a retryableError for 408, 429, 5xx and network failures,
// any other error for the rest.
func (n *Notifier) attempt(ctx context.Context, j job, attempt int) (status int, wait time.Duration, err error) {
	ctx, span := n.startSpan(ctx, j.url, attempt)
	defer func() { endSpan(span, status, err) }()
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Timeout)
	defer cancel()
	timestamp := strconv.FormatInt(n.cfg.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.url.String(), bytes.NewReader(j.payload))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "rulevalidator-callback/1")
	req.Header.Set(HeaderEventID, j.eventID)
	req.Header.Set(HeaderTimestamp, timestamp)
	req.Header.Set(HeaderSignature, Sign(n.cfg.Secret, timestamp, j.payload))
	tracing.InjectHTTP(ctx, req.Header)
	resp, err := n.client.Do(req)
	if err != nil {
		// The client's error names the URL, query and all: the query is
		// dropped before it reaches a log line or a span.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			ue.URL = logURL(j.url)
		}
		if errors.Is(err, ErrTargetRefused) {
			return 0, 0, err
		}
		return 0, 0, retryableError{err}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrainBytes))
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return code, 0, nil
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500:
		return code, retryAfter(resp.Header.Get("Retry-After"), n.cfg.Now()), retryableError{fmt.Errorf("receiver answered %s", resp.Status)}
	default:
		return code, 0, fmt.Errorf("receiver answered %s, which retrying will not change", resp.Status)
	}
}

// retryAfter reads a Retry-After header: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs > 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// logURL drops the query, which may hold a receiver's token.
func logURL(u *url.URL) string {
	c := *u
	c.RawQuery, c.ForceQuery, c.Fragment = "", false, ""
	return c.String()
}
