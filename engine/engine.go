// Package engine judges inputs against a ruleset with an LLM: it builds the
// prompt, asks the model through the LLM port, checks the answer and re-asks
// for the rules that failed, anchors evidence to verbatim spans and aggregates.
// It knows nothing of Kafka, Avro, object storage, HTTP or Prometheus.
package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"rulevalidator/engine/anchor"
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
	// MaxTokens caps each answer (0: the server's default).
	MaxTokens int
	// MaxInputBytes caps the total text of a request's inputs (default 4 MiB).
	MaxInputBytes int
	// FuzzyThreshold is the similarity (0.5..1) a paraphrased quote needs to
	// be anchored to a span (default 0.85).
	FuzzyThreshold float64
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
}

// Validate reports the first problem with the configuration.
func (c *Config) Validate() error {
	switch c.Format {
	case FormatJSONSchema, FormatJSONObject, FormatText:
	default:
		return fmt.Errorf("engine: Format %q is not one of json_schema, json_object, text", c.Format)
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
	return nil
}

// Engine judges requests. It is safe for concurrent use.
type Engine struct {
	llm      LLM
	cfg      Config
	compiled *compiledCache
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
	return &Engine{llm: llm, cfg: cfg, compiled: newCompiledCache(256)}, nil
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

	verdicts, usage, err := e.ask(ctx, model, rs, in)
	if err != nil {
		return nil, err
	}
	if err := anchorEvidence(verdicts, in, e.anchorOptions(), e.cfg.Hooks.Anchor); err != nil {
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

// ask runs the conversation: one question, then corrective re-asks for the
// rules whose answers failed the checks, merging what was accepted. The
// verdicts come back in ruleset order.
func (e *Engine) ask(ctx context.Context, model string, rs *Ruleset, in *Inputs) ([]Verdict, Usage, error) {
	first, err := e.compiled.get(rs)
	if err != nil {
		return nil, Usage{}, err
	}
	base := []Message{
		{Role: "system", Content: first.system},
		{Role: "user", Content: UserPrompt(in)},
	}
	messages := base
	pending := rs.Rules
	accepted := make(map[string]Verdict, len(rs.Rules))
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

		good, problems := checkAnswer(resp.Content, pending)
		for id, v := range good {
			accepted[id] = v
		}
		pending = stillPending(pending, accepted)
		if len(pending) == 0 {
			break
		}
		if attempt >= e.cfg.OutputRetries {
			return nil, usage, &OutputError{Attempts: attempt + 1, Problems: problems}
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
	out := make([]Verdict, 0, len(rs.Rules))
	for _, r := range rs.Rules {
		out = append(out, accepted[r.RuleID])
	}
	return out, usage, nil
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

// collectSources lists the cited sources, de-duplicated by (origin, text,
// page), in order of first citation.
func collectSources(verdicts []Verdict) []Source {
	seen := make(map[Source]bool)
	sources := []Source{}
	for _, v := range verdicts {
		for _, ev := range v.Evidences {
			s := Source{SourceOrigin: ev.SourceOrigin, Text: ev.Text, SourcePageNumber: ev.SourcePageNumber}
			if !seen[s] {
				seen[s] = true
				sources = append(sources, s)
			}
		}
	}
	return sources
}
