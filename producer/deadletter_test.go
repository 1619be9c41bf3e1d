package producer

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"rulevalidator/consumer"
	"rulevalidator/internal/kafkatest"
	"rulevalidator/internal/s3test"
	"rulevalidator/objstore"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// TestOversizedRequestIsDeadLetteredAtOnce: on a requests topic whose max.message.bytes is
// raised for large documents, a request over 1 MiB that fails permanently is dead-lettered on
// its first attempt, although it does not fit the dead-letter topic: its original is kept in
// object storage (claim check) or, without storage, truncated with its length and SHA-256
// recorded. The next request on the partition then completes.
func TestOversizedRequestIsDeadLetteredAtOnce(t *testing.T) {
	for _, withStorage := range []bool{true, false} {
		name := "truncated"
		if withStorage {
			name = "claim check"
		}
		t.Run(name, func(t *testing.T) { testOversizedDeadLetter(t, withStorage) })
	}
}

func testOversizedDeadLetter(t *testing.T, withStorage bool) {
	bootstrap := kafkatest.Broker(t)
	requests := kafkatest.UniqueTopic(t, "requests")
	deadLetters := kafkatest.UniqueTopic(t, "deadletter")
	verdicts := kafkatest.UniqueTopic(t, "verdicts")
	summaries := kafkatest.UniqueTopic(t, "summaries")
	kafkatest.CreateTopicWith(t, bootstrap, requests, 1, map[string]string{"max.message.bytes": strconv.Itoa(8 << 20)})
	for _, topic := range []string{deadLetters, verdicts, summaries} {
		kafkatest.CreateTopic(t, bootstrap, topic, 1) // the broker's default limit, about 1 MiB
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := stream.NewClient(stream.ClientConfig{Brokers: []string{bootstrap}})
	if err != nil {
		t.Fatal(err)
	}
	serde, err := schemas.NewSerde(ctx, schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Client: client, VerdictTopic: verdicts, SummaryTopic: summaries, DeadLetterTopic: deadLetters, Logger: slog.New(slog.DiscardHandler)}
	if withStorage {
		cfg.Objects = s3test.Store(t)
	}
	prod, err := New(ctx, cfg, serde)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	// The large request and a small one behind it, through the stream writer, whose batch
	// limit follows the topic's raised max.message.bytes.
	large := make([]byte, 2<<20)
	if _, err := rand.Read(large); err != nil {
		t.Fatal(err)
	}
	w, err := stream.NewWriter(ctx, stream.WriterConfig{Client: client, Topics: []string{requests}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(ctx,
		stream.Record{Topic: requests, Key: []byte("large"), Value: large, Headers: []stream.Header{{Key: HeaderTraceparent, Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}},
		stream.Record{Topic: requests, Key: []byte("small"), Value: []byte("fine")},
	); err != nil {
		t.Fatalf("writing the requests: %v", err)
	}

	var (
		mu       sync.Mutex
		attempts = map[string]int{}
		handled  = map[string]bool{}
	)
	handler := consumer.Chain(func(_ context.Context, m *consumer.Message) error {
		mu.Lock()
		defer mu.Unlock()
		attempts[string(m.Key)]++
		if string(m.Key) == "large" {
			return consumer.Permanent(string(schemas.ReasonOversized), errors.New("the request is over the input limit"))
		}
		handled[string(m.Key)] = true
		return nil
	}, consumer.Retry(consumer.RetryPolicy{Initial: 50 * time.Millisecond}, nil), consumer.DeadLetter(prod, nil), consumer.Recover(nil))
	commits := make(chan int64, 16)
	cons, err := consumer.New(consumer.Config{
		GroupConfig:    stream.GroupConfig{Client: client, GroupID: kafkatest.UniqueTopic(t, "group"), Topic: requests},
		CommitInterval: 50 * time.Millisecond,
		Hooks:          consumer.Hooks{Committed: func(_ int, off int64) { commits <- off }},
	}, handler)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cons.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("consumer: %v", err)
		}
	}()
	for committed := int64(0); committed < 2; {
		select {
		case committed = <-commits:
		case <-ctx.Done():
			t.Fatal("the partition's commit point never passed both requests")
		}
	}
	mu.Lock()
	if attempts["large"] != 1 || !handled["small"] {
		t.Errorf("attempts %v, handled %v: want the large request tried once and the small one handled", attempts, handled)
	}
	mu.Unlock()

	// The dead letter, read back.
	got := make(chan stream.Record, 1)
	reader, err := stream.NewReader(stream.ReaderConfig{Client: client, Topics: []string{deadLetters}, Handle: func(_ context.Context, r stream.Record) { got <- r }})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = reader.Run(runCtx) }()
	var rec stream.Record
	select {
	case rec = <-got:
	case <-ctx.Done():
		t.Fatal("no dead letter")
	}
	header := func(k string) string { v, _ := stream.HeaderValue(rec.Headers, k); return string(v) }
	sum := sha256.Sum256(large)
	if header(HeaderDLQValueSHA256) != hex.EncodeToString(sum[:]) || header(HeaderDLQValueBytes) != strconv.Itoa(len(large)) {
		t.Errorf("headers say %s bytes, SHA-256 %s; want %d and %x", header(HeaderDLQValueBytes), header(HeaderDLQValueSHA256), len(large), sum)
	}
	if header(HeaderDLQReasonRV) != "oversized" || header(HeaderTraceparent) == "" {
		t.Errorf("reason %q, traceparent %q", header(HeaderDLQReasonRV), header(HeaderTraceparent))
	}
	schemaHeaders := make([]schemas.Header, len(rec.Headers))
	for i, h := range rec.Headers {
		schemaHeaders[i] = schemas.Header(h)
	}
	ev, err := serde.Decode(ctx, deadLetters, rec.Value, schemaHeaders)
	if err != nil {
		t.Fatalf("decoding the dead letter: %v", err)
	}
	dl := ev.(*schemas.DeadLetter)
	if dl.OriginalOffset != 0 || string(dl.OriginalKey) != "large" || dl.Reason != schemas.ReasonOversized {
		t.Errorf("dead letter %+v", dl)
	}
	if withStorage {
		uri := header(HeaderDLQValueURI)
		_, key, err := objstore.ParseURI(uri)
		if err != nil {
			t.Fatalf("the claim check %q: %v", uri, err)
		}
		stored, err := cfg.Objects.(*objstore.Store).GetBytes(ctx, key)
		if err != nil {
			t.Fatalf("reading the claim check %q: %v", uri, err)
		}
		if !bytes.Equal(stored, large) || len(dl.OriginalValue) != 0 || !bytes.Contains([]byte(dl.Message), []byte(uri)) {
			t.Errorf("claim check %q holds %d bytes (equal: %v); original_value %d bytes; message %q",
				uri, len(stored), bytes.Equal(stored, large), len(dl.OriginalValue), dl.Message)
		}
		return
	}
	kept, err := strconv.Atoi(header(HeaderDLQValueTruncated))
	if err != nil || kept <= 0 || kept >= len(large) || !bytes.Equal(dl.OriginalValue, large[:kept]) {
		t.Errorf("truncated header %q, original_value %d bytes: want a non-empty prefix of the original", header(HeaderDLQValueTruncated), len(dl.OriginalValue))
	}
	if want := fmt.Sprintf("truncated to its first %d bytes", kept); !bytes.Contains([]byte(dl.Message), []byte(want)) {
		t.Errorf("message %q does not say %q", dl.Message, want)
	}
}
