// Package api is rulevalidator's HTTP API: report downloads for tenants and
// for internal callers, asynchronous validations (submit, then poll or get a
// callback), and the operational endpoints (health, readiness, metrics).
//
// Public routes take a bearer JWT; the caller's tenant comes from the
// verified token and nowhere else, and every resource of another tenant is
// answered exactly as a missing one. A report reference id that
// report.ValidReferenceID refuses (wrong length or alphabet, upper case,
// encoded slashes or dots, overlong) is answered the same way: 404
// not_found with the same body and headers as a missing report, so ids
// cannot be probed. Internal routes take the internal callers' shared token:
// report downloads for any tenant, and the asynchronous execution path
// (POST /internal/execute-async, a job handle at once, the result posted to
// a callback) with its status route.
// Errors are JSON, {"error":{"code","message"}}, with the codes listed in
// errors.go; 401 carries a Bearer challenge, 405 an Allow header, 429 (a
// tenant over its rate of submissions, Config.RateLimit) a Retry-After.
//
// Validations go to the requests topic through the Submitter; the serve
// pipeline judges them and stores the result in a jobs.ObjectStore, or a
// jobfeed.Feed brings their events back into a jobs.MemoryStore, for GET to
// answer. Callbacks are the pipeline's (package outbox delivers them); the
// API only checks the URL.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"rulevalidator/auth"
	"rulevalidator/docread"
	"rulevalidator/internal/tracing"
	"rulevalidator/jobs"
	"rulevalidator/reviews"
	"rulevalidator/schemas"
	"rulevalidator/usage"
)

// TokenVerifier checks public bearer tokens (an *auth.Verifier).
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (auth.Principal, error)
}

// InternalVerifier checks the internal callers' token (an *auth.StaticToken).
type InternalVerifier interface {
	Verify(token string) error
}

// Submitter queues validation requests for the serve pipeline (serve wires
// a *producer.RequestWriter on the requests topic). Submit returns once the
// request is queued; for a request too large to queue as one message, the
// error wraps ErrRequestTooLarge.
type Submitter interface {
	Submit(ctx context.Context, sub Submission) error
}

// Submission is one validation request to queue, with the W3C trace context
// of the HTTP request it came by, which it carries on: a well-formed
// traceparent and its tracestate, both empty when there is none.
type Submission struct {
	Request     *schemas.Request
	Traceparent string
	Tracestate  string
}

// ErrRequestTooLarge is wrapped by a Submitter's error for a request larger
// than the queue takes as one message: submitting it again will not help,
// sending its documents by uri will.
var ErrRequestTooLarge = errors.New("api: the request is larger than the requests topic takes as one message")

// ClaimChecker says whether a tenant may name an object as a claim check (an
// *objstore.Store); a refusal wraps bucket.ErrClaimRefused.
type ClaimChecker interface {
	CheckClaim(tenant, uri string) error
}

// CallbackChecker says whether a callback URL may receive callbacks (a
// *callback.Notifier).
type CallbackChecker interface {
	CheckURL(rawURL string) error
}

// RateLimiter admits a tenant's submissions at its rate (a *tenants.RateLimiter).
type RateLimiter interface {
	// Admit takes one submission of tenant. A refusal is an error whose message names the
	// limit, with how long until a submission would be admitted.
	Admit(tenant string) (retryAfter time.Duration, err error)
}

// UsageSource reads a tenant's usage by hour (a *usage.Store). A range it refuses wraps
// usage.ErrRange.
type UsageSource interface {
	Hours(ctx context.Context, tenant string, from, to time.Time) (usage.Report, error)
}

// Instrumenter counts and times requests per route (a *metrics.Metrics).
type Instrumenter interface {
	InstrumentHTTP(route string, h http.Handler) http.Handler
}

