package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"rulevalidator/consumer"
	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/internal/tracing"
	"rulevalidator/jobs"
	"rulevalidator/judging"
	"rulevalidator/objstore"
	"rulevalidator/outbox"
	"rulevalidator/pipeline"
	"rulevalidator/producer"
	"rulevalidator/registry"
	"rulevalidator/reviews"
	"rulevalidator/schemas"
	"rulevalidator/stream"
	"rulevalidator/tenants"
	tenantusage "rulevalidator/usage"
	"rulevalidator/verdict"
)

// serveConfig is everything `serve` needs, resolved from defaults, the config
// file, the environment and flags (see serveSettings).
type serveConfig struct {
	docs            documentConfig
	brokers         []string
	kafka           kafkaConn
	groupID         string
	requestsTopic   string
	verdictsTopic   string
	summariesTopic  string
	deadLetterTopic string
	callbacksTopic  string
	reviewsTopic    string
	rulesetsTopic   string
	rulesetsDir     string
	wireFormat      string
	schemaRegistry  []string
	concurrency     int
	// readAhead is how many requests beyond --concurrency are read ahead so
	// that the next one is picked fairly across tenants; 0: in fetch order.
	readAhead int
	// tenantsFile is the tenants file: weights and caps for the fair share,
	// rate limits for the API; empty: none.
	tenantsFile string
	// priceTable is the --price-table file, pricing the usage rows.
	priceTable        string
	maxBytesInFlight  int
	memoryLimit       int
	drainTimeout      time.Duration
	sessionTimeout    time.Duration
	retryBackoff      time.Duration
	retryBackoffMax   time.Duration
	requestTimeout    time.Duration
	timeoutAttempts   int
	delayRecheck      time.Duration
	cacheEntries      int
	rulesetsReadyWait time.Duration

	llm llmConfig

	s3    s3Config
	cache verdictCacheConfig

	logLevel  string
	logFormat string

	http httpConfig

	// gomemlimit is the GOMEMLIMIT environment variable, which the runtime
	// has already applied.
	gomemlimit string
	// tracer makes the spans, from the OTEL_* variables (tracing.Setup);
	// nil makes none.
	tracer trace.TracerProvider
}

