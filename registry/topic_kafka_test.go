package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/internal/kafkatest"
	"rulevalidator/stream"
)

// createCompactedTopic creates a topic with cleanup.policy=compact, as the
// ruleset topic is in production. kafkatest.CreateTopic takes no topic
// configs, so the topic is created here first; kafkatest then accepts it as
// existing, waits for its leaders and deletes it when the test ends.
func createCompactedTopic(t *testing.T, bootstrap, name string, partitions int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// kafka-go's default transport, as kafkatest uses, so Writers see the topic at once.
	client := &kafka.Client{Addr: kafka.TCP(bootstrap)}
	res, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: name, NumPartitions: partitions, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
	}}})
	if err == nil {
		err = res.Errors[name]
	}
	if err != nil {
		t.Fatalf("creating compacted topic %s: %v", name, err)
	}
	kafkatest.CreateTopic(t, bootstrap, name, partitions)

	described, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: name, ConfigNames: []string{"cleanup.policy"},
	}}})
	if err != nil {
		t.Fatalf("describing topic %s: %v", name, err)
	}
	for _, r := range described.Resources {
		for _, c := range r.ConfigEntries {
			if c.ConfigName == "cleanup.policy" && c.ConfigValue != "compact" {
				t.Fatalf("topic %s has cleanup.policy=%s, want compact", name, c.ConfigValue)
			}
		}
	}
}

// writeRaw writes records as an upstream producer would, partitioned by key
// like Publish.
func writeRaw(ctx context.Context, t *testing.T, bootstrap, topic string, msgs ...kafka.Message) {
	t.Helper()
	w := &kafka.Writer{
		Addr: kafka.TCP(bootstrap), Topic: topic, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond,
	}
	defer w.Close()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("writing to %s: %v", topic, err)
	}
}