// Check is one readiness probe, such as broker, storage or model.
type Check struct {
	Name  string
	Probe func(ctx context.Context) error
}

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// Verifier checks the public routes' JWTs; nil disables those routes
	// (404), leaving the internal and operations ones.
	Verifier TokenVerifier
	// Internal checks the internal routes' token; nil disables them (404).
	Internal InternalVerifier
	// Reports serves report downloads; nil disables them (404).
	Reports ReportSource
	// Submitter publishes validations to Kafka; nil disables the routes
	// that submit them (404).
	Submitter Submitter
	// Jobs tracks validations: a *jobs.ObjectStore (durable, shared by
	// every replica) or a *jobs.MemoryStore (per process; the default, with
	// its defaults).
	Jobs jobs.Store
	// Reviews keeps people's reviews of verdicts and the review queue; nil
	// disables the review routes (404) and leaves reviews out of a
	// validation's status.
	Reviews reviews.Store
	// ReviewPublisher publishes each review to the reviews topic (a
	// *producer.ReviewWriter); nil publishes none.
	ReviewPublisher reviews.Publisher
	// ReviewScope, when set, is the scope a token needs to post reviews.
	ReviewScope string
	// Pages renders the pages of the PDFs kept with validations, for the
	// review page; nil shows every page as its text.
	Pages PageRenderer
	// PageCacheSize is how many rendered pages are kept (default 64).
	PageCacheSize int
	// ReviewMetrics counts reviews (a *metrics.Metrics); optional.
	ReviewMetrics reviews.Observer
	// Documents reads the documents a submission carries as files (data)
	// before it is queued, so that one that cannot be read is answered 422
	// naming it instead of failing later; nil queues them unread. Documents
	// by uri are read by the pipeline.
	Documents DocumentReader
	// Claims checks, at submission, that every document given by uri names
	// an object the request's tenant may read, answering 403 naming the
	// document otherwise; nil leaves the check to the pipeline, which
	// dead-letters such a request (claim_refused) without reading the object.
	Claims ClaimChecker
	// Callbacks checks options.callback_url at submission; the serve
	// pipeline writes the callback to the callbacks topic, delivered from
	// there (package outbox). Nil refuses requests that ask for a callback.
	Callbacks CallbackChecker
	// RateLimit, when set, admits each tenant's submissions (POST /v1/validations, for the
	// token's tenant, and POST /internal/execute-async, for the tenant the request names)
	// at its rate, answering 429 rate_limited with Retry-After past it. Every submission
	// counts, one that repeats a request id included.
	RateLimit RateLimiter
	// Usage serves GET /v1/usage, the token's tenant's usage by hour (a *usage.Store); nil
	// disables the route (404).
	Usage UsageSource
	// Readiness lists what /readyz probes, each with ReadyTimeout (default 2s).
	Readiness    []Check
	ReadyTimeout time.Duration
	// Metrics instruments every route under its pattern; optional.
	Metrics Instrumenter
	// MaxBodyBytes bounds request bodies (default 8 MiB); past it, 413.
	MaxBodyBytes int64
	// RequestTimeout bounds every request but downloads (default 30s).
	RequestTimeout time.Duration
	// DownloadTimeout bounds a download, streaming included (default 5m,
	// the WriteTimeout of NewHTTPServer).
	DownloadTimeout time.Duration
	// TracerProvider makes a SERVER span per request on a route, continuing
	// the caller's traceparent (see trace.go); nil makes none.
	TracerProvider trace.TracerProvider
	Logger         *slog.Logger
	// Now is the clock (tests).
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.Jobs == nil {
		c.Jobs = jobs.NewMemoryStore(jobs.MemoryStoreConfig{})
	}
	if c.PageCacheSize == 0 {
		c.PageCacheSize = 64
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 2 * time.Second
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 8 << 20
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.DownloadTimeout == 0 {
		c.DownloadTimeout = 5 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// DocumentReader reads a document's file (a *docread.Reader).
type DocumentReader interface {
	Read(ctx context.Context, src docread.Source) (*docread.Document, error)
}

// Validate reports the first problem with the configuration.
func (c *Config) Validate() error {
	switch {
	case c.PageCacheSize < 1:
		return fmt.Errorf("api: PageCacheSize %d must be positive", c.PageCacheSize)
	case c.MaxBodyBytes < 1:
		return fmt.Errorf("api: MaxBodyBytes %d must be positive", c.MaxBodyBytes)
	case c.RequestTimeout <= 0 || c.DownloadTimeout <= 0 || c.ReadyTimeout <= 0:
		return fmt.Errorf("api: RequestTimeout %v, DownloadTimeout %v and ReadyTimeout %v must be positive", c.RequestTimeout, c.DownloadTimeout, c.ReadyTimeout)
	}
	for i, check := range c.Readiness {
		if check.Name == "" || check.Probe == nil {
			return fmt.Errorf("api: Readiness[%d] needs a Name and a Probe", i)
		}
	}
	return nil
}

// Server serves the API. It is safe for concurrent use.
type Server struct {
	cfg   Config
	log   *slog.Logger
	pages *pageCache
	// reviews records posted reviews; nil without cfg.Reviews.
	reviews *reviews.Recorder
	tracer  trace.Tracer
}

// New checks cfg (after filling in defaults) and returns a Server.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "api"), pages: newPageCache(cfg.PageCacheSize),
		tracer: tracing.OrNoop(cfg.TracerProvider).Tracer(tracerName)}
	if cfg.Reviews != nil {
		s.reviews = &reviews.Recorder{Store: cfg.Reviews, Publisher: cfg.ReviewPublisher, Observer: cfg.ReviewMetrics, Now: cfg.Now}
	}
	return s, nil
}

