package api

import (
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"rulevalidator/internal/tracing"
)

// tracerName is the instrumentation scope of the API's spans.
const tracerName = "rulevalidator/api"

// traced wraps a route's handler in a SERVER span, "<METHOD> <route>" (the
// route pattern, never the path's values), continuing the trace of the
// request's traceparent header when it has a valid one. A validation it
// publishes carries this span's trace (producer's send span, its child).
func (s *Server) traced(pattern string, h http.Handler) http.Handler {
	method, route, ok := strings.Cut(pattern, " ")
	if !ok {
		method, route = "", pattern
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := tracing.Propagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := s.tracer.Start(ctx, pattern, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			semconv.HTTPRequestMethodKey.String(method),
			semconv.HTTPRoute(route),
			semconv.URLScheme(scheme(r)),
		))
		defer span.End()
		if !span.IsRecording() {
			h.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r.WithContext(ctx))
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		if status >= 500 {
			span.SetStatus(codes.Error, "")
			span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		}
	})
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}
