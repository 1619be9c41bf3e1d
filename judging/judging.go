// Package judging is the use case of judging one validation request, free of any transport:
// it resolves the request's ruleset, reads its documents (inline files, or claim checks
// through an ObjectReader, making room for them in memory through Config.Reserve), asks the
// engine, writes the report, and returns what was judged as events (Events: the verdict
// events, the summary, and what was judged, for the result store). Its ports are declared
// here (judging.go); the request's documents are read in documents.go.
//
// It owns the one road from a decoded request into the engine (Evaluate, EngineInputs:
// evaluate.go), which validate and eval take too; the road out, the events built from a
// result (events.go); and the failure table (Classify, failures.go) with the one predicate of
// whose fault an error is (MessageFault), which serve's consumer is given: the message's
// faults are dead-lettered, the environment's are retried while consumption holds.
//
// It imports no broker, HTTP or object-storage client: serve's Kafka handler (package
// pipeline) decodes, replays, publishes and holds around it.
package judging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/internal/fault"
	"rulevalidator/internal/tracing"
	"rulevalidator/request"
	"rulevalidator/schemas"
)

// Evaluator judges one task (an *engine.Engine).
type Evaluator interface {
	Evaluate(ctx context.Context, task engine.Task) (*engine.Result, error)
}

// RulesetResolver finds a validated ruleset by id and version, "" asking for the latest (a
// registry.Resolver). An error for an id or version it does not know wraps
// fault.ErrUnknownRuleset (registry.ErrUnknownRuleset); any other error is not a verdict on
// the reference.
type RulesetResolver interface {
	Resolve(ctx context.Context, id, version string) (*engine.Ruleset, error)
}

// ObjectReader reads a tenant's claim-checked documents (an *objstore.Store), refusing,
// unread, any object the tenant may not read (bucket.ErrClaimRefused). ClaimSize gives an
// object's size before it is read, so that room is made for it; a missing object wraps
// bucket.ErrNotFound, one larger than the store reads bucket.ErrTooLarge.
type ObjectReader interface {
	ClaimSize(ctx context.Context, tenant, uri string) (int64, error)
	GetClaim(ctx context.Context, tenant, uri string) ([]byte, error)
}

// DocumentReader reads a document's file (inline or claim-checked) into
// pages (a *docread.Reader). What it cannot read is a *docread.Error, the
// message's fault (unreadable_document); CheckSize gives the one for a file
// too large, before it is fetched.
type DocumentReader interface {
	Read(ctx context.Context, src docread.Source) (*docread.Document, error)
	CheckSize(name string, size int64) error
}

// ReportWriter renders and stores the report of a judged request. It retries
// transient failures itself; an error it returns fails the request visibly.
type ReportWriter interface {
	WriteReport(ctx context.Context, req *schemas.Request, rs *engine.Ruleset, res *engine.Result, at time.Time) (*schemas.ReportDescriptor, error)
}

// Reserver makes room in memory for what a request's documents hold once read: it takes n
// bytes, waiting until they fit, and returns the function that gives them back. Serve's is
// consumer.Reserve, the bytes in flight of the message being handled.
type Reserver func(ctx context.Context, n int64) (release func(), err error)

// Config configures a Judge.
type Config struct {
	Engine   Evaluator
	Rulesets RulesetResolver
	// Evidence is the engine's evidence mode (default cite), which sets what
	// a claim-checked document costs of the memory reserved (MaterialCost).
	Evidence engine.EvidenceMode
	// Objects resolves documents given by uri; nil rejects such requests.
	Objects ObjectReader
	// Documents reads documents given as files (data) or by uri into pages:
	// PDF, DOCX, text. Nil: a reader with docread's defaults, whose PDF
	// engine (started on the first PDF, compiled without a cache) lives as
	// long as the process.
	Documents DocumentReader
	// Reports writes reports when a ruleset or request asks; nil means
	// reports are disabled: such a request completes without one (its
	// summary's report is null) and a warning says so.
	Reports ReportWriter
	// Reserve makes room for the documents a request reads; nil reserves
	// nothing.
	Reserve Reserver
	// Timeout bounds the work on one request, retries of the model included;
	// an attempt that runs out of it ends in an error wrapping
	// ErrRequestTimeout. Zero: no bound.
	Timeout time.Duration
	// ReportFailed, when set, is called when a report could not be stored.
	ReportFailed func()
	// TracerProvider makes the spans of the stages (ruleset, documents,
	// task, report; see trace.go); nil makes none. The engine makes its own.
	TracerProvider trace.TracerProvider
	Logger         *slog.Logger
	// Now is the clock (tests).
	Now func() time.Time
}

// Validate reports the first missing dependency.
func (c *Config) Validate() error {
	switch {
	case c.Engine == nil:
		return errors.New("judging: Engine is required")
	case c.Rulesets == nil:
		return errors.New("judging: Rulesets is required")
	case c.Timeout < 0:
		return fmt.Errorf("judging: Timeout %v must not be negative", c.Timeout)
	}
	return nil
}

// Judge judges validation requests. It is safe for concurrent use.
type Judge struct {
	cfg    Config
	tracer trace.Tracer
}

