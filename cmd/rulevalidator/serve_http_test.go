package main

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/api"
	"rulevalidator/internal/kafkatest"
	"rulevalidator/producer"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// fakeRequestWriter records what it is asked to write and answers err.
type fakeRequestWriter struct {
	subs []producer.Submission
	err  error
}

func (w *fakeRequestWriter) Write(_ context.Context, subs ...producer.Submission) error {
	w.subs = append(w.subs, subs...)
	return w.err
}

// TestHTTPRequestSubmitter: the API's submission is written with its trace
// context as the producer's trace headers (none without a traceparent); a
// request too large for the topic is refused as api.ErrRequestTooLarge,
// keeping the cause; any other failure is not.
func TestHTTPRequestSubmitter(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req := &schemas.Request{RequestID: "req-1", TenantID: tenant}
	for _, tc := range []struct {
		name   string
		sub    api.Submission
		traced []stream.Header
	}{
		{"traceparent and tracestate", api.Submission{Request: req, Traceparent: tp, Tracestate: "vendor=1"}, producer.TraceHeaders(tp, "vendor=1")},
		{"traceparent alone", api.Submission{Request: req, Traceparent: tp}, producer.TraceHeaders(tp, "")},
		{"no trace context", api.Submission{Request: req}, nil},
	} {
		w := &fakeRequestWriter{}
		if err := (requestSubmitter{w}).Submit(context.Background(), tc.sub); err != nil {
			t.Fatalf("%s: Submit: %v", tc.name, err)
		}
		if len(w.subs) != 1 || w.subs[0].Request != req || !reflect.DeepEqual(w.subs[0].Trace, tc.traced) {
			t.Errorf("%s: wrote %+v, want the request with trace %v", tc.name, w.subs, tc.traced)
		}
	}

	tooLarge := fmt.Errorf("producer: writing request %q to requests: %w", "req-1", stream.ErrTooLarge)
	err := (requestSubmitter{&fakeRequestWriter{err: tooLarge}}).Submit(context.Background(), api.Submission{Request: req})
	if !errors.Is(err, api.ErrRequestTooLarge) || !errors.Is(err, stream.ErrTooLarge) || !strings.Contains(err.Error(), `writing request "req-1"`) {
		t.Errorf("a request too large for the topic: %v, want api.ErrRequestTooLarge with its cause", err)
	}
	down := errors.New("broker down")
	if err := (requestSubmitter{&fakeRequestWriter{err: down}}).Submit(context.Background(), api.Submission{Request: req}); !errors.Is(err, down) || errors.Is(err, api.ErrRequestTooLarge) {
		t.Errorf("a broker down: %v, want its error as it is", err)
	}
}

// TestHTTPRequestSubmitterOnKafka: through the real request writer, a
// submission lands on the requests topic keyed by its request id with its
// tenant and trace context; one over the topic's max.message.bytes is
// refused as api.ErrRequestTooLarge, which the API answers 413.
func TestHTTPRequestSubmitterOnKafka(t *testing.T) {
	bootstrap := kafkatest.Broker(t)
	requests := kafkatest.UniqueTopic(t, "requests")
	kafkatest.CreateTopicWith(t, bootstrap, requests, 1, map[string]string{"max.message.bytes": strconv.Itoa(64 << 10)})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	serde, err := schemas.NewSerde(ctx, schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	client, err := stream.NewClient(stream.ClientConfig{Brokers: []string{bootstrap}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := producer.NewRequestWriter(ctx, producer.RequestWriterConfig{Client: client, Topic: requests}, serde)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sub := requestSubmitter{w}

	request := func(id, text string) *schemas.Request {
		return &schemas.Request{RequestID: id, TenantID: tenant, RulesetRef: &schemas.RulesetRef{ID: exampleRulesetID},
			PrimaryDocs: []schemas.Document{{Name: "contract.txt", Pages: []string{text}}}, SubmittedAt: time.Now().UTC().Truncate(time.Millisecond)}
	}
	tp := traceparentFor("req-small")
	if err := sub.Submit(ctx, api.Submission{Request: request("req-small", "Signed."), Traceparent: tp, Tracestate: "vendor=1"}); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	err = sub.Submit(ctx, api.Submission{Request: request("req-big", strings.Repeat("Signed. ", 16<<10))})
	if !errors.Is(err, api.ErrRequestTooLarge) {
		t.Fatalf("Submit of a request over the topic's limit: %v, want api.ErrRequestTooLarge", err)
	}

	reader := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{bootstrap}, Topic: requests, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer reader.Close()
	msg, err := reader.FetchMessage(ctx)
	if err != nil {
		t.Fatalf("reading the requests topic: %v", err)
	}
	if string(msg.Key) != "req-small" {
		t.Errorf("key %q, want the request id", msg.Key)
	}
	for key, want := range map[string]string{producer.HeaderTenant: tenant, producer.HeaderTraceparent: tp, producer.HeaderTracestate: "vendor=1"} {
		if got, ok := header(msg, key); !ok || got != want {
			t.Errorf("header %s = %q (%v), want %q", key, got, ok, want)
		}
	}
	ev, err := serde.Decode(ctx, requests, msg.Value, schemaHeadersOf(msg))
	if err != nil {
		t.Fatalf("decoding the request: %v", err)
	}
	if req, ok := ev.(*schemas.Request); !ok || req.RequestID != "req-small" || req.TenantID != tenant {
		t.Errorf("request read back: %+v", ev)
	}
	short, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	if extra, err := reader.FetchMessage(short); err == nil {
		t.Errorf("a second record on the requests topic: key %q", extra.Key)
	}
}
