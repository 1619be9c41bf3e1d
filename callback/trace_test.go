package callback

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestDeliverySpans: each attempt is a CLIENT span "POST", a child of the
// caller's span, with the URL less its query, the status and the attempt's
// number; the receiver gets that attempt's span as its traceparent.
func TestDeliverySpans(t *testing.T) {
	rcv := newReceiver(t, 503, 200)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	n := newNotifier(t, Config{AllowPrivate: true, TracerProvider: tp})
	ctx, parent := tp.Tracer("test").Start(t.Context(), "process callbacks")
	d := n.Deliver(ctx, rcv.srv.URL+"/hook?token=SECRET", []byte(`{"a":1}`), "t/req-1", nil)
	parent.End()
	if !d.Delivered {
		t.Fatalf("not delivered: %+v", d)
	}

	var attempts []tracetest.SpanStub
	for _, s := range tracetest.SpanStubsFromReadOnlySpans(rec.Ended()) {
		if s.Name == "POST" {
			attempts = append(attempts, s)
		}
	}
	got := rcv.requests()
	if len(attempts) != 2 || len(got) != 2 {
		t.Fatalf("%d spans and %d requests, want 2 of each", len(attempts), len(got))
	}
	for i, s := range attempts {
		a := spanAttrs(s)
		if s.SpanKind != trace.SpanKindClient || s.Parent.SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("attempt %d: kind %v parent %v, want a CLIENT child of the caller's span", i+1, s.SpanKind, s.Parent.SpanID())
		}
		if a["http.request.method"] != "POST" || a["url.full"] != rcv.srv.URL+"/hook" || a["server.address"] != "127.0.0.1" ||
			a["rulevalidator.callback.attempt"] != []string{"1", "2"}[i] || a["http.response.status_code"] != []string{"503", "200"}[i] {
			t.Errorf("attempt %d: attributes %v", i+1, a)
		}
		want := "00-" + s.SpanContext.TraceID().String() + "-" + s.SpanContext.SpanID().String() + "-01"
		if tp := got[i].header.Get("traceparent"); tp != want {
			t.Errorf("attempt %d: the receiver got traceparent %q, want %q", i+1, tp, want)
		}
	}
	if s := attempts[0]; s.Status.Code != codes.Error || spanAttrs(s)["error.type"] != "503" {
		t.Errorf("the failed attempt: status %v attributes %v", s.Status, s.Attributes)
	}
	if s := attempts[1]; s.Status.Code == codes.Error || spanAttrs(s)["http.request.resend_count"] != "1" {
		t.Errorf("the second attempt: status %v attributes %v", s.Status, s.Attributes)
	}
}

// TestDeliverySpanHidesTheQuery: an attempt that reaches no receiver is an
// error span whose status and exception name the URL without its query.
func TestDeliverySpanHidesTheQuery(t *testing.T) {
	rcv := newReceiver(t, 200)
	url := rcv.srv.URL + "/hook?token=SECRET"
	rcv.srv.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	n := newNotifier(t, Config{AllowPrivate: true, MaxAttempts: 1, TracerProvider: tp})
	if d := n.Deliver(t.Context(), url, []byte(`{}`), "t/req-1", nil); d.Delivered || d.Err == nil {
		t.Fatalf("delivered to a closed server: %+v", d)
	} else if strings.Contains(d.Err.Error(), "SECRET") {
		t.Errorf("the outcome's error names the query: %v", d.Err)
	}
	spans := tracetest.SpanStubsFromReadOnlySpans(rec.Ended())
	if len(spans) != 1 || spans[0].Status.Code != codes.Error {
		t.Fatalf("spans %v, want one error span", spans)
	}
	s := spans[0]
	texts := []string{s.Status.Description}
	for _, kv := range s.Attributes {
		texts = append(texts, kv.Value.String())
	}
	for _, ev := range s.Events {
		for _, kv := range ev.Attributes {
			texts = append(texts, kv.Value.String())
		}
	}
	for _, text := range texts {
		if strings.Contains(text, "SECRET") {
			t.Errorf("the span holds the query: %q", text)
		}
	}
	if spanAttrs(s)["http.response.status_code"] != "" || spanAttrs(s)["error.type"] == "" {
		t.Errorf("attributes %v", s.Attributes)
	}
}

// TestDeliveryPassesTraceWithTracingOff: without a tracer provider the
// receiver gets the trace context of the caller's context, as it came.
func TestDeliveryPassesTraceWithTracingOff(t *testing.T) {
	rcv := newReceiver(t, 200)
	n := newNotifier(t, Config{AllowPrivate: true})
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": parent})
	if d := n.Deliver(ctx, rcv.srv.URL+"/hook", []byte(`{}`), "t/req-1", nil); !d.Delivered {
		t.Fatalf("not delivered: %+v", d)
	}
	if got := rcv.requests()[0].header.Get("traceparent"); got != parent {
		t.Errorf("traceparent %q, want the caller's %q", got, parent)
	}
}

func spanAttrs(s tracetest.SpanStub) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value.String()
	}
	return m
}
