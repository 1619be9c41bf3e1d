package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"rulevalidator/api"
	"rulevalidator/auth"
	"rulevalidator/callback"
	"rulevalidator/engine"
	"rulevalidator/jobfeed"
	"rulevalidator/jobs"
	"rulevalidator/metrics"
	"rulevalidator/objstore"
	"rulevalidator/producer"
	"rulevalidator/report"
	"rulevalidator/reviews"
	"rulevalidator/reviewui"
	"rulevalidator/schemas"
	"rulevalidator/stream"
	"rulevalidator/tenants"
	tenantusage "rulevalidator/usage"
)

// httpConfig holds the settings of the HTTP listeners, auth, reports and
// callbacks.
type httpConfig struct {
	httpAddr string
	opsAddr  string
	// opsProfiles serves the runtime's profiles (net/http/pprof) on the
	// operations listener.
	opsProfiles    bool
	jwksURL        string
	jwtPEMFiles    []string
	jwtIssuer      string
	jwtAudience    string
	jwtTenantClaim string
	jwtAlgorithms  []string
	internalToken  string
	reportPrefix   string
	jobPrefix      string
	reviewPrefix   string
	reviewScope    string
	callbackSecret string
	callbackHosts  []string
	callbackLocal  bool
	callbackGroup  string
	// callbackConcurrency bounds the callbacks delivered at once from the
	// callback topic; callbackAttempts is each one's retry budget.
	callbackConcurrency int
	callbackAttempts    int
	// callbackBackoff is the wait after a callback's first failed attempt,
	// doubled after each further one up to callbackBackoffMax.
	callbackBackoff    time.Duration
	callbackBackoffMax time.Duration
}

// httpSettings binds the HTTP-side settings of serve.
func httpSettings(s *settings, c *httpConfig) {
	s.section("HTTP")
	s.str(&c.httpAddr, "http-addr", "RULEVALIDATOR_HTTP_ADDR", "", "public HTTP API listener (reports, validations), e.g. 127.0.0.1:8080; needs token keys; empty disables it")
	opsAddrSetting(s, &c.opsAddr)
	s.boolean(&c.opsProfiles, "ops-pprof", "RULEVALIDATOR_OPS_PPROF", "false", "also serve the Go runtime's profiles (heap, goroutines, CPU) under /debug/pprof/ on the operations listener, e.g. go tool pprof http://OPS-ADDR/debug/pprof/heap; they name code, not data, but keep the listener private")
	s.str(&c.jwksURL, "jwks-url", "RULEVALIDATOR_JWKS_URL", "", "JWKS URL with the keys that sign API tokens")
	s.strList(&c.jwtPEMFiles, "jwt-pem-files", "RULEVALIDATOR_JWT_PEM_FILES", "", "PEM public keys that sign API tokens, comma-separated (kid = file base name)")
	s.str(&c.jwtIssuer, "jwt-issuer", "RULEVALIDATOR_JWT_ISSUER", "", "required iss of API tokens")
	s.str(&c.jwtAudience, "jwt-audience", "RULEVALIDATOR_JWT_AUDIENCE", "rulevalidator", "required aud of API tokens")
	s.str(&c.jwtTenantClaim, "jwt-tenant-claim", "RULEVALIDATOR_JWT_TENANT_CLAIM", auth.DefaultTenantClaim, "claim that names the caller's tenant")
	s.strList(&c.jwtAlgorithms, "jwt-algorithms", "RULEVALIDATOR_JWT_ALGORITHMS", strings.Join(auth.DefaultAlgorithms, ","), "accepted signature algorithms (asymmetric only)")
	s.secret(&c.internalToken, "internal-token", "RULEVALIDATOR_INTERNAL_TOKEN", "credential of internal callers (at least 32 characters); empty disables /internal routes")
	s.section("Reports and jobs")
	s.str(&c.reportPrefix, "report-prefix", "RULEVALIDATOR_REPORT_PREFIX", report.DefaultPrefix, "object key prefix of reports")
	jobPrefixSetting(s, &c.jobPrefix)
	reviewPrefixSetting(s, &c.reviewPrefix)
	s.str(&c.reviewScope, "review-scope", "RULEVALIDATOR_REVIEW_SCOPE", "", "scope a token needs to post reviews of verdicts (scope or scp claim); empty: any token of the tenant")
	s.section("Callbacks")
	s.secret(&c.callbackSecret, "callback-secret", "RULEVALIDATOR_CALLBACK_SECRET", "HMAC key that signs callbacks (at least 32 bytes); empty disables callbacks")
	s.strList(&c.callbackHosts, "callback-hosts", "RULEVALIDATOR_CALLBACK_HOSTS", "", "hosts callbacks may go to (host or *.suffix), comma-separated; empty allows any public host")
	s.boolean(&c.callbackLocal, "callback-allow-private", "RULEVALIDATOR_CALLBACK_ALLOW_PRIVATE", "false", "allow callbacks to loopback and private addresses (local development only)")
	s.str(&c.callbackGroup, "callback-group", "RULEVALIDATOR_CALLBACK_GROUP", "", "consumer group that delivers the callbacks topic; empty: the --group-id followed by .callbacks")
	s.integer(&c.callbackConcurrency, "callback-concurrency", "RULEVALIDATOR_CALLBACK_CONCURRENCY", "16", "callbacks delivered at once by this process; one waiting to retry holds its place")
	s.integer(&c.callbackAttempts, "callback-attempts", "RULEVALIDATOR_CALLBACK_ATTEMPTS", "6", "attempts per callback (with --callback-backoff between them) before it is given up and committed")
	s.duration(&c.callbackBackoff, "callback-backoff", "RULEVALIDATOR_CALLBACK_BACKOFF", "1s", "wait after a callback's first failed attempt; doubled after each further one, up to --callback-backoff-max")
	s.duration(&c.callbackBackoffMax, "callback-backoff-max", "RULEVALIDATOR_CALLBACK_BACKOFF_MAX", "1m", "longest wait between two attempts at a callback, a longer Retry-After included")
}

