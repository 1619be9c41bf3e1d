package producer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"rulevalidator/internal/kafkatest"
	"rulevalidator/schemas"
	"rulevalidator/stream"
	"rulevalidator/verdict"
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
			recs, err := p.Encode(t.Context(), Result{Summary: summary, Trace: trace, Callback: tc.cb})
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
	if _, err := p.Encode(t.Context(), Result{Summary: schemas.SummaryEvent{EventID: "a/b", TenantID: "a", RequestID: "b"}, Callback: &Callback{URL: "https://x.example.com", Payload: []byte(`{}`)}}); err == nil {
		t.Error("a callback encoded without a callback topic")
	}
	cfg := Config{Client: p.cfg.Client, CallbackTopic: "rulevalidator.summaries"}
	cfg.setDefaults()
	if err := cfg.Validate(); err == nil {
		t.Error("a callback topic equal to the summary topic was accepted")
	}
}

// On a real broker whose callbacks topic takes 64 KiB, a callback over that
// is written without its verdicts, with the events, in one write; one that
// fits is written as it is.
func TestOversizedCallbackIsWrittenWithoutVerdicts(t *testing.T) {
	bootstrap := kafkatest.Broker(t)
	verdicts, summaries := kafkatest.UniqueTopic(t, "verdicts"), kafkatest.UniqueTopic(t, "summaries")
	deadLetters, callbacks := kafkatest.UniqueTopic(t, "deadletter"), kafkatest.UniqueTopic(t, "callbacks")
	for _, topic := range []string{verdicts, summaries, deadLetters} {
		kafkatest.CreateTopic(t, bootstrap, topic, 1)
	}
	kafkatest.CreateTopicWith(t, bootstrap, callbacks, 1, map[string]string{"max.message.bytes": strconv.Itoa(64 << 10)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := stream.NewClient(stream.ClientConfig{Brokers: []string{bootstrap}})
	if err != nil {
		t.Fatal(err)
	}
	serde, err := schemas.NewSerde(ctx, schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := New(ctx, Config{Client: client, VerdictTopic: verdicts, SummaryTopic: summaries, DeadLetterTopic: deadLetters,
		CallbackTopic: callbacks, Logger: slog.New(slog.DiscardHandler)}, serde)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	at := time.Now().UTC().Truncate(time.Millisecond)
	fallback := []byte(`{"result":{"verdicts":[],"verdicts_omitted":{"count":1}}}`)
	for _, tc := range []struct {
		id      string
		payload []byte
	}{
		{"small", []byte(`{"result":{"verdicts":[{"rule_id":"r1"}]}}`)},
		{"large", []byte(`{"result":{"verdicts":[{"rationale":"` + strings.Repeat("y", 100<<10) + `"}]}}`)},
	} {
		summary := schemas.SummaryEvent{EventID: "acme/" + tc.id, RequestID: tc.id, TenantID: "acme", RulesetID: "rs", Status: schemas.StatusCompleted, StartedAt: at, CompletedAt: at}
		recs, err := prod.Encode(ctx, Result{Summary: summary, Callback: &Callback{URL: "https://hooks.example.com/" + tc.id, Payload: tc.payload, Fallback: fallback}})
		if err != nil {
			t.Fatal(err)
		}
		if err := prod.Write(ctx, recs); err != nil {
			t.Fatalf("writing %s: %v", tc.id, err)
		}
	}

	got := make(chan stream.Record, 2)
	reader, err := stream.NewReader(stream.ReaderConfig{Client: client, Topics: []string{callbacks}, Handle: func(_ context.Context, r stream.Record) { got <- r }})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = reader.Run(ctx) }()
	for range 2 {
		var rec stream.Record
		select {
		case rec = <-got:
		case <-ctx.Done():
			t.Fatal("the callbacks were not read back")
		}
		_, omitted := stream.HeaderValue(rec.Headers, HeaderCallbackVerdictsOmitted)
		url, _ := stream.HeaderValue(rec.Headers, HeaderCallbackURL)
		switch string(rec.Key) {
		case "acme/small":
			if omitted || !bytes.Contains(rec.Value, []byte(`"rule_id":"r1"`)) {
				t.Errorf("the small callback: omitted %v, value %s", omitted, rec.Value)
			}
		case "acme/large":
			if !omitted || !bytes.Equal(rec.Value, fallback) {
				t.Errorf("the large callback: omitted %v, value of %d bytes, want the fallback", omitted, len(rec.Value))
			}
		default:
			t.Errorf("unexpected callback key %q", rec.Key)
		}
		if want := "https://hooks.example.com/" + strings.TrimPrefix(string(rec.Key), "acme/"); string(url) != want {
			t.Errorf("callback %s: URL %q, want %q", rec.Key, url, want)
		}
	}
}

// A verdict event larger than its topic takes is refused when encoded,
// naming the rule, before anything is written: the result's fault, not the
// broker's.
func TestEncodeRefusesAnEventOverItsTopicsLimit(t *testing.T) {
	p := offlineProducer(t, "")
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	summary := schemas.SummaryEvent{EventID: "acme/req-1", RequestID: "req-1", TenantID: "acme", RulesetID: "rs", Status: schemas.StatusCompleted, StartedAt: at, CompletedAt: at}
	verdict := func(id string, rationale int) schemas.VerdictEvent {
		return schemas.VerdictEvent{EventID: "acme/req-1/" + id, RequestID: "req-1", TenantID: "acme", RulesetID: "rs", Model: "m", RuleID: id,
			RuleType: verdict.Boolean, DataSufficiency: true, Rationale: strings.Repeat("y", rationale), BooleanOutput: new(bool), StartedAt: at, CompletedAt: at}
	}
	recs, err := p.Encode(context.Background(), Result{Verdicts: []schemas.VerdictEvent{verdict("small", 100)}, Summary: summary})
	if err != nil || len(recs) != 2 {
		t.Fatalf("Encode of a small result = %d records, %v", len(recs), err)
	}
	_, err = p.Encode(context.Background(), Result{Verdicts: []schemas.VerdictEvent{verdict("small", 100), verdict("huge", 1100<<10)}, Summary: summary})
	if !errors.Is(err, stream.ErrTooLarge) || !strings.Contains(err.Error(), `the verdict event of rule "huge"`) {
		t.Fatalf("Encode of a verdict over the topic's limit = %v, want ErrTooLarge naming rule huge", err)
	}
}
