// Package pipeline is serve's Kafka adapter around the judging use case (package judging):
// a consumer.Handler that decodes one consumed validation request, answers a redelivery from
// what was built before (the result cache, and the events whose storing or publishing failed),
// has the request judged (judging.Judge) under the request timeout, counting per message the
// attempts that ran out of it, stores the result, encodes and publishes the verdicts, the
// summary and the callback with the request's trace headers, and holds consumption while an
// environment fault lasts (hold.go). What is the message's fault and what the environment's
// is the failure table's answer (judging.Classify), which the consumer's retry and dead-letter
// middleware are given too (judging.MessageFault).
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"rulevalidator/consumer"
	"rulevalidator/internal/tracing"
	"rulevalidator/judging"
	"rulevalidator/producer"
	"rulevalidator/schemas"
	"rulevalidator/stream"
	"rulevalidator/verdict"
)

// Publisher encodes and writes events (a *producer.Producer).
type Publisher interface {
	Encode(ctx context.Context, r producer.Result) ([]stream.Record, error)
	Write(ctx context.Context, msgs []stream.Record) error
}

// Hooks observe the pipeline; every field is optional and must be safe for
// concurrent use.
type Hooks struct {
	// RequestDone is called once per handled request with its outcome:
	// "completed", "failed" (a failed summary was published), "cached" (a
	// redelivery answered from the cache) or "retry" (a transient error),
	// and the context it was handled in (its spans still open).
	RequestDone func(ctx context.Context, outcome string, took time.Duration)
	// VerdictsPublished counts published verdicts by engine.Outcome: "pass",
	// "fail", "score", "not_applicable" or "no_verdict".
	VerdictsPublished func(outcome string, n int)
	// ReportFailed is called when a report could not be stored (the
	// use case's judging.Config.ReportFailed).
	ReportFailed func()
	// EnvironmentFault is called when an environment fault starts holding
	// consumption (active) and when it clears; cause is a judging.Cause.
	EnvironmentFault func(cause string, active bool)
	// Finished is called once a request's outcome is published, completed
	// or failed (not for redeliveries answered from the cache). req is the
	// request without the text of its documents and text input, which is not
	// kept past judging.
	Finished func(req *schemas.Request, out judging.Events)
}

// Config configures a Pipeline.
type Config struct {
	// Judging configures the use case each request is judged by
	// (judging.New): the engine, the rulesets, the documents and claim
	// checks, the reports. New sets its Reserve to the consumer's (a
	// claim-checked document is counted in the bytes in flight of its
	// message, consumer.Reserve), its Timeout to RequestTimeout, its
	// ReportFailed to Hooks.ReportFailed, and its Logger and Now, when it
	// has none, to this Config's.
	Judging judging.Config
	// Serde and Publisher decode the request and encode and publish its
	// events; Handle fails without them.
	Serde     *schemas.Serde
	Publisher Publisher
	// Results stores each request's final result (completed or failed)
	// before its events are published, so that job status is durable once
	// the events are out; nil stores nothing. A failure to store is an
	// environment fault: the request is held and retried.
	Results judging.ResultStore
	// Admit, when set, is asked before a request is judged whether its tenant may have it
	// judged now (the token budgets: usage.Admission). An error that the failure table makes
	// the message's fault (consumer.Permanent with reason quota_exceeded) fails the request
	// with that reason, the model not asked: its failed summary is stored and published and
	// the message dead-lettered. Any other error (the usage could not be read) is the
	// environment's, a storage fault: the request is held and retried.
	// An error that says its request may wait (DelayUntil, on_exceed: delay) defers the
	// message until then (consumer.Defer), its status marked by Delayed, when the consumer
	// lets it; otherwise it fails as above.
	Admit func(ctx context.Context, tenant, requestID string) error
	// Delayed, when set, records that a request waits for its tenant's budget until until,
	// saying why (its job status). A failure to record it is logged, and the request waits
	// all the same.
	Delayed func(ctx context.Context, req *schemas.Request, until time.Time, why string) error
	// Price, when set, prices a request's usage by the model that judged it (nil: not
	// priced), for its summary's usage.cost.
	Price func(model string, u verdict.Usage) *float64
	// DelayRecheck is the longest a delayed request waits before its tenant's budget is
	// checked again, before its window ends: a raised budget applies within it (default
	// 30s).
	DelayRecheck time.Duration
	// CacheEntries and CacheBytes bound the cache of recent results
	// (defaults 1024 and 64 MiB; CacheEntries < 0 disables it).
	CacheEntries int
	CacheBytes   int
	// RequestTimeout bounds the work on one request, retries of the model
	// included (default 10m).
	RequestTimeout time.Duration
	// TimeoutAttempts is how many times one message may run out of
	// RequestTimeout before it is dead-lettered with reason timeout
	// (default 3).
	TimeoutAttempts int
	// CallbackPayload, when set, builds the callback of a request that asks
	// for one (options.callback_url), completed or failed: the body to POST,
	// and the same body without the verdicts for when the full one does not
	// fit the callback topic. It is published with the request's events
	// (producer.Result.Callback), so the callback is durable before the
	// request's offset is committed. Nil publishes no callbacks.
	CallbackPayload func(req *schemas.Request, out judging.Events) (payload, withoutVerdicts []byte, err error)
	// TracerProvider makes the decode and store spans and is given to the
	// use case (Judging.TracerProvider, when it has none); nil makes none.
	TracerProvider trace.TracerProvider
	Logger         *slog.Logger
	Hooks          Hooks
	// Now is the clock (tests).
	Now func() time.Time
}

