// Package engine judges inputs against a ruleset with an LLM: it builds the
// prompt, asks the model through the LLM port, checks the answer and re-asks
// for the rules that failed, anchors evidence to verbatim spans and aggregates.
// It knows nothing of Kafka, Avro, object storage, HTTP or Prometheus.
//
// It owns the ruleset model (ParseRuleset, its checks), the engine's Inputs and
// their checks (Inputs.Validate; the JSON form a request gives them in is package
// request's), the plan of a request's calls within the model's context window
// (judge.go, planning.go, budget.go, window.go), the conversation with the model
// and its answer checks, evidence, the verdict cache port (VerdictCache) and the
// aggregates. Evaluate, given a Task, is its one entry point. The value types a
// verdict carries (rule types, evidence, aggregates, usage…) are package
// verdict's, and the engine names them so: verdict.Evidence, verdict.Boolean.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"rulevalidator/engine/anchor"
	"rulevalidator/engine/plan"
	"rulevalidator/verdict"
)

// ErrInputTooLarge marks inputs over Config.MaxInputBytes. It is also an
// ErrInvalidInput.
var ErrInputTooLarge = fmt.Errorf("%w: too large", ErrInvalidInput)

// Config tunes an Engine. Zero values take the documented defaults.
type Config struct {
	// Model is the model name sent to the server (required unless every
	// request names one).
	Model string
	// Format is the preferred response format (default json_schema; the LLM
	// falls back when the server refuses it).
	Format ResponseFormat
	// OutputRetries is the corrective re-ask budget per request (default 2;
	// negative disables re-asking).
	OutputRetries int
	// Temperature is sent with every call, 0 (the default) included: a
	// judge samples greedily unless told otherwise, so that the same
	// request gets the same verdicts (a server left to its default samples
	// at 0.8 on llama-cpp-python, at 1 on OpenAI).
	Temperature float32
	// MaxTokens caps each answer (0: the server's default). Rules are split
	// into calls whose answers fit it.
	MaxTokens int
	// ContextTokens is the model's context window, prompt and answer
	// together (0: asked from the server when the LLM can, else
	// DefaultContextTokens). A request that does not fit is judged in several
	// calls, each on the passages most relevant to its rules.
	ContextTokens int
	// RulesPerCall is the most rules one call judges (0: as many as fit
	// the budget). Calls of a request share the instructions and the
	// material as a prefix, so on a server with a prompt cache more calls
	// cost little more prompt; a small model judges one rule a call better
	// than ten.
	RulesPerCall int
	// NearestPassages is how many document passages a call of one rule
	// shows again after the rule, the ones whose words are nearest the
	// rule's (cite mode, the whole material in the call; 0, the default:
	// none; at most MaxNearestPassages). A small model that reads the rule
	// last judges it by the rule's own words less often when the clauses
	// that speak of it follow it (docs/measurements/2026-12-local-model-nearest-passages.md).
	NearestPassages int
	// CallConcurrency caps the calls of one request that run at once
	// (default DefaultCallConcurrency).
	CallConcurrency int
	// MaxInputBytes caps the total text of a request's inputs (default 4 MiB).
	MaxInputBytes int
	// FuzzyThreshold is the similarity (0.5..1) a paraphrased quote needs to
	// be anchored to a span (default 0.85).
	FuzzyThreshold float64
	// Evidence is how the model gives its evidence (default cite: by passage
	// id; quote: verbatim quotes, anchored to the documents).
	Evidence EvidenceMode
	// Confidence is where each verdict's confidence comes from (default
	// logprobs: the server's token log-probabilities, absent where it
	// gives none; samples: the agreement of ConfidenceSamples answers;
	// verify: a check of each verdict against the passages it cites; off:
	// always absent).
	Confidence ConfidenceSource
	// ConfidenceSamples is how many answers the samples source compares,
	// the judged one included (2 to MaxConfidenceSamples; default
	// DefaultConfidenceSamples).
	ConfidenceSamples int
	// OverrulePassesBelow turns a boolean pass into a fail when the verify
	// source's check gives it a confidence under it: the check found that
	// the passages the pass cites do not show the rule is met, and the output
	// contract asks a pass for evidence that shows it (0..1, with
	// Confidence verify only; 0, the default: no verdict is changed).
	OverrulePassesBelow float64
	// VerifyNearestPassages has the verify source's check also show the
	// document passages whose words are nearest the rule's, this many,
	// beside those the verdict cites (0 to MaxNearestPassages, with
	// Confidence verify only; 0, the default: the cited passages alone).
	VerifyNearestPassages int
	// SampleTemperature is the temperature of the samples source's extra
	// calls (above 0, at most 2; default DefaultSampleTemperature): the
	// model's own distribution, so that their agreement measures how much
	// of it the verdict's value holds.
	SampleTemperature float32
	// Instructions is how the instructions reach the model (default system;
	// auto decides once per model from the server's prompt token count,
	// see InstructionsAuto).
	Instructions Instructions
	// ReviewBelowConfidence routes a verdict to a person when its
	// confidence is under it (0..1), unless its ruleset or rule sets its
	// own threshold; 0 (the default): none is routed for its confidence.
	ReviewBelowConfidence float64
	// Cache keeps verdicts by what decided them (VerdictKey), so that a
	// rule judged on the same material is not asked again; nil: none.
	Cache VerdictCache
	// Logger receives the engine's rare notices, such as what a probe found
	// (default slog.Default()).
	Logger *slog.Logger
	// TracerProvider makes the engine's internal spans (evaluate, plan,
	// cache, calls; see trace.go); nil makes none.
	TracerProvider trace.TracerProvider
	// Now is the clock that dates cached verdicts (default time.Now).
	Now func() time.Time
	// Hooks observe the engine's work; every field is optional.
	Hooks Hooks
}