// jobPrefixSetting is where job status documents are kept.
func jobPrefixSetting(s *settings, p *string) {
	s.str(p, "job-prefix", "RULEVALIDATOR_JOB_PREFIX", jobs.DefaultPrefix, "object key prefix of job status documents (with --s3-endpoint)")
}

// reviewPrefixSetting is where reviews are kept.
func reviewPrefixSetting(s *settings, p *string) {
	s.str(p, "review-prefix", "RULEVALIDATOR_REVIEW_PREFIX", reviews.DefaultPrefix, "object key prefix of reviews (with --s3-endpoint); the review queue and what each validation judged are kept under it followed by -pending and -material")
}

func (c *httpConfig) validate() error {
	var errs []error
	if c.opsAddr == "" {
		errs = append(errs, errors.New("--ops-addr is required: probes and metrics need it"))
	}
	if c.httpAddr != "" && c.jwksURL == "" && len(c.jwtPEMFiles) == 0 {
		errs = append(errs, errors.New("--http-addr needs token keys: set --jwks-url or --jwt-pem-files"))
	}
	if c.httpAddr != "" && c.jwtIssuer == "" {
		errs = append(errs, errors.New("--http-addr needs --jwt-issuer"))
	}
	if strings.TrimSuffix(c.jobPrefix, "/") == strings.TrimSuffix(c.reportPrefix, "/") {
		errs = append(errs, fmt.Errorf("--job-prefix and --report-prefix are both %q", c.jobPrefix))
	}
	if p := strings.TrimSuffix(c.reviewPrefix, "/"); p == strings.TrimSuffix(c.jobPrefix, "/") || p == strings.TrimSuffix(c.reportPrefix, "/") {
		errs = append(errs, fmt.Errorf("--review-prefix %q must differ from --job-prefix and --report-prefix", c.reviewPrefix))
	}
	if c.httpAddr != "" && c.httpAddr == c.opsAddr {
		errs = append(errs, fmt.Errorf("--http-addr and --ops-addr are both %s", c.httpAddr))
	}
	if c.callbackConcurrency < 1 {
		errs = append(errs, fmt.Errorf("--callback-concurrency: %d must be at least 1", c.callbackConcurrency))
	}
	if c.callbackAttempts < 1 {
		errs = append(errs, fmt.Errorf("--callback-attempts: %d must be at least 1", c.callbackAttempts))
	}
	if c.callbackBackoff <= 0 {
		errs = append(errs, fmt.Errorf("--callback-backoff: %s must be positive", c.callbackBackoff))
	}
	if c.callbackBackoffMax < c.callbackBackoff {
		errs = append(errs, fmt.Errorf("--callback-backoff-max: %s must be at least --callback-backoff (%s)", c.callbackBackoffMax, c.callbackBackoff))
	}
	return errors.Join(errs...)
}