func TestTopicAgainstBroker(t *testing.T) {
	bootstrap := kafkatest.Broker(t)
	topic := kafkatest.UniqueTopic(t, "rulesets")
	createCompactedTopic(t, bootstrap, topic, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Published before the source starts: two versions of one ruleset, a
	// ruleset then its tombstone, and two records that must be skipped.
	for _, rs := range []struct{ id, version string }{
		{"contract-review", "1"}, {"contract-review", "2"}, {"retired", "1"},
	} {
		if err := Publish(ctx, testClient(t, bootstrap), topic, newRuleset(rs.id, rs.version)); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	writeRaw(ctx, t, bootstrap, topic,
		kafka.Message{Key: []byte("retired")}, // tombstone
		kafka.Message{Key: []byte("broken"), Value: []byte("id: broken\nrules: 3\n")},
		kafka.Message{Key: []byte("mislabelled"), Value: rulesetJSON(t, newRuleset("mislabelled", "1")),
			Headers: []kafka.Header{{Key: VersionHeader, Value: []byte("2")}}},
	)

	logger, logs := testLogger(t)
	tp, err := NewTopic(TopicConfig{Client: testClient(t, bootstrap), Topic: topic, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tp.Run(runCtx) }()
	defer func() {
		stop()
		<-done
	}()

	start := time.Now()
	if err := tp.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	t.Logf("read to the end in %s", time.Since(start).Round(time.Millisecond))
	// Straight from the store, without Resolve's own wait: WaitReady must
	// not return before everything published earlier is in.
	if rs, err := tp.lookup("contract-review", ""); err != nil || ruleText(rs) != "rule of contract-review version 2" {
		t.Fatalf("latest contract-review right after WaitReady = %q, %v; want version 2", ruleText(rs), err)
	}
	wantResolves(t, tp, "contract-review", "1", "rule of contract-review version 1")
	wantUnknown(t, tp, "retired", "", `unknown ruleset "retired"`)
	wantUnknown(t, tp, "contract-review", "9", `unknown ruleset "contract-review" version "9" (known versions: "1", "2")`)
	wantUnknown(t, tp, "mislabelled", "", `unknown ruleset "mislabelled"`)
	for _, want := range []string{
		`ruleset_id=broken err="ruleset \"broken\": rules: must be an array (got a number)"`,
		`ruleset_id=mislabelled err="the ruleset's version \"1\" differs from the rv-ruleset-version header \"2\""`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	for _, e := range tp.List() {
		if !strings.HasPrefix(e.Source, topic+"/") {
			t.Errorf("entry %s@%s has source %q, want topic/partition/offset", e.ID, e.Version, e.Source)
		}
	}

	// A version published while running is picked up.
	if err := Publish(ctx, testClient(t, bootstrap), topic, newRuleset("contract-review", "3")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	published := time.Now()
	for {
		rs, err := tp.Resolve(ctx, "contract-review", "")
		if err == nil && ruleText(rs) == "rule of contract-review version 3" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("version 3 not picked up: latest is %q, %v", ruleText(rs), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("version 3 picked up %s after publishing", time.Since(published).Round(time.Millisecond))
	wantResolves(t, tp, "contract-review", "2", "rule of contract-review version 2")

	stop()
	select {
	case err := <-done:
		done <- err // for the deferred receive
		if err != nil {
			t.Errorf("Run returned %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context ending")
	}
}

// TestTopicEmptyIsReady: a topic with nothing in it is read to the end at once.
func TestTopicEmptyIsReady(t *testing.T) {
	bootstrap := kafkatest.Broker(t)
	topic := kafkatest.UniqueTopic(t, "rulesets")
	createCompactedTopic(t, bootstrap, topic, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	logger, _ := testLogger(t)
	tp, err := NewTopic(TopicConfig{Client: testClient(t, bootstrap), Topic: topic, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tp.Run(runCtx) }()
	defer func() {
		stop()
		<-done
	}()

	if err := tp.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	wantUnknown(t, tp, "anything", "", `unknown ruleset "anything"`)
}

// TestTopicMissing: a topic that does not exist keeps the source from being
// ready, and WaitReady says so when its context ends.
func TestTopicMissing(t *testing.T) {
	bootstrap := kafkatest.Broker(t)
	topic := kafkatest.UniqueTopic(t, "absent")
	logger, logs := testLogger(t)
	tp, err := NewTopic(TopicConfig{Client: testClient(t, bootstrap), Topic: topic, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tp.Run(runCtx) }()
	defer func() {
		stop()
		<-done
	}()

	waitCtx, cancelWait := context.WithTimeout(ctx, time.Second)
	defer cancelWait()
	err = tp.WaitReady(waitCtx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "partitions not listed yet") {
		t.Errorf("WaitReady on a missing topic = %v, want a deadline error saying the partitions are not listed", err)
	}
	if !strings.Contains(logs.String(), "cannot list the partitions") || !strings.Contains(logs.String(), "no such topic") {
		t.Errorf("the missing topic was not logged:\n%s", logs)
	}
}

// TestTopicFollowsAddedPartitions: a ruleset published to a partition added to the topic
// after the source started is picked up without a restart.
func TestTopicFollowsAddedPartitions(t *testing.T) {
	bootstrap := kafkatest.Broker(t)
	topic := kafkatest.UniqueTopic(t, "rulesets")
	createCompactedTopic(t, bootstrap, topic, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logger, _ := testLogger(t)
	tp, err := NewTopic(TopicConfig{Client: testClient(t, bootstrap), Topic: topic, Logger: logger, PartitionRefresh: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tp.Run(runCtx) }()
	defer func() {
		stop()
		<-done
	}()
	if err := tp.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}

	const partitions = 4
	kafkatest.AddPartitions(t, bootstrap, topic, partitions)
	id := ""
	for i := 0; id == ""; i++ {
		if candidate := fmt.Sprintf("added-%d", i); stream.Partition([]byte(candidate), partitions) != 0 {
			id = candidate
		}
	}
	// A client of its own, whose metadata already shows the added partitions.
	if err := Publish(ctx, testClient(t, bootstrap), topic, newRuleset(id, "1")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rs, err := tp.Resolve(ctx, id, "")
		if err == nil {
			if rs.Version != "1" {
				t.Errorf("resolved version %q", rs.Version)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ruleset %s on an added partition not picked up: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, e := range tp.List() {
		if e.ID == id && e.Source == topic+"/0/0" {
			t.Errorf("ruleset %s read from partition 0; it was written to partition %d", id, stream.Partition([]byte(id), partitions))
		}
	}
}
