package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"rulevalidator/engine"
	"rulevalidator/engine/gbnf"
	"rulevalidator/internal/backoff"
	"rulevalidator/internal/limit"
	"rulevalidator/internal/tracing"
	"rulevalidator/verdict"
)

// Client is an engine.LLM backed by an OpenAI-compatible chat completions
// endpoint. It is safe for concurrent use.
type Client struct {
	cfg   Config
	api   *goopenai.Client
	log   *slog.Logger
	retry backoff.Policy
	// limiter bounds the requests in flight to the server; endpoint names
	// it (BaseURL's host).
	limiter  *limit.Limiter
	endpoint string
	// tracer makes one CLIENT span per attempt; host and port are
	// server.address and server.port.
	tracer trace.Tracer
	host   string
	port   int

	mu sync.Mutex
	// formats holds, per model, the strongest response format the server
	// has not refused; calls start there.
	formats map[string]engine.ResponseFormat
	// noLogProbs holds the models whose server refused to give
	// log-probabilities; they are no longer asked for.
	noLogProbs map[string]bool
	// told holds what has been logged once per model: a fallback is said
	// once, not on every request.
	told map[string]bool
}

var _ engine.LLM = (*Client)(nil)

// New checks cfg, fills in its defaults and returns a Client.
func New(cfg Config) (*Client, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	oc := goopenai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	oc.HTTPClient = recordingDoer{next: cfg.HTTPClient}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, err // Validate parsed it already
	}
	c := &Client{
		cfg:        cfg,
		api:        goopenai.NewClientWithConfig(oc),
		log:        cfg.Logger,
		retry:      backoff.Policy{Initial: cfg.BaseDelay, Max: cfg.MaxDelay, MaxAttempts: cfg.MaxAttempts, MaxElapsed: cfg.MaxElapsed},
		endpoint:   u.Host,
		tracer:     tracing.OrNoop(cfg.TracerProvider).Tracer(tracerName),
		host:       u.Hostname(),
		port:       urlPort(u),
		formats:    map[string]engine.ResponseFormat{},
		noLogProbs: map[string]bool{},
		told:       map[string]bool{},
	}
	lc := limit.Config{
		Initial:  cfg.InitialConcurrency,
		Max:      cfg.MaxConcurrency,
		Fixed:    cfg.FixedConcurrency,
		MaxPause: cfg.MaxElapsed,
	}
	if observe := cfg.OnConcurrency; observe != nil {
		lc.OnChange = func(s limit.State) { observe(c.concurrency(s)) }
	}
	c.limiter = limit.New(lc)
	return c, nil
}

// Concurrency is the state of the limit on the requests in flight to the
// server now (see Config.MaxConcurrency).
func (c *Client) Concurrency() Concurrency { return c.concurrency(c.limiter.State()) }

func (c *Client) concurrency(s limit.State) Concurrency {
	return Concurrency{Endpoint: c.endpoint, Limit: s.Limit, InFlight: s.InFlight, Waiting: s.Waiting}
}