// services are the parts of serve that the HTTP side and the pipeline share.
type services struct {
	metrics  *metrics.Metrics
	registry *prometheus.Registry
	notifier *callback.Notifier
	reports  *meteredReports
	// jobs keeps job status in object storage; nil without it.
	jobs *jobs.ObjectStore
	// reviews keeps reviews and the review queue: in object storage with
	// it, else in memory.
	reviews reviews.Store
	// kafka is the one checked Kafka client every Kafka part is built on.
	kafka *stream.Client
	// tenants is the tenants file; nil without --tenants-file.
	tenants *tenants.File
	// usage keeps each tenant's usage in object storage; nil without it.
	usage *tenantusage.Store
	// prices is the --price-table, pricing the usage rows and each summary; nil without it.
	prices tenantusage.PriceTable
}

// newServices builds metrics, the callback notifier and the report writer.
func newServices(cfg serveConfig, store *objstore.Store, logger *slog.Logger) (*services, error) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		return nil, err
	}
	s := &services{metrics: m, registry: reg}
	if s.tenants, err = cfg.openTenants(logger); err != nil {
		return nil, err
	}
	if s.kafka, err = cfg.kafka.client(cfg.brokers); err != nil {
		return nil, fmt.Errorf("%w: %v", errConfig, err)
	}
	if cfg.priceTable != "" {
		if s.prices, err = tenantusage.ReadPriceTable(cfg.priceTable); err != nil {
			return nil, fmt.Errorf("%w: --price-table: %v", errConfig, err)
		}
	}
	if cfg.http.callbackSecret != "" {
		s.notifier, err = callback.New(callback.Config{
			Secret:         []byte(cfg.http.callbackSecret),
			AllowHosts:     cfg.http.callbackHosts,
			AllowPrivate:   cfg.http.callbackLocal,
			MaxAttempts:    cfg.http.callbackAttempts,
			BaseDelay:      cfg.http.callbackBackoff,
			MaxDelay:       cfg.http.callbackBackoffMax,
			Logger:         logger,
			OnDone:         m.ObserveCallback,
			TracerProvider: cfg.tracer,
		})
		if err != nil {
			return nil, fmt.Errorf("%w: --callback-secret: %v", errConfig, err)
		}
	}
	if store != nil {
		s.reports = &meteredReports{
			w: report.NewWriter(store, report.WriterOptions{Prefix: cfg.http.reportPrefix}),
			m: m,
		}
		if s.jobs, err = jobs.NewObjectStore(store, jobs.ObjectStoreConfig{Prefix: cfg.http.jobPrefix}); err != nil {
			return nil, fmt.Errorf("%w: --job-prefix: %v", errConfig, err)
		}
		if s.reviews, err = reviews.NewObjectStore(store, reviews.ObjectStoreConfig{Prefix: cfg.http.reviewPrefix}); err != nil {
			return nil, fmt.Errorf("%w: --review-prefix: %v", errConfig, err)
		}
		if s.usage, err = tenantusage.New(store, tenantusage.Options{Prices: s.prices}); err != nil {
			return nil, err
		}
	} else {
		s.reviews = reviews.NewMemoryStore(reviews.MemoryStoreConfig{})
	}
	return s, nil
}

// meteredReports times report uploads for the metrics.
type meteredReports struct {
	w *report.Writer
	m *metrics.Metrics
}

func (r *meteredReports) WriteReport(ctx context.Context, req *schemas.Request, rs *engine.Ruleset, res *engine.Result, at time.Time) (*schemas.ReportDescriptor, error) {
	start := time.Now()
	d, err := r.w.WriteReport(ctx, req, rs, res, at)
	r.m.ObserveReportUpload(time.Since(start), err)
	return d, err
}