// Route patterns, also the routes' metric labels.
const (
	RouteReport         = "GET /rule-validation-reports/{reference_id}"
	RouteInternalReport = "GET /internal/rule-validation-reports/{reference_id}"
	RouteSubmit         = "POST /v1/validations"
	RouteValidation     = "GET " + jobs.StatusPath + "{request_id}"
	RouteUsage          = "GET /v1/usage"
	RouteHealth         = "GET /healthz"
	RouteReady          = "GET /readyz"
	RouteMetrics        = "GET /metrics"
	RouteExecuteAsync   = "POST /internal/execute-async"
	RouteExecution      = "GET /internal/execute-async/{job_id}"
	executePathPrefix   = "/internal/execute-async/"
)

// Handler serves the public and internal routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	if s.cfg.Verifier != nil {
		s.handle(mux, RouteReport, s.cfg.DownloadTimeout, http.HandlerFunc(s.getReport))
		s.handle(mux, RouteSubmit, s.cfg.RequestTimeout, http.HandlerFunc(s.submitValidation))
		s.handle(mux, RouteValidation, s.cfg.RequestTimeout, http.HandlerFunc(s.getValidation))
		if s.cfg.Usage != nil {
			s.handle(mux, RouteUsage, s.cfg.RequestTimeout, http.HandlerFunc(s.getUsage))
		}
		if s.cfg.Reviews != nil {
			s.handle(mux, RoutePostReview, s.cfg.RequestTimeout, http.HandlerFunc(s.postReview))
			s.handle(mux, RouteQueue, s.cfg.RequestTimeout, http.HandlerFunc(s.getQueue))
			s.handle(mux, RouteAgreement, s.cfg.RequestTimeout, http.HandlerFunc(s.getAgreement))
			s.handle(mux, RouteReviewedReport, s.cfg.DownloadTimeout, http.HandlerFunc(s.getReviewedReport))
			s.handle(mux, RouteDocuments, s.cfg.RequestTimeout, http.HandlerFunc(s.getDocuments))
			s.handle(mux, RouteDocumentPage, s.cfg.RequestTimeout, http.HandlerFunc(s.getDocumentPage))
		}
	}
	s.handle(mux, RouteInternalReport, s.cfg.DownloadTimeout, http.HandlerFunc(s.getInternalReport))
	s.handle(mux, RouteExecuteAsync, s.cfg.RequestTimeout, http.HandlerFunc(s.executeAsync))
	s.handle(mux, RouteExecution, s.cfg.RequestTimeout, http.HandlerFunc(s.getExecution))
	return base(newRouter(mux, s.instrument), s.cfg.MaxBodyBytes, s.log)
}

// OpsHandler serves /healthz, /readyz and, when metrics is not nil,
// /metrics. Serve it on its own listener, out of the public one's reach.
func (s *Server) OpsHandler(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	s.handle(mux, RouteHealth, s.cfg.RequestTimeout, http.HandlerFunc(s.healthz))
	s.handle(mux, RouteReady, s.cfg.RequestTimeout, http.HandlerFunc(s.readyz))
	if metrics != nil {
		mux.Handle(RouteMetrics, metrics)
	}
	return base(newRouter(mux, s.instrument), s.cfg.MaxBodyBytes, s.log)
}

func (s *Server) handle(mux *http.ServeMux, pattern string, timeout time.Duration, h http.Handler) {
	mux.Handle(pattern, s.traced(pattern, s.instrument(pattern, withTimeout(h, timeout))))
}

func (s *Server) instrument(route string, h http.Handler) http.Handler {
	if s.cfg.Metrics == nil {
		return h
	}
	return s.cfg.Metrics.InstrumentHTTP(route, h)
}

// NewHTTPServer returns an http.Server for h with timeouts fit for this API:
// headers within 5s, the body within 1m, the response (downloads) within 5m,
// idle connections kept 2m, headers up to 64 KiB.
func NewHTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}
