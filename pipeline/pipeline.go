// Package pipeline turns one consumed validation request into published
// events: decode, resolve the ruleset and claim-checked documents, judge with
// the engine, write the report, publish the verdicts and the summary. It is a
// consumer.Handler.
//
// It owns the one road from a decoded request to its verdicts (Evaluate,
// evaluate.go), which validate and eval take too; the events built from a result
// (events.go); the failure table (Classify, failures.go) and the one predicate of
// whose fault an error is (MessageFault), which the consumer's retry and
// dead-letter middleware are given: the message's faults are dead-lettered, the
// environment's are retried while consumption holds until the fault clears
// (hold.go).
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"rulevalidator/consumer"
	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/objstore"
	"rulevalidator/producer"
	"rulevalidator/registry"
	"rulevalidator/request"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// Evaluator judges one request (an *engine.Engine).
type Evaluator interface {
	Evaluate(ctx context.Context, req engine.Task) (*engine.Result, error)
}

// Publisher encodes and writes events (a *producer.Producer).
type Publisher interface {
	Encode(ctx context.Context, r producer.Result) ([]stream.Record, error)
	Write(ctx context.Context, msgs []stream.Record) error
}

// ObjectReader reads a tenant's claim-checked documents (an *objstore.Store),
// refusing, unread, any object the tenant may not read (objstore.ErrClaimRefused).
// StatClaim gives an object's size before it is read, so that room is made for it.
type ObjectReader interface {
	StatClaim(ctx context.Context, tenant, uri string) (objstore.ObjectInfo, error)
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

// ResultStore keeps the final result of a request where the API reads job
// status (a *jobs.ObjectStore). Storing is idempotent: the same request may be
// stored again after a redelivery.
type ResultStore interface {
	StoreResult(ctx context.Context, req *schemas.Request, out Events) error
}

// Hooks observe the pipeline; every field is optional and must be safe for
// concurrent use.
type Hooks struct {
	// RequestDone is called once per handled request with its outcome:
	// "completed", "failed" (a failed summary was published), "cached" (a
	// redelivery answered from the cache) or "retry" (a transient error).
	RequestDone func(outcome string, took time.Duration)
	// VerdictsPublished counts published verdicts by engine.Outcome: "pass",
	// "fail", "score", "not_applicable" or "no_verdict".
	VerdictsPublished func(outcome string, n int)
	// ReportFailed is called when a report could not be stored.
	ReportFailed func()
	// EnvironmentFault is called when an environment fault starts holding
	// consumption (active) and when it clears; cause is a Cause.
	EnvironmentFault func(cause string, active bool)
	// Finished is called once a request's outcome is published, completed
	// or failed (not for redeliveries answered from the cache). req is the
	// request without the text of its documents and text input, which is not
	// kept past judging.
	Finished func(req *schemas.Request, out Events)
}

// Config configures a Pipeline.
type Config struct {
	Engine   Evaluator
	Rulesets registry.Resolver
	// Serde and Publisher are needed by Handle only; Judge works without.
	Serde     *schemas.Serde
	Publisher Publisher
	// Evidence is the engine's evidence mode (default cite), which sets what
	// a claim-checked document costs of the bytes in flight (Cost).
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
	// Results stores each request's final result (completed or failed)
	// before its events are published, so that job status is durable once
	// the events are out; nil stores nothing. A failure to store is an
	// environment fault: the request is held and retried.
	Results ResultStore
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
	CallbackPayload func(req *schemas.Request, out Events) (payload, withoutVerdicts []byte, err error)
	Logger          *slog.Logger
	Hooks           Hooks
	// Now is the clock (tests).
	Now func() time.Time
}

// Defaults for Config's zero fields, declared once: serve's settings show these.
const (
	DefaultCacheEntries    = 1024
	DefaultCacheBytes      = 64 << 20
	DefaultRequestTimeout  = 10 * time.Minute
	DefaultTimeoutAttempts = 3
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
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// defaultDocuments is the reader of a pipeline configured without one.
func defaultDocuments(c *Config) error {
	if c.Documents != nil {
		return nil
	}
	r, err := docread.New(docread.Config{Logger: c.Logger})
	if err != nil {
		return err
	}
	c.Documents = r
	return nil
}

// Validate reports the first missing dependency.
func (c *Config) Validate() error {
	switch {
	case c.Engine == nil:
		return errors.New("pipeline: Engine is required")
	case c.Rulesets == nil:
		return errors.New("pipeline: Rulesets is required")
	case c.RequestTimeout < 0:
		return fmt.Errorf("pipeline: RequestTimeout %v must not be negative", c.RequestTimeout)
	case c.TimeoutAttempts < 0:
		return fmt.Errorf("pipeline: TimeoutAttempts %d must not be negative", c.TimeoutAttempts)
	}
	return nil
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
	cache *resultCache
	// unsent holds what was built for requests whose publishing failed, so
	// the retry re-sends it instead of asking the model again.
	unsent *resultCache
	env    *environment
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
	if err := defaultDocuments(&cfg); err != nil {
		return nil, err
	}
	return &Pipeline{
		cfg:      cfg,
		cache:    newResultCache(cfg.CacheEntries, cfg.CacheBytes),
		unsent:   newResultCache(max(cfg.CacheEntries, unsentEntries), max(cfg.CacheBytes, unsentBytes)),
		env:      newEnvironment(cfg.Hooks.EnvironmentFault),
		timeouts: map[string]int{},
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
		if _, messageFault := MessageFault(err); !messageFault {
			outcome = "retry"
		}
	}
	p.observeEnvironment(ctx, m, err)
	if p.cfg.Hooks.RequestDone != nil {
		p.cfg.Hooks.RequestDone(outcome, p.cfg.Now().Sub(start))
	}
	return err
}

func (p *Pipeline) handle(ctx context.Context, m *consumer.Message, start time.Time) (string, error) {
	if p.cfg.Serde == nil || p.cfg.Publisher == nil {
		return "", errors.New("pipeline: Handle needs a Serde and a Publisher")
	}
	ev, err := p.cfg.Serde.Decode(ctx, m.Topic, m.Value, m.Headers)
	if err != nil {
		return "failed", fmt.Errorf("decoding %s: %w", position(m), err) // e.g. registry unavailable: held
	}
	req, ok := ev.(*schemas.Request)
	if !ok {
		return "failed", fmt.Errorf("%w: %s holds a %s, not a %s", schemas.ErrUndecodable, position(m), ev.SchemaName(), schemas.RequestSchema)
	}
	if err := req.Validate(); err != nil {
		return "failed", consumer.Permanent(string(schemas.ReasonInvalidRequest), err)
	}
	log := p.cfg.Logger.With("request_id", req.RequestID, "tenant_id", req.TenantID, "position", position(m))

	if pub, ok := p.unsent.get(requestKey(req)); ok {
		log.Info("re-sending the events built before storing or publishing failed; the model is not asked again")
		if err := p.storeResult(ctx, pub); err != nil {
			return "", err
		}
		if err := p.cfg.Publisher.Write(ctx, pub.msgs); err != nil {
			return "", &brokerError{err}
		}
		p.unsent.remove(requestKey(req))
		return p.finished(log, pub)
	}
	if pub, ok := p.cache.get(requestKey(req)); ok {
		log.Info("redelivered request answered from the result cache")
		if err := p.cfg.Publisher.Write(ctx, pub.msgs); err != nil {
			return "", &brokerError{err}
		}
		return "cached", nil
	}

	// What is reserved for the documents is held until the request is let go
	// of: its pages are in req until then.
	var held holds
	defer held.release()
	out, judgeErr := p.judgeHolding(ctx, req, start, &held)
	if judgeErr != nil {
		if _, messageFault := MessageFault(judgeErr); !messageFault {
			if !errors.Is(judgeErr, errRequestTimeout) || !p.timedOutForGood(m) {
				return "", judgeErr
			}
			// The last attempt allowed: the failure table makes it the
			// message's fault, as for every other reason.
			judgeErr = &attemptsError{n: p.cfg.TimeoutAttempts,
				err: fmt.Errorf("%w (%d attempts of %s): %w", errTimedOut, p.cfg.TimeoutAttempts, p.cfg.RequestTimeout, judgeErr)}
			out = Events{Summary: schemas.NewFailedSummary(req, Classify(judgeErr).Reason, judgeErr.Error(), start, p.cfg.Now())}
		}
	}
	p.forgetTimeouts(m)
	// A request that cannot succeed still gets its (failed) summary, so the
	// dashboards hear of it; the consumer then dead-letters the message.
	msgs, err := p.encode(ctx, req, out, m.Headers)
	if errors.Is(err, stream.ErrTooLarge) && judgeErr == nil {
		// An event larger than its topic takes is the request's fault (its
		// inputs, its rules), never the broker's: the request fails with a
		// summary that says why, which fits, and the message is dead-lettered.
		judgeErr = consumer.Permanent(string(schemas.ReasonOversized), fmt.Errorf("the request's events do not fit their topics: %w", err))
		out = Events{Summary: schemas.NewFailedSummary(req, schemas.ReasonOversized, judgeErr.Error(), start, p.cfg.Now())}
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
	return p.finished(log, pub)
}

// encode builds the records of a request's events, and of its callback.
func (p *Pipeline) encode(ctx context.Context, req *schemas.Request, out Events, headers []stream.Header) ([]stream.Record, error) {
	result := producer.Result{Verdicts: out.Verdicts, Summary: out.Summary, Trace: traceHeaders(headers)}
	var err error
	if result.Callback, err = p.callback(req, out); err != nil {
		return nil, err
	}
	return p.cfg.Publisher.Encode(ctx, result)
}

// storeResult stores pub's result unless it is stored already.
func (p *Pipeline) storeResult(ctx context.Context, pub *published) error {
	if p.cfg.Results == nil || pub.stored {
		pub.out.Material, pub.out.Ruleset, pub.out.Files = nil, nil, nil
		return nil
	}
	if err := p.cfg.Results.StoreResult(ctx, pub.req, pub.out); err != nil {
		return &resultStoreError{fmt.Errorf("storing the result of request %q (tenant %q): %w", pub.req.RequestID, pub.req.TenantID, err)}
	}
	pub.stored, pub.out.Material, pub.out.Ruleset, pub.out.Files = true, nil, nil, nil
	return nil
}

// finished reports a request whose events are written: completed results
// are remembered so a redelivery yields the same bytes.
func (p *Pipeline) finished(log *slog.Logger, pub *published) (string, error) {
	if pub.judgeErr == nil {
		p.cache.put(requestKey(pub.req), pub)
	}
	if p.cfg.Hooks.Finished != nil {
		p.cfg.Hooks.Finished(pub.req, pub.out)
	}
	if pub.judgeErr != nil {
		log.Warn("request failed", "reason", pub.out.Summary.Error.Code, "err", pub.judgeErr)
		return "failed", pub.judgeErr
	}
	if h := p.cfg.Hooks.VerdictsPublished; h != nil {
		for outcome, n := range verdictOutcomes(pub.out.Verdicts) {
			h(outcome, n)
		}
	}
	log.Info("request judged", "rules", len(pub.out.Verdicts), "cached", pub.out.Summary.Counts.Cached, "llm_calls", pub.out.Summary.Usage.LLMCalls, "took", pub.out.Summary.CompletedAt.Sub(pub.out.Summary.StartedAt))
	return "completed", nil
}

// callback is the request's callback, nil when it asks for none or callbacks
// are not configured.
func (p *Pipeline) callback(req *schemas.Request, out Events) (*producer.Callback, error) {
	if p.cfg.CallbackPayload == nil || req.Options.CallbackURL == nil || *req.Options.CallbackURL == "" {
		return nil, nil
	}
	payload, fallback, err := p.cfg.CallbackPayload(req, out)
	if err != nil {
		return nil, fmt.Errorf("building the callback payload: %w", err)
	}
	return &producer.Callback{URL: *req.Options.CallbackURL, Payload: payload, Fallback: fallback}, nil
}

// Events is what judging one request produced: its verdict events (none
// when it failed) and its summary.
type Events struct {
	Verdicts []schemas.VerdictEvent
	Summary  schemas.SummaryEvent
	// Material is what was judged, the documents' text as read, and Ruleset
	// the ruleset it was judged on, for the ResultStore to keep beside the
	// result (reviewers cite the material's passages; reviewed validations
	// become evaluation cases); nil for a request that failed. They are
	// dropped once the result is stored, so results kept for redeliveries
	// hold no document text.
	Material *engine.Inputs
	Ruleset  *engine.Ruleset
	// Files are the PDF files that were read, as they came, for the pages
	// a reviewer is shown (rendered as a reader sees them); dropped with
	// Material.
	Files []File
}

// File is a document file as it came in a request.
type File struct {
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	Data      []byte `json:"data"`
}

// Judge resolves, judges and reports one decoded request without publishing
// anything; it is what Handle does between decoding and publishing, and what
// the benchmarks run without a broker. An environment fault (model or
// storage misconfigured or unavailable, or the request timeout, wrapping
// errRequestTimeout) returns no events; a message fault returns the failed
// summary with the error, whose reason MessageFault names.
//
// Under a consumer, claim-checked documents are counted in the bytes in
// flight (consumer.Reserve) while Judge runs.
func (p *Pipeline) Judge(ctx context.Context, req *schemas.Request, start time.Time) (Events, error) {
	var held holds
	defer held.release()
	return p.judgeHolding(ctx, req, start, &held)
}

// judgeHolding is Judge, the bytes reserved for documents added to held.
func (p *Pipeline) judgeHolding(ctx context.Context, req *schemas.Request, start time.Time, held *holds) (Events, error) {
	jctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	var files []File
	res, rs, report, err := p.judge(jctx, req, held, &files)
	if err != nil {
		if ctx.Err() == nil && errors.Is(jctx.Err(), context.DeadlineExceeded) {
			return Events{}, fmt.Errorf("%w %s: %w", errRequestTimeout, p.cfg.RequestTimeout, err)
		}
		f := Classify(err)
		if !f.Message {
			return Events{}, err
		}
		summary := schemas.NewFailedSummary(req, f.Reason, err.Error(), start, p.cfg.Now())
		if rs != nil {
			summary.RulesetID = rs.ID
			if rs.Version != "" {
				summary.RulesetVersion = &rs.Version
			}
		}
		return Events{Summary: summary}, err
	}
	completed := p.cfg.Now()
	// The documents are read: the inputs are built again from them as judge
	// built them.
	material, err := EngineInputs(req)
	if err != nil {
		material = nil
	}
	return Events{
		Verdicts: NewVerdictEvents(req, rs, res, res.Model, start, completed),
		Summary:  NewSummary(req, rs, res, res.Model, report, start, completed),
		Material: material,
		Ruleset:  rs,
		Files:    files,
	}, nil
}

// judge resolves the ruleset and documents, asks the engine and writes the
// report. Its errors are classified by the caller, through the failure table.
func (p *Pipeline) judge(ctx context.Context, req *schemas.Request, held *holds, files *[]File) (*engine.Result, *engine.Ruleset, *schemas.ReportDescriptor, error) {
	rs, err := p.ruleset(ctx, req)
	if err != nil {
		return nil, nil, nil, err
	}
	stats, err := p.statClaimChecks(ctx, req, held)
	if err != nil {
		return nil, rs, nil, err
	}
	mediaTypes := map[string]string{}
	read := func(ctx context.Context, doc schemas.Document) ([]string, error) {
		pages, mediaType, err := p.readDocument(ctx, req.TenantID, doc, held, stats, files)
		mediaTypes[doc.Name] = mediaType
		return pages, err
	}
	if err := req.ResolveDocuments(ctx, read); err != nil {
		return nil, rs, nil, err
	}
	res, err := Evaluate(ctx, p.cfg.Engine, rs, req, mediaTypes)
	if err != nil {
		return nil, rs, nil, err
	}

	if !wantsReport(req, rs) {
		return res, rs, nil, nil
	}
	if p.cfg.Reports == nil {
		// The report is conditional on storage: the request completes, its
		// summary without a report, and this line says why.
		p.cfg.Logger.Warn("report skipped: a report was asked for but no report storage is configured (--s3-endpoint); the summary's validation_report is null",
			"request_id", req.RequestID, "tenant_id", req.TenantID, "ruleset_id", rs.ID)
		return res, rs, nil, nil
	}
	report, err := p.cfg.Reports.WriteReport(ctx, req, rs, res, p.cfg.Now())
	if err != nil {
		if p.cfg.Hooks.ReportFailed != nil {
			p.cfg.Hooks.ReportFailed()
		}
		return nil, rs, nil, &reportError{err}
	}
	return res, rs, report, nil
}

func (p *Pipeline) ruleset(ctx context.Context, req *schemas.Request) (*engine.Ruleset, error) {
	if req.InlineRuleset != nil {
		rs, err := request.InlineRuleset(req)
		if err != nil {
			return nil, consumer.Permanent(string(schemas.ReasonInvalidRuleset), err)
		}
		return rs, nil
	}
	version := ""
	if req.RulesetRef.Version != nil {
		version = *req.RulesetRef.Version
	}
	rs, err := p.cfg.Rulesets.Resolve(ctx, req.RulesetRef.ID, version)
	if err != nil {
		return nil, fmt.Errorf("resolving ruleset %q: %w", req.RulesetRef.ID, err)
	}
	return rs, nil
}

// readDocument reads a document given as a file (data) or by a claim-check
// uri into its pages: a PDF's pages, a DOCX's pages between page breaks, or
// UTF-8 text whose pages are separated by form feeds (what pdftotext writes);
// the media type is content_type, else sniffed.
//
// An inline file is in the record, already counted in the bytes in flight;
// a claim-checked one was stat'ed and reserved for by statClaimChecks.
func (p *Pipeline) readDocument(ctx context.Context, tenant string, doc schemas.Document, held *holds, stats map[claimKey]claimStat, files *[]File) (pages []string, mediaType string, err error) {
	data := doc.Data
	if data == nil {
		if p.cfg.Objects == nil {
			return nil, "", fmt.Errorf("%w: documents by uri are not enabled (no object storage configured)", engine.ErrInvalidInput)
		}
		st, ok := stats[claimKey{*doc.URI, doc.Name}]
		if !ok { // cannot happen: statClaimChecks saw every document resolved by uri
			st = p.statClaimCheck(ctx, tenant, doc)
			if st.err == nil {
				if err := held.reserve(ctx, p.documentCost(st.size)); err != nil {
					return nil, "", err
				}
			}
		}
		if st.err != nil {
			return nil, "", st.err
		}
		var err error
		if data, err = p.cfg.Objects.GetClaim(ctx, tenant, *doc.URI); err != nil {
			return nil, "", err
		}
		// Replaced since the stat by a larger object: count what was read.
		if n := int64(len(data)); n > st.size {
			if err := held.reserve(ctx, p.documentCost(n-st.size)); err != nil {
				return nil, "", err
			}
		}
	}
	read, err := p.cfg.Documents.Read(ctx, docread.Source{Name: doc.Name, Data: data, MediaType: deref(doc.ContentType)})
	if err != nil {
		return nil, "", err
	}
	// The file was counted as if it were the text (in its record, or
	// reserved from its size). What is made of the text is counted by the
	// text's size (a DOCX or a compressed PDF holds several times its file
	// in text), and the file, kept besides its text, once more.
	text := 0
	for _, page := range read.Pages {
		text += len(page)
	}
	extra := int64(len(data)) + max(0, p.documentCost(int64(text))-p.documentCost(int64(len(data))))
	if err := held.reserve(ctx, extra); err != nil {
		return nil, "", err
	}
	if len(read.ImageOnly) > 0 {
		p.cfg.Logger.Warn("document read without the text of its pages that are only an image (OCR is not done)",
			"document", doc.Name, "media_type", read.MediaType, "pages", read.ImageOnly)
	}
	if read.MediaType == docread.PDF {
		*files = append(*files, File{Name: doc.Name, MediaType: read.MediaType, Data: data})
	}
	return read.Pages, read.MediaType, nil
}

// claimKey names a claim-checked document: its object, and its name in the
// request (which its refusal quotes).
type claimKey struct{ uri, name string }

// claimStat is what the stat of a claim-checked document found: its size, or
// why it is not read (storage failing, missing, too large).
type claimStat struct {
	size int64
	err  error
}

// statClaimChecks stats every claim-checked document of req before any is
// downloaded and reserves their documentCost in held in one wait, so that a
// request never waits for room while it holds documents already read. It
// stops at the first document that cannot be read, whose error readDocument
// returns when ResolveDocuments comes to it, naming it; those after it are
// never read.
func (p *Pipeline) statClaimChecks(ctx context.Context, req *schemas.Request, held *holds) (map[claimKey]claimStat, error) {
	stats := map[claimKey]claimStat{}
	if p.cfg.Objects == nil {
		return stats, nil
	}
	var total int64
	for _, d := range req.ClaimChecks() {
		k := claimKey{*d.URI, d.Name}
		st, seen := stats[k]
		if !seen {
			st = p.statClaimCheck(ctx, req.TenantID, d)
			stats[k] = st
		}
		if st.err != nil {
			break
		}
		total += p.documentCost(st.size) // each time it is read
	}
	if total > 0 {
		if err := held.reserve(ctx, total); err != nil {
			return nil, fmt.Errorf("making room for the request's claim-checked documents: %w", err)
		}
	}
	return stats, nil
}

// statClaimCheck stats one claim-checked document, refusing it from its size
// when it is over the reader's limit.
func (p *Pipeline) statClaimCheck(ctx context.Context, tenant string, doc schemas.Document) claimStat {
	info, err := p.cfg.Objects.StatClaim(ctx, tenant, *doc.URI)
	if err != nil {
		return claimStat{err: err}
	}
	if err := p.cfg.Documents.CheckSize(doc.Name, info.Size); err != nil {
		return claimStat{err: err}
	}
	return claimStat{size: info.Size}
}

// requestKey identifies a request across tenants: a request_id is unique
// within its tenant only.
func requestKey(req *schemas.Request) string {
	return schemas.SummaryEventID(req.TenantID, req.RequestID)
}

// errRequestTimeout marks an attempt that ran out of the request timeout.
var errRequestTimeout = errors.New("no result within the request timeout")

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

func wantsReport(req *schemas.Request, rs *engine.Ruleset) bool {
	if req.Options.GenerateReport != nil {
		return *req.Options.GenerateReport
	}
	return rs.GenerateReport
}

func verdictOutcomes(verdicts []schemas.VerdictEvent) map[string]int {
	out := map[string]int{}
	for _, v := range verdicts {
		out[string(EventOutcome(v))]++
	}
	return out
}

// EventOutcome is engine.VerdictOutcome of a verdict event.
func EventOutcome(v schemas.VerdictEvent) engine.Outcome {
	return engine.VerdictOutcome(v.RuleType, v.NotApplicable, v.BooleanOutput, v.NumericalOutput)
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

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