// startHTTP starts the job feed and both listeners in g. They stop when ctx
// ends.
func startHTTP(ctx context.Context, g *errgroup.Group, cfg serveConfig, svc *services, serde *schemas.Serde, store *objstore.Store, documents api.DocumentReader, environment func(context.Context) error, logger *slog.Logger) error {
	checks := readinessChecks(cfg, store)
	// An environment fault holding consumption makes the replica unready,
	// naming the cause and what to fix.
	checks = append(checks, api.Check{Name: "environment", Probe: environment})
	// Job status lives in object storage when there is one: every replica
	// reads the same documents. Otherwise each replica keeps its own, in
	// memory, fed from the event topics.
	var memJobs *jobs.MemoryStore
	var jobStore jobs.Store = svc.jobs
	if svc.jobs == nil {
		memJobs = jobs.NewMemoryStore(jobs.MemoryStoreConfig{})
		jobStore = memJobs
	}
	acfg := api.Config{
		Documents:      documents,
		Jobs:           jobStore,
		Reviews:        svc.reviews,
		ReviewScope:    cfg.http.reviewScope,
		ReviewMetrics:  svc.metrics,
		Readiness:      checks,
		Metrics:        svc.metrics,
		Logger:         logger,
		TracerProvider: cfg.tracer,
	}
	if svc.notifier != nil {
		acfg.Callbacks = svc.notifier
	}
	if svc.tenants != nil {
		// Per replica: N replicas admit up to N times a tenant's rate.
		acfg.RateLimit = tenants.NewRateLimiter(svc.tenants.RequestsPerMinute, tenants.RateLimiterOptions{})
	}
	if svc.usage != nil {
		acfg.Usage = svc.usage
	}
	// The review page shows PDF pages as a reader sees them, rendered by
	// the engine that reads them.
	if pages, ok := documents.(api.PageRenderer); ok {
		acfg.Pages = pages
	}
	if cfg.http.httpAddr != "" {
		if err := publicPorts(ctx, g, cfg, svc, serde, store, memJobs, &acfg, logger); err != nil {
			return err
		}
	}
	server, err := api.New(acfg)
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	if cfg.http.httpAddr != "" {
		public, err := publicHandler(server, acfg, logger)
		if err != nil {
			return fmt.Errorf("%w: %v", errConfig, err)
		}
		if err := listen(ctx, g, cfg.http.httpAddr, public, "public API", logger); err != nil {
			return err
		}
	}
	ops := server.OpsHandler(metrics.Handler(svc.registry))
	if cfg.http.opsProfiles {
		ops = withProfiles(ops)
	}
	return listen(ctx, g, cfg.http.opsAddr, ops, "operations", logger)
}

// publicPorts fills in what the public API needs beyond the operations
// routes: token verification, the internal token, report downloads and
// claim checks, the writers of submissions and reviews, and job status.
func publicPorts(ctx context.Context, g *errgroup.Group, cfg serveConfig, svc *services, serde *schemas.Serde, store *objstore.Store, memJobs *jobs.MemoryStore, acfg *api.Config, logger *slog.Logger) error {
	verifier, err := auth.NewVerifier(ctx, auth.Config{
		JWKSURL:     cfg.http.jwksURL,
		PEMFiles:    cfg.http.jwtPEMFiles,
		Algorithms:  cfg.http.jwtAlgorithms,
		Issuer:      cfg.http.jwtIssuer,
		Audience:    cfg.http.jwtAudience,
		TenantClaim: cfg.http.jwtTenantClaim,
		Logger:      logger,
	})
	if err != nil {
		return fmt.Errorf("%w: API token keys: %v", errConfig, err)
	}
	acfg.Verifier = verifier
	if cfg.http.internalToken != "" {
		tok, err := auth.NewStaticToken(cfg.http.internalToken)
		if err != nil {
			return fmt.Errorf("%w: --internal-token: %v", errConfig, err)
		}
		acfg.Internal = tok
	}
	if store != nil {
		acfg.Reports = api.StoredReports{Store: store, Prefix: cfg.http.reportPrefix}
		acfg.Claims = store
	}
	sub, err := producer.NewRequestWriter(ctx, producer.RequestWriterConfig{Client: svc.kafka, Topic: cfg.requestsTopic, TracerProvider: cfg.tracer}, serde)
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	acfg.Submitter = requestSubmitter{sub}
	g.Go(func() error {
		<-ctx.Done()
		return sub.Close()
	})
	if cfg.reviewsTopic != "" {
		rw, err := producer.NewReviewWriter(ctx, producer.ReviewWriterConfig{Client: svc.kafka, Topic: cfg.reviewsTopic, TracerProvider: cfg.tracer}, serde)
		if err != nil {
			return fmt.Errorf("%w: --reviews-topic: %v (create the topic, e.g. with ops/kafka.sh topics, or set --reviews-topic empty to publish no reviews)", errConfig, err)
		}
		acfg.ReviewPublisher = rw
		g.Go(func() error {
			<-ctx.Done()
			return rw.Close()
		})
	}
	return startJobFeed(ctx, g, cfg, svc, serde, store, memJobs, logger)
}