// serveSettings binds every setting of `serve` to cfg; those other commands
// read too are declared in the table (table.go).
func serveSettings(cfg *serveConfig) *settings {
	s := &settings{}
	kafkaSettings(s, &cfg.brokers, &cfg.kafka)
	s.section("Topics")
	requestsTopicSetting(s, &cfg.requestsTopic)
	verdictsTopicSetting(s, &cfg.verdictsTopic)
	summariesTopicSetting(s, &cfg.summariesTopic)
	deadLetterTopicSetting(s, &cfg.deadLetterTopic)
	callbacksTopicSetting(s, &cfg.callbacksTopic)
	s.str(&cfg.reviewsTopic, "reviews-topic", "RULEVALIDATOR_TOPIC_REVIEWS", schemas.TopicReviews, "topic each review of a verdict is published to, keyed request_id/rule_id; empty publishes none")
	rulesetsTopicSetting(s, &cfg.rulesetsTopic)
	s.section("Rulesets")
	s.str(&cfg.rulesetsDir, "rulesets-dir", "RULEVALIDATOR_RULESETS_DIR", "", "directory of ruleset files (YAML/JSON), reloaded on change; consulted before the topic")
	s.duration(&cfg.rulesetsReadyWait, "rulesets-ready-timeout", "RULEVALIDATOR_RULESETS_READY_TIMEOUT", "60s", "how long start-up waits for the rulesets topic to be read to its end")
	s.section("Wire format")
	wireFormatSetting(s, &cfg.wireFormat)
	schemaRegistrySetting(s, &cfg.schemaRegistry)
	s.section("Consumer")
	s.str(&cfg.groupID, "group-id", "RULEVALIDATOR_GROUP_ID", "rulevalidator", "consumer group; replicas in one group share the request partitions")
	s.integer(&cfg.concurrency, "concurrency", "RULEVALIDATOR_CONCURRENCY", strconv.Itoa(consumer.DefaultConcurrency), "requests judged at once by this process")
	s.integer(&cfg.readAhead, "read-ahead", "RULEVALIDATOR_READ_AHEAD", strconv.Itoa(consumer.DefaultReadAhead), "requests read beyond --concurrency (within --max-bytes-in-flight) so that the next one judged is picked by fair share across tenants (the tenant of the rv-tenant-id header that has held the slots least lately, per weight: a tenant behind another's flood goes first until its use catches up; a tenant alone still takes every slot); 0: judged in the order they are read, a flood of one tenant ahead of everyone else's")
	s.str(&cfg.priceTable, "price-table", "RULEVALIDATOR_PRICE_TABLE", "", "YAML file of each model's prices per million tokens (model: {input: 0.15, output: 0.60}), adding cost to each summary's usage and to GET /v1/usage's rows; a file missing or invalid at start is an error; empty: no cost")
	s.str(&cfg.tenantsFile, "tenants-file", "RULEVALIDATOR_TENANTS_FILE", "", "YAML file of what each tenant is allowed, read again every 2s while serving (a version that does not parse is logged and the previous one kept; a file missing at start is an error): weight (its share of the time requests are judged while tenants wait, with --read-ahead above 0), max_in_flight (the most of its requests this replica judges at once) and requests_per_minute (the submissions this replica's API admits from it, in bursts of a tenth of the rate, at least 1; past it 429 rate_limited), tokens_per_hour and tokens_per_day (token budgets across replicas, checked against the usage kept in object storage before a request is judged; on_exceed: reject, the default, fails a request past them as quota_exceeded, delay holds it until the window allows, its status delayed), default: giving what a tenant's entry leaves out and what the tenants it does not name get (ops/tenants.example.yaml); empty: every tenant weighs 1, uncapped and unlimited")
	s.integer(&cfg.maxBytesInFlight, "max-bytes-in-flight", "RULEVALIDATOR_MAX_BYTES_IN_FLIGHT", strconv.Itoa(consumer.DefaultMaxBytesInFlight), "cap on the memory of the requests taken on at once, besides --concurrency: each counts 3.5x its record in quote mode (record, decoded request, prompt), 5x in cite mode (also the passages and their ids), as much of each claim-checked document's size from before it is downloaded, and of the text a file holds beyond its size once read (DOCX, compressed PDF); a larger request runs alone. 48 MiB keeps a process under 256 MB RSS with 1 MB documents in either mode (ops/membench.sh)")
	s.integer(&cfg.memoryLimit, "memory-limit", "RULEVALIDATOR_MEMORY_LIMIT", "0", "soft memory limit in bytes for the Go runtime (as GOMEMLIMIT); 0: GOMEMLIMIT when set, else 90% of the container's memory limit when there is one, else none")
	s.duration(&cfg.drainTimeout, "drain-timeout", "RULEVALIDATOR_DRAIN_TIMEOUT", durationText(consumer.DefaultDrainTimeout), "on SIGTERM or when a rebalance moves partitions away, how long in-flight requests may finish before the partitions are given up")
	s.duration(&cfg.sessionTimeout, "session-timeout", "RULEVALIDATOR_SESSION_TIMEOUT", stream.DefaultSessionTimeout.String(), "how long the consumer groups wait for a member that stopped heartbeating (a killed replica) before its partitions go to the others; within the broker's group.min/max.session.timeout.ms (6s to 30m by default)")
	s.duration(&cfg.retryBackoff, "retry-backoff", "RULEVALIDATOR_RETRY_BACKOFF", consumer.DefaultRetryInitial.String(), "pause before a request that failed transiently (model, broker or object storage unavailable, an environment fault) is handled again; doubled after each failure, up to --retry-backoff-max")
	s.duration(&cfg.retryBackoffMax, "retry-backoff-max", "RULEVALIDATOR_RETRY_BACKOFF_MAX", consumer.DefaultRetryMax.String(), "longest pause between two attempts at a request that fails transiently")
	s.duration(&cfg.requestTimeout, "request-timeout", "RULEVALIDATOR_REQUEST_TIMEOUT", durationText(pipeline.DefaultRequestTimeout), "bound on one request's work, model retries included")
	s.integer(&cfg.timeoutAttempts, "request-timeout-attempts", "RULEVALIDATOR_REQUEST_TIMEOUT_ATTEMPTS", strconv.Itoa(pipeline.DefaultTimeoutAttempts), "attempts a request may run out of --request-timeout before it is dead-lettered with reason timeout")
	s.duration(&cfg.delayRecheck, "delay-recheck", "RULEVALIDATOR_DELAY_RECHECK", durationText(pipeline.DefaultDelayRecheck), "how often the budget of a tenant whose requests wait for it (on_exceed: delay in --tenants-file) is checked again before its window ends, so that a raised budget applies")
	s.integer(&cfg.cacheEntries, "result-cache", "RULEVALIDATOR_RESULT_CACHE", strconv.Itoa(pipeline.DefaultCacheEntries), "recent results kept to answer redeliveries without the model (0 disables)")

	llmSettings(s, &cfg.llm)

	s3Settings(s, &cfg.s3)
	s.str(&cfg.s3.claimsPrefix, "s3-claims-prefix", "S3_CLAIMS_PREFIX", objstore.DefaultClaimsPrefix, "key prefix of the documents requests name by uri: a request of tenant T may name only s3://<bucket>/<prefix>/T/<name>; any other key, another tenant's or the service's own, is refused unread (403 at the API, dead-lettered as claim_refused on the stream)")
	verdictCacheSettings(s, &cfg.cache)

	documentSettings(s, &cfg.docs)

	httpSettings(s, &cfg.http)
	s.section("Logging")
	s.str(&cfg.logLevel, "log-level", "RULEVALIDATOR_LOG_LEVEL", "info", "debug, info, warn or error")
	s.str(&cfg.logFormat, "log-format", "RULEVALIDATOR_LOG_FORMAT", "json", "json or text")
	return s
}

