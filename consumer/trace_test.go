package consumer

import (
	"context"
	"errors"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestTracedContinuesTheMessagesTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	const tp0 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var inner trace.SpanContext
	h := Trace(tp, "g1")(func(ctx context.Context, m *Message) error {
		inner = trace.SpanContextFromContext(ctx)
		return errors.New("boom")
	})
	m := &Message{Topic: "requests", Partition: 2, Offset: 41, Value: []byte("abc"),
		Headers: []Header{{Key: "traceparent", Value: []byte(tp0)}}}
	if err := h(context.Background(), m); err == nil {
		t.Fatal("the handler's error was lost")
	}
	spans := tracetest.SpanStubsFromReadOnlySpans(rec.Ended())
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.Name != "process requests" || s.SpanKind != trace.SpanKindConsumer {
		t.Errorf("span %q kind %v", s.Name, s.SpanKind)
	}
	if s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent.SpanID().String() != "00f067aa0ba902b7" || !s.Parent.IsRemote() {
		t.Errorf("trace %s parent %s: does not continue the message's traceparent", s.SpanContext.TraceID(), s.Parent.SpanID())
	}
	if inner.SpanID() != s.SpanContext.SpanID() {
		t.Error("the handler does not run in the process span")
	}
	want := map[string]string{
		"messaging.system": "kafka", "messaging.destination.name": "requests", "messaging.consumer.group.name": "g1",
		"messaging.destination.partition.id": "2", "messaging.kafka.offset": "41", "messaging.operation.type": "process",
	}
	for _, kv := range s.Attributes {
		if w, ok := want[string(kv.Key)]; ok {
			if kv.Value.String() != w {
				t.Errorf("%s = %s, want %s", kv.Key, kv.Value.String(), w)
			}
			delete(want, string(kv.Key))
		}
	}
	if len(want) != 0 {
		t.Errorf("missing attributes %v", want)
	}
	if s.Status.Code.String() != "Error" {
		t.Errorf("status %v, want Error", s.Status)
	}
}

// TestRunHandlesInTheProcessSpan: with a TracerProvider, a consumer runs its
// handler in the message's process span, and Hooks.Handled sees that span
// still recording (so that the handler's time can name its trace), ended
// after it.
func TestRunHandlesInTheProcessSpan(t *testing.T) {
	e := newEnv(t, 1)
	rec := tracetest.NewSpanRecorder()
	cfg := e.config(t)
	cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	type seen struct {
		sc        trace.SpanContext
		recording bool
	}
	handled := make(chan seen, 1)
	var inner trace.SpanContext
	cfg.Hooks.Handled = func(ctx context.Context, _ string, _ time.Duration) {
		span := trace.SpanFromContext(ctx)
		handled <- seen{span.SpanContext(), span.IsRecording()}
	}
	r := start(t, cfg, func(ctx context.Context, m *Message) error {
		inner = trace.SpanContextFromContext(ctx)
		return nil
	})
	e.produce(t, record{value: "v"})
	var got seen
	select {
	case got = <-handled:
	case <-time.After(waitTimeout):
		t.Fatal("no message handled")
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if !got.recording || !got.sc.IsValid() || got.sc.SpanID() != inner.SpanID() {
		t.Errorf("Handled saw span %v (recording %v), want the handler's %v, recording", got.sc.SpanID(), got.recording, inner.SpanID())
	}
	spans := tracetest.SpanStubsFromReadOnlySpans(rec.Ended())
	if len(spans) != 1 || spans[0].Name != "process "+e.topic || spans[0].SpanContext.SpanID() != inner.SpanID() {
		t.Errorf("ended spans %v, want the one process span", spans)
	}
}
