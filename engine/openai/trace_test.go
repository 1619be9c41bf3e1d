package openai_test

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
)

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestChatSpans: each attempt is its own CLIENT span, the failed one
// marked, the answered one with the response model and the token usage;
// no span holds the prompt or the answer.
func TestChatSpans(t *testing.T) {
	fake := newFake(t)
	fake.Enqueue(
		llmfake.Reply{Status: 503, Error: &llmfake.Error{Message: "overloaded"}},
		llmfake.Reply{Content: `{"verdict":"pass"}`, Model: "test-model-2024", PromptTokens: 120, CompletionTokens: 9},
	)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	c, _ := newClient(t, fake.URL(), func(cfg *openai.Config) { cfg.TracerProvider = tp })
	ctx, parent := tp.Tracer("test").Start(t.Context(), "parent")
	req := schemaRequest()
	req.Purpose = engine.PurposeCheck
	if _, err := c.Chat(ctx, req); err != nil {
		t.Fatal(err)
	}
	parent.End()

	spans := tracetest.SpanStubsFromReadOnlySpans(rec.Ended())
	var attempts []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == "chat test-model" {
			attempts = append(attempts, s)
		}
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2 (%v)", len(attempts), spans)
	}
	for i, s := range attempts {
		a := attrs(s)
		if s.SpanKind != trace.SpanKindClient || s.Parent.SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("attempt %d: kind %v parent %v, want a CLIENT child of the caller's span", i, s.SpanKind, s.Parent.SpanID())
		}
		if a["gen_ai.operation.name"].AsString() != "chat" || a["gen_ai.request.model"].AsString() != "test-model" ||
			a["server.address"].AsString() != "127.0.0.1" || a["server.port"].AsInt64() == 0 || a["rulevalidator.llm.attempt"].AsInt64() != int64(i+1) ||
			a["rulevalidator.llm.purpose"].AsString() != string(engine.PurposeCheck) {
			t.Errorf("attempt %d: attributes %v", i, s.Attributes)
		}
		for _, kv := range s.Attributes {
			if v := kv.Value.String(); strings.Contains(v, "sky") || strings.Contains(v, "judge documents") || strings.Contains(v, `"verdict"`) {
				t.Errorf("attempt %d: attribute %s holds message text: %q", i, kv.Key, v)
			}
		}
	}
	// Each request carries its own attempt's span as the parent of the
	// server's work.
	calls := fake.Requests()
	if len(calls) != len(attempts) {
		t.Fatalf("%d requests, want %d", len(calls), len(attempts))
	}
	for i, s := range attempts {
		want := "00-" + s.SpanContext.TraceID().String() + "-" + s.SpanContext.SpanID().String() + "-01"
		if got := calls[i].Header.Get("traceparent"); got != want {
			t.Errorf("request %d: traceparent %q, want the attempt's %q", i, got, want)
		}
	}
	failed, answered := attempts[0], attempts[1]
	if failed.Status.Code != codes.Error || attrs(failed)["error.type"].AsString() != "503" || attrs(failed)["http.response.status_code"].AsInt64() != 503 {
		t.Errorf("failed attempt: status %v, attributes %v", failed.Status, failed.Attributes)
	}
	a := attrs(answered)
	if answered.Status.Code == codes.Error || a["gen_ai.response.model"].AsString() != "test-model-2024" ||
		a["gen_ai.usage.input_tokens"].AsInt64() != 120 || a["gen_ai.usage.output_tokens"].AsInt64() != 9 {
		t.Errorf("answered attempt: status %v, attributes %v", answered.Status, answered.Attributes)
	}
}

// TestChatPassesTraceWithTracingOff: without a tracer provider the client
// makes no span, and the model server gets the caller's trace context as it
// came (an incoming request's traceparent), unchanged.
func TestChatPassesTraceWithTracingOff(t *testing.T) {
	fake := newFake(t)
	fake.Enqueue(llmfake.Reply{Content: `{"verdict":"pass"}`})
	c, _ := newClient(t, fake.URL(), nil)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := propagation.TraceContext{}.Extract(t.Context(), propagation.MapCarrier{"traceparent": parent})
	if _, err := c.Chat(ctx, schemaRequest()); err != nil {
		t.Fatal(err)
	}
	if got := fake.Requests()[0].Header.Get("traceparent"); got != parent {
		t.Errorf("traceparent %q, want the caller's %q", got, parent)
	}

	fake.Enqueue(llmfake.Reply{Content: `{"verdict":"pass"}`})
	if _, err := c.Chat(t.Context(), schemaRequest()); err != nil {
		t.Fatal(err)
	}
	if got := fake.Requests()[1].Header.Values("traceparent"); len(got) != 0 {
		t.Errorf("traceparent %q sent without a trace", got)
	}
}