// Hooks let the caller observe the engine without the engine knowing how it
// is measured. They must be safe for concurrent use.
type Hooks struct {
	// LLMCall is called after every model call, with the context it was
	// made in (its caller's span still open) and what the call was for.
	LLMCall func(ctx context.Context, model string, purpose CallPurpose, took time.Duration, usage verdict.Usage, err error)
	// OutputRetry is called once per problem that caused a re-ask.
	OutputRetry func(reason string)
	// Anchor is called once per evidence with how it was anchored.
	Anchor func(m verdict.Match)
	// PlannedCalls is called once per request with the number of calls
	// planned for it (1 when everything fits one call).
	PlannedCalls func(model string, calls int)
	// CacheLookup is called once per request that asked the verdict cache,
	// with the rules of each lookup outcome (CacheHit, CacheMiss,
	// CacheStale).
	CacheLookup func(outcome string, rules int)
	// CacheTokensSaved is called with the model tokens each hit saved: what
	// its verdict cost when it was judged.
	CacheTokensSaved func(model string, tokens int)
	// CacheStoreFailed is called when judged verdicts could not be stored
	// in the verdict cache.
	CacheStoreFailed func()
	// RulesDecided is called once per request whose ruleset has filters or
	// checks, with the rules decided without the model: how is
	// DecidedFiltered or DecidedChecked.
	RulesDecided func(how string, rules int)
}

// How rules are decided without the model (Hooks.RulesDecided).
const (
	// DecidedFiltered: a filter left the rule out as not applicable.
	DecidedFiltered = "filtered"
	// DecidedChecked: the rule's check judged it.
	DecidedChecked = "checked"
)