// Defaults for Config's zero fields, declared once: serve's settings show these.
const (
	DefaultCacheEntries    = 1024
	DefaultCacheBytes      = 64 << 20
	DefaultRequestTimeout  = 10 * time.Minute
	DefaultTimeoutAttempts = 3
	DefaultDelayRecheck    = 30 * time.Second
)

func (c *Config) setDefaults() {
	if c.CacheEntries == 0 {
		c.CacheEntries = DefaultCacheEntries
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.TimeoutAttempts == 0 {
		c.TimeoutAttempts = DefaultTimeoutAttempts
	}
	if c.DelayRecheck == 0 {
		c.DelayRecheck = DefaultDelayRecheck
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports the first missing dependency.
func (c *Config) Validate() error {
	switch {
	case c.RequestTimeout < 0:
		return fmt.Errorf("pipeline: RequestTimeout %v must not be negative", c.RequestTimeout)
	case c.TimeoutAttempts < 0:
		return fmt.Errorf("pipeline: TimeoutAttempts %d must not be negative", c.TimeoutAttempts)
	}
	return c.Judging.Validate()
}

// unsentEntries and unsentBytes bound the results kept for a publish retry
// even when the result cache is disabled: a request is retried while it holds
// a consumer slot, so there are few at a time.
const (
	unsentEntries = 256
	unsentBytes   = 64 << 20
)

// Pipeline handles validation requests. It is safe for concurrent use.
type Pipeline struct {
	cfg   Config
	judge *judging.Judge
	cache *resultCache
	// unsent holds what was built for requests whose publishing failed, so
	// the retry re-sends it instead of asking the model again.
	unsent *resultCache
	env    *environment
	tracer trace.Tracer
	// timeouts counts, per message in flight, the attempts that ran out of
	// the request timeout; ReleaseHolds forgets a message's count when its
	// handling ends.
	timeoutsMu sync.Mutex
	timeouts   map[string]int
}

// New returns a Pipeline.
func New(cfg Config) (*Pipeline, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	jc := cfg.Judging
	jc.Reserve, jc.Timeout, jc.ReportFailed = consumer.Reserve, cfg.RequestTimeout, cfg.Hooks.ReportFailed
	if jc.Logger == nil {
		jc.Logger = cfg.Logger
	}
	if jc.Now == nil {
		jc.Now = cfg.Now
	}
	if jc.TracerProvider == nil {
		jc.TracerProvider = cfg.TracerProvider
	}
	judge, err := judging.New(jc)
	if err != nil {
		return nil, err
	}
	return &Pipeline{
		cfg:      cfg,
		judge:    judge,
		cache:    newResultCache(cfg.CacheEntries, cfg.CacheBytes),
		unsent:   newResultCache(max(cfg.CacheEntries, unsentEntries), max(cfg.CacheBytes, unsentBytes)),
		env:      newEnvironment(cfg.Hooks.EnvironmentFault),
		timeouts: map[string]int{},
		tracer:   tracing.OrNoop(cfg.TracerProvider).Tracer(tracerName),
	}, nil
}

// EnvironmentCheck fails while an environment fault holds consumption,
// naming the cause and what to fix; it is a readiness probe.
func (p *Pipeline) EnvironmentCheck(ctx context.Context) error { return p.env.check(ctx) }

// Handle processes one request message; it implements consumer.Handler. It
// returns nil only once every event of the request is acknowledged.
func (p *Pipeline) Handle(ctx context.Context, m *consumer.Message) error {
	start := p.cfg.Now()
	outcome, err := p.handle(ctx, m, start)
	if err != nil {
		if _, messageFault := judging.MessageFault(err); !messageFault {
			outcome = "retry"
		}
		if _, deferred := errors.AsType[*consumer.DeferredError](err); deferred {
			outcome = "delayed"
		}
	}
	p.observeEnvironment(ctx, m, err)
	if p.cfg.Hooks.RequestDone != nil {
		p.cfg.Hooks.RequestDone(ctx, outcome, p.cfg.Now().Sub(start))
	}
	return err
}

func (p *Pipeline) handle(ctx context.Context, m *consumer.Message, start time.Time) (string, error) {
	if p.cfg.Serde == nil || p.cfg.Publisher == nil {
		return "", errors.New("pipeline: Handle needs a Serde and a Publisher")
	}
	req, err := p.decode(ctx, m)
	if err != nil {
		return "failed", err
	}
	log := p.cfg.Logger.With("request_id", req.RequestID, "tenant_id", req.TenantID, "position", position(m))
	// A replayed dead letter is judged as any request; its count only keeps its usage
	// apart from that of the attempt that failed. A count that cannot be read is no replay.
	if n, err := schemas.ReplayCount(m.Headers); err == nil && n > 0 {
		ctx = judging.WithReplay(ctx, n)
		log = log.With("replay", n)
	}

	if pub, ok := p.unsent.get(requestKey(req)); ok {
		log.InfoContext(ctx, "re-sending the events built before storing or publishing failed; the model is not asked again")
		if err := p.storeResult(ctx, pub); err != nil {
			return "", err
		}
		if err := p.cfg.Publisher.Write(ctx, pub.msgs); err != nil {
			return "", &brokerError{err}
		}
		p.unsent.remove(requestKey(req))
		return p.finished(ctx, log, pub)
	}
	if pub, ok := p.cache.get(requestKey(req)); ok {
		log.InfoContext(ctx, "redelivered request answered from the result cache")
		if err := p.cfg.Publisher.Write(ctx, pub.msgs); err != nil {
			return "", &brokerError{err}
		}
		return "cached", nil
	}

	var (
		out      judging.Events
		judgeErr error
	)
	if err := p.admit(ctx, req); err != nil {
		if _, messageFault := judging.MessageFault(err); !messageFault {
			return "", err
		}
		judgeErr = err
		out = judging.Events{Summary: schemas.NewFailedSummary(req, judging.Classify(err).Reason, err.Error(), start, p.cfg.Now())}
	} else {
		// What is reserved for the documents is held until the request is let go
		// of: its pages are in req until then.
		var release func()
		out, release, judgeErr = p.judge.Judge(ctx, req, start)
		defer release()
	}
	if judgeErr != nil {
		if _, messageFault := judging.MessageFault(judgeErr); !messageFault {
			if !errors.Is(judgeErr, judging.ErrRequestTimeout) || !p.timedOutForGood(m) {
				return "", judgeErr
			}
			// The last attempt allowed: the failure table makes it the
			// message's fault, as for every other reason.
			judgeErr = &attemptsError{n: p.cfg.TimeoutAttempts,
				err: fmt.Errorf("%w (%d attempts of %s): %w", judging.ErrTimedOut, p.cfg.TimeoutAttempts, p.cfg.RequestTimeout, judgeErr)}
			out = judging.Events{Summary: schemas.NewFailedSummary(req, judging.Classify(judgeErr).Reason, judgeErr.Error(), start, p.cfg.Now())}
		}
	}
	p.forgetTimeouts(m)
	if p.cfg.Price != nil && out.Summary.Usage.LLMCalls > 0 {
		out.Summary.Usage.Cost = p.cfg.Price(out.Summary.Model, out.Summary.Usage)
	}
	// A request that cannot succeed still gets its (failed) summary, so the
	// dashboards hear of it; the consumer then dead-letters the message.
	msgs, err := p.encode(ctx, req, out, m.Headers)
	if errors.Is(err, stream.ErrTooLarge) && judgeErr == nil {
		// An event larger than its topic takes is the request's fault (its
		// inputs, its rules), never the broker's: the request fails with a
		// summary that says why, which fits, and the message is dead-lettered.
		judgeErr = consumer.Permanent(string(schemas.ReasonOversized), fmt.Errorf("the request's events do not fit their topics: %w", err))
		out = judging.Events{Summary: schemas.NewFailedSummary(req, schemas.ReasonOversized, judgeErr.Error(), start, p.cfg.Now())}
		msgs, err = p.encode(ctx, req, out, m.Headers)
	}
	if err != nil {
		return "", consumer.Permanent(string(schemas.ReasonInternal), err)
	}
	pub := &published{msgs: msgs, req: envelope(req), out: out, judgeErr: judgeErr}
	if err := p.storeResult(ctx, pub); err != nil {
		p.unsent.put(requestKey(req), pub)
		return "", err
	}
	if err := p.cfg.Publisher.Write(ctx, msgs); err != nil {
		p.unsent.put(requestKey(req), pub)
		return "", &brokerError{err}
	}
	return p.finished(ctx, log, pub)
}

// encode builds the records of a request's events, and of its callback.
func (p *Pipeline) encode(ctx context.Context, req *schemas.Request, out judging.Events, headers []stream.Header) ([]stream.Record, error) {
	result := producer.Result{Verdicts: out.Verdicts, Summary: out.Summary, Trace: traceHeaders(headers)}
	var err error
	if result.Callback, err = p.callback(req, out); err != nil {
		return nil, err
	}
	return p.cfg.Publisher.Encode(ctx, result)
}

// admit asks Config.Admit whether req's tenant may have it judged now.
func (p *Pipeline) admit(ctx context.Context, req *schemas.Request) error {
	if p.cfg.Admit == nil {
		return nil
	}
	err := p.cfg.Admit(ctx, req.TenantID, req.RequestID)
	if err == nil {
		return nil
	}
	if delayed, ok := p.delay(ctx, req, err); ok {
		return delayed
	}
	if _, messageFault := judging.MessageFault(err); messageFault {
		return err
	}
	return &resultStoreError{fmt.Errorf("reading the usage of tenant %q for its token budget: %w", req.TenantID, err)}
}

// delay is what becomes of a request refused by Admit with an error that says it may wait
// (DelayUntil): deferred until its window ends, or DelayRecheck if sooner, its status
// marked delayed; failed, saying why it did not wait, when the consumer does not let it
// wait (its tenant holds as many waiting as it may). ok is false for any other error.
func (p *Pipeline) delay(ctx context.Context, req *schemas.Request, err error) (_ error, ok bool) {
	var wait interface{ DelayUntil() (time.Time, bool) }
	if !errors.As(err, &wait) {
		return nil, false
	}
	until, delay := wait.DelayUntil()
	if !delay {
		return nil, false
	}
	if !consumer.MayDefer(ctx) {
		return fmt.Errorf("%w; it is not delayed: as many of the tenant's requests wait already as a replica holds for one tenant", err), true
	}
	if p.cfg.Delayed != nil {
		if derr := p.cfg.Delayed(ctx, req, until, err.Error()); derr != nil {
			p.cfg.Logger.WarnContext(ctx, "the request waits for its tenant's budget; its status could not say so", "request_id", req.RequestID, "err", derr)
		}
	}
	recheck := p.cfg.Now().Add(p.cfg.DelayRecheck)
	if until.Before(recheck) {
		recheck = until
	}
	return consumer.Defer(recheck, err), true
}

// storeResult stores pub's result unless it is stored already.
func (p *Pipeline) storeResult(ctx context.Context, pub *published) (err error) {
	if p.cfg.Results == nil || pub.stored {
		pub.out.Material, pub.out.Ruleset, pub.out.Files = nil, nil, nil
		return nil
	}
	ctx, span := p.tracer.Start(ctx, "store result")
	defer func() { tracing.End(span, err) }()
	if err := p.cfg.Results.StoreResult(ctx, pub.req, pub.out); err != nil {
		return &resultStoreError{fmt.Errorf("storing the result of request %q (tenant %q): %w", pub.req.RequestID, pub.req.TenantID, err)}
	}
	pub.stored, pub.out.Material, pub.out.Ruleset, pub.out.Files = true, nil, nil, nil
	return nil
}

// finished reports a request whose events are written: completed results
// are remembered so a redelivery yields the same bytes.
func (p *Pipeline) finished(ctx context.Context, log *slog.Logger, pub *published) (string, error) {
	if pub.judgeErr == nil {
		p.cache.put(requestKey(pub.req), pub)
	}
	if p.cfg.Hooks.Finished != nil {
		p.cfg.Hooks.Finished(pub.req, pub.out)
	}
	if pub.judgeErr != nil {
		log.WarnContext(ctx, "request failed", "reason", pub.out.Summary.Error.Code, "err", pub.judgeErr)
		return "failed", pub.judgeErr
	}
	if h := p.cfg.Hooks.VerdictsPublished; h != nil {
		for outcome, n := range verdictOutcomes(pub.out.Verdicts) {
			h(outcome, n)
		}
	}
	log.InfoContext(ctx, "request judged", "rules", len(pub.out.Verdicts), "cached", pub.out.Summary.Counts.Cached, "llm_calls", pub.out.Summary.Usage.LLMCalls, "took", pub.out.Summary.CompletedAt.Sub(pub.out.Summary.StartedAt))
	return "completed", nil
}

// callback is the request's callback, nil when it asks for none or callbacks
// are not configured.
func (p *Pipeline) callback(req *schemas.Request, out judging.Events) (*producer.Callback, error) {
	if p.cfg.CallbackPayload == nil || req.Options.CallbackURL == nil || *req.Options.CallbackURL == "" {
		return nil, nil
	}
	payload, fallback, err := p.cfg.CallbackPayload(req, out)
	if err != nil {
		return nil, fmt.Errorf("building the callback payload: %w", err)
	}
	return &producer.Callback{URL: *req.Options.CallbackURL, Payload: payload, Fallback: fallback}, nil
}

// requestKey identifies a request across tenants: a request_id is unique
// within its tenant only.
func requestKey(req *schemas.Request) string {
	return schemas.SummaryEventID(req.TenantID, req.RequestID)
}

// timedOutForGood counts a timed-out attempt of m and reports whether it was
// the last one allowed.
func (p *Pipeline) timedOutForGood(m *consumer.Message) bool {
	p.timeoutsMu.Lock()
	defer p.timeoutsMu.Unlock()
	p.timeouts[position(m)]++
	return p.timeouts[position(m)] >= p.cfg.TimeoutAttempts
}

func (p *Pipeline) forgetTimeouts(m *consumer.Message) {
	p.timeoutsMu.Lock()
	delete(p.timeouts, position(m))
	p.timeoutsMu.Unlock()
}

func verdictOutcomes(verdicts []schemas.VerdictEvent) map[string]int {
	out := map[string]int{}
	for _, v := range verdicts {
		out[string(judging.EventOutcome(v))]++
	}
	return out
}

// traceHeaders carries the request's W3C trace context onto its events.
func traceHeaders(hs []stream.Header) []stream.Header {
	var out []stream.Header
	for _, h := range hs {
		if h.Key == producer.HeaderTraceparent || h.Key == producer.HeaderTracestate {
			out = append(out, h)
		}
	}
	return out
}

func position(m *consumer.Message) string {
	return fmt.Sprintf("%s/%d/%d", m.Topic, m.Partition, m.Offset)
}
