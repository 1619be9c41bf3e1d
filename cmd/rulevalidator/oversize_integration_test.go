package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"rulevalidator/internal/kafkatest"
	"rulevalidator/internal/s3test"
	"rulevalidator/objstore"
	"rulevalidator/producer"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// TestServeOversizedRequestDeadLettered: the requests topic's max.message.bytes is raised for
// large documents; a request of over 2 MiB, past --max-input-bytes, is dead-lettered on its
// first attempt although it is larger than the dead-letter topic takes: the dead letter names
// the original's copy in object storage, with its length and SHA-256. The request behind it
// on the partition is judged and everything is committed.
func TestServeOversizedRequestDeadLettered(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 1)
	kafkatest.SetTopicConfig(t, e.bootstrap, e.requests, map[string]string{"max.message.bytes": strconv.Itoa(8 << 20)})
	store := s3test.Store(t)
	endpoint, accessKey, secretKey := s3test.Endpoint(t)
	summaryLog := e.watch(t, e.summaries, 1)
	deadLog := e.watch(t, e.deadLetters, 1)

	big := exampleRequest(t, "big-request")
	big.PrimaryDocs = append(big.PrimaryDocs, schemas.Document{Name: "annex.txt", Content: ptr(strings.Repeat("Annex clause, repeated at length. ", 70_000))})
	after := exampleRequest(t, "after-big")
	var recs []stream.Record
	for _, req := range []*schemas.Request{big, after} {
		m := e.requestMessage(t, req)
		r := stream.Record{Topic: e.requests, Key: m.Key, Value: m.Value}
		for _, h := range m.Headers {
			r.Headers = append(r.Headers, stream.Header{Key: h.Key, Value: h.Value})
		}
		recs = append(recs, r)
	}
	if len(recs[0].Value) < 2<<20 {
		t.Fatalf("the big request is %d bytes, want over 2 MiB", len(recs[0].Value))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := stream.NewWriter(ctx, stream.WriterConfig{Client: e.client(t), Topics: []string{e.requests}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(ctx, recs...); err != nil {
		t.Fatalf("writing the requests: %v", err)
	}

	e.startInProcess(t, "--max-input-bytes", strconv.Itoa(1<<20),
		"--s3-endpoint", endpoint, "--s3-access-key", accessKey, "--s3-secret-key", secretKey, "--s3-bucket", store.Bucket())
	waitUntil(t, waitLimit, "the dead letter", func() bool { return deadLog.len() >= 1 })
	waitUntil(t, waitLimit, "both summaries", func() bool { return summaryLog.len() >= 2 })
	e.waitCommittedToEnd(t)

	m := deadLog.snapshot()[0]
	dl := e.deadLetter(t, m)
	sum := sha256.Sum256(recs[0].Value)
	uri, _ := header(m, producer.HeaderDLQValueURI)
	digest, _ := header(m, producer.HeaderDLQValueSHA256)
	size, _ := header(m, producer.HeaderDLQValueBytes)
	if dl.Reason != schemas.ReasonOversized || dl.Attempts != 1 || dl.OriginalOffset != 0 || len(dl.OriginalValue) != 0 ||
		digest != hex.EncodeToString(sum[:]) || size != strconv.Itoa(len(recs[0].Value)) || !strings.Contains(dl.Message, uri) {
		t.Errorf("dead letter: reason %s, attempts %d, offset %d, original_value %d bytes, headers uri %q sha256 %q bytes %q; message %q",
			dl.Reason, dl.Attempts, dl.OriginalOffset, len(dl.OriginalValue), uri, digest, size, dl.Message)
	}
	_, key, err := objstore.ParseURI(uri)
	if err != nil {
		t.Fatalf("the claim check %q: %v", uri, err)
	}
	stored, err := store.GetBytes(ctx, key)
	if err != nil {
		t.Fatalf("reading the claim check %s: %v", uri, err)
	}
	if !bytes.Equal(stored, recs[0].Value) {
		t.Errorf("the stored original is %d bytes and differs from the %d-byte request", len(stored), len(recs[0].Value))
	}
	statuses := map[string]schemas.Status{}
	for _, sm := range summaryLog.snapshot() {
		s := e.summary(t, sm)
		statuses[s.RequestID] = s.Status
	}
	if statuses["big-request"] != schemas.StatusFailed || statuses["after-big"] != schemas.StatusCompleted {
		t.Errorf("summaries %v: want big-request failed and after-big completed", statuses)
	}
	if seen := ticketsSeen(e.llm); seen["big-request"] != 0 || seen["after-big"] != 1 {
		t.Errorf("the model saw %v: want only after-big, once", seen)
	}
}
