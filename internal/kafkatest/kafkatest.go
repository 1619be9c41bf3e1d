// Package kafkatest gives integration tests a real Apache Kafka broker: the single local node
// that ops/kafka.sh runs on 127.0.0.1, or the cluster named by RULEVALIDATOR_KAFKA, shared by
// the tests; and, for a test that restarts its broker, a local broker of the test's own
// (OwnBroker), so that the shared one is never restarted under the other tests.
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
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/internal/backoff"
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

// Own is a local broker of one test's own, started through ops/kafka.sh on free ports with its
// data in the test's temporary directory, for tests that restart the broker: the broker the
// other tests share is never restarted, so they run alongside.
type Own struct {
	// Addr is the broker's bootstrap address.
	Addr string
	env  []string
}

// OwnBroker starts a broker of t's own and stops it when t ends. It needs what Broker's local
// broker needs (Java, the jars ops/kafka.sh fetches once); without them the test is skipped
// with the reason, or fails with RULEVALIDATOR_REQUIRE_INTEGRATION=1. A plain `go test ./...`
// skips it as it skips Broker.
func OwnBroker(t testing.TB) *Own {
	t.Helper()
	if testing.Short() && !opsscript.Required() {
		t.Skip("Kafka integration test skipped under -short")
	}
	if !opsscript.Required() {
		t.Skipf("Kafka integration test skipped: it starts a broker of its own (run ops/test.sh, or set %s=1 to start it from the test)", EnvRequire)
	}
	ports, err := freePorts(2)
	if err != nil {
		opsscript.Unavailable(t, "Kafka", "no free ports for a broker of the test's own: %v", err)
	}
	b := &Own{
		Addr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		env: []string{
			fmt.Sprintf("KAFKA_PORT=%d", ports[0]),
			fmt.Sprintf("KAFKA_CONTROLLER_PORT=%d", ports[1]),
			// The data, pid, lock and log files of this broker alone; the jars stay shared.
			"RULEVALIDATOR_RUN=" + t.TempDir(),
			// A small heap: the broker holds a few test topics.
			"KAFKA_HEAP_OPTS=-Xms128m -Xmx384m",
		},
	}
	began := time.Now()
	if _, _, err := opsscript.RunEnv(startTimeout, b.env, "kafka.sh", "start"); err != nil {
		// A half-started broker is stopped all the same. The error quotes the script's output.
		_, _, _ = opsscript.RunEnv(startTimeout, b.env, "kafka.sh", "stop")
		opsscript.Unavailable(t, "Kafka", "starting a broker of the test's own on %s: %v", b.Addr, err)
	}
	t.Logf("kafkatest: a broker of this test's own on %s, up in %s", b.Addr, time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if _, _, err := opsscript.RunEnv(startTimeout, b.env, "kafka.sh", "stop"); err != nil {
			t.Errorf("stopping the test's broker on %s: %v", b.Addr, err)
		}
	})
	return b
}

// Restart restarts the broker, keeping its data, and waits until it answers again and every
// partition it holds has a leader: a broker answers metadata requests before it has taken the
// leadership of its partitions back, and kafka-go's Writer gives up at once on a partition
// without a leader.
func (b *Own) Restart(t testing.TB) {
	t.Helper()
	if _, _, err := opsscript.RunEnv(startTimeout, b.env, "kafka.sh", "restart"); err != nil {
		t.Fatalf("restarting the test's broker on %s: %v", b.Addr, err)
	}
	// As long as a start may take: on a loaded machine the restarted broker can take well
	// over adminTimeout to lead its partitions again.
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := waitForLeaders(ctx, b.Addr, 0); err != nil {
		t.Fatalf("the test's broker on %s after its restart: %v", b.Addr, err)
	}
}

