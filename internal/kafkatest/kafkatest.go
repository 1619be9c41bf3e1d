// Package kafkatest gives integration tests a real Apache Kafka broker: the single local node
// that ops/kafka.sh runs on 127.0.0.1, or the cluster named by RULEVALIDATOR_KAFKA.
//
// When no broker can be had the test is skipped with the reason, so that a plain `go test ./...`
// stays green on a machine without Java; RULEVALIDATOR_REQUIRE_INTEGRATION=1 turns those skips
// into failures, for CI and the full local test run.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/internal/opsscript"
)

const (
	// EnvBroker names an existing bootstrap address (host:port) to use instead of the local broker.
	EnvBroker = "RULEVALIDATOR_KAFKA"
	// EnvRequire set to 1 makes a missing broker fail the test instead of skipping it.
	EnvRequire = opsscript.EnvRequire

	// startTimeout covers the first run, which downloads the Kafka jars from Maven Central.
	startTimeout = 10 * time.Minute
	// adminTimeout bounds each admin round (create, wait for leaders, delete).
	adminTimeout = 30 * time.Second
	// maxTopicLen is Kafka's limit on topic names.
	maxTopicLen = 249
)

// Broker returns the bootstrap address of the broker for integration tests. With
// RULEVALIDATOR_KAFKA set it checks that address answers; otherwise it starts the local broker
// through ops/kafka.sh (a no-op when it already runs). When neither works, or with -short, the
// test is skipped with the reason, unless RULEVALIDATOR_REQUIRE_INTEGRATION=1.
func Broker(t testing.TB) string {
	t.Helper()
	if testing.Short() && !opsscript.Required() {
		t.Skip("Kafka integration test skipped under -short")
	}
	if addr := os.Getenv(EnvBroker); addr != "" {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		if err := ping(ctx, addr); err != nil {
			opsscript.Unavailable(t, "Kafka", "%s=%s does not answer a metadata request: %v", EnvBroker, addr, err)
		}
		return addr
	}
	if !opsscript.Required() {
		// A plain `go test ./...` runs unit tests only; ops/test.sh sets
		// RULEVALIDATOR_REQUIRE_INTEGRATION=1 and the broker is started here.
		t.Skipf("Kafka integration test skipped: no broker configured (run ops/test.sh, set %s=1 to start the local broker from the test, or set %s=host:port)", EnvRequire, EnvBroker)
	}
	out, messages, err := opsscript.Run(startTimeout, "kafka.sh", "start")
	if err != nil {
		opsscript.Unavailable(t, "Kafka", "no local Kafka broker: %v", err)
	}
	t.Logf("kafkatest: ops/kafka.sh start:\n%s", strings.TrimRight(messages, "\n"))
	addr := lastLine(out)
	if addr == "" {
		opsscript.Unavailable(t, "Kafka", "ops/kafka.sh start printed no bootstrap address")
	}
	return addr
}

// Restart restarts the local broker, keeping its data, and waits until it answers again.
// The broker is shared with every test package that runs at the same time, and their clients
// see the restart too, so keep restart tests few. A broker from RULEVALIDATOR_KAFKA is not
// ours to restart: the test is skipped (or fails, with RULEVALIDATOR_REQUIRE_INTEGRATION=1).
func Restart(t testing.TB) {
	t.Helper()
	if addr := os.Getenv(EnvBroker); addr != "" {
		opsscript.Unavailable(t, "Kafka", "%s=%s names an external broker, which this test can't restart", EnvBroker, addr)
	}
	if _, _, err := opsscript.Run(startTimeout, "kafka.sh", "restart"); err != nil {
		t.Fatalf("restarting the local Kafka broker: %v", err)
	}
}

// CreateTopic creates topic name with the given number of partitions (replication factor 1)
// and waits until every partition has a leader, so producing right away works. An existing
// topic of that name is accepted. The topic is deleted when the test ends, unless the test
// failed, in which case it is kept for inspection.
func CreateTopic(t testing.TB, bootstrap, name string, partitions int) {
	t.Helper()
	// Created through kafka-go's default transport on purpose: Writers share its metadata
	// cache, and a create through it refreshes that cache at once. Otherwise a Writer that
	// already talked to this broker fails with UnknownTopicOrPartition until the next refresh.
	client := &kafka.Client{Addr: kafka.TCP(bootstrap)}

	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	var (
		res *kafka.CreateTopicsResponse
		err error
	)
	// A connection pooled before a broker restart (another test's) fails once; a new one
	// is dialled on the next try.
	for attempt := 1; attempt <= 3; attempt++ {
		res, err = client.CreateTopics(ctx, &kafka.CreateTopicsRequest{
			Topics: []kafka.TopicConfig{{Topic: name, NumPartitions: partitions, ReplicationFactor: 1}},
		})
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("creating topic %s on %s: %v", name, bootstrap, err)
	}
	if err := res.Errors[name]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		t.Fatalf("creating topic %s on %s: %v", name, bootstrap, err)
	}
	t.Cleanup(func() { deleteTopic(t, bootstrap, name) })

	if err := waitForLeaders(ctx, bootstrap, name, partitions); err != nil {
		t.Fatalf("topic %s on %s: %v", name, bootstrap, err)
	}
}

