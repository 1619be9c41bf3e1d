package engine

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

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

// startEvaluate starts the span of one Evaluate, "evaluate".
func (e *Engine) startEvaluate(ctx context.Context, req Task) (context.Context, trace.Span) {
	ctx, span := e.tracer.Start(ctx, "evaluate")
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
	ctx, span := e.tracer.Start(ctx, "cache store")
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
