// Package engine judges inputs against a ruleset with an LLM: it builds the
// prompt, asks the model through the LLM port, checks the answer and re-asks
// for the rules that failed, anchors evidence to verbatim spans and aggregates.
// It knows nothing of Kafka, Avro, object storage, HTTP or Prometheus.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"rulevalidator/engine/anchor"
	"rulevalidator/engine/plan"
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
	// Temperature is passed to the model (default 0: as deterministic as the
	// server allows).
	Temperature float32
	// MaxTokens caps each answer (0: the server's default). Rules are split
	// into calls whose answers fit it.
	MaxTokens int
	// ContextTokens is the model's context window, prompt and answer
	// together (0: asked from the server when the LLM can, else
	// DefaultContextTokens). A request that does not fit is judged in several
	// calls, each on the passages most relevant to its rules.
	ContextTokens int
	// CallConcurrency caps the calls of one request that run at once
	// (default DefaultCallConcurrency).
	CallConcurrency int
	// MaxInputBytes caps the total text of a request's inputs (default 4 MiB).
	MaxInputBytes int
	// FuzzyThreshold is the similarity (0.5..1) a paraphrased quote needs to
	// be anchored to a span (default 0.85).
	FuzzyThreshold float64
	// Instructions is how the instructions reach the model (default system;
	// auto probes each model once, see InstructionsAuto).
	Instructions Instructions
	// Logger receives the engine's rare notices, such as what a probe found
	// (default slog.Default()).
	Logger *slog.Logger
	// Hooks observe the engine's work; every field is optional.
	Hooks Hooks
}

// Hooks let the caller observe the engine without the engine knowing how it
// is measured. They must be safe for concurrent use.
type Hooks struct {
	// LLMCall is called after every model call.
	LLMCall func(model string, took time.Duration, usage Usage, err error)
	// OutputRetry is called once per problem that caused a re-ask.
	OutputRetry func(reason string)
	// Anchor is called once per evidence with how it was anchored.
	Anchor func(m Match)
	// PlannedCalls is called once per request with the number of calls
	// planned for it (1 when everything fits one call).
	PlannedCalls func(model string, calls int)
}

func (c *Config) setDefaults() {
	if c.Format == "" {
		c.Format = FormatJSONSchema
	}
	if c.OutputRetries == 0 {
		c.OutputRetries = 2
	}
	if c.OutputRetries < 0 {
		c.OutputRetries = 0
	}
	if c.MaxInputBytes == 0 {
		c.MaxInputBytes = 4 << 20
	}
	if c.Instructions == "" {
		c.Instructions = InstructionsSystem
	}
	if c.CallConcurrency == 0 {
		c.CallConcurrency = DefaultCallConcurrency
	}
	c.Logger = defaultLogger(c.Logger)
}