// Chat sends req, retrying transient failures and falling back to a weaker
// response format when the server refuses the one asked for. Errors wrap
// engine.ErrLLMUnavailable or engine.ErrLLMRejected, or the context's error
// when ctx ends first.
func (c *Client) Chat(ctx context.Context, req engine.ChatRequest) (engine.ChatResponse, error) {
	format, err := c.startFormat(req)
	if err != nil {
		return engine.ChatResponse{}, err
	}
	start := time.Now()
	for {
		var grammar string
		if format == engine.FormatGrammar {
			if grammar = c.grammar(req); grammar == "" {
				format = engine.FormatJSONObject // this call only: it has no grammar
			}
		}
		if req.LogProbs && c.refusedLogProbs(req.Model) {
			req.LogProbs = false
		}
		resp, refused, err := c.callWithRetries(ctx, req, format, grammar, start)
		if refused == nil {
			if err == nil && format == engine.FormatGrammar && !compactJSON(resp.Content) {
				// A server that ignores the field answers in its own spelling:
				// the grammar would only cost a wasted render from now on.
				c.remember(req.Model, engine.FormatJSONObject)
				c.tellOnce(ctx, req.Model, "grammar-ignored", "openai: the server ignores grammars; later calls ask for json_object",
					"model", req.Model)
			}
			return resp, err
		}
		if refused.kind == logProbsRefused {
			c.mu.Lock()
			c.noLogProbs[req.Model] = true
			c.mu.Unlock()
			c.tellOnce(ctx, req.Model, "logprobs", "openai: the server gives no log-probabilities; verdicts carry no confidence from them",
				"model", req.Model, "status", refused.status, "reason", shortReason(refused.reason))
			continue
		}
		// Text sends no response_format, so a refusal always has a weaker
		// format to go to. A server refusing a format is how the adapter
		// finds what the server supports: said once, in one line, at info.
		next := weaker(format)
		c.remember(req.Model, next)
		c.tellOnce(ctx, req.Model, "format-"+string(format), "openai: the server does not take this response format; using a weaker one",
			"model", req.Model, "format", format, "fallback", next, "status", refused.status, "reason", shortReason(refused.reason))
		format = next
	}
}

// refusedLogProbs reports whether model's server refused log-probabilities.
func (c *Client) refusedLogProbs(model string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.noLogProbs[model]
}

// tellOnce logs msg at info level the first time key is told for model.
func (c *Client) tellOnce(ctx context.Context, model, key, msg string, attrs ...any) {
	c.mu.Lock()
	k := model + "\x00" + key
	told := c.told[k]
	c.told[k] = true
	c.mu.Unlock()
	if !told {
		c.log.InfoContext(ctx, msg, attrs...)
	}
}

// shortReason is the first line of a server's reason, clipped: a server's
// error can carry a whole traceback, which says nothing to an operator
// reading why a fallback happened.
func shortReason(reason string) string {
	if i := strings.IndexAny(reason, "\r\n"); i >= 0 {
		reason = strings.TrimSpace(reason[:i]) + " …"
	}
	const maxRunes = 160
	if r := []rune(reason); len(r) > maxRunes {
		reason = string(r[:maxRunes]) + "…"
	}
	return reason
}

// grammar is req's GrammarSchema as a GBNF grammar, or "" when it has none
// or it cannot be rendered (logged: the engine's schemas are meant to be).
func (c *Client) grammar(req engine.ChatRequest) string {
	if len(req.GrammarSchema) == 0 {
		return ""
	}
	g, err := gbnf.FromSchema(req.GrammarSchema)
	if err != nil {
		c.log.Warn("openai: the grammar schema has no GBNF form, sending json_object", "model", req.Model, "err", err)
		return ""
	}
	return g
}

// compactJSON reports whether s is spelled as a grammar from gbnf makes
// it: an object or array with no whitespace outside its strings (a prefix
// of one when the answer was cut at max_tokens).
func compactJSON(s string) bool {
	if s == "" || s[0] != '{' && s[0] != '[' {
		return false
	}
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case inString && escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case b == '"':
			inString = !inString
		case !inString && (b == ' ' || b == '\t' || b == '\n' || b == '\r'):
			return false
		}
	}
	return true
}

// Format is the response format calls for model start at: the configured
// bound, lowered by any refusal seen so far.
func (c *Client) Format(model string) engine.ResponseFormat {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.boundLocked(model)
}

func (c *Client) boundLocked(model string) engine.ResponseFormat {
	bound := engine.FormatJSONSchema
	if c.cfg.Format != "" {
		bound = c.cfg.Format
	}
	if known, ok := c.formats[model]; ok {
		bound = weakest(bound, known)
	}
	return bound
}

func (c *Client) remember(model string, f engine.ResponseFormat) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if known, ok := c.formats[model]; !ok || strength(f) < strength(known) {
		c.formats[model] = f
	}
}

var schemaNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// startFormat checks req and picks the format of its first attempt. An
// empty req.Format means json_schema when a Schema is given, else json_object.
func (c *Client) startFormat(req engine.ChatRequest) (engine.ResponseFormat, error) {
	want := req.Format
	if want == "" {
		want = engine.FormatJSONObject
		if len(req.Schema) > 0 {
			want = engine.FormatJSONSchema
		}
	}
	if err := engine.ValidateFormat(want); err != nil {
		return "", rejectedLocally("format %s", err)
	}
	switch {
	case len(req.Messages) == 0:
		return "", rejectedLocally("the request has no messages")
	case want == engine.FormatJSONSchema && len(req.Schema) == 0:
		return "", rejectedLocally("format json_schema needs a Schema")
	case want == engine.FormatJSONSchema && !json.Valid(req.Schema):
		return "", rejectedLocally("schema %q is not valid JSON", schemaName(req))
	case want == engine.FormatJSONSchema && !schemaNamePattern.MatchString(schemaName(req)):
		return "", rejectedLocally("SchemaName %q must be 1 to 64 letters, digits, '_' or '-'", req.SchemaName)
	}
	return weakest(want, c.Format(req.Model)), nil
}

// callWithRetries sends req in format until it succeeds, fails for good, or
// the server refuses the format (refused is then set and err is nil). The
// retry budget (MaxElapsed) counts from start, the call's first attempt in
// any format.
func (c *Client) callWithRetries(ctx context.Context, req engine.ChatRequest, format engine.ResponseFormat, grammar string, start time.Time) (resp engine.ChatResponse, refused *failure, err error) {
	creq := buildRequest(req, format)
	ext := extensions{schemaHint: c.schemaHint(req, format), grammar: grammar}
	if req.Temperature != nil && creq.Temperature == 0 && takesSampling(req.Model) {
		// go-openai leaves a zero temperature out; a greedy judge must say so.
		ext.zeroTemperature = true
	}
	var last *failure // the last transient failure
	err = c.retry.Retry(ctx, func(n int) error {
		out, f := c.attempt(ctx, creq, req.Model, req.Purpose, format, n, ext)
		if f == nil {
			resp = c.toChatResponse(out, req.Model, format)
			return nil
		}
		if ctx.Err() != nil {
			if f.queued {
				return backoff.Permanent(fmt.Errorf("openai: call abandoned waiting for a slot to %s for attempt %d: %w", c.endpoint, n, ctx.Err()))
			}
			return backoff.Permanent(fmt.Errorf("openai: call abandoned during attempt %d: %w", n, ctx.Err()))
		}
		switch f.kind {
		case formatRefused, logProbsRefused:
			refused = f
			return backoff.Permanent(attemptError{f})
		case environment, permanent:
			return backoff.Permanent(f.chatError())
		}
		last = f
		var asked time.Duration
		if f.hasRetryAfter {
			asked = f.retryAfter
		}
		return backoff.RetryAfter(attemptError{f}, asked)
	},
		backoff.Since(start),
		backoff.WithSleep(c.cfg.Sleep),
		backoff.OnRetry(func(n int, wait time.Duration, _ error) {
			level := slog.LevelWarn
			if last.status == http.StatusTooManyRequests {
				level = slog.LevelInfo // rate limiting is back-pressure, not a fault
			}
			attrs := []any{"model", req.Model, "attempt", n, "max_attempts", c.cfg.MaxAttempts, "wait", wait, "err", last.reason}
			if last.status != 0 {
				attrs = append(attrs, "status", last.status)
			}
			if last.hasRetryAfter {
				attrs = append(attrs, "retry_after", last.retryAfter)
			}
			c.log.Log(ctx, level, "openai: retrying chat completion", attrs...)
		}))
	if refused != nil {
		return engine.ChatResponse{}, refused, nil
	}
	gaveUp, ok := errors.AsType[*backoff.GiveUpError](err)
	if !ok {
		return resp, nil, err
	}
	n := gaveUp.Attempts
	var why string
	switch {
	case gaveUp.RetryAfter > 0:
		why = fmt.Sprintf(" (the server asked to wait %s, more than the %s left of the %s retry budget)",
			roundDuration(gaveUp.RetryAfter), roundDuration(c.cfg.MaxElapsed-gaveUp.Elapsed), c.cfg.MaxElapsed)
	case errors.Is(gaveUp.Reason, backoff.ErrElapsed):
		why = fmt.Sprintf(" (retry budget of %s spent)", c.cfg.MaxElapsed)
	case !errors.Is(gaveUp.Reason, backoff.ErrAttempts):
		// The wait for the next attempt ended with ctx.
		return engine.ChatResponse{}, nil, fmt.Errorf("openai: call abandoned waiting to retry after %d %s (last error: %s): %w",
			n, plural(n, "attempt", "attempts"), last.reason, gaveUp.Reason)
	}
	return engine.ChatResponse{}, nil, &chatError{
		msg: fmt.Sprintf("%s after %d %s over %s%s: last error: %s",
			engine.ErrLLMUnavailable, n, plural(n, "attempt", "attempts"), roundDuration(gaveUp.Elapsed), why, last.reason),
		kind:  engine.ErrLLMUnavailable,
		cause: last.cause,
		fault: CauseModelUnavailable,
	}
}

