package api

import (
	"context"
	"net/http"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"rulevalidator/jobs"
)

// spanSubmitter records the span context a submission is published in.
type spanSubmitter struct {
	mu  sync.Mutex
	got []trace.SpanContext
}

func (s *spanSubmitter) Submit(ctx context.Context, _ Submission) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, trace.SpanContextFromContext(ctx))
	return nil
}

// TestSubmitServerSpan: POST /v1/validations is a SERVER span named by its
// route, continuing the caller's traceparent, and the submission is
// published within it.
func TestSubmitServerSpan(t *testing.T) {
	id := newIdentity(t)
	rec := tracetest.NewSpanRecorder()
	sub := &spanSubmitter{}
	_, ts := serve(t, Config{Verifier: id.verifier, Submitter: sub, Jobs: jobs.NewMemoryStore(jobs.MemoryStoreConfig{}),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r := call(t, http.MethodPost, ts.URL+"/v1/validations", id.token(t, "acme"), validationBody("req-span"), "traceparent", tp)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST: %s", r)
	}
	spans := tracetest.SpanStubsFromReadOnlySpans(rec.Ended())
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	attrs := map[string]string{}
	for _, kv := range s.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if s.Name != RouteSubmit || s.SpanKind != trace.SpanKindServer || attrs["http.route"] != "/v1/validations" ||
		attrs["http.request.method"] != "POST" || attrs["http.response.status_code"] != "202" {
		t.Errorf("span %q kind %v attributes %v", s.Name, s.SpanKind, attrs)
	}
	if s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("the span does not continue the traceparent: trace %s parent %s", s.SpanContext.TraceID(), s.Parent.SpanID())
	}
	if len(sub.got) != 1 || sub.got[0].SpanID() != s.SpanContext.SpanID() {
		t.Errorf("the submission was published in %v, want the server span %s", sub.got, s.SpanContext.SpanID())
	}
}