func (c *Config) setDefaults() {
	if c.Format == "" {
		c.Format = FormatJSONSchema
	}
	if c.OutputRetries == 0 {
		c.OutputRetries = DefaultOutputRetries
	}
	if c.OutputRetries < 0 {
		c.OutputRetries = 0
	}
	if c.MaxInputBytes == 0 {
		c.MaxInputBytes = DefaultMaxInputBytes
	}
	if c.Instructions == "" {
		c.Instructions = InstructionsSystem
	}
	if c.Confidence == "" {
		c.Confidence = ConfidenceLogProbs
	}
	if c.ConfidenceSamples == 0 {
		c.ConfidenceSamples = DefaultConfidenceSamples
	}
	if c.SampleTemperature == 0 {
		c.SampleTemperature = DefaultSampleTemperature
	}
	if c.Evidence == "" {
		c.Evidence = EvidenceCite
	}
	if c.CallConcurrency == 0 {
		c.CallConcurrency = DefaultCallConcurrency
	}
	c.Logger = defaultLogger(c.Logger)
}

func (c *Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Validate reports the first problem with the configuration.
func (c *Config) Validate() error {
	if err := ValidateFormat(c.Format); err != nil {
		return fmt.Errorf("engine: Format %w", err)
	}
	if err := c.Instructions.validate(); c.Instructions != "" && err != nil {
		return err
	}
	if err := c.Confidence.validate(); c.Confidence != "" && err != nil {
		return err
	}
	if err := c.Evidence.validate(); c.Evidence != "" && err != nil {
		return err
	}
	if err := checkSampling(c.ConfidenceSamples, c.SampleTemperature); err != nil {
		return err
	}
	if c.MaxInputBytes < 0 {
		return fmt.Errorf("engine: MaxInputBytes %d must not be negative", c.MaxInputBytes)
	}
	if err := (anchor.Options{FuzzyThreshold: c.FuzzyThreshold}).Validate(); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if c.Temperature < 0 || c.Temperature > 2 {
		return fmt.Errorf("engine: Temperature %v must be between 0 and 2", c.Temperature)
	}
	if c.NearestPassages < 0 || c.NearestPassages > MaxNearestPassages {
		return fmt.Errorf("engine: NearestPassages %d must be between 0 and %d", c.NearestPassages, MaxNearestPassages)
	}
	if c.MaxTokens < 0 {
		return fmt.Errorf("engine: MaxTokens %d must not be negative", c.MaxTokens)
	}
	if c.ContextTokens < 0 {
		return fmt.Errorf("engine: ContextTokens %d must not be negative", c.ContextTokens)
	}
	if c.ContextTokens > 0 && c.MaxTokens >= c.ContextTokens {
		return fmt.Errorf("engine: MaxTokens %d must be below ContextTokens %d: the answer shares the context window with the prompt", c.MaxTokens, c.ContextTokens)
	}
	if c.RulesPerCall < 0 {
		return fmt.Errorf("engine: RulesPerCall %d must not be negative", c.RulesPerCall)
	}
	if c.CallConcurrency < 0 {
		return fmt.Errorf("engine: CallConcurrency %d must not be negative", c.CallConcurrency)
	}
	if c.OverrulePassesBelow < 0 || c.OverrulePassesBelow >= 1 {
		return fmt.Errorf("engine: OverrulePassesBelow %v must be from 0 to below 1", c.OverrulePassesBelow)
	}
	if c.OverrulePassesBelow > 0 && c.Confidence != ConfidenceVerify {
		return fmt.Errorf("engine: OverrulePassesBelow %v needs Confidence %s: it reads the verify check's confidence", c.OverrulePassesBelow, ConfidenceVerify)
	}
	if c.VerifyNearestPassages < 0 || c.VerifyNearestPassages > MaxNearestPassages {
		return fmt.Errorf("engine: VerifyNearestPassages %d must be from 0 to %d", c.VerifyNearestPassages, MaxNearestPassages)
	}
	if c.VerifyNearestPassages > 0 && c.Confidence != ConfidenceVerify {
		return fmt.Errorf("engine: VerifyNearestPassages %d needs Confidence %s: it is what the verify check shows", c.VerifyNearestPassages, ConfidenceVerify)
	}
	return checkReviewThreshold(c.ReviewBelowConfidence)
}

// Engine judges requests. It is safe for concurrent use.
type Engine struct {
	llm      LLM
	cfg      Config
	compiled *compiledCache
	modes    *instructionModes
	est      *plan.Estimator // token estimates, learned per model
	windows  *contextWindows // context windows the server reported
	tracer   trace.Tracer
}

// New returns an Engine asking llm, with cfg's defaults applied and checked.
func New(llm LLM, cfg Config) (*Engine, error) {
	if llm == nil {
		return nil, errors.New("engine: an LLM is required")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Engine{llm: llm, cfg: cfg, compiled: newCompiledCache(256, cfg.Evidence), modes: newInstructionModes(),
		est: plan.NewEstimator(), windows: newContextWindows(), tracer: tracerOf(cfg.TracerProvider)}, nil
}

// Task is one request to judge, as the engine sees it: the ruleset, the inputs, and whose
// they are (the service's request, schemas.Request, becomes one in judging.Evaluate).
type Task struct {
	Ruleset *Ruleset
	Inputs  *Inputs
	// Model overrides Config.Model when set.
	Model string
	// Tenant and RequestID say whose request it is: the verdict cache
	// keeps tenants apart, and a cached verdict names the request it was
	// judged under.
	Tenant    string
	RequestID string
	// NoCache has the request judged afresh: no verdict is taken from the
	// verdict cache or stored in it.
	NoCache bool
	// Facts are what the ruleset's filters and checks read besides the
	// inputs: the tenant, the documents' media types, the options.
	Facts RequestFacts
}

// Evaluate judges req. Errors wrap ErrInvalidRuleset or ErrInvalidInput (no
// model call was made), ErrLLMUnavailable or ErrLLMRejected (from the LLM), or
// ErrInvalidOutput (the answer was still wrong when the retry budget ran out).
func (e *Engine) Evaluate(ctx context.Context, req Task) (res *Result, err error) {
	ctx, span := e.startEvaluate(ctx, req)
	defer func() { endEvaluate(span, res, err) }()
	model, err := e.checkTask(req)
	if err != nil {
		return nil, err
	}
	rs, in := req.Ruleset, req.Inputs
	if rs.tree != nil {
		return e.evaluateTree(ctx, req, model)
	}
	an := e.newAnchoring(in)
	cr := e.cacheRunFor(req)
	verdicts, usage, err := e.judge(ctx, model, rs, in, an, cr)
	if err != nil {
		return nil, err
	}
	if cr != nil {
		e.storeTraced(ctx, cr, model, in.Documents())
	}
	return flatResult(rs, model, verdicts, usage, e.cfg.ReviewBelowConfidence), nil
}

// checkTask makes the checks a task must pass before any model call (its
// ruleset and inputs valid, the inputs within MaxInputBytes, a model to
// ask) and returns the model it is judged with. Errors wrap
// ErrInvalidRuleset or ErrInvalidInput.
func (e *Engine) checkTask(req Task) (string, error) {
	rs, in := req.Ruleset, req.Inputs
	if rs == nil {
		return "", fmt.Errorf("%w: no ruleset given", ErrInvalidRuleset)
	}
	if err := rs.Validate(); err != nil {
		return "", err
	}
	if in == nil {
		return "", fmt.Errorf("%w: no inputs given", ErrInvalidInput)
	}
	if err := in.Validate(); err != nil {
		return "", err
	}
	if size := in.Size(); size > e.cfg.MaxInputBytes {
		return "", fmt.Errorf("%w: the inputs hold %d bytes of text, over the limit of %d", ErrInputTooLarge, size, e.cfg.MaxInputBytes)
	}
	model := cmp.Or(req.Model, e.cfg.Model)
	if model == "" {
		return "", errors.New("engine: no model configured")
	}
	return model, nil
}

// flatResult is the result of a ruleset without groups, filters or checks
// whose verdicts are judged: each routed under its rule's review threshold
// (def the service's), the verdicts aggregated.
func flatResult(rs *Ruleset, model string, verdicts []Verdict, usage verdict.Usage, def float64) *Result {
	routeReviews(rs, rs.Rules, verdicts, def)
	return &Result{
		RulesetID:      rs.ID,
		RulesetVersion: rs.Version,
		Model:          model,
		Rules:          verdicts,
		Aggregate:      aggregate(rs, verdicts),
		Sources:        collectSources(verdicts),
		Usage:          usage,
	}
}

// evaluateTree judges a ruleset with nested rulesets, filters or checks:
// the filters and checks decide their rules before any model call, the
// model judges the rest (in the calls, and with the cache keys, it would
// give them in a ruleset of those rules alone), and the verdicts combine
// group by group.
func (e *Engine) evaluateTree(ctx context.Context, req Task, model string) (*Result, error) {
	rs, in, t := req.Ruleset, req.Inputs, req.Ruleset.tree
	d := t.decide(ctx, t.env.Bind(activation(in, req.Facts)))
	verdicts := d.verdicts
	var usage verdict.Usage
	if len(d.model) > 0 {
		mrs := t.modelRuleset(d.model)
		an := e.newAnchoring(in)
		cr := e.cacheRunFor(req)
		judged, u, err := e.judge(ctx, model, mrs, in, an, cr)
		if err != nil {
			return nil, err
		}
		if cr != nil {
			e.storeTraced(ctx, cr, model, in.Documents())
		}
		for k, i := range d.model {
			verdicts[i] = judged[k]
		}
		usage = u
	}
	usage.RulesFiltered, usage.RulesChecked = d.filtered, d.checked
	if h := e.cfg.Hooks.RulesDecided; h != nil {
		h(DecidedFiltered, d.filtered)
		h(DecidedChecked, d.checked)
	}
	all := make([]Rule, len(t.rules))
	for i, tr := range t.rules {
		all[i] = *tr.rule
	}
	routeReviews(rs, all, verdicts, e.cfg.ReviewBelowConfidence)
	agg, groups := t.aggregate(verdicts, d.excluded)
	return &Result{
		RulesetID:      rs.ID,
		RulesetVersion: rs.Version,
		Model:          model,
		Rules:          verdicts,
		Aggregate:      agg,
		Groups:         groups,
		Sources:        collectSources(verdicts),
		Usage:          usage,
	}, nil
}

func (e *Engine) anchorOptions() anchor.Options {
	return anchor.Options{FuzzyThreshold: e.cfg.FuzzyThreshold}
}

// OutputError says what was still wrong with the model's answer when the
// output-retry budget ran out. It is an ErrInvalidOutput.
type OutputError struct {
	Attempts int
	Problems []Problem
}

func (e *OutputError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model output invalid after %d attempt%s:", e.Attempts, plural(e.Attempts))
	for _, p := range e.Problems {
		b.WriteString("\n  - " + p.String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidOutput) true.
func (e *OutputError) Is(target error) bool { return target == ErrInvalidOutput }

// collectSources lists the cited sources: the evidence anchored in a
// supplied document, de-duplicated by (origin, text, page), in order of first
// citation. Evidence from named inputs, the text input or the message, and
// quotes found in no document, cite no source.
func collectSources(verdicts []Verdict) []verdict.Source {
	seen := make(map[verdict.Source]bool)
	sources := []verdict.Source{}
	for _, v := range verdicts {
		for _, ev := range v.Evidences {
			if !ev.Anchored {
				continue
			}
			s := verdict.Source{SourceOrigin: ev.SourceOrigin, Text: ev.Text, SourcePageNumber: ev.SourcePageNumber}
			if !seen[s] {
				seen[s] = true
				sources = append(sources, s)
			}
		}
	}
	return sources
}