// freePorts returns n ports on 127.0.0.1 that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// CreateTopic creates topic name with the given number of partitions (replication factor 1)
// and waits until every partition has a leader, so producing right away works. An existing
// topic of that name is accepted. The topic is deleted when the test ends, unless the test
// failed, in which case it is kept for inspection.
//
// Its records are kept however old their timestamps: a record carries its event's time, and
// tests publish events stamped with fixed dates, which the broker's retention (72 hours)
// would otherwise delete at its next check, within a second of their writing.
func CreateTopic(t testing.TB, bootstrap, name string, partitions int) {
	t.Helper()
	CreateTopicWith(t, bootstrap, name, partitions, nil)
}

// CreateTopicWith creates topic name like CreateTopic, with topic configs (such as
// max.message.bytes or cleanup.policy) beside the unlimited retention, which configs may
// override.
func CreateTopicWith(t testing.TB, bootstrap, name string, partitions int, configs map[string]string) {
	t.Helper()
	// Created through kafka-go's default transport on purpose: Writers share its metadata
	// cache, and a create through it refreshes that cache at once. Otherwise a Writer that
	// already talked to this broker fails with UnknownTopicOrPartition until the next refresh.
	client := &kafka.Client{Addr: kafka.TCP(bootstrap)}
	tc := kafka.TopicConfig{Topic: name, NumPartitions: partitions, ReplicationFactor: 1}
	all := map[string]string{"retention.ms": "-1"}
	maps.Copy(all, configs)
	for _, k := range slices.Sorted(maps.Keys(all)) {
		tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: all[k]})
	}

	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	var res *kafka.CreateTopicsResponse
	// A connection pooled before a broker restart (another test's) fails once; a new one
	// is dialled on the next try.
	err := backoff.Policy{Initial: 200 * time.Millisecond, MaxAttempts: 3}.Retry(ctx, func(int) error {
		var err error
		res, err = client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
		return err
	})
	if err == nil {
		if err = res.Errors[name]; errors.Is(err, kafka.TopicAlreadyExists) {
			err = nil
		}
	}
	if err != nil {
		t.Fatalf("creating topic %s on %s with %v: %v", name, bootstrap, all, err)
	}
	t.Cleanup(func() { deleteTopic(t, bootstrap, name) })
	if err := waitForLeaders(ctx, bootstrap, partitions, name); err != nil {
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
	if err := waitForLeaders(ctx, bootstrap, total, name); err != nil {
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

// waitForLeaders waits until every partition of topics (of every topic when none is named) has a
// leader and, when partitions is not 0, until there are that many of them.
func waitForLeaders(ctx context.Context, bootstrap string, partitions int, topics ...string) error {
	began := time.Now()
	err := backoff.Policy{Initial: 100 * time.Millisecond}.Retry(ctx, func(int) error {
		got, err := readPartitions(ctx, bootstrap, topics...)
		if err != nil {
			return err
		}
		if partitions != 0 && len(got) != partitions {
			return fmt.Errorf("metadata shows %d partitions, want %d", len(got), partitions)
		}
		return everyLeader(got)
	})
	if err != nil {
		return fmt.Errorf("partitions without a leader after %s: %w", time.Since(began).Round(time.Second), err)
	}
	return nil
}

func everyLeader(partitions []kafka.Partition) error {
	for _, p := range partitions {
		if p.Error != nil {
			return fmt.Errorf("%s partition %d: %w", p.Topic, p.ID, p.Error)
		}
		if p.Leader.ID < 0 {
			return fmt.Errorf("%s partition %d has no leader yet", p.Topic, p.ID)
		}
	}
	return nil
}

// readPartitions asks the broker itself for the partitions of topics, or of every topic when
// none is named (kafka-go's Client would answer from its cache).
func readPartitions(ctx context.Context, bootstrap string, topics ...string) ([]kafka.Partition, error) {
	conn, err := kafka.DialContext(ctx, "tcp", bootstrap)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(deadline); err != nil {
			return nil, err
		}
	}
	return conn.ReadPartitions(topics...)
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
