package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"rulevalidator/internal/kafkatest"
	"rulevalidator/producer"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// TestOneRequestIDOnePartition: a request_id written through `rulevalidator produce`, through
// the request writer the API submits with and by confluent-kafka (librdkafka) configured with
// the murmur2_random partitioner lands on one partition, the one the Java client's default
// partitioner picks, so that per-key order holds however a request was sent.
func TestOneRequestIDOnePartition(t *testing.T) {
	t.Parallel()
	bootstrap := kafkatest.Broker(t)
	python := pythonClients(t)
	const partitions = 12
	topic := kafkatest.UniqueTopic(t, "requests")
	kafkatest.CreateTopic(t, bootstrap, topic, partitions)
	schemaDir, err := filepath.Abs("../../schemas")
	if err != nil {
		t.Fatal(err)
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
	submitter, err := producer.NewRequestWriter(ctx, producer.RequestWriterConfig{Client: client, Topic: topic}, serde)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = submitter.Close() })

	ids := []string{"order-1", "order-2", "invoice-2026-0042", "f47ac10b-58cc-4372-a567-0e02b2c3d479", "x"}
	requestFile := opWriteFile(t, "request.json", requestDoc)
	for _, id := range ids {
		if code, _, stderr := opRun(t, "produce", "--file", requestFile, "--kafka-brokers", bootstrap, "--requests-topic", topic, "--request-id", id); code != exitOK {
			t.Fatalf("produce --request-id %s: exit %d\n%s", id, code, stderr)
		}
		if err := submitter.Write(ctx, producer.Submission{Request: exampleRequest(t, id)}); err != nil {
			t.Fatalf("request writer, %s: %v", id, err)
		}
		pyRequest := filepath.Join(t.TempDir(), "request.json")
		if err := os.WriteFile(pyRequest, []byte(jsonText(t, requestRecord(exampleRequest(t, id)))), 0o600); err != nil {
			t.Fatal(err)
		}
		out := runPython(t, python, "produce", "--bootstrap", bootstrap, "--topic", topic, "--schemas", schemaDir,
			"--request", pyRequest, "--partitioner", "murmur2_random")
		var produced struct{ Partition int }
		if err := json.Unmarshal(out, &produced); err != nil {
			t.Fatalf("pyclient.py produce printed %q: %v", out, err)
		}
		if want := stream.Partition([]byte(id), partitions); produced.Partition != want {
			t.Errorf("confluent-kafka put %q on partition %d, murmur2 says %d", id, produced.Partition, want)
		}
	}

	// Read everything back and group by key.
	var (
		mu    sync.Mutex
		where = map[string]map[int]int{} // key → partition → records
		total int
	)
	reader, err := stream.NewReader(stream.ReaderConfig{Client: client, Topics: []string{topic}, Handle: func(_ context.Context, r stream.Record) {
		mu.Lock()
		defer mu.Unlock()
		if where[string(r.Key)] == nil {
			where[string(r.Key)] = map[int]int{}
		}
		where[string(r.Key)][r.Partition]++
		total++
	}})
	if err != nil {
		t.Fatal(err)
	}
	readCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- reader.Run(readCtx) }()
	defer func() {
		stop()
		<-done
	}()
	waitUntil(t, time.Minute, "every record read back", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return total >= 3*len(ids)
	})
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		got := where[id]
		want := stream.Partition([]byte(id), partitions)
		if len(got) != 1 || got[want] != 3 {
			t.Errorf("request_id %q: records by partition %v, want all 3 on partition %d", id, got, want)
		}
	}
	t.Logf("partitions by request_id: %s", fmt.Sprint(where))
}