// attempt waits for a slot under the server's concurrency limit, then sends
// one request; n numbers it among the attempts of its call in this format.
// A failure with queued set says ctx ended before a slot was free: nothing
// was sent.
func (c *Client) attempt(ctx context.Context, creq goopenai.ChatCompletionRequest, model string, purpose engine.CallPurpose, format engine.ResponseFormat, n int, ext extensions) (resp goopenai.ChatCompletionResponse, f *failure) {
	ctx, span := c.startSpan(ctx, model, purpose, format, n)
	defer func() { endSpan(span, resp, f) }()
	creq, contents := withPlaceholders(creq)
	rec := &attemptRecord{extensions: ext, contents: contents}
	var queued, took time.Duration
	waitStart := time.Now()
	err := c.limiter.Do(ctx, func() limit.Result {
		queued = time.Since(waitStart)
		var timedOut bool
		resp, f, took, timedOut = c.send(ctx, creq, rec, model, format)
		return loadResult(rec.header, f, timedOut, time.Now())
	})
	if err != nil {
		return resp, &failure{kind: transient, queued: true, cause: err,
			reason: fmt.Sprintf("no slot to %s before the call ended: %v", c.endpoint, err)}
	}
	span.SetAttributes(attribute.Int64(attrQueuedMS, queued.Milliseconds()))
	if rec.status != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(rec.status))
	}
	if c.cfg.OnAttempt != nil {
		a := observed(model, format, n, took, rec.status, resp, f)
		a.Queued = queued
		c.cfg.OnAttempt(a)
	}
	return resp, f
}

// send sends one request under its own timeout and classifies its failure,
// nil when it succeeded; timedOut says that timeout, not ctx, ended it.
func (c *Client) send(ctx context.Context, creq goopenai.ChatCompletionRequest, rec *attemptRecord, model string, format engine.ResponseFormat) (resp goopenai.ChatCompletionResponse, f *failure, took time.Duration, timedOut bool) {
	actx, cancel := context.WithTimeout(context.WithValue(ctx, attemptKey{}, rec), c.cfg.Timeout)
	defer cancel()
	start := time.Now()
	resp, err := c.api.CreateChatCompletion(actx, creq)
	took = time.Since(start)
	timedOut = ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded)
	if err != nil {
		f = classify(err, rec, attemptInfo{
			model:           model,
			configuredModel: c.cfg.Model == "" || model == "" || model == c.cfg.Model,
			withFormat:      format != engine.FormatText,
			grammar:         format == engine.FormatGrammar,
			logProbs:        creq.LogProbs,
			timeout:         c.cfg.Timeout,
			timedOut:        timedOut,
			now:             time.Now(),
		})
	}
	return resp, f, took, timedOut
}