// Validate reports the first problem with the configuration.
func (c *Config) Validate() error {
	switch c.Format {
	case FormatJSONSchema, FormatJSONObject, FormatText:
	default:
		return fmt.Errorf("engine: Format %q is not one of json_schema, json_object, text", c.Format)
	}
	if err := c.Instructions.validate(); c.Instructions != "" && err != nil {
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
	if c.MaxTokens < 0 {
		return fmt.Errorf("engine: MaxTokens %d must not be negative", c.MaxTokens)
	}
	if c.ContextTokens < 0 {
		return fmt.Errorf("engine: ContextTokens %d must not be negative", c.ContextTokens)
	}
	if c.ContextTokens > 0 && c.MaxTokens >= c.ContextTokens {
		return fmt.Errorf("engine: MaxTokens %d must be below ContextTokens %d: the answer shares the context window with the prompt", c.MaxTokens, c.ContextTokens)
	}
	if c.CallConcurrency < 0 {
		return fmt.Errorf("engine: CallConcurrency %d must not be negative", c.CallConcurrency)
	}
	return nil
}

// Engine judges requests. It is safe for concurrent use.
type Engine struct {
	llm      LLM
	cfg      Config
	compiled *compiledCache
	modes    *instructionModes
	est      *plan.Estimator // token estimates, learned per model
	windows  *contextWindows // context windows the server reported
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
	return &Engine{llm: llm, cfg: cfg, compiled: newCompiledCache(256), modes: newInstructionModes(),
		est: plan.NewEstimator(), windows: newContextWindows()}, nil
}

// Request is one thing to judge.
type Request struct {
	Ruleset *Ruleset
	Inputs  *Inputs
	// Model overrides Config.Model when set.
	Model string
}

// Evaluate judges req. Errors wrap ErrInvalidRuleset or ErrInvalidInput (no
// model call was made), ErrLLMUnavailable or ErrLLMRejected (from the LLM), or
// ErrInvalidOutput (the answer was still wrong when the retry budget ran out).
func (e *Engine) Evaluate(ctx context.Context, req Request) (*Result, error) {
	rs, in := req.Ruleset, req.Inputs
	if rs == nil {
		return nil, fmt.Errorf("%w: no ruleset given", ErrInvalidRuleset)
	}
	if err := rs.Validate(); err != nil {
		return nil, err
	}
	if in == nil {
		return nil, fmt.Errorf("%w: no inputs given", ErrInvalidInput)
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	if size := in.Size(); size > e.cfg.MaxInputBytes {
		return nil, fmt.Errorf("%w: the inputs hold %d bytes of text, over the limit of %d", ErrInputTooLarge, size, e.cfg.MaxInputBytes)
	}
	model := req.Model
	if model == "" {
		model = e.cfg.Model
	}
	if model == "" {
		return nil, errors.New("engine: no model configured")
	}

	an := e.newAnchoring(in)
	verdicts, usage, err := e.judge(ctx, model, rs, in, an)
	if err != nil {
		return nil, err
	}
	return &Result{
		RulesetID:      rs.ID,
		RulesetVersion: rs.Version,
		Model:          model,
		Rules:          verdicts,
		Aggregate:      aggregate(rs, verdicts),
		Sources:        collectSources(verdicts),
		Usage:          usage,
	}, nil
}

// converse runs one conversation: it asks the model to judge rules (all of
// rs.Rules, or a subset of them) on in (all of the request's inputs, or an
// excerpt of them), then re-asks for the rules whose answers failed the
// checks, merging what was accepted. an anchors evidence against the whole
// request's documents; share one per request across its conversations.
// The verdicts come back in the order of rules, their evidence anchored.
//
// An answer is accepted once it has the right shape (checkAnswer) and says
// something (checkContent). When the re-ask budget runs out and the only
// problems left are content problems, each such rule keeps its best answer,
// marked data_sufficiency false with the reason; any shape problem left is
// an OutputError.
func (e *Engine) converse(ctx context.Context, model string, rs *Ruleset, rules []Rule, in *Inputs, an *anchoring) ([]Verdict, Usage, error) {
	return e.converseWith(ctx, model, rs, rules, UserPrompt(in), an)
}

// converseWith is converse with the user message already rendered (an
// excerpt's, which names the pages it holds).
func (e *Engine) converseWith(ctx context.Context, model string, rs *Ruleset, rules []Rule, user string, an *anchoring) ([]Verdict, Usage, error) {
	first, err := e.compiledFor(rs, rules)
	if err != nil {
		return nil, Usage{}, err
	}
	mode, err := e.instructionMode(ctx, model)
	if err != nil {
		return nil, Usage{}, err
	}
	base := buildPrompt(mode, first.system, user)
	messages := base
	pending := rules
	accepted := make(map[string]Verdict, len(rules))
	best := map[string]candidate{} // content-flawed answers, the fewest problems kept
	var usage Usage
	for attempt := 0; ; attempt++ {
		schema, grammar := first.schema, first.grammar
		if attempt > 0 { // a re-ask names only the rules still pending
			if schema, err = OutputSchema(pending); err != nil {
				return nil, usage, err
			}
			if grammar, err = GrammarSchema(pending); err != nil {
				return nil, usage, err
			}
		}
		start := time.Now()
		resp, err := e.llm.Chat(ctx, ChatRequest{
			Model:         model,
			Messages:      messages,
			Format:        e.cfg.Format,
			SchemaName:    "rule_verdicts",
			Schema:        schema,
			GrammarSchema: grammar,
			Temperature:   e.cfg.Temperature,
			MaxTokens:     e.cfg.MaxTokens,
		})
		if e.cfg.Hooks.LLMCall != nil {
			e.cfg.Hooks.LLMCall(model, time.Since(start), resp.Usage, err)
		}
		if err != nil {
			return nil, usage, err
		}
		usage = usage.Add(resp.Usage)
		e.observeUsage(model, messages, len(pending), resp.Usage)

		good, problems := checkAnswer(resp.Content, pending)
		for _, r := range pending {
			v, ok := good[r.RuleID]
			if !ok {
				continue
			}
			cps, err := an.checkContent(r, &v)
			if err != nil {
				return nil, usage, err
			}
			if len(cps) == 0 {
				accepted[r.RuleID] = v
				delete(best, r.RuleID)
				continue
			}
			problems = append(problems, cps...)
			if c, ok := best[r.RuleID]; !ok || len(cps) <= len(c.problems) {
				best[r.RuleID] = candidate{v, cps}
			}
		}
		pending = stillPending(pending, accepted)
		if len(pending) == 0 {
			break
		}
		if attempt >= e.cfg.OutputRetries {
			if !keepBest(pending, best, accepted) {
				return nil, usage, &OutputError{Attempts: attempt + 1, Problems: problems}
			}
			break
		}
		if e.cfg.Hooks.OutputRetry != nil {
			for _, p := range problems {
				e.cfg.Hooks.OutputRetry(p.Reason)
			}
		}
		// Keep only the latest exchange: the base prompt, the answer being
		// corrected and the correction, so re-asks don't grow without bound.
		messages = append(base[:len(base):len(base)],
			Message{Role: "assistant", Content: resp.Content},
			Message{Role: "user", Content: correctiveMessage(problems, pending)},
		)
	}
	out := make([]Verdict, 0, len(rules))
	for _, r := range rules {
		out = append(out, accepted[r.RuleID])
	}
	if observe := e.cfg.Hooks.Anchor; observe != nil {
		for _, v := range out {
			for _, ev := range v.Evidences {
				observe(ev.Match)
			}
		}
	}
	return out, usage, nil
}

// candidate is an answer that had the right shape but content problems.
type candidate struct {
	verdict  Verdict
	problems []Problem
}

// keepBest accepts, for every pending rule, its best content-flawed answer,
// marked as judged on insufficient data with the reasons. It accepts nothing
// and reports false when some pending rule has no such answer (its problems
// were of shape).
func keepBest(pending []Rule, best map[string]candidate, accepted map[string]Verdict) bool {
	for _, r := range pending {
		if _, ok := best[r.RuleID]; !ok {
			return false
		}
	}
	for _, r := range pending {
		c := best[r.RuleID]
		v := c.verdict
		v.DataSufficiency = false
		notes := make([]string, len(c.problems))
		for i, p := range c.problems {
			notes[i] = p.Note
			if notes[i] == "" {
				notes[i] = p.Detail
			}
		}
		v.Problems = notes
		v.SufficiencyNote = "kept with problems after every re-ask: " + strings.Join(notes, "; ")
		accepted[r.RuleID] = v
	}
	return true
}

// compiledFor is the prompt and schemas for judging rules of rs: from the
// cache when they are all of rs's rules, rendered afresh for a subset.
func (e *Engine) compiledFor(rs *Ruleset, rules []Rule) (*compiled, error) {
	if len(rules) == len(rs.Rules) && (len(rules) == 0 || &rules[0] == &rs.Rules[0]) {
		return e.compiled.get(rs)
	}
	return compile(&Ruleset{ID: rs.ID, Version: rs.Version, Rules: rules})
}

func (e *Engine) anchorOptions() anchor.Options {
	return anchor.Options{FuzzyThreshold: e.cfg.FuzzyThreshold}
}

func stillPending(rules []Rule, accepted map[string]Verdict) []Rule {
	var out []Rule
	for _, r := range rules {
		if _, ok := accepted[r.RuleID]; !ok {
			out = append(out, r)
		}
	}
	return out
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
func collectSources(verdicts []Verdict) []Source {
	seen := make(map[Source]bool)
	sources := []Source{}
	for _, v := range verdicts {
		for _, ev := range v.Evidences {
			if !ev.Anchored {
				continue
			}
			s := Source{SourceOrigin: ev.SourceOrigin, Text: ev.Text, SourcePageNumber: ev.SourcePageNumber}
			if !seen[s] {
				seen[s] = true
				sources = append(sources, s)
			}
		}
	}
	return sources
}