// validate checks the settings that the components do not check themselves.
func (c *serveConfig) validate() error {
	var errs []error
	if err := checkKafka(c.brokers, c.kafka); err != nil {
		errs = append(errs, err)
	}
	if c.readAhead < 0 {
		errs = append(errs, fmt.Errorf("--read-ahead: %d must not be negative (0: no fair share, fetch order)", c.readAhead))
	}
	if c.concurrency < 1 {
		errs = append(errs, fmt.Errorf("--concurrency: %d must be at least 1", c.concurrency))
	}
	if c.maxBytesInFlight < 1 {
		errs = append(errs, fmt.Errorf("--max-bytes-in-flight: %d must be positive", c.maxBytesInFlight))
	}
	if c.memoryLimit < 0 {
		errs = append(errs, fmt.Errorf("--memory-limit: %d must not be negative", c.memoryLimit))
	}
	if err := c.docs.check(); err != nil {
		errs = append(errs, err)
	}
	if err := checkWireFormat(c.wireFormat, c.schemaRegistry); err != nil {
		errs = append(errs, err)
	}
	if c.requestsTopic == "" {
		errs = append(errs, errors.New("--requests-topic is required"))
	}
	if c.sessionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--session-timeout: %s must be positive", c.sessionTimeout))
	}
	if c.retryBackoff <= 0 {
		errs = append(errs, fmt.Errorf("--retry-backoff: %s must be positive", c.retryBackoff))
	}
	if c.retryBackoffMax < c.retryBackoff {
		errs = append(errs, fmt.Errorf("--retry-backoff-max: %s must be at least --retry-backoff (%s)", c.retryBackoffMax, c.retryBackoff))
	}
	if c.requestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--request-timeout: %s must be positive", c.requestTimeout))
	}
	if c.delayRecheck <= 0 {
		errs = append(errs, fmt.Errorf("--delay-recheck: %s must be positive", c.delayRecheck))
	}
	if c.timeoutAttempts <= 0 {
		errs = append(errs, fmt.Errorf("--request-timeout-attempts: %d must be positive", c.timeoutAttempts))
	}
	if c.cacheEntries < 0 {
		errs = append(errs, fmt.Errorf("--result-cache: %d must not be negative", c.cacheEntries))
	}
	if err := c.llm.check(); err != nil {
		errs = append(errs, err)
	}
	if c.rulesetsDir != "" {
		if st, err := os.Stat(c.rulesetsDir); err != nil || !st.IsDir() {
			errs = append(errs, fmt.Errorf("--rulesets-dir: %q is not a directory", c.rulesetsDir))
		}
	}
	if err := c.s3.check(); err != nil {
		errs = append(errs, err)
	}
	if err := c.cache.check(); err != nil {
		errs = append(errs, err)
	}
	if p := c.cache.prefix; p == c.http.jobPrefix || p == c.http.reportPrefix {
		errs = append(errs, fmt.Errorf("--verdict-cache-prefix %q must differ from --job-prefix and --report-prefix", p))
	}
	if err := c.claimsApart(); err != nil {
		errs = append(errs, err)
	}
	if _, err := parseLevel(c.logLevel); err != nil {
		errs = append(errs, err)
	}
	if c.logFormat != "json" && c.logFormat != "text" {
		errs = append(errs, fmt.Errorf("--log-format: %q is not json or text", c.logFormat))
	}
	if err := c.http.validate(); err != nil {
		errs = append(errs, err)
	}
	if t := c.reviewsTopic; t != "" && (t == c.requestsTopic || t == c.verdictsTopic || t == c.summariesTopic || t == c.deadLetterTopic || t == c.callbacksTopic) {
		errs = append(errs, fmt.Errorf("--reviews-topic %q must be a topic of its own", t))
	}
	if c.http.callbackSecret != "" {
		switch {
		case c.callbacksTopic == "":
			errs = append(errs, errors.New("--callback-secret is set but --callbacks-topic is empty: callbacks wait for delivery there"))
		case c.callbacksTopic == c.requestsTopic || c.callbacksTopic == c.verdictsTopic || c.callbacksTopic == c.summariesTopic || c.callbacksTopic == c.deadLetterTopic:
			errs = append(errs, fmt.Errorf("--callbacks-topic %q must be a topic of its own", c.callbacksTopic))
		}
		if c.callbackGroupID() == c.groupID {
			errs = append(errs, fmt.Errorf("--callback-group %q must differ from --group-id: the callbacks have their own offsets", c.callbackGroupID()))
		}
	}
	return errors.Join(errs...)
}

