package openai

import (
	"context"
	"errors"
	"net/url"
	"strconv"

	goopenai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"rulevalidator/engine"
)

// tracerName is the instrumentation scope of the model client's spans.
const tracerName = "rulevalidator/engine/openai"

// The project's own attributes of an attempt's span.
const (
	attrAttempt  = "rulevalidator.llm.attempt"
	attrPurpose  = "rulevalidator.llm.purpose"
	attrFormat   = "rulevalidator.llm.response_format"
	attrQueuedMS = "rulevalidator.llm.queued_ms"
)

// startSpan starts the CLIENT span of one attempt, named "chat <model>" as
// the GenAI semantic conventions name an inference span. It carries ids,
// counts and settings, and what the call is for (judge, check, ...); never
// a prompt or a completion.
func (c *Client) startSpan(ctx context.Context, model string, purpose engine.CallPurpose, format engine.ResponseFormat, n int) (context.Context, trace.Span) {
	name := "chat"
	if model != "" {
		name += " " + model
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameOpenAI,
		semconv.GenAIRequestModel(model),
		semconv.ServerAddress(c.host),
		attribute.Int(attrAttempt, n),
		attribute.String(attrFormat, string(format)),
	}
	if purpose != "" {
		attrs = append(attrs, attribute.String(attrPurpose, string(purpose)))
	}
	if c.port != 0 {
		attrs = append(attrs, semconv.ServerPort(c.port))
	}
	return c.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSpan records an attempt's answer (response model and token usage) or
// its failure (error.type, and the first line of the reason as the status).
func endSpan(span trace.Span, resp goopenai.ChatCompletionResponse, f *failure) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if f != nil {
		reason := shortReason(f.reason)
		span.RecordError(errors.New(reason))
		span.SetStatus(codes.Error, reason)
		span.SetAttributes(semconv.ErrorTypeKey.String(failureType(f)))
		return
	}
	span.SetAttributes(
		semconv.GenAIResponseModel(resp.Model),
		semconv.GenAIUsageInputTokens(resp.Usage.PromptTokens),
		semconv.GenAIUsageOutputTokens(resp.Usage.CompletionTokens),
	)
	if resp.ID != "" {
		span.SetAttributes(semconv.GenAIResponseID(resp.ID))
	}
	reasons := make([]string, 0, len(resp.Choices))
	for _, ch := range resp.Choices {
		reasons = append(reasons, string(ch.FinishReason))
	}
	span.SetAttributes(semconv.GenAIResponseFinishReasons(reasons...))
}

// urlPort is u's port, the scheme's default when it names none.
func urlPort(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	switch u.Scheme {
	case "https":
		return 443
	case "http":
		return 80
	}
	return 0
}

// failureType is a failed attempt's error.type: its HTTP status when one
// came, else its environment cause, else what kind of failure it is.
func failureType(f *failure) string {
	switch {
	case f.queued:
		return "queued"
	case f.status != 0:
		return strconv.Itoa(f.status)
	case f.fault != "":
		return f.fault
	case f.kind == permanent:
		return "rejected"
	default:
		return "unavailable"
	}
}