// startJobFeed says where job status is kept and, when it is in memory,
// starts the feed that fills it from the event topics.
func startJobFeed(ctx context.Context, g *errgroup.Group, cfg serveConfig, svc *services, serde *schemas.Serde, store *objstore.Store, memJobs *jobs.MemoryStore, logger *slog.Logger) error {
	if memJobs == nil {
		logger.Info("job status is kept in object storage, shared by every replica and durable", "bucket", store.Bucket(), "prefix", cfg.http.jobPrefix)
		return nil
	}
	logger.Warn("job status is kept in memory: it is per replica (a replica answers GET for a request once it has read its events) and lost on restart; set --s3-endpoint to keep it in object storage, shared and durable")
	feed, err := jobfeed.New(jobfeed.Config{
		Client: svc.kafka, SummaryTopic: cfg.summariesTopic, VerdictTopic: cfg.verdictsTopic,
		Serde: serde, Store: memJobs, Logger: logger,
		// Verdicts that need review join the queue as they arrive.
		OnVerdict: func(ctx context.Context, v schemas.VerdictEvent) {
			if err := reviews.RouteForReview(ctx, svc.reviews, v.TenantID, v.RequestID, []schemas.VerdictEvent{v}); err != nil {
				logger.Warn("a verdict needing review was not queued", "request_id", v.RequestID, "rule_id", v.RuleID, "err", err)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	g.Go(func() error { return feed.Run(ctx) })
	return nil
}

// requestSubmitter is the API's Submitter on the requests topic: each
// submission written as every producer of requests writes it, its trace
// context as headers; a request too large for the topic is refused with an
// error wrapping api.ErrRequestTooLarge.
type requestSubmitter struct {
	w interface {
		Write(ctx context.Context, subs ...producer.Submission) error
	} // a *producer.RequestWriter
}

func (s requestSubmitter) Submit(ctx context.Context, sub api.Submission) error {
	err := s.w.Write(ctx, producer.Submission{Request: sub.Request, Trace: producer.TraceHeaders(sub.Traceparent, sub.Tracestate)})
	if errors.Is(err, stream.ErrTooLarge) {
		return fmt.Errorf("%w: %w", api.ErrRequestTooLarge, err)
	}
	return err
}

// withProfiles serves net/http/pprof's pages under /debug/pprof/ and the
// rest with h.
func withProfiles(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.Handle("/", h)
	return mux
}

// publicHandler is the public API, with the review page under /review/
// when the API serves reviews: the page is a client of the API, and holds
// nothing of its own.
func publicHandler(server *api.Server, acfg api.Config, logger *slog.Logger) (http.Handler, error) {
	if acfg.Verifier == nil || acfg.Reviews == nil {
		return server.Handler(), nil
	}
	page, err := reviewui.New(logger)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	page.Register(mux)
	mux.Handle("/", server.Handler())
	logger.Info("review page served", "path", reviewui.Prefix)
	return mux, nil
}

// listen binds addr now, so a taken port fails start-up plainly, and serves
// until ctx ends.
func listen(ctx context.Context, g *errgroup.Group, addr string, h http.Handler, what string, logger *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%w: %s listener on %s: %v", errConfig, what, addr, err)
	}
	srv := api.NewHTTPServer(addr, h)
	logger.Info("listening", "what", what, "addr", ln.Addr().String())
	g.Go(func() error {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("%s listener: %w", what, err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return nil
}

// readinessChecks probe what a request needs: the broker, object storage
// (when configured) and the model server.
func readinessChecks(cfg serveConfig, store *objstore.Store) []api.Check {
	checks := []api.Check{
		{Name: "kafka", Probe: func(ctx context.Context) error {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", cfg.brokers[0])
			if err != nil {
				return err
			}
			return conn.Close()
		}},
		{Name: "model", Probe: func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.llm.baseURL, "/")+"/models", nil)
			if err != nil {
				return err
			}
			if cfg.llm.apiKey != "" {
				req.Header.Set("Authorization", "Bearer "+cfg.llm.apiKey)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				return fmt.Errorf("GET /models answered %s", resp.Status)
			}
			return nil
		}},
	}
	if store != nil {
		checks = append(checks, api.Check{Name: "storage", Probe: store.Ping})
	}
	return checks
}