// New returns a Judge.
func New(cfg Config) (*Judge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Reserve == nil {
		cfg.Reserve = func(context.Context, int64) (func(), error) { return func() {}, nil }
	}
	if cfg.Documents == nil {
		r, err := docread.New(docread.Config{Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		cfg.Documents = r
	}
	return &Judge{cfg: cfg, tracer: tracing.OrNoop(cfg.TracerProvider).Tracer(tracerName)}, nil
}

// ErrRequestTimeout marks an attempt that ran out of Config.Timeout: nobody's fault yet
// (MessageFault), for the transport to retry or give up on (ErrTimedOut).
var ErrRequestTimeout = errors.New("no result within the request timeout")

// Judge resolves, reads, judges and reports one decoded request, started at start, and
// returns its events; it publishes nothing. An environment fault (model or storage
// misconfigured or unavailable, or the request timeout, wrapping ErrRequestTimeout) returns
// no events; a message fault returns the failed summary with the error, whose reason
// MessageFault names.
//
// The documents read are in req (ResolveDocuments) and the room reserved for them
// (Config.Reserve) is held until release, never nil, is called: call it once req is let go of.
func (j *Judge) Judge(ctx context.Context, req *schemas.Request, start time.Time) (out Events, release func(), err error) {
	held := &holds{take: j.cfg.Reserve}
	jctx, cancel := ctx, context.CancelFunc(func() {})
	if j.cfg.Timeout > 0 {
		jctx, cancel = context.WithTimeout(ctx, j.cfg.Timeout)
	}
	defer cancel()
	out, rs, err := j.judge(jctx, req, start, held)
	if err == nil {
		return out, held.release, nil
	}
	if ctx.Err() == nil && errors.Is(jctx.Err(), context.DeadlineExceeded) {
		return Events{}, held.release, fmt.Errorf("%w %s: %w", ErrRequestTimeout, j.cfg.Timeout, err)
	}
	if f := Classify(err); f.Message {
		return Events{Summary: failedSummary(req, rs, f.Reason, err, start, j.cfg.Now())}, held.release, err
	}
	return Events{}, held.release, err
}

// judge is the road: the ruleset, the documents, the engine's task built from them once, the
// engine, the report, the events. Its errors are classified by Judge, through the failure
// table; rs is the ruleset once resolved, for a failed summary to name.
func (j *Judge) judge(ctx context.Context, req *schemas.Request, start time.Time, held *holds) (out Events, rs *engine.Ruleset, err error) {
	if rs, err = j.rulesetTraced(ctx, req); err != nil {
		return Events{}, nil, err
	}
	read, err := j.readDocumentsTraced(ctx, req, held)
	if err != nil {
		return Events{}, rs, err
	}
	task, err := newTask(req, rs, read.mediaTypes)
	if err != nil {
		return Events{}, rs, err
	}
	res, err := j.cfg.Engine.Evaluate(ctx, task)
	if err != nil {
		return Events{}, rs, err
	}
	report, err := j.reportTraced(ctx, req, rs, res)
	if err != nil {
		return Events{}, rs, err
	}
	completed := j.cfg.Now()
	return Events{
		Verdicts: NewVerdictEvents(req, rs, res, res.Model, start, completed),
		Summary:  NewSummary(req, rs, res, res.Model, report, start, completed),
		Material: task.Inputs,
		Ruleset:  rs,
		Files:    read.files,
	}, rs, nil
}

// failedSummary is the summary of a request that failed for reason, naming its ruleset when
// it was resolved.
func failedSummary(req *schemas.Request, rs *engine.Ruleset, reason schemas.Reason, err error, start, now time.Time) schemas.SummaryEvent {
	summary := schemas.NewFailedSummary(req, reason, err.Error(), start, now)
	if rs != nil {
		summary.RulesetID = rs.ID
		if rs.Version != "" {
			summary.RulesetVersion = &rs.Version
		}
	}
	return summary
}

func (j *Judge) ruleset(ctx context.Context, req *schemas.Request) (*engine.Ruleset, error) {
	if req.InlineRuleset != nil {
		rs, err := request.InlineRuleset(req)
		if err != nil {
			return nil, fault.Permanent(string(schemas.ReasonInvalidRuleset), err)
		}
		return rs, nil
	}
	version := ""
	if req.RulesetRef.Version != nil {
		version = *req.RulesetRef.Version
	}
	rs, err := j.cfg.Rulesets.Resolve(ctx, req.RulesetRef.ID, version)
	if err != nil {
		return nil, fmt.Errorf("resolving ruleset %q: %w", req.RulesetRef.ID, err)
	}
	return rs, nil
}

// report writes the report of a judged request when its ruleset or itself asks for one; nil
// when none is written.
func (j *Judge) report(ctx context.Context, req *schemas.Request, rs *engine.Ruleset, res *engine.Result) (*schemas.ReportDescriptor, error) {
	if !wantsReport(req, rs) {
		return nil, nil
	}
	if j.cfg.Reports == nil {
		// The report is conditional on storage: the request completes, its
		// summary without a report, and this line says why.
		j.cfg.Logger.WarnContext(ctx, "report skipped: a report was asked for but no report storage is configured (--s3-endpoint); the summary's validation_report is null",
			"request_id", req.RequestID, "tenant_id", req.TenantID, "ruleset_id", rs.ID)
		return nil, nil
	}
	report, err := j.cfg.Reports.WriteReport(ctx, req, rs, res, j.cfg.Now())
	if err != nil {
		if j.cfg.ReportFailed != nil {
			j.cfg.ReportFailed()
		}
		return nil, &reportError{err}
	}
	return report, nil
}

func wantsReport(req *schemas.Request, rs *engine.Ruleset) bool {
	if req.Options.GenerateReport != nil {
		return *req.Options.GenerateReport
	}
	return rs.GenerateReport
}
