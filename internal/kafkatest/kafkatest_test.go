package kafkatest_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/internal/kafkatest"
)

// validTopic is Kafka's rule for topic names.
var validTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func TestUniqueTopic(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
	}{
		{name: "plain", prefix: "requests"},
		{name: "subtest with spaces/and slashes", prefix: "verdicts"},
		{name: "dots_and.underscores", prefix: "rulevalidator.summaries"},
		{name: strings.Repeat("long", 100), prefix: "deadletter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := kafkatest.UniqueTopic(t, tt.prefix)
			second := kafkatest.UniqueTopic(t, tt.prefix)
			for _, got := range []string{first, second} {
				if !validTopic.MatchString(got) {
					t.Errorf("UniqueTopic(%q) = %q, not a valid Kafka topic name", tt.prefix, got)
				}
				if strings.ContainsAny(got, "._") {
					t.Errorf("UniqueTopic(%q) = %q mixes '.' or '_', which Kafka treats as colliding", tt.prefix, got)
				}
			}
			if first == second {
				t.Errorf("UniqueTopic(%q) returned %q twice", tt.prefix, first)
			}
		})
	}
}

// TestProduceConsume proves the local broker works with kafka-go the way the service uses it:
// acks=all writes, and a consumer group that fetches and then commits.
func TestProduceConsume(t *testing.T) {
	bootstrap := kafkatest.Broker(t)
	topic := kafkatest.UniqueTopic(t, "kafkatest")
	group := kafkatest.UniqueTopic(t, "group")
	kafkatest.CreateTopic(t, bootstrap, topic, 3)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	want := kafka.Message{
		Key:     []byte("request-1"),
		Value:   []byte(`{"document":"invoice 42"}`),
		Headers: []kafka.Header{{Key: "content-type", Value: []byte("application/json")}},
	}
	writer := newWriter(bootstrap, topic)
	defer writer.Close()
	if err := writer.WriteMessages(ctx, want); err != nil {
		t.Fatalf("writing to %s: %v", topic, err)
	}

	reader := newReader(bootstrap, topic, group)
	defer reader.Close()
	got, err := reader.FetchMessage(ctx)
	if err != nil {
		t.Fatalf("fetching from %s: %v", topic, err)
	}
	if string(got.Key) != string(want.Key) || string(got.Value) != string(want.Value) {
		t.Errorf("got key %q value %q, want key %q value %q", got.Key, got.Value, want.Key, want.Value)
	}
	if len(got.Headers) != 1 || got.Headers[0].Key != "content-type" || string(got.Headers[0].Value) != "application/json" {
		t.Errorf("got headers %v, want content-type: application/json", got.Headers)
	}
	if err := reader.CommitMessages(ctx, got); err != nil {
		t.Fatalf("committing offset %d of %s/%d: %v", got.Offset, topic, got.Partition, err)
	}
	if committed := committedOffset(ctx, t, bootstrap, group, topic, got.Partition); committed != got.Offset+1 {
		t.Errorf("group %s committed offset %d on %s/%d, want %d", group, committed, topic, got.Partition, got.Offset+1)
	}
}

// TestRestartKeepsDataAndOffsets produces before a broker restart and consumes after it: the
// messages and the consumer group's committed offset must both survive. The broker is the
// test's own, started and restarted by ops/kafka.sh as the shared one is.
func TestRestartKeepsDataAndOffsets(t *testing.T) {
	t.Parallel()
	broker := kafkatest.OwnBroker(t)
	bootstrap := broker.Addr
	topic := kafkatest.UniqueTopic(t, "kafkatest")
	group := kafkatest.UniqueTopic(t, "group")
	kafkatest.CreateTopic(t, bootstrap, topic, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	writer := newWriter(bootstrap, topic)
	if err := writer.WriteMessages(ctx,
		kafka.Message{Key: []byte("k"), Value: []byte("before-1")},
		kafka.Message{Key: []byte("k"), Value: []byte("before-2")},
	); err != nil {
		t.Fatalf("writing to %s before the restart: %v", topic, err)
	}
	writer.Close()

	reader := newReader(bootstrap, topic, group)
	first := fetch(ctx, t, reader)
	if string(first.Value) != "before-1" {
		t.Fatalf("first message before the restart = %q, want before-1", first.Value)
	}
	if err := reader.CommitMessages(ctx, first); err != nil {
		t.Fatalf("committing before the restart: %v", err)
	}
	reader.Close()

	broker.Restart(t)

	writer = newWriter(bootstrap, topic)
	defer writer.Close()
	if err := writer.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte("after-1")}); err != nil {
		t.Fatalf("writing to %s after the restart: %v", topic, err)
	}

	// The same group resumes after its committed offset: before-2, then the new message.
	reader = newReader(bootstrap, topic, group)
	defer reader.Close()
	for _, want := range []string{"before-2", "after-1"} {
		if got := fetch(ctx, t, reader); string(got.Value) != want {
			t.Fatalf("after the restart got %q, want %q", got.Value, want)
		}
	}
}

// newWriter writes through a transport of its own: kafka-go's default transport shares the
// metadata it cached, and one cached while a broker restarted names no leader for a while.
func newWriter(bootstrap, topic string) *kafka.Writer {
	return &kafka.Writer{
		Addr:         kafka.TCP(bootstrap),
		Transport:    &kafka.Transport{},
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond,
		MaxAttempts:  20,
	}
}

func newReader(bootstrap, topic, group string) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{
		Brokers:     []string{bootstrap},
		Topic:       topic,
		GroupID:     group,
		StartOffset: kafka.FirstOffset,
		MaxWait:     100 * time.Millisecond,
	})
}

func fetch(ctx context.Context, t *testing.T, r *kafka.Reader) kafka.Message {
	t.Helper()
	msg, err := r.FetchMessage(ctx)
	if err != nil {
		t.Fatalf("fetching from %s: %v", r.Config().Topic, err)
	}
	return msg
}

// committedOffset asks the broker directly, not the reader, what the group has committed.
func committedOffset(ctx context.Context, t *testing.T, bootstrap, group, topic string, partition int) int64 {
	t.Helper()
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(bootstrap), Transport: transport}
	res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{
		GroupID: group,
		Topics:  map[string][]int{topic: {partition}},
	})
	if err != nil {
		t.Fatalf("fetching the committed offset of group %s: %v", group, err)
	}
	if res.Error != nil {
		t.Fatalf("fetching the committed offset of group %s: %v", group, res.Error)
	}
	for _, p := range res.Topics[topic] {
		if p.Partition == partition {
			if p.Error != nil {
				t.Fatalf("committed offset of group %s on %s/%d: %v", group, topic, partition, p.Error)
			}
			return p.CommittedOffset
		}
	}
	t.Fatalf("group %s has no committed offset on %s/%d", group, topic, partition)
	return 0
}
