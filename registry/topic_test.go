package registry

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/internal/logbuf"
	"rulevalidator/stream"
)

func newTestTopic(t *testing.T) (*Topic, *logbuf.Buffer) {
	t.Helper()
	logger, logs := testLogger(t)
	tp, err := NewTopic(TopicConfig{Client: testClient(t, "127.0.0.1:1"), Topic: "rulesets", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	return tp, logs
}

// markRead makes tp behave as if Run had read its one partition to the end.
func markRead(tp *Topic) { close(tp.loaded) }

func testClient(t *testing.T, brokers ...string) *stream.Client {
	t.Helper()
	c, err := stream.NewClient(stream.ClientConfig{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func rulesetJSON(t *testing.T, rs *engine.Ruleset) []byte {
	t.Helper()
	data, err := json.Marshal(rs)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// record is a record on partition 0 at offset, written at second offset.
func record(offset int64, key string, value []byte, headers ...stream.Header) stream.Record {
	return stream.Record{
		Partition: 0, Offset: offset, Key: []byte(key), Value: value, Headers: headers,
		Time: time.Unix(1_700_000_000+offset, 0),
	}
}

func TestTopicRecords(t *testing.T) {
	tp, logs := newTestTopic(t)
	markRead(tp)
	v := func(id, version string) []byte { return rulesetJSON(t, newRuleset(id, version)) }
	noVersion := v("review", "")

	for _, msg := range []stream.Record{
		record(0, "review", v("review", "1")),
		record(1, "review", v("review", "2")),
		record(2, "review", noVersion, stream.Header{Key: VersionHeader, Value: []byte("3-from-header")}),
		// Rejected: the header contradicts the ruleset's own version.
		record(3, "review", v("review", "4"), stream.Header{Key: VersionHeader, Value: []byte("5")}),
		// Rejected: the key is not the ruleset's id.
		record(4, "review", v("other", "1")),
		// Rejected: not a valid ruleset.
		record(5, "review", []byte(`{"id": "review", "version": "6", "rules": []}`)),
		// Rejected: no key.
		record(6, "", v("review", "7")),
		// An older version published again is the most recent record: it is the latest.
		record(7, "doc", v("doc", "2")),
		record(8, "doc", v("doc", "1")),
		// A tombstone deletes the id; a later record brings it back.
		record(9, "gone", v("gone", "1")),
		record(10, "gone", nil),
		record(11, "back", v("back", "1")),
		record(12, "back", nil),
		record(13, "back", v("back", "2")),
		// The id may be left out of the value: the key gives it.
		record(14, "keyed", []byte(`{"version": "1", "rules": [{"rule_id": "r1", "rule_text": "keyed by the record"}]}`)),
	} {
		tp.apply(t.Context(), msg)
	}

	wantResolves(t, tp, "review", "", "rule of review version ")
	wantResolves(t, tp, "review", "3-from-header", "rule of review version ")
	wantResolves(t, tp, "review", "1", "rule of review version 1")
	wantUnknown(t, tp, "review", "4", `unknown ruleset "review" version "4" (known versions: "1", "2", "3-from-header")`)
	wantResolves(t, tp, "doc", "", "rule of doc version 1")
	wantResolves(t, tp, "doc", "2", "rule of doc version 2")
	wantUnknown(t, tp, "gone", "", `unknown ruleset "gone"`)
	wantUnknown(t, tp, "gone", "1", `unknown ruleset "gone" version "1"`)
	wantResolves(t, tp, "back", "", "rule of back version 2")
	wantUnknown(t, tp, "back", "1", `unknown ruleset "back" version "1" (known versions: "2")`)
	wantResolves(t, tp, "keyed", "1", "keyed by the record")
	wantUnknown(t, tp, "other", "", `unknown ruleset "other"`)

	out := logs.String()
	for _, want := range []string{
		`offset=3 ruleset_id=review err="the ruleset's version \"4\" differs from the rv-ruleset-version header \"5\""`,
		`offset=4 ruleset_id=review err="the ruleset's id \"other\" differs from the record key \"review\""`,
		`offset=5 ruleset_id=review err="ruleset \"review\": rules: no rules: give at least one"`,
		`no key (the ruleset id)" ruleset_topic=rulesets partition=0 offset=6`,
		"ruleset deleted by a tombstone",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}

	var listed []string
	for _, e := range tp.List() {
		listed = append(listed, e.ID+"@"+e.Version+" "+e.Source)
	}
	want := []string{
		"back@2 rulesets/0/13", "doc@1 rulesets/0/8", "doc@2 rulesets/0/7", "keyed@1 rulesets/0/14",
		"review@1 rulesets/0/0", "review@2 rulesets/0/1", "review@3-from-header rulesets/0/2",
	}
	if strings.Join(listed, "\n") != strings.Join(want, "\n") {
		t.Errorf("List():\n%s\nwant:\n%s", strings.Join(listed, "\n"), strings.Join(want, "\n"))
	}
}

// TestTopicOrdersPartitionsByTime: an id found in two partitions takes the
// record written last as its latest, whichever partition is read first.
func TestTopicOrdersPartitionsByTime(t *testing.T) {
	tp, _ := newTestTopic(t)
	markRead(tp)
	at := func(partition int, offset, unix int64, version string, value []byte) stream.Record {
		return stream.Record{Partition: partition, Offset: offset, Key: []byte("review"), Value: value, Time: time.Unix(unix, 0)}
	}
	v := func(version string) []byte { return rulesetJSON(t, newRuleset("review", version)) }

	tp.apply(t.Context(), at(1, 0, 200, "2", v("2")))
	tp.apply(t.Context(), at(0, 50, 100, "1", v("1"))) // read later, written earlier
	wantResolves(t, tp, "review", "", "rule of review version 2")
	wantResolves(t, tp, "review", "1", "rule of review version 1")

	tp.apply(t.Context(), at(0, 51, 150, "", nil)) // a stale tombstone
	wantResolves(t, tp, "review", "", "rule of review version 2")
	tp.apply(t.Context(), at(0, 52, 300, "", nil)) // a newer one
	wantUnknown(t, tp, "review", "", `unknown ruleset "review"`)
	tp.apply(t.Context(), at(1, 1, 250, "3", v("3"))) // older than the tombstone
	wantUnknown(t, tp, "review", "", `unknown ruleset "review"`)
}

// TestTopicWaitsUntilRead: before the topic is read to the end, a latest or
// unknown reference is not reported unknown; it waits, and fails with the
// context when that ends first.
func TestTopicWaitsUntilRead(t *testing.T) {
	tp, _ := newTestTopic(t)
	tp.apply(t.Context(), record(0, "review", rulesetJSON(t, newRuleset("review", "1"))))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	for _, version := range []string{"", "9"} {
		_, err := tp.Resolve(ctx, "review", version)
		if err == nil || errors.Is(err, ErrUnknownRuleset) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Resolve(review, %q) while loading = %v; want the context's error, not ErrUnknownRuleset", version, err)
		}
	}
	const want = "not read to the end yet (partitions not listed yet)"
	if err := tp.WaitReady(ctx); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("WaitReady = %v, want an error saying %q", err, want)
	}
	// A pinned version already read needs no wait.
	wantResolves(t, tp, "review", "1", "rule of review version 1")

	// Resolve blocks until the topic is read to the end, then answers.
	answered := make(chan error, 1)
	go func() {
		_, err := tp.Resolve(context.Background(), "review", "9")
		answered <- err
	}()
	markRead(tp)
	select {
	case err := <-answered:
		if !errors.Is(err, ErrUnknownRuleset) {
			t.Errorf("Resolve(review, 9) once read = %v, want ErrUnknownRuleset", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Resolve still waiting after the topic was read to the end")
	}
	if err := tp.WaitReady(context.Background()); err != nil {
		t.Errorf("WaitReady once read = %v", err)
	}
}

func TestNewTopicRejects(t *testing.T) {
	tests := []struct {
		name string
		cfg  TopicConfig
		want string
	}{
		{"no client", TopicConfig{Topic: "t"}, "registry: TopicConfig.Client is nil"},
		{"no topic", TopicConfig{Client: testClient(t, "127.0.0.1:9092")}, "registry: TopicConfig.Topic is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewTopic(tt.cfg); err == nil || err.Error() != tt.want {
				t.Errorf("NewTopic error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestPublishRejects(t *testing.T) {
	invalid := newRuleset("review", "1")
	invalid.Rules = []engine.Rule{}
	tests := []struct {
		name    string
		brokers string
		topic   string
		rs      *engine.Ruleset
		want    string
	}{
		{"nil", "127.0.0.1:9092", "t", nil, "registry: publish: no ruleset given"},
		{"no id", "127.0.0.1:9092", "t", newRuleset("", "1"), "registry: publish: invalid ruleset: the ruleset has no id, and the id is the record key"},
		{"invalid", "127.0.0.1:9092", "t", invalid, `registry: publish ruleset "review" version "1": ruleset "review": rules: no rules: give at least one`},
		{"no topic", "127.0.0.1:9092", "", newRuleset("review", "1"), "registry: publish: no topic given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Nothing listens on the address: these must fail before any write.
			err := Publish(context.Background(), testClient(t, tt.brokers), tt.topic, tt.rs)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Publish error %v, want %q", err, tt.want)
			}
		})
	}
}
