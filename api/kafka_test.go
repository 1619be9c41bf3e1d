package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/internal/kafkatest"
	"rulevalidator/jobfeed"
	"rulevalidator/jobs"
	"rulevalidator/producer"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestSubmitThroughKafka: a validation posted in broker mode lands on the
// requests topic as an Avro request keyed by its id, with the token's tenant
// and the caller's trace context; once the serve pipeline's events appear on
// the summary and verdict topics, GET answers with the result.
func TestSubmitThroughKafka(t *testing.T) {
	broker := kafkatest.Broker(t)
	requests := kafkatest.UniqueTopic(t, "requests")
	summaries := kafkatest.UniqueTopic(t, "summaries")
	verdicts := kafkatest.UniqueTopic(t, "verdicts")
	for _, topic := range []string{requests, summaries, verdicts} {
		kafkatest.CreateTopic(t, broker, topic, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	serde, err := schemas.NewSerde(ctx, schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	client := testClient(t, broker)
	submitter, err := producer.NewRequestWriter(ctx, producer.RequestWriterConfig{Client: client, Topic: requests}, serde)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = submitter.Close() })

	store := jobs.NewMemoryStore(jobs.MemoryStoreConfig{})
	feed, err := jobfeed.New(jobfeed.Config{Client: client, SummaryTopic: summaries, VerdictTopic: verdicts, Serde: serde, Store: store, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	feedCtx, stopFeed := context.WithCancel(context.Background())
	feedDone := make(chan error, 1)
	go func() { feedDone <- feed.Run(feedCtx) }()
	t.Cleanup(func() {
		stopFeed()
		if err := <-feedDone; err != nil {
			t.Errorf("feed.Run: %v", err)
		}
	})
	select {
	case <-feed.Ready():
	case <-ctx.Done():
		t.Fatal("job feed not ready within a minute")
	}

	id := newIdentity(t)
	_, ts := serve(t, Config{Verifier: id.verifier, Submitter: kafkaSubmitter{submitter}, Jobs: store})
	token := id.token(t, "acme")
	r := call(t, http.MethodPost, ts.URL+"/v1/validations", token, validationBody("req-k1"), "traceparent", testTraceparent)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST: %s", r)
	}

	// The message on the requests topic.
	reader := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: requests, Partition: 0, MaxWait: 100 * time.Millisecond})
	t.Cleanup(func() { _ = reader.Close() })
	msg, err := reader.FetchMessage(ctx)
	if err != nil {
		t.Fatalf("reading the requests topic: %v", err)
	}
	if string(msg.Key) != "req-k1" {
		t.Errorf("key %q, want the request id", msg.Key)
	}
	headers := map[string]string{}
	var schemaHeaders []schemas.Header
	for _, h := range msg.Headers {
		headers[h.Key] = string(h.Value)
		schemaHeaders = append(schemaHeaders, schemas.Header{Key: h.Key, Value: h.Value})
	}
	if headers[producer.HeaderTraceparent] != testTraceparent || headers[producer.HeaderTenant] != "acme" {
		t.Errorf("headers %v: want traceparent %s and tenant acme", headers, testTraceparent)
	}
	ev, err := serde.Decode(ctx, requests, msg.Value, schemaHeaders)
	if err != nil {
		t.Fatalf("decoding the request: %v", err)
	}
	req, ok := ev.(*schemas.Request)
	if !ok {
		t.Fatalf("decoded a %T", ev)
	}
	if req.RequestID != "req-k1" || req.TenantID != "acme" || req.InlineRuleset == nil || req.SubmittedAt.IsZero() {
		t.Errorf("request read back: %+v", req)
	}
	if g := decodeJob(t, call(t, http.MethodGet, ts.URL+"/v1/validations/req-k1", token, nil)); g.Status != "pending" {
		t.Errorf("before any event: %s", g.Status)
	}

	// What the serve pipeline publishes for it, through the real producer.
	out, err := passAll(ctx, req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	deadLetters := kafkatest.UniqueTopic(t, "deadletter")
	kafkatest.CreateTopic(t, broker, deadLetters, 1)
	prod, err := producer.New(ctx, producer.Config{
		Client: client, SummaryTopic: summaries, VerdictTopic: verdicts,
		DeadLetterTopic: deadLetters, Logger: quietLogger(),
	}, serde)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prod.Close() })
	msgs, err := prod.Encode(ctx, producer.Result{Verdicts: out.Verdicts, Summary: out.Summary})
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.Write(ctx, msgs); err != nil {
		t.Fatalf("publishing the outcome: %v", err)
	}

	done := pollDone(t, ts.URL+"/v1/validations/req-k1", token)
	if done.Status != "completed" || done.Result == nil || len(done.Result.Verdicts) != 2 || done.Result.Summary.Counts.Rules != 2 {
		t.Errorf("job after the events: %+v", done)
	}
	if *done.SubmittedAt != req.SubmittedAt.UTC().Format(schemas.TimeLayout) {
		t.Errorf("submitted_at %s, want %s", *done.SubmittedAt, req.SubmittedAt.UTC().Format(schemas.TimeLayout))
	}
	if r := call(t, http.MethodGet, ts.URL+"/v1/validations/req-k1", id.token(t, "globex"), nil); r.status != http.StatusNotFound {
		t.Errorf("another tenant: %s", r)
	}
}

// A broker that cannot take the request leaves no job behind and answers 503.
func TestSubmitBrokerDown(t *testing.T) {
	serde, err := schemas.NewSerde(context.Background(), schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	submitter, err := producer.NewRequestWriter(context.Background(), producer.RequestWriterConfig{Client: testClient(t, "127.0.0.1:1"), WriteTimeout: 500 * time.Millisecond}, serde)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = submitter.Close() })
	id := newIdentity(t)
	_, ts := serve(t, Config{Verifier: id.verifier, Submitter: kafkaSubmitter{submitter}, RequestTimeout: 2 * time.Second})
	token := id.token(t, "acme")
	r := call(t, http.MethodPost, ts.URL+"/v1/validations", token, validationBody("req-down"))
	if r.status != http.StatusServiceUnavailable || r.errorCode() != CodeUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("POST with the broker down: %s", r)
	}
	if g := call(t, http.MethodGet, ts.URL+"/v1/validations/req-down", token, nil); g.status != http.StatusNotFound {
		t.Errorf("GET after a failed submission: %s", g)
	}
}

// kafkaSubmitter is the API's Submitter on a requests topic, as serve wires
// it (cmd/rulevalidator's requestSubmitter, which also maps a request too
// large for the topic to ErrRequestTooLarge): the request written as every
// producer of requests writes it, its trace context as headers.
type kafkaSubmitter struct{ w *producer.RequestWriter }

func (s kafkaSubmitter) Submit(ctx context.Context, sub Submission) error {
	return s.w.Write(ctx, producer.Submission{Request: sub.Request, Trace: producer.TraceHeaders(sub.Traceparent, sub.Tracestate)})
}

func testClient(t *testing.T, brokers ...string) *stream.Client {
	t.Helper()
	c, err := stream.NewClient(stream.ClientConfig{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