// callbackGroupID is the consumer group of the callback topic: --callback-group,
// else --group-id followed by ".callbacks".
func (c *serveConfig) callbackGroupID() string {
	if c.http.callbackGroup != "" {
		return c.http.callbackGroup
	}
	return c.groupID + ".callbacks"
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level: %q is not debug, info, warn or error", s)
	}
	return l, nil
}

// newLogger is the logger of level and format on w; a line written with the context of a
// span carries its trace_id and span_id (tracing.LogHandler).
func newLogger(w io.Writer, level, format string) *slog.Logger {
	l, _ := parseLevel(level)
	opts := &slog.HandlerOptions{Level: l}
	if format == "text" {
		return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts)))
	}
	return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts)))
}

// tracingShutdownTimeout bounds flushing the spans at exit.
const tracingShutdownTimeout = 5 * time.Second

// shutdownTracing flushes and stops the tracer provider, within tracingShutdownTimeout.
func shutdownTracing(shutdown func(context.Context) error, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		logger.Warn("flushing the traces at exit", "err", err)
	}
}

// setTracer gives tp to every part that makes spans.
func (c *serveConfig) setTracer(tp trace.TracerProvider) {
	c.tracer, c.llm.tracer, c.s3.tracer = tp, tp, tp
}

// serveDoc is serve's --help.
var serveDoc = commandDoc{
	synopsis: "serve [--config FILE] [settings]",
	about: []string{
		"Consumes validation requests from Kafka, judges them and publishes one verdict event per rule " +
			"plus a summary. SIGTERM drains in-flight requests.",
	},
	exit: "0 stopped cleanly, 2 invalid settings, 1 a failure while serving.",
	examples: []string{
		"rulevalidator serve --config serve.yaml",
		"rulevalidator serve --kafka-brokers kafka-1:9092 --rulesets-dir rulesets/ --llm-base-url http://llm:8000/v1",
	},
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	var cfg serveConfig
	cl := newCommandLine("serve", serveDoc, serveSettings(&cfg), stderr)
	if code, ok := cl.parse(args, getenv); !ok {
		return code
	}
	if err := cfg.validate(); err != nil {
		return cl.invalid(err)
	}
	cfg.gomemlimit = getenv("GOMEMLIMIT")
	logger := newLogger(stderr, cfg.logLevel, cfg.logFormat)
	tp, shutdown, err := tracing.Setup(ctx, getenv)
	if err != nil {
		return cl.invalid(err)
	}
	defer shutdownTracing(shutdown, logger)
	cfg.setTracer(tp)
	if err := serve(ctx, cfg, logger); err != nil {
		logger.Error("serve stopped", "err", err)
		if errors.Is(err, errConfig) {
			return exitInvalid
		}
		return exitFailure
	}
	logger.Info("serve stopped cleanly")
	return exitOK
}

