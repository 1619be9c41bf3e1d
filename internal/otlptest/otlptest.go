// Package otlptest is a test helper: an OTLP/HTTP trace receiver on an
// httptest server, which decodes the ExportTraceServiceRequest protobufs it
// is sent and keeps their spans.
package otlptest

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with its resource's service.name.
type Span struct {
	Service string
	*tracepb.Span
}

// TraceID is the span's trace id in hex.
func (s Span) TraceID() string { return hex.EncodeToString(s.Span.GetTraceId()) }

// SpanID is the span's id in hex.
func (s Span) SpanID() string { return hex.EncodeToString(s.Span.GetSpanId()) }

// ParentID is the span's parent's id in hex, "" for a root.
func (s Span) ParentID() string { return hex.EncodeToString(s.Span.GetParentSpanId()) }

// Attr is the string form of attribute key, "" when absent: strings as
// they are, integers in decimal.
func (s Span) Attr(key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() != key {
			continue
		}
		v := kv.GetValue()
		if iv, ok := v.GetValue().(*commonpb.AnyValue_IntValue); ok {
			return strconv.FormatInt(iv.IntValue, 10)
		}
		return v.GetStringValue()
	}
	return ""
}

// Receiver collects the spans posted to URL()+"/v1/traces".
type Receiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []Span
}

// New starts a receiver, closed when the test ends.
func New(t testing.TB) *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the receiver's base URL (OTEL_EXPORTER_OTLP_ENDPOINT).
func (r *Receiver) URL() string { return r.srv.URL }

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a protobuf POST to /v1/traces", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Service: service, Span: sp})
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans is a copy of the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Wait polls until ok holds for the spans received, or timeout passes, and
// returns the spans seen last.
func (r *Receiver) Wait(timeout time.Duration, ok func([]Span) bool) ([]Span, bool) {
	deadline := time.Now().Add(timeout)
	for {
		spans := r.Spans()
		if ok(spans) {
			return spans, true
		}
		if time.Now().After(deadline) {
			return spans, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
