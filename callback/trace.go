package callback

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the deliveries' spans.
const tracerName = "rulevalidator/callback"

// attrAttempt numbers a delivery's attempts from 1.
const attrAttempt = "rulevalidator.callback.attempt"

// startSpan starts the CLIENT span of one attempt, named "POST" as the HTTP
// semantic conventions name a client span without a route template. url.full
// is the URL without its query and fragment (a receiver's token may be
// there); the payload is never an attribute.
func (n *Notifier) startSpan(ctx context.Context, u *url.URL, attempt int) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodPost,
		semconv.URLFull(logURL(u)),
		semconv.ServerAddress(u.Hostname()),
		attribute.Int(attrAttempt, attempt),
	}
	if port := urlPort(u); port != 0 {
		attrs = append(attrs, semconv.ServerPort(port))
	}
	if attempt > 1 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(attempt-1))
	}
	return n.tracer.Start(ctx, http.MethodPost, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSpan ends an attempt's span with the status received (0: none) and,
// when it failed, its error: error.type is the status when one came, else
// the error's type.
func endSpan(span trace.Span, status int, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if status != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
	if err == nil {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	if status != 0 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
	} else {
		span.SetAttributes(semconv.ErrorType(err))
	}
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
