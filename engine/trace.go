package engine

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"rulevalidator/internal/tracing"
)

// tracerName is the instrumentation scope of the engine's spans.
const tracerName = "rulevalidator/engine"

// The attributes of the engine's spans: ids, counts and sizes, never the
// text of a document, a rule, a prompt or an answer.
const (
	attrRulesetID   = "rulevalidator.ruleset.id"
	attrRules       = "rulevalidator.rules"
	attrDocuments   = "rulevalidator.documents"
	attrInputBytes  = "rulevalidator.input.bytes"
	attrCalls       = "rulevalidator.calls"
	attrCall        = "rulevalidator.call.index"
	attrPartial     = "rulevalidator.call.partial"
	attrLLMCalls    = "rulevalidator.llm.calls"
	attrCacheHits   = "rulevalidator.cache.hits"
	attrCacheStored = "rulevalidator.cache.stored"
	attrVerdicts    = "rulevalidator.verdicts"
)

// startSpan starts an internal span named name, a child of ctx's. Without a
// tracer (tracing off) it returns ctx as it is and a span that records
// nothing, allocating nothing: the engine's hot path pays for no span.
func (e *Engine) startSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	if e.tracer == nil {
		return ctx, noSpan
	}
	return e.tracer.Start(ctx, name)
}

// noSpan is the span of an engine that traces nothing.
var noSpan trace.Span = noop.Span{}

// startEvaluate starts the span of one Evaluate, "evaluate".
func (e *Engine) startEvaluate(ctx context.Context, req Task) (context.Context, trace.Span) {
	ctx, span := e.startSpan(ctx, "evaluate")
	if !span.IsRecording() {
		return ctx, span
	}
	model := req.Model
	if model == "" {
		model = e.cfg.Model
	}
	span.SetAttributes(semconv.GenAIRequestModel(model))
	if rs := req.Ruleset; rs != nil {
		span.SetAttributes(attribute.String(attrRulesetID, rs.ID), attribute.Int(attrRules, len(rs.Rules)))
	}
	if in := req.Inputs; in != nil {
		span.SetAttributes(attribute.Int(attrDocuments, len(in.Documents())), attribute.Int(attrInputBytes, in.Size()))
	}
	return ctx, span
}

// endEvaluate ends an Evaluate's span with what it used.
func endEvaluate(span trace.Span, res *Result, err error) {
	if res != nil && span.IsRecording() {
		span.SetAttributes(
			attribute.Int(attrVerdicts, len(res.Rules)),
			attribute.Int(attrCalls, res.Usage.PlannedCalls),
			attribute.Int(attrLLMCalls, res.Usage.LLMCalls),
			semconv.GenAIUsageInputTokens(res.Usage.PromptTokens),
			semconv.GenAIUsageOutputTokens(res.Usage.CompletionTokens),
		)
	}
	tracing.End(span, err)
}

// storeTraced is store in a span, "cache store".
func (e *Engine) storeTraced(ctx context.Context, cr *cacheRun, model string, docs []Document) {
	ctx, span := e.startSpan(ctx, "cache store")
	defer span.End()
	e.store(ctx, cr, model, docs)
	if span.IsRecording() {
		n := 0
		for _, v := range cr.fresh {
			if v != nil {
				n++
			}
		}
		span.SetAttributes(attribute.Int(attrCacheStored, n))
	}
}

// hitCount is how many of the request's rules the cache answered.
func (cr *cacheRun) hitCount() int {
	n := 0
	for _, h := range cr.hits {
		if h != nil {
			n++
		}
	}
	return n
}

// tracerOf is tp's tracer for the engine, nil when tracing is off (tp nil
// or a no-op provider): see startSpan.
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if !tracing.Enabled(tp) {
		return nil
	}
	return tp.Tracer(tracerName)
}
