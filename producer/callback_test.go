package producer

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// offlineProducer is a Producer whose cluster does not answer: the topics'
// limits are Kafka's default, which is all encoding needs.
func offlineProducer(t *testing.T, callbackTopic string) *Producer {
	t.Helper()
	client, err := stream.NewClient(stream.ClientConfig{Brokers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	serde, err := schemas.NewSerde(context.Background(), schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(context.Background(), Config{Client: client, CallbackTopic: callbackTopic, Logger: slog.New(slog.DiscardHandler)}, serde)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// A result with a callback encodes to its events followed by one record on
// the callback topic: the payload as value, keyed by tenant/request_id, with
// the URL, the event id, the tenant, the content type and the trace context
// in headers. A payload over the topic's limit is replaced by the fallback,
// and says so.
func TestEncodeCallback(t *testing.T) {
	p := offlineProducer(t, "rv.callbacks")
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	summary := schemas.SummaryEvent{EventID: "acme/req-1", RequestID: "req-1", TenantID: "acme", RulesetID: "rs", Status: schemas.StatusCompleted, StartedAt: at, CompletedAt: at}
	trace := []stream.Header{{Key: HeaderTraceparent, Value: []byte("00-0123456789abcdef0123456789abcdef-0123456789abcdef-01")}}
	huge := []byte(`{"big":"` + strings.Repeat("x", 2<<20) + `"}`)
	tests := []struct {
		name         string
		cb           *Callback
		wantValue    []byte
		wantOmitted  bool
		wantRecords  int
		wantEncodeOK bool
	}{
		{name: "no callback", cb: nil, wantRecords: 1, wantEncodeOK: true},
		{name: "payload", cb: &Callback{URL: "https://hooks.example.com/rv?t=1", Payload: []byte(`{"a":1}`), Fallback: []byte(`{"a":0}`)}, wantValue: []byte(`{"a":1}`), wantRecords: 2, wantEncodeOK: true},
		{name: "too large: fallback", cb: &Callback{URL: "https://hooks.example.com/rv", Payload: huge, Fallback: []byte(`{"a":0}`)}, wantValue: []byte(`{"a":0}`), wantOmitted: true, wantRecords: 2, wantEncodeOK: true},
		{name: "too large without a fallback: left to the write to refuse", cb: &Callback{URL: "https://hooks.example.com/rv", Payload: huge}, wantValue: huge, wantRecords: 2, wantEncodeOK: true},
		{name: "no URL", cb: &Callback{Payload: []byte(`{}`)}, wantEncodeOK: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := p.Encode(Result{Summary: summary, Trace: trace, Callback: tc.cb})
			if (err == nil) != tc.wantEncodeOK {
				t.Fatalf("Encode: %v, want success %v", err, tc.wantEncodeOK)
			}
			if err != nil {
				return
			}
			if len(recs) != tc.wantRecords {
				t.Fatalf("%d records, want %d", len(recs), tc.wantRecords)
			}
			if recs[0].Topic != "rulevalidator.summaries" {
				t.Errorf("first record on %s, want the summary", recs[0].Topic)
			}
			if tc.cb == nil {
				return
			}
			cb := recs[len(recs)-1]
			if cb.Topic != "rv.callbacks" || string(cb.Key) != "acme/req-1" || !bytes.Equal(cb.Value, tc.wantValue) || !cb.Time.Equal(at) {
				t.Errorf("callback record on %s key %q time %s value of %d bytes, want rv.callbacks, acme/req-1, %s, %d bytes",
					cb.Topic, cb.Key, cb.Time, len(cb.Value), at, len(tc.wantValue))
			}
			for key, want := range map[string]string{
				HeaderEventID:     "acme/req-1",
				HeaderTenant:      "acme",
				HeaderCallbackURL: tc.cb.URL,
				HeaderContentType: "application/json",
				HeaderTraceparent: string(trace[0].Value),
			} {
				if got, _ := stream.HeaderValue(cb.Headers, key); string(got) != want {
					t.Errorf("header %s = %q, want %q", key, got, want)
				}
			}
			if _, omitted := stream.HeaderValue(cb.Headers, HeaderCallbackVerdictsOmitted); omitted != tc.wantOmitted {
				t.Errorf("header %s present %v, want %v", HeaderCallbackVerdictsOmitted, omitted, tc.wantOmitted)
			}
		})
	}
}

// Without a callback topic a callback cannot be encoded, and the topic must
// be one of its own.
func TestCallbackTopicConfig(t *testing.T) {
	p := offlineProducer(t, "")
	if _, err := p.Encode(Result{Summary: schemas.SummaryEvent{EventID: "a/b", TenantID: "a", RequestID: "b"}, Callback: &Callback{URL: "https://x.example.com", Payload: []byte(`{}`)}}); err == nil {
		t.Error("a callback encoded without a callback topic")
	}
	cfg := Config{Client: p.cfg.Client, CallbackTopic: "rulevalidator.summaries"}
	cfg.setDefaults()
	if err := cfg.Validate(); err == nil {
		t.Error("a callback topic equal to the summary topic was accepted")
	}
}