// errConfig marks start-up failures caused by the configuration.
var errConfig = errors.New("configuration")

// serve wires the components and runs until ctx ends.
func serve(ctx context.Context, cfg serveConfig, logger *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the registry loops when start-up fails half way
	// The runtime collects harder as the heap nears the limit, instead of growing past what
	// the container allows.
	limit, from, err := memoryLimit(cfg.memoryLimit, cfg.gomemlimit, "/sys/fs/cgroup")
	if err != nil {
		logger.Warn("no memory limit set", "err", err)
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
		logger.Info("memory limit set", "bytes", limit, "from", from)
	}
	cfg.llm.logProfile(logger)
	// A cache directory set that cannot be written is said at start, not
	// found by the first PDF (a read-only root filesystem, a wrong mount).
	if err := cfg.docs.checkCacheDir(); err != nil {
		return fmt.Errorf("%w: %s", errConfig, cacheDirFault(err))
	}
	serde, err := newSerde(ctx, cfg)
	if err != nil {
		return err
	}

	store, err := cfg.s3.store(logger)
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}

	if store == nil {
		logger.Warn("reports are disabled: no object storage is configured (--s3-endpoint); requests asking for a report complete without one, and documents by uri are refused")
	}

	svc, err := newServices(cfg, store, logger)
	if err != nil {
		return err
	}
	cache, err := cfg.cache.open(store, logger)
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	documents, err := cfg.docs.reader(logger)
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	defer documents.Close()
	// The PDF engine compiles (or loads from --pdf-cache-dir) while the rest
	// starts; a PDF arriving first waits for it.
	go func() {
		if err := documents.Start(ctx); err != nil && ctx.Err() == nil {
			logger.Error("the PDF engine did not start; PDFs cannot be read", "err", err)
		}
	}()
	eng, err := cfg.llm.newEngineWith(logger, svc.metrics.EngineHooks(), cache, svc.metrics.ObserveModelConcurrency)
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}

	prodCfg := producer.Config{
		Client:          svc.kafka,
		VerdictTopic:    cfg.verdictsTopic,
		SummaryTopic:    cfg.summariesTopic,
		DeadLetterTopic: cfg.deadLetterTopic,
		TracerProvider:  cfg.tracer,
		Logger:          logger,
	}
	if store != nil {
		// A dead letter too large for its topic keeps its original here.
		prodCfg.Objects = store
	}
	if svc.notifier != nil {
		prodCfg.CallbackTopic = cfg.callbacksTopic
	}
	prod, err := producer.New(ctx, prodCfg, serde)
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	defer func() {
		if err := prod.Close(); err != nil {
			logger.Warn("closing the producer", "err", err)
		}
	}()

	g, gctx := errgroup.WithContext(ctx)
	if svc.tenants != nil {
		g.Go(func() error { return svc.tenants.Run(gctx) })
	}
	resolver, err := startRegistry(gctx, g, cfg, svc.kafka, logger)
	if err != nil {
		return err
	}

	pipeCfg := pipelineConfig(cfg, svc, eng, documents, resolver, prod, serde, store, logger)
	pipe, err := pipeline.New(pipeCfg)
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}

	retry := consumer.RetryPolicy{Initial: cfg.retryBackoff, Max: cfg.retryBackoffMax}
	deadLetters := svc.metrics.CountDeadLetters(prod)
	handler := consumer.Chain(pipe.Handle,
		pipe.ReleaseHolds,
		consumer.RetryWithFilter(retry, judging.MessageFault, logger),
		consumer.DeadLetterWithFilter(deadLetters, judging.MessageFault, logger),
		consumer.Recover(logger),
	)
	cons, err := consumer.New(consumer.Config{
		GroupConfig: stream.GroupConfig{
			Client: svc.kafka, GroupID: cfg.groupID, Topic: cfg.requestsTopic, SessionTimeout: cfg.sessionTimeout, Logger: logger,
		},
		Concurrency:      cfg.concurrency,
		MaxBytesInFlight: int64(cfg.maxBytesInFlight),
		Cost:             pipeline.Cost(engine.EvidenceMode(cfg.llm.evidence)),
		DrainTimeout:     cfg.drainTimeout,
		Hooks:            svc.metrics.ConsumerHooks(cfg.requestsTopic),
		Fairness:         cfg.fairness(svc.tenants),
		TracerProvider:   cfg.tracer,
	}, handler)
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	logger.Info("serving", "brokers", strings.Join(cfg.brokers, ","), "group", cfg.groupID, "requests_topic", cfg.requestsTopic,
		"concurrency", cfg.concurrency, "model", cfg.llm.model, "llm", cfg.llm.baseURL, "wire_format", cfg.wireFormat)
	if err := startHTTP(gctx, g, cfg, svc, serde, store, documents, pipe.EnvironmentCheck, logger); err != nil {
		return err
	}
	g.Go(func() error { return cons.Run(gctx) })
	if svc.notifier != nil {
		callbacks, err := callbackConsumer(cfg, svc, deadLetters, retry, logger)
		if err != nil {
			return err
		}
		g.Go(func() error { return callbacks.Run(gctx) })
	}
	return g.Wait()
}

