package stream_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"rulevalidator/internal/kafkatest"
	"rulevalidator/internal/logbuf"
	"rulevalidator/stream"
)

// TestWriterFollowsTopicLimits: each topic's batch and record limit is its own
// max.message.bytes, read at start. A record a raised topic takes is written; the same record
// to a topic with the default limit fails at once with ErrTooLarge; a topic the cluster does
// not have is refused at start.
func TestWriterFollowsTopicLimits(t *testing.T) {
	bootstrap := kafkatest.Broker(t)
	raised := kafkatest.UniqueTopic(t, "raised")
	plain := kafkatest.UniqueTopic(t, "plain")
	const limit = 3 << 20
	kafkatest.CreateTopicWith(t, bootstrap, raised, 2, map[string]string{"max.message.bytes": strconv.Itoa(limit)})
	kafkatest.CreateTopic(t, bootstrap, plain, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := stream.NewClient(stream.ClientConfig{Brokers: []string{bootstrap}})
	if err != nil {
		t.Fatal(err)
	}
	var acked []stream.Record
	w, err := stream.NewWriter(ctx, stream.WriterConfig{Client: client, Topics: []string{raised, plain},
		Completed: func(rs []stream.Record) { acked = append(acked, rs...) }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got, err := w.MaxRecordBytes(ctx, raised); err != nil || got != limit {
		t.Errorf("MaxRecordBytes(raised) = %d, %v; want %d", got, err, limit)
	}
	big := make([]byte, 2<<20)
	if err := w.Write(ctx, stream.Record{Topic: raised, Key: []byte("k"), Value: big}); err != nil {
		t.Fatalf("writing 2 MiB to a topic that takes 3 MiB: %v", err)
	}
	if len(acked) != 1 || acked[0].Topic != raised || acked[0].Partition != stream.Partition([]byte("k"), 2) {
		t.Errorf("acknowledged %d records, first at %s/%d; want one, on murmur2's partition %d",
			len(acked), acked[0].Topic, acked[0].Partition, stream.Partition([]byte("k"), 2))
	}
	start := time.Now()
	err = w.Write(ctx, stream.Record{Topic: plain, Key: []byte("k"), Value: big})
	if !errors.Is(err, stream.ErrTooLarge) || time.Since(start) > time.Second {
		t.Errorf("writing 2 MiB to a topic with the default limit: %v after %s; want ErrTooLarge at once", err, time.Since(start))
	}
	if _, err := stream.NewWriter(ctx, stream.WriterConfig{Client: client, Topics: []string{kafkatest.UniqueTopic(t, "absent")}}); !errors.Is(err, stream.ErrUnknownTopic) {
		t.Errorf("NewWriter on a missing topic: %v, want ErrUnknownTopic", err)
	}
}

// TestReaderHandlerEndsWithRun: Handle gets a context that ends with Run's, so a handler
// blocked on its own work (a full consumer, a schema registry) returns when the Reader is
// stopped, and Run with it.
func TestReaderHandlerEndsWithRun(t *testing.T) {
	bootstrap := kafkatest.Broker(t)
	topic := kafkatest.UniqueTopic(t, "reader-ctx")
	kafkatest.CreateTopic(t, bootstrap, topic, 1)
	client, err := stream.NewClient(stream.ClientConfig{Brokers: []string{bootstrap}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := stream.NewWriter(t.Context(), stream.WriterConfig{Client: client, Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(t.Context(), stream.Record{Topic: topic, Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}

	handling := make(chan struct{})
	r, err := stream.NewReader(stream.ReaderConfig{Client: client, Topics: []string{topic}, Handle: func(ctx context.Context, _ stream.Record) {
		close(handling)
		<-ctx.Done() // blocked on work of its own until the Reader stops
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	select {
	case <-handling:
	case <-time.After(30 * time.Second):
		t.Fatal("the record was not handed to the handler")
	}
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return once stopped: the handler's context did not end")
	}
}

// TestReaderWaitsOnIdlePartitions: a partition with nothing new is read again on the same
// connection, not taken for a failure: no reconnect and no warning while it is idle, and a
// record written later is still read.
func TestReaderWaitsOnIdlePartitions(t *testing.T) {
	bootstrap := kafkatest.Broker(t)
	topic := kafkatest.UniqueTopic(t, "reader-idle")
	kafkatest.CreateTopic(t, bootstrap, topic, 2)
	client, err := stream.NewClient(stream.ClientConfig{Brokers: []string{bootstrap}})
	if err != nil {
		t.Fatal(err)
	}
	var logs logbuf.Buffer
	got := make(chan stream.Record, 1)
	r, err := stream.NewReader(stream.ReaderConfig{Client: client, Topics: []string{topic},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Handle: func(_ context.Context, rec stream.Record) { got <- rec }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	if err := r.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	logs.Reset()                // a topic just created may have had no leader yet
	time.Sleep(5 * time.Second) // ten fetch waits on each empty partition
	if s := logs.String(); s != "" {
		t.Errorf("warnings while the partitions were idle:\n%s", s)
	}
	w, err := stream.NewWriter(t.Context(), stream.WriterConfig{Client: client, Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(t.Context(), stream.Record{Topic: topic, Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	select {
	case rec := <-got:
		if string(rec.Value) != "v" {
			t.Errorf("read %q, want the record written", rec.Value)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the record written after the idle time was not read")
	}
	cancel()
	if err := <-ran; err != nil {
		t.Errorf("Run: %v", err)
	}
}
