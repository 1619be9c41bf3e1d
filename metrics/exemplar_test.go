package metrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"rulevalidator/consumer"
	"rulevalidator/engine"
	"rulevalidator/verdict"
)

// observeLatencies makes one observation of each latency histogram in ctx:
// a model call, a message handled, a request handled, an HTTP request.
func observeLatencies(ctx context.Context, m *Metrics) {
	m.EngineHooks().LLMCall(ctx, "gemma", engine.PurposeJudge, 1200*time.Millisecond, verdict.Usage{PromptTokens: 1}, nil)
	m.ConsumerHooks("requests").Handled(ctx, consumer.OutcomeOK, 2*time.Second)
	m.PipelineHooks().RequestDone(ctx, "completed", 2*time.Second)
	h := m.InstrumentHTTP("POST /v1/validations", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/validations", nil))
}

// scrape is what Handler serves for accept ("" asks for nothing).
func scrape(t *testing.T, reg prometheus.Gatherer, accept string) string {
	t.Helper()
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

const openMetrics = "application/openmetrics-text; version=1.0.0"

// TestLatencyHistogramsCarryTheTrace: an observation made in a sampled span
// is the exemplar of its bucket, naming the span's trace and span, served
// in OpenMetrics; the text format, which has no exemplars, is unchanged.
func TestLatencyHistogramsCarryTheTrace(t *testing.T) {
	m, reg := newMetrics(t)
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	observeLatencies(ctx, m)

	sc := span.SpanContext()
	traceID, spanID := `trace_id="`+sc.TraceID().String()+`"`, `span_id="`+sc.SpanID().String()+`"`
	body := scrape(t, reg, openMetrics)
	for _, name := range []string{
		"rulevalidator_llm_request_duration_seconds_bucket",
		"rulevalidator_handler_duration_seconds_bucket",
		"rulevalidator_request_duration_seconds_bucket",
		"rulevalidator_http_request_duration_seconds_bucket",
	} {
		found := false
		for line := range strings.Lines(body) {
			_, ex, ok := strings.Cut(line, " # {")
			if strings.HasPrefix(line, name+"{") && ok && strings.Contains(ex, traceID) && strings.Contains(ex, spanID) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s line carries the exemplar {%s,%s}", name, traceID, spanID)
		}
	}
	if text := scrape(t, reg, ""); strings.Contains(text, sc.TraceID().String()) {
		t.Error("the text format carries the trace id")
	}
}

// TestNoExemplarWithoutASampledSpan: no span, a span not sampled, and the
// trace context passed through with tracing off leave no exemplar.
func TestNoExemplarWithoutASampledSpan(t *testing.T) {
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	unsampled, span := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())).
		Tracer("test").Start(context.Background(), "request")
	defer span.End()
	passedThrough, _ := noop.NewTracerProvider().Tracer("test").Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), "request")
	for name, ctx := range map[string]context.Context{
		"no span":                     context.Background(),
		"not sampled":                 unsampled,
		"passed through, tracing off": passedThrough,
	} {
		t.Run(name, func(t *testing.T) {
			m, reg := newMetrics(t)
			observeLatencies(ctx, m)
			if body := scrape(t, reg, openMetrics); strings.Contains(body, "trace_id=") {
				t.Errorf("an exemplar:\n%s", body)
			}
		})
	}
}