// observed describes an attempt for Config.OnAttempt; f is nil when it
// succeeded.
func observed(model string, format engine.ResponseFormat, n int, took time.Duration, status int, resp goopenai.ChatCompletionResponse, f *failure) Attempt {
	a := Attempt{Model: model, Format: format, N: n, Status: status, Took: took}
	if f != nil {
		if f.status != 0 {
			a.Status = f.status
		}
		a.Err = attemptError{f}
		a.FormatRefused = f.kind == formatRefused
		return a
	}
	a.Usage = verdict.Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens}
	if d := resp.Usage.PromptTokensDetails; d != nil {
		a.Usage.CachedTokens = d.CachedTokens
	}
	return a
}

// attemptError is a failed attempt as Attempt.Err reports it: the reason,
// wrapping the transport's or go-openai's error.
type attemptError struct{ f *failure }

func (e attemptError) Error() string { return e.f.reason }
func (e attemptError) Unwrap() error { return e.f.cause }

func (c *Client) toChatResponse(resp goopenai.ChatCompletionResponse, model string, format engine.ResponseFormat) engine.ChatResponse {
	out := engine.ChatResponse{
		Format: format,
		Model:  resp.Model,
		Usage: verdict.Usage{
			PromptTokens:     resp.Usage.PromptTokens,
			CompletionTokens: resp.Usage.CompletionTokens,
			LLMCalls:         1,
		},
	}
	if d := resp.Usage.PromptTokensDetails; d != nil {
		out.Usage.CachedTokens = d.CachedTokens
	}
	if out.Model == "" {
		out.Model = model
	}
	// No choices, or an empty or refused message, is an answer the engine's
	// output checks deal with, not a transport failure.
	if len(resp.Choices) == 0 {
		c.log.Debug("openai: response has no choices", "model", model)
		return out
	}
	msg := resp.Choices[0].Message
	out.Content = msg.Content
	if lp := resp.Choices[0].LogProbs; lp != nil {
		out.Tokens = make([]engine.TokenLogProb, len(lp.Content))
		for i, t := range lp.Content {
			tok := engine.TokenLogProb{Text: t.Token, LogProb: t.LogProb, Top: make([]engine.TokenAlternative, len(t.TopLogProbs))}
			for j, alt := range t.TopLogProbs {
				tok.Top[j] = engine.TokenAlternative{Text: alt.Token, LogProb: alt.LogProb}
			}
			out.Tokens[i] = tok
		}
	}
	if msg.Refusal != "" {
		c.log.Info("openai: model refused to answer", "model", model, "refusal", msg.Refusal)
	}
	return out
}

// schemaHint is the schema to send inside a json_object response_format, or
// nil (see Config.OmitSchemaHint).
func (c *Client) schemaHint(req engine.ChatRequest, format engine.ResponseFormat) json.RawMessage {
	if format != engine.FormatJSONObject || c.cfg.OmitSchemaHint {
		return nil
	}
	for _, s := range []json.RawMessage{req.GrammarSchema, req.Schema} {
		if len(s) > 0 && json.Valid(s) {
			return s
		}
	}
	return nil
}

// buildRequest maps req onto the wire request for format.
func buildRequest(req engine.ChatRequest, format engine.ResponseFormat) goopenai.ChatCompletionRequest {
	msgs := make([]goopenai.ChatCompletionMessage, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = goopenai.ChatCompletionMessage{Role: m.Role, Content: m.Content}
	}
	creq := goopenai.ChatCompletionRequest{
		Model:    req.Model,
		Messages: msgs,
		//lint:ignore SA1019 max_tokens is what llama.cpp, vLLM and Ollama read; reasoning models get max_completion_tokens below
		MaxTokens: req.MaxTokens,
	}
	if takesSampling(req.Model) {
		if req.Temperature != nil {
			creq.Temperature = *req.Temperature
		}
		if req.LogProbs {
			creq.LogProbs, creq.TopLogProbs = true, topLogProbs
		}
	}
	switch format {
	case engine.FormatJSONSchema:
		creq.ResponseFormat = &goopenai.ChatCompletionResponseFormat{
			Type: goopenai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &goopenai.ChatCompletionResponseFormatJSONSchema{
				Name:   schemaName(req),
				Schema: req.Schema,
				Strict: true,
			},
		}
	case engine.FormatJSONObject:
		creq.ResponseFormat = &goopenai.ChatCompletionResponseFormat{
			Type: goopenai.ChatCompletionResponseFormatTypeJSONObject,
		}
	}
	// Reasoning models take max_completion_tokens and refuse max_tokens;
	// everything else (llama.cpp, vLLM, Ollama) understands max_tokens.
	//lint:ignore SA1019 moved to max_completion_tokens for the models that refuse max_tokens
	if creq.MaxTokens > 0 && errors.Is(goopenai.NewReasoningValidator().Validate(creq), goopenai.ErrReasoningModelMaxTokensDeprecated) {
		creq.MaxCompletionTokens, creq.MaxTokens = creq.MaxTokens, 0 //lint:ignore SA1019 see above
	}
	return creq
}

