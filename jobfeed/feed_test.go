package jobfeed

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"rulevalidator/internal/kafkatest"
	"rulevalidator/jobs"
	"rulevalidator/producer"
	"rulevalidator/schemas"
	"rulevalidator/stream"
	"rulevalidator/verdict"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testClient(t *testing.T, brokers ...string) *stream.Client {
	t.Helper()
	c, err := stream.NewClient(stream.ClientConfig{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFeedFollowsAddedPartitions: events written to a partition added to the summary
// topic after the feed started reach the store without a restart.
func TestFeedFollowsAddedPartitions(t *testing.T) {
	broker := kafkatest.Broker(t)
	summaries := kafkatest.UniqueTopic(t, "summaries")
	verdicts := kafkatest.UniqueTopic(t, "verdicts")
	deadLetters := kafkatest.UniqueTopic(t, "deadletter")
	for _, topic := range []string{summaries, verdicts, deadLetters} {
		kafkatest.CreateTopic(t, broker, topic, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	serde, err := schemas.NewSerde(ctx, schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	store := jobs.NewMemoryStore(jobs.MemoryStoreConfig{})
	feed, err := New(Config{Client: testClient(t, broker), SummaryTopic: summaries, VerdictTopic: verdicts,
		Serde: serde, Store: store, Logger: quietLogger(), PartitionRefresh: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runFeed(t, ctx, feed)

	const partitions = 3
	kafkatest.AddPartitions(t, broker, summaries, partitions)
	id := ""
	for i := 0; id == ""; i++ {
		if candidate := fmt.Sprintf("req-added-%d", i); stream.Partition([]byte(candidate), partitions) != 0 {
			id = candidate
		}
	}
	req := &schemas.Request{RequestID: id, TenantID: "acme", RulesetRef: &schemas.RulesetRef{ID: "r"}}
	summary := schemas.NewFailedSummary(req, schemas.ReasonUnknownRuleset, "no ruleset r", time.Now(), time.Now())
	// A client of its own, whose metadata already shows the added partitions.
	prod, err := producer.New(ctx, producer.Config{
		Client: testClient(t, broker), SummaryTopic: summaries, VerdictTopic: verdicts, DeadLetterTopic: deadLetters, Logger: quietLogger(),
	}, serde)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	msgs, err := prod.Encode(ctx, producer.Result{Summary: summary})
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.Write(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if job, ok, _ := store.Get(t.Context(), "acme", id); ok && job.Summary != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the summary written to partition %d of the grown topic never reached the job store", stream.Partition([]byte(id), partitions))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFeedTellsOnVerdict: each verdict the feed records is also handed to
// OnVerdict (serve queues those needing review from there).
func TestFeedTellsOnVerdict(t *testing.T) {
	broker := kafkatest.Broker(t)
	summaries := kafkatest.UniqueTopic(t, "summaries")
	verdicts := kafkatest.UniqueTopic(t, "verdicts")
	deadLetters := kafkatest.UniqueTopic(t, "deadletter")
	for _, topic := range []string{summaries, verdicts, deadLetters} {
		kafkatest.CreateTopic(t, broker, topic, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	serde, err := schemas.NewSerde(ctx, schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan schemas.VerdictEvent, 1)
	feed, err := New(Config{Client: testClient(t, broker), SummaryTopic: summaries, VerdictTopic: verdicts,
		Serde: serde, Store: jobs.NewMemoryStore(jobs.MemoryStoreConfig{}), Logger: quietLogger(),
		OnVerdict: func(_ context.Context, v schemas.VerdictEvent) { seen <- v }})
	if err != nil {
		t.Fatal(err)
	}
	runFeed(t, ctx, feed)
	prod, err := producer.New(ctx, producer.Config{
		Client: testClient(t, broker), SummaryTopic: summaries, VerdictTopic: verdicts, DeadLetterTopic: deadLetters, Logger: quietLogger(),
	}, serde)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	v := verdictEvent("acme", "req-v", "signed", 0)
	v.NeedsReview, v.ReviewReasons, v.Confidence = true, []string{"low_confidence"}, new(0.3)
	msgs, err := prod.Encode(ctx, producer.Result{Verdicts: []schemas.VerdictEvent{v}, Summary: summary("acme", "req-v", schemas.StatusCompleted, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.Write(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-seen:
		if got.RuleID != "signed" || !got.NeedsReview || *got.Confidence != 0.3 {
			t.Errorf("OnVerdict got %+v", got)
		}
	case <-ctx.Done():
		t.Fatal("OnVerdict was not called within a minute")
	}
}

func verdictEvent(tenant, requestID, ruleID string, index int) schemas.VerdictEvent {
	return schemas.VerdictEvent{
		EventID: schemas.VerdictEventID(tenant, requestID, ruleID), RequestID: requestID, TenantID: tenant,
		RuleID: ruleID, RuleType: verdict.Boolean, RuleIndex: index, RuleCount: 2,
	}
}

func summary(tenant, requestID string, status schemas.Status, rules int) schemas.SummaryEvent {
	return schemas.SummaryEvent{EventID: requestID, RequestID: requestID, TenantID: tenant, Status: status, Counts: schemas.Counts{Rules: rules}}
}

// runFeed runs feed until the end of the test and waits until it is ready (ctx bounds the
// wait).
func runFeed(t *testing.T, ctx context.Context, feed *Feed) {
	t.Helper()
	feedCtx, stopFeed := context.WithCancel(ctx)
	feedDone := make(chan error, 1)
	go func() { feedDone <- feed.Run(feedCtx) }()
	t.Cleanup(func() {
		stopFeed()
		<-feedDone
	})
	select {
	case <-feed.Ready():
	case <-ctx.Done():
		t.Fatal("job feed not ready within a minute")
	}
}
