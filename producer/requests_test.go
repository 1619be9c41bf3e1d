package producer

import (
	"context"
	"reflect"
	"testing"
	"time"

	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// TestRequestRecord: a request's record is keyed by its id, carries the wire
// format's headers, the tenant and the trace context, and decodes back to the
// request.
func TestRequestRecord(t *testing.T) {
	ctx := context.Background()
	serde, err := schemas.NewSerde(ctx, schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ref := "contract-review"
	req := &schemas.Request{RequestID: "req-1", TenantID: "acme", RulesetRef: &schemas.RulesetRef{ID: ref},
		SubmittedAt: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name  string
		trace []stream.Header
		want  map[string]string
	}{
		{"no trace", nil, map[string]string{HeaderTenant: "acme"}},
		{"traceparent", TraceHeaders(tp, ""), map[string]string{HeaderTenant: "acme", HeaderTraceparent: tp}},
		{"traceparent and tracestate", TraceHeaders(tp, "vendor=1"), map[string]string{HeaderTenant: "acme", HeaderTraceparent: tp, HeaderTracestate: "vendor=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := RequestRecord(serde, "requests", Submission{Request: req, Trace: tt.trace})
			if err != nil {
				t.Fatal(err)
			}
			if rec.Topic != "requests" || string(rec.Key) != "req-1" {
				t.Errorf("topic %q key %q", rec.Topic, rec.Key)
			}
			got := map[string]string{}
			var sh []schemas.Header
			for _, h := range rec.Headers {
				if _, dup := got[h.Key]; dup {
					t.Errorf("header %s given twice", h.Key)
				}
				got[h.Key] = string(h.Value)
				sh = append(sh, schemas.Header(h))
			}
			if got[schemas.HeaderSchema] != schemas.RequestSchema || len(got[schemas.HeaderFingerprint]) != 16 {
				t.Errorf("wire-format headers missing: %v", got)
			}
			delete(got, schemas.HeaderSchema)
			delete(got, schemas.HeaderFingerprint)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("headers %v, want %v", got, tt.want)
			}
			ev, err := serde.Decode(ctx, "requests", rec.Value, sh)
			if err != nil {
				t.Fatal(err)
			}
			if back, ok := ev.(*schemas.Request); !ok || back.RequestID != "req-1" || back.TenantID != "acme" || back.RulesetRef.ID != ref {
				t.Errorf("decoded %+v", ev)
			}
		})
	}
}

func TestTraceHeaders(t *testing.T) {
	tests := []struct {
		parent, state string
		want          []stream.Header
	}{
		{"", "", nil},
		{"", "vendor=1", nil},
		{"tp", "", []stream.Header{{Key: HeaderTraceparent, Value: []byte("tp")}}},
		{"tp", "vendor=1", []stream.Header{{Key: HeaderTraceparent, Value: []byte("tp")}, {Key: HeaderTracestate, Value: []byte("vendor=1")}}},
	}
	for _, tt := range tests {
		if got := TraceHeaders(tt.parent, tt.state); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("TraceHeaders(%q, %q) = %v, want %v", tt.parent, tt.state, got, tt.want)
		}
	}
}