// topLogProbs is how many alternatives are asked for at each token: the
// most OpenAI allows, and enough to hold every answer a verdict's value
// could have taken that a model weighed seriously.
const topLogProbs = 5

// takesSampling reports whether model takes sampling parameters
// (temperature, log-probabilities): OpenAI's reasoning models refuse them.
func takesSampling(model string) bool {
	probe := goopenai.ChatCompletionRequest{Model: model, Temperature: 0.5, LogProbs: true, TopLogProbs: 1}
	err := goopenai.NewReasoningValidator().Validate(probe)
	return !errors.Is(err, goopenai.ErrReasoningModelLimitationsOther) &&
		!errors.Is(err, goopenai.ErrReasoningModelLimitationsLogprobs) &&
		!errors.Is(err, goopenai.ErrReasoningSamplingUnsupported)
}

func schemaName(req engine.ChatRequest) string {
	if req.SchemaName == "" {
		return "response"
	}
	return req.SchemaName
}

// strength orders formats (engine.ResponseFormats, strongest first); 0
// means unknown.
func strength(f engine.ResponseFormat) int {
	all := engine.ResponseFormats()
	if i := slices.Index(all, f); i >= 0 {
		return len(all) - i
	}
	return 0
}

func weakest(a, b engine.ResponseFormat) engine.ResponseFormat {
	if strength(b) < strength(a) {
		return b
	}
	return a
}

// weaker is the next format to try after f is refused.
func weaker(f engine.ResponseFormat) engine.ResponseFormat {
	all := engine.ResponseFormats()
	if i := slices.Index(all, f); i >= 0 && i < len(all)-1 {
		return all[i+1]
	}
	return engine.FormatText
}

// chatError wraps the engine's sentinel and the underlying cause; its
// message already names the sentinel.
type chatError struct {
	msg   string
	kind  error
	cause error
	// fault is the environment cause; empty when the request is to blame.
	fault string
}

func (e *chatError) Error() string { return "openai: " + e.msg }

// MessageFault reports whether the request caused the failure (a bad
// request, a model it chose that the server does not know, an input longer
// than the context window) rather than the service's configuration or the
// server's state.
func (e *chatError) MessageFault() bool { return e.fault == "" }

// FaultCause names the environment cause (CauseModelAuth, ...), empty for a
// message fault.
func (e *chatError) FaultCause() string { return e.fault }
func (e *chatError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// chatError is the error that ends a call on f, an environment failure
// (ErrLLMUnavailable, with its fault) or a permanent one (ErrLLMRejected).
func (f *failure) chatError() error {
	if f.kind == environment {
		return &chatError{msg: fmt.Sprintf("%s: %s", engine.ErrLLMUnavailable, f.reason), kind: engine.ErrLLMUnavailable, cause: f.cause, fault: f.fault}
	}
	return &chatError{msg: fmt.Sprintf("%s: %s", engine.ErrLLMRejected, f.reason), kind: engine.ErrLLMRejected, cause: f.cause}
}

// rejectedLocally is an ErrLLMRejected for a request that is not sent.
func rejectedLocally(format string, args ...any) error {
	return fmt.Errorf("openai: %w: %s (no request was sent)", engine.ErrLLMRejected, fmt.Sprintf(format, args...))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// roundDuration keeps messages readable: 41.3s, 850ms.
func roundDuration(d time.Duration) string {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}