// AddPartitions grows topic to total partitions and waits until every one has a leader.
func AddPartitions(t testing.TB, bootstrap, name string, total int) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(bootstrap)}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	res, err := client.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{
		Topics: []kafka.TopicPartitionsConfig{{Name: name, Count: int32(total)}},
	})
	if err == nil && len(res.Errors) > 0 {
		err = res.Errors[name]
	}
	if err != nil {
		t.Fatalf("growing topic %s on %s to %d partitions: %v", name, bootstrap, total, err)
	}
	if err := waitForLeaders(ctx, bootstrap, name, total); err != nil {
		t.Fatalf("topic %s on %s: %v", name, bootstrap, err)
	}
}

// CreateTopicWith creates topic name like CreateTopic, with topic configs (such as
// max.message.bytes or cleanup.policy).
func CreateTopicWith(t testing.TB, bootstrap, name string, partitions int, configs map[string]string) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(bootstrap)}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	tc := kafka.TopicConfig{Topic: name, NumPartitions: partitions, ReplicationFactor: 1}
	for k, v := range configs {
		tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: v})
	}
	res, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
	if err == nil {
		err = res.Errors[name]
	}
	if err != nil {
		t.Fatalf("creating topic %s on %s with %v: %v", name, bootstrap, configs, err)
	}
	t.Cleanup(func() { deleteTopic(t, bootstrap, name) })
	if err := waitForLeaders(ctx, bootstrap, name, partitions); err != nil {
		t.Fatalf("topic %s on %s: %v", name, bootstrap, err)
	}
}

// SetTopicConfig sets topic configs (such as max.message.bytes) on an existing topic.
func SetTopicConfig(t testing.TB, bootstrap, name string, configs map[string]string) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(bootstrap)}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	res := kafka.IncrementalAlterConfigsRequestResource{ResourceType: kafka.ResourceTypeTopic, ResourceName: name}
	for k, v := range configs {
		res.Configs = append(res.Configs, kafka.IncrementalAlterConfigsRequestConfig{Name: k, Value: v, ConfigOperation: kafka.ConfigOperationSet})
	}
	out, err := client.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{Resources: []kafka.IncrementalAlterConfigsRequestResource{res}})
	if err == nil {
		for _, r := range out.Resources {
			if r.Error != nil {
				err = r.Error
			}
		}
	}
	if err != nil {
		t.Fatalf("setting %v on topic %s on %s: %v", configs, name, bootstrap, err)
	}
}

// UniqueTopic returns a topic name made of prefix, the test's name and a random suffix, valid
// for Kafka and unique to this call. It serves as a unique consumer group id just as well.
func UniqueTopic(t testing.TB, prefix string) string {
	t.Helper()
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatalf("random topic suffix: %v", err)
	}
	tail := "-" + hex.EncodeToString(suffix)
	name := sanitize(prefix) + "-" + sanitize(t.Name())
	if len(name) > maxTopicLen-len(tail) {
		name = name[:maxTopicLen-len(tail)]
	}
	return name + tail
}

// sanitize keeps the characters Kafka allows in topic names and replaces the rest with '-'.
// '.' and '_' are replaced too: Kafka treats names that differ only by them as colliding.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-':
			return r
		default:
			return '-'
		}
	}, s)
}

func waitForLeaders(ctx context.Context, bootstrap, name string, partitions int) error {
	for {
		err := leadersReady(ctx, bootstrap, name, partitions)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("partitions without a leader after %s: %w", adminTimeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// leadersReady asks the broker itself (kafka-go's Client would answer from its cache).
func leadersReady(ctx context.Context, bootstrap, name string, partitions int) error {
	conn, err := kafka.DialContext(ctx, "tcp", bootstrap)
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(deadline); err != nil {
			return err
		}
	}
	got, err := conn.ReadPartitions(name)
	if err != nil {
		return err
	}
	if len(got) != partitions {
		return fmt.Errorf("metadata shows %d partitions, want %d", len(got), partitions)
	}
	for _, p := range got {
		if p.Error != nil {
			return fmt.Errorf("partition %d: %w", p.ID, p.Error)
		}
		if p.Leader.ID < 0 {
			return fmt.Errorf("partition %d has no leader yet", p.ID)
		}
	}
	return nil
}

func deleteTopic(t testing.TB, bootstrap, name string) {
	if t.Failed() {
		t.Logf("kafkatest: keeping topic %s on %s for inspection", name, bootstrap)
		return
	}
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(bootstrap), Transport: transport}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	res, err := client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{name}})
	if err == nil {
		err = res.Errors[name]
	}
	if err != nil {
		// Leftover test topics are harmless; say so and move on.
		t.Logf("kafkatest: deleting topic %s on %s: %v", name, bootstrap, err)
	}
}

// ping asks addr for cluster metadata, which only a working Kafka broker answers.
func ping(ctx context.Context, addr string) error {
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(addr), Transport: transport}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return err
	}
	if len(meta.Brokers) == 0 {
		return errors.New("the metadata lists no brokers")
	}
	return nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