// pipelineConfig is the request pipeline serve runs: judging with the
// engine, the documents, the rulesets and object storage; results stored with
// what reviews and usage keep of them; budgets checked before judging.
func pipelineConfig(cfg serveConfig, svc *services, eng *engine.Engine, documents *docread.Reader, resolver registry.Resolver, prod *producer.Producer, serde *schemas.Serde, store *objstore.Store, logger *slog.Logger) pipeline.Config {
	pipeCfg := pipeline.Config{
		Judging: judging.Config{
			Engine:    eng,
			Evidence:  engine.EvidenceMode(cfg.llm.evidence),
			Documents: documents,
			Rulesets:  resolver,
		},
		Serde:           serde,
		Publisher:       prod,
		CacheEntries:    cfg.cacheEntries,
		RequestTimeout:  cfg.requestTimeout,
		TimeoutAttempts: cfg.timeoutAttempts,
		DelayRecheck:    cfg.delayRecheck,
		TracerProvider:  cfg.tracer,
		Logger:          logger,
		Hooks:           svc.metrics.PipelineHooks(),
	}
	if svc.notifier != nil {
		// Callbacks are written with the events and delivered by the outbox
		// consumer below, so that none is lost to a restart or a drain.
		pipeCfg.CallbackPayload = jobs.CallbackPayloads
	}
	if svc.reports != nil {
		pipeCfg.Judging.Reports = svc.reports
	}
	if svc.jobs != nil {
		// The final job status is stored before the events are published,
		// with what was judged and the verdicts routed to the review queue.
		pipeCfg.Results = reviews.ResultStore{Results: svc.jobs, Reviews: svc.reviews}
	}
	if svc.usage != nil {
		// Each judged request's usage is added to its tenant's window before its result is
		// stored; the token budgets of the tenants file are checked against it before a
		// request is judged.
		results := tenantusage.ResultStore{Results: pipeCfg.Results, Usage: svc.usage}
		if svc.tenants != nil {
			// A reservation outlives a replica killed while judging by the longest a
			// request may take.
			results.Budgets = &tenantusage.Admission{Usage: svc.usage, Budget: budgetOf(svc.tenants), Hold: pipeCfg.RequestTimeout + time.Minute}
			pipeCfg.Admit = results.Budgets.Admit
			if svc.jobs != nil {
				pipeCfg.Delayed = svc.jobs.Delayed
			}
		}
		pipeCfg.Results = results
	} else if svc.tenants != nil && hasBudgets(svc.tenants.Config()) {
		logger.Warn("the tenants file sets token budgets, which are not enforced without object storage (--s3-endpoint): usage is kept there")
	}
	if svc.prices != nil {
		pipeCfg.Price = func(model string, u verdict.Usage) *float64 {
			return svc.prices.Cost(map[string]tenantusage.Counts{model: tenantusage.FromUsage(u)})
		}
	}
	if cfg.cacheEntries == 0 {
		pipeCfg.CacheEntries = -1
	}
	if store != nil {
		pipeCfg.Judging.Objects = store
	}
	return pipeCfg
}

