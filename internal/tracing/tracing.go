// Package tracing sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables, and carries a span's ids into log lines (LogHandler).
// Nothing here is global: Setup returns the provider, which the wiring passes
// to the packages that make spans through their Configs.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES name none.
const DefaultServiceName = "rulevalidator"

// Protocols of OTEL_EXPORTER_OTLP_PROTOCOL that Setup supports.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Propagator is the W3C Trace Context propagator (traceparent, tracestate)
// every transport uses, passed explicitly rather than set globally.
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// InjectHTTP sets h's traceparent and tracestate to the span context of ctx,
// so that the server an outgoing request goes to continues its trace; h is
// left as it is when ctx holds no valid span context. With tracing off the
// context passed through (an incoming request's) is the one sent.
func InjectHTTP(ctx context.Context, h http.Header) {
	Propagator().Inject(ctx, propagation.HeaderCarrier(h))
}

// Noop is the provider used when tracing is off: its spans record nothing
// and cost a context lookup; a parent's span context passes through them, so
// an incoming traceparent still reaches the events.
func Noop() trace.TracerProvider { return noop.NewTracerProvider() }

// OrNoop is tp, or the no-op provider when tp is nil: the default of every
// Config's TracerProvider.
func OrNoop(tp trace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return Noop()
	}
	return tp
}

// Setup builds the tracer provider the OTEL_* variables read through getenv
// describe, and the function that flushes and stops it.
//
// Tracing is on when OTEL_TRACES_EXPORTER is "otlp", or when it is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set;
// otherwise (nothing set, "none", or OTEL_SDK_DISABLED=true) the provider is
// a no-op one and shutdown does nothing. Read are: the exporter's protocol
// (OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL: http/protobuf, the default, or
// grpc) and endpoint, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES and
// OTEL_TRACES_SAMPLER with OTEL_TRACES_SAMPLER_ARG. A value Setup does not
// support is an error naming the variable. The OTLP exporters read their
// other settings (headers, timeout, certificates, compression) from the
// process environment themselves.
func Setup(ctx context.Context, getenv func(string) string) (trace.TracerProvider, func(context.Context) error, error) {
	off := func(context.Context) error { return nil }
	on, err := enabled(getenv)
	if err != nil || !on {
		return Noop(), off, err
	}
	sampler, err := samplerFrom(getenv)
	if err != nil {
		return Noop(), off, err
	}
	res, err := resourceFrom(getenv)
	if err != nil {
		return Noop(), off, err
	}
	exp, err := exporterFrom(ctx, getenv)
	if err != nil {
		return Noop(), off, err
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
	)
	return tp, tp.Shutdown, nil
}

func enabled(getenv func(string) string) (bool, error) {
	if v := strings.TrimSpace(getenv("OTEL_SDK_DISABLED")); v != "" {
		disabled, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("OTEL_SDK_DISABLED=%q: want true or false", v)
		}
		if disabled {
			return false, nil
		}
	}
	switch v := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); v {
	case "otlp":
		return true, nil
	case "none":
		return false, nil
	case "":
		return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: supported are otlp and none", v)
	}
}

// protocol is the OTLP protocol of the traces exporter.
func protocol(getenv func(string) string) (string, error) {
	name, p := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if p == "" {
		name, p = "OTEL_EXPORTER_OTLP_PROTOCOL", getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch p = strings.TrimSpace(p); p {
	case "", ProtocolHTTP:
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	default:
		return "", fmt.Errorf("%s=%q: supported are %s and %s", name, p, ProtocolHTTP, ProtocolGRPC)
	}
}

// endpoint is the URL the traces go to, "" for the exporter's default
// (localhost:4318 over HTTP, localhost:4317 over gRPC): the traces endpoint
// as given, else the base endpoint, to which HTTP adds /v1/traces.
func endpoint(getenv func(string) string, proto string) (string, error) {
	name, raw := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	signal := raw != ""
	if !signal {
		name, raw = "OTEL_EXPORTER_OTLP_ENDPOINT", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s=%q: want an http:// or https:// URL with a host", name, raw)
	}
	if !signal && proto == ProtocolHTTP {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	return u.String(), nil
}

func exporterFrom(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	proto, err := protocol(getenv)
	if err != nil {
		return nil, err
	}
	ep, err := endpoint(getenv, proto)
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	if proto == ProtocolGRPC {
		var opts []otlptracegrpc.Option
		if ep != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(ep))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	} else {
		var opts []otlptracehttp.Option
		if ep != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(ep))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP %s exporter: %w", proto, err)
	}
	return exp, nil
}

func samplerFrom(getenv func(string) string) (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio between 0 and 1", arg)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	default:
		return nil, fmt.Errorf("OTEL_TRACES_SAMPLER=%q: supported are always_on, always_off, traceidratio and their parentbased_ forms", name)
	}
}

// resourceFrom is the SDK's default resource (telemetry.sdk.*) with the
// attributes of OTEL_RESOURCE_ATTRIBUTES and service.name, which
// OTEL_SERVICE_NAME sets over both.
func resourceFrom(getenv func(string) string) (*resource.Resource, error) {
	attrs, err := parseResourceAttributes(getenv("OTEL_RESOURCE_ATTRIBUTES"))
	if err != nil {
		return nil, err
	}
	service := strings.TrimSpace(getenv("OTEL_SERVICE_NAME"))
	if service == "" {
		service = DefaultServiceName
		for _, a := range attrs {
			if a.Key == semconv.ServiceNameKey {
				service = a.Value.AsString()
			}
		}
	}
	attrs = append(attrs, semconv.ServiceName(service))
	return resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
}

// parseResourceAttributes reads key1=value1,key2=value2, values
// percent-encoded (W3C Baggage octets).
func parseResourceAttributes(s string) ([]attribute.KeyValue, error) {
	var out []attribute.KeyValue
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for pair := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %q is not key=value", pair)
		}
		value, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: the value of %q: %w", k, err)
		}
		out = append(out, attribute.String(k, value))
	}
	return out, nil
}

// End ends span, recording err, when not nil, as the span's error: an
// exception event, the status Error and error.type. The error's message is
// the program's own (no document or model text is put in errors).
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorType(err))
	}
	span.End()
}

// Enabled reports whether tp makes spans that may record: false for nil and
// for the no-op provider Setup returns when tracing is off. A hot path may
// skip its spans when it is false (an incoming parent still passes through
// the context untouched).
func Enabled(tp trace.TracerProvider) bool {
	if tp == nil {
		return false
	}
	_, off := tp.(noop.TracerProvider)
	return !off
}
