package consumer

import (
	"context"
	"errors"
	"testing"

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
			if kv.Value.Emit() != w {
				t.Errorf("%s = %s, want %s", kv.Key, kv.Value.Emit(), w)
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