// callbackConsumer reads the callback topic in its own group and delivers each
// callback, committing it once delivered or given up (package outbox). A
// delivery waiting to retry gives its slot up at the drain, uncommitted; one
// that panics is dead-lettered as a request that panics is, retry shaping the
// retries of a failed dead-letter publish.
func callbackConsumer(cfg serveConfig, svc *services, deadLetters consumer.DeadLetterPublisher, retry consumer.RetryPolicy, logger *slog.Logger) (*consumer.Consumer, error) {
	// Lag and committed offsets are labelled by topic; in-flight and handler
	// timings stay the requests' own.
	hooks := svc.metrics.ConsumerHooks(cfg.callbacksTopic)
	hooks.InFlight, hooks.Handled = nil, nil
	c, err := consumer.New(consumer.Config{
		GroupConfig: stream.GroupConfig{
			Client: svc.kafka, GroupID: cfg.callbackGroupID(), Topic: cfg.callbacksTopic, SessionTimeout: cfg.sessionTimeout, Logger: logger,
		},
		Concurrency:    cfg.http.callbackConcurrency,
		DrainTimeout:   cfg.drainTimeout,
		Hooks:          hooks,
		TracerProvider: cfg.tracer,
	}, outbox.Handler(svc.notifier, deadLetters, retry, logger))
	if err != nil {
		return nil, fmt.Errorf("%w: callbacks: %v", errConfig, err)
	}
	logger.Info("delivering callbacks", "topic", cfg.callbacksTopic, "group", cfg.callbackGroupID(), "concurrency", cfg.http.callbackConcurrency)
	return c, nil
}

func newSerde(ctx context.Context, cfg serveConfig) (*schemas.Serde, error) {
	sc := schemas.SerdeConfig{
		Format: schemas.Format(cfg.wireFormat),
		Topics: map[string]string{
			cfg.requestsTopic:   schemas.RequestSchema,
			cfg.verdictsTopic:   schemas.VerdictSchema,
			cfg.summariesTopic:  schemas.SummarySchema,
			cfg.deadLetterTopic: schemas.DeadLetterSchema,
		},
	}
	if cfg.reviewsTopic != "" {
		sc.Topics[cfg.reviewsTopic] = schemas.ReviewSchema
	}
	if len(cfg.schemaRegistry) > 0 {
		client, err := sr.NewClient(sr.URLs(cfg.schemaRegistry...))
		if err != nil {
			return nil, fmt.Errorf("%w: --schema-registry: %v", errConfig, err)
		}
		sc.Registry = client
	}
	serde, err := schemas.NewSerde(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("setting up the wire format: %w", err)
	}
	return serde, nil
}

