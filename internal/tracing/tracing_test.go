package tracing_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"rulevalidator/internal/otlptest"
	"rulevalidator/internal/tracing"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestSetupOffWhenUnset(t *testing.T) {
	for _, kv := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "x"}, // a name alone exports nothing
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"},
	} {
		tp, shutdown, err := tracing.Setup(context.Background(), env(kv))
		if err != nil {
			t.Fatalf("%v: %v", kv, err)
		}
		if _, sdk := tp.(*sdktrace.TracerProvider); sdk {
			t.Errorf("%v: an SDK provider, want the no-op one", kv)
		}
		if tracing.Enabled(tp) {
			t.Errorf("%v: Enabled says the no-op provider traces", kv)
		}
		_, span := tp.Tracer("t").Start(context.Background(), "s")
		if span.IsRecording() || span.SpanContext().IsValid() {
			t.Errorf("%v: the no-op provider made a recording span", kv)
		}
		if err := shutdown(context.Background()); err != nil {
			t.Errorf("%v: shutdown: %v", kv, err)
		}
	}
}

func TestSetupRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		kv   map[string]string
		want string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://h/x"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_RESOURCE_ATTRIBUTES": "team"}, "OTEL_RESOURCE_ATTRIBUTES"},
		{map[string]string{"OTEL_SDK_DISABLED": "perhaps"}, "OTEL_SDK_DISABLED"},
	} {
		tp, _, err := tracing.Setup(context.Background(), env(tc.kv))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one naming %s", tc.kv, err, tc.want)
		}
		if tp == nil {
			t.Errorf("%v: a nil provider with the error", tc.kv)
		}
	}
}

// TestSetupOTLPHTTP exports a span over OTLP/HTTP to a receiver, with the
// service name and resource attributes of the environment.
func TestSetupOTLPHTTP(t *testing.T) {
	rcv := otlptest.New(t)
	tp, shutdown, err := tracing.Setup(context.Background(), env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL(),
		"OTEL_SERVICE_NAME":           "rv-test",
		"OTEL_RESOURCE_ATTRIBUTES":    "deployment.environment.name=ci,team=a%20b",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, sdk := tp.(*sdktrace.TracerProvider); !sdk || !tracing.Enabled(tp) || tracing.Enabled(nil) {
		t.Fatalf("%T (enabled %v), want the SDK's provider", tp, tracing.Enabled(tp))
	}
	_, span := tp.Tracer("t").Start(context.Background(), "one", trace.WithSpanKind(trace.SpanKindClient))
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 1 || spans[0].GetName() != "one" || spans[0].Service != "rv-test" {
		t.Fatalf("received %v, want the span one of service rv-test", spans)
	}
	if got := span.SpanContext().TraceID().String(); spans[0].TraceID() != got {
		t.Errorf("trace id %s, want %s", spans[0].TraceID(), got)
	}
}

// TestSetupOTLPGRPC builds the gRPC exporter (its connection is lazy, so no
// server is needed to set it up), and the sampler asked for.
func TestSetupOTLPGRPC(t *testing.T) {
	tp, shutdown, err := tracing.Setup(context.Background(), env(map[string]string{
		"OTEL_TRACES_EXPORTER":               "otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL":        "grpc",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1",
		"OTEL_TRACES_SAMPLER":                "always_off",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, sdk := tp.(*sdktrace.TracerProvider); !sdk {
		t.Fatalf("%T, want the SDK's provider", tp)
	}
	if _, span := tp.Tracer("t").Start(context.Background(), "s"); span.IsRecording() {
		t.Error("always_off sampled a span")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = shutdown(ctx) // nothing to flush; the unreachable endpoint is not an error here
}

func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "x")
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "s")
	defer span.End()
	log.InfoContext(ctx, "in a span")
	log.InfoContext(context.Background(), "outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines %q", lines)
	}
	sc := span.SpanContext()
	if want := `"trace_id":"` + sc.TraceID().String() + `","span_id":"` + sc.SpanID().String() + `"`; !strings.Contains(lines[0], want) {
		t.Errorf("line %s lacks %s", lines[0], want)
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("line %s outside a span has a trace id", lines[1])
	}
}