// startRegistry starts the ruleset sources: the directory first, then the
// topic, and waits until the topic has been read to its end so no request is
// dead-lettered as unknown while the rulesets are still loading.
func startRegistry(ctx context.Context, g *errgroup.Group, cfg serveConfig, client *stream.Client, logger *slog.Logger) (registry.Resolver, error) {
	var resolvers []registry.Resolver
	if cfg.rulesetsDir != "" {
		dir, err := registry.NewDir(cfg.rulesetsDir, registry.DirOptions{Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("%w: --rulesets-dir: %v", errConfig, err)
		}
		g.Go(func() error { return dir.Run(ctx) })
		resolvers = append(resolvers, dir)
	}
	if cfg.rulesetsTopic != "" {
		topic, err := registry.NewTopic(registry.TopicConfig{Client: client, Topic: cfg.rulesetsTopic, Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("%w: --rulesets-topic: %v", errConfig, err)
		}
		g.Go(func() error { return topic.Run(ctx) })
		wctx, cancel := context.WithTimeout(ctx, cfg.rulesetsReadyWait)
		defer cancel()
		if err := topic.WaitReady(wctx); err != nil {
			return nil, fmt.Errorf("reading the rulesets topic %q: %w", cfg.rulesetsTopic, err)
		}
		resolvers = append(resolvers, topic)
	}
	if len(resolvers) == 0 {
		return nil, fmt.Errorf("%w: no ruleset source: set --rulesets-dir or --rulesets-topic", errConfig)
	}
	return registry.Chain(resolvers...), nil
}

// claimsApart checks that no key the service keeps its own state under lies
// under the claims prefix, or holds it: a tenant may name any key under
// the prefix as a claim check.
func (c *serveConfig) claimsApart() error {
	review := strings.TrimSuffix(c.http.reviewPrefix, "/")
	own := []struct{ setting, prefix string }{
		{"--job-prefix", c.http.jobPrefix},
		{"--report-prefix", c.http.reportPrefix},
		{"--review-prefix", review},
		{"--review-prefix (its -pending keys)", review + "-pending"},
		{"--review-prefix (its -material keys)", review + "-material"},
		{"--verdict-cache-prefix", c.cache.prefix},
		{"the dead letters' stored values", producer.DeadLetterPrefix},
		{"the usage windows", tenantusage.DefaultPrefix},
	}
	claims := strings.TrimSuffix(c.s3.claimsPrefix, "/")
	for _, o := range own {
		p := strings.TrimSuffix(o.prefix, "/")
		if p == claims || strings.HasPrefix(p, claims+"/") || strings.HasPrefix(claims, p+"/") {
			return fmt.Errorf("--s3-claims-prefix %q overlaps %s %q: tenants may name any key under the claims prefix, so the service's own objects must lie elsewhere", c.s3.claimsPrefix, o.setting, o.prefix)
		}
	}
	return nil
}

// fairness is the requests consumer's fair share across tenants, by the
// tenant header the service's request writer sets (requests without it
// share one queue), with the weights and caps of the tenants file, read at
// each decision so that a reload applies at once (nil: each tenant weighing
// the same, uncapped); nil with --read-ahead 0.
func (c *serveConfig) fairness(file *tenants.File) *consumer.Fairness {
	if c.readAhead == 0 {
		return nil
	}
	f := &consumer.Fairness{Tenant: consumer.TenantHeader(producer.HeaderTenant), ReadAhead: c.readAhead}
	if file != nil {
		f.Weight, f.MaxInFlight = file.Weight, file.MaxInFlight
	}
	return f
}

// budgetOf is each tenant's token budget in the tenants file's version in force.
func budgetOf(file *tenants.File) func(tenant string) tenantusage.Budget {
	return func(tenant string) tenantusage.Budget {
		l := file.Config().For(tenant)
		return tenantusage.Budget{TokensPerHour: l.TokensPerHour, TokensPerDay: l.TokensPerDay, Delay: l.OnExceed == tenants.OnExceedDelay}
	}
}

// hasBudgets reports whether cfg sets a token budget.
func hasBudgets(cfg *tenants.Config) bool {
	if cfg.Default.HasBudget() {
		return true
	}
	for _, l := range cfg.Tenants {
		if l.HasBudget() {
			return true
		}
	}
	return false
}

// openTenants reads the tenants file, nil without --tenants-file; one that
// is missing or does not parse is a configuration error.
func (c *serveConfig) openTenants(logger *slog.Logger) (*tenants.File, error) {
	if c.tenantsFile == "" {
		return nil, nil
	}
	file, err := tenants.Open(c.tenantsFile, tenants.FileOptions{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("%w: --tenants-file: %v", errConfig, err)
	}
	if c.readAhead == 0 {
		logger.Warn("--read-ahead 0 judges requests in the order they are read: the tenants file's weights and max_in_flight do not apply, only its rate limits at the API")
	}
	return file, nil
}
