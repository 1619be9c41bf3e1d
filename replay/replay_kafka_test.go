package replay

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"rulevalidator/internal/kafkatest"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// kafkaEnv is one test's topics on the test broker.
type kafkaEnv struct {
	client                          *stream.Client
	serde                           *schemas.Serde
	deadLetters, requests, progress string
}

func newKafkaEnv(t *testing.T) *kafkaEnv {
	t.Helper()
	bootstrap := kafkatest.Broker(t)
	e := &kafkaEnv{
		serde:       newSerde(t),
		deadLetters: kafkatest.UniqueTopic(t, "deadletter"),
		requests:    kafkatest.UniqueTopic(t, "requests"),
		progress:    kafkatest.UniqueTopic(t, "replays"),
	}
	kafkatest.CreateTopic(t, bootstrap, e.deadLetters, 1)
	kafkatest.CreateTopic(t, bootstrap, e.requests, 2)
	kafkatest.CreateTopicWith(t, bootstrap, e.progress, 1, map[string]string{"cleanup.policy": "compact"})
	c, err := stream.NewClient(stream.ClientConfig{Brokers: []string{bootstrap}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e.client = c
	return e
}

// write writes records, each to its topic, waiting for every acknowledgement.
func (e *kafkaEnv) write(t *testing.T, recs ...stream.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := stream.NewWriter(ctx, stream.WriterConfig{Client: e.client, Topics: []string{e.deadLetters}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range recs {
		recs[i].Topic = e.deadLetters
	}
	if err := w.Write(ctx, recs...); err != nil {
		t.Fatal(err)
	}
}

// read reads topic to its end.
func (e *kafkaEnv) read(t *testing.T, topic string) []stream.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		mu   sync.Mutex
		recs []stream.Record
	)
	if err := readToEnd(ctx, e.client, topic, nil, func(r stream.Record) {
		mu.Lock()
		recs = append(recs, r)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

func (e *kafkaEnv) run(t *testing.T, f Filter, dryRun bool, each func(Outcome) error) ([]Outcome, Report, error) {
	t.Helper()
	var outs []Outcome
	rep, err := Run(context.Background(), Config{
		Client: e.client, Serde: e.serde,
		DeadLetterTopic: e.deadLetters, RequestsTopic: e.requests, ProgressTopic: e.progress,
		Filter: f, DryRun: dryRun,
	}, func(o Outcome) error {
		outs = append(outs, o)
		if each != nil {
			return each(o)
		}
		return nil
	})
	return outs, rep, err
}

func statuses(outs []Outcome) map[string]Status {
	m := map[string]Status{}
	for _, o := range outs {
		m[o.RequestID()] = o.Status
	}
	return m
}

// TestRunResumesAndNeverSendsTwice: on the real broker, a dry run sends nothing; a replay
// stopped after its first send resumes with the second; a repeat, by the same selection or a
// wider one, sends nothing already sent; a dead letter of another tenant is left to another
// selection, which sends it.
func TestRunResumesAndNeverSendsTwice(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t)
	var recs []stream.Record
	for i, r := range []*schemas.Request{request("a-1", "acme", "rs"), request("a-2", "acme", "rs"), request("g-1", "globex", "rs")} {
		recs = append(recs, requestDeadLetter(t, e.serde, int64(i), schemas.ReasonUnknownRuleset, r))
	}
	recs = append(recs, deadLetterRecord(t, e.serde, 3, schemas.ReasonUndecodable, "junk", []byte("junk"), nil))
	e.write(t, recs...)
	acme := Filter{Reasons: []schemas.Reason{schemas.ReasonUnknownRuleset}, Tenant: "acme"}

	outs, rep, err := e.run(t, acme, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(outs); len(got) != 2 || got["a-1"] != StatusReplayable || got["a-2"] != StatusReplayable || rep.Read != 4 || rep.Selected != 2 {
		t.Fatalf("dry run: %v, %+v", got, rep)
	}
	if n := len(e.read(t, e.requests)); n != 0 {
		t.Fatalf("a dry run sent %d requests", n)
	}

	stop := errors.New("interrupted")
	outs, _, err = e.run(t, acme, false, func(o Outcome) error {
		if o.Status == StatusSent {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || len(outs) != 1 || outs[0].RequestID() != "a-1" || outs[0].Status != StatusSent {
		t.Fatalf("interrupted run: %v, %v", err, statuses(outs))
	}

	outs, rep, err = e.run(t, acme, false, nil)
	if got := statuses(outs); err != nil || got["a-1"] != StatusReplayed || got["a-2"] != StatusSent || rep.ByStatus[StatusSent] != 1 {
		t.Fatalf("resumed run: %v, %v", got, err)
	}

	// Every dead letter: only globex's is left to send; the undecodable one never is.
	outs, _, err = e.run(t, Filter{}, false, nil)
	want := map[string]Status{"a-1": StatusReplayed, "a-2": StatusReplayed, "g-1": StatusSent, "junk": StatusNotReplayable}
	if got := statuses(outs); err != nil || len(got) != len(want) || got["a-1"] != want["a-1"] || got["a-2"] != want["a-2"] || got["g-1"] != want["g-1"] || got["junk"] != want["junk"] {
		t.Fatalf("every dead letter: %v, %v; want %v", got, err, want)
	}
	outs, _, err = e.run(t, Filter{}, false, nil)
	if got := statuses(outs); err != nil || got["g-1"] != StatusReplayed {
		t.Fatalf("again: %v, %v", got, err)
	}

	sent := e.read(t, e.requests)
	byKey := map[string]int{}
	for _, r := range sent {
		byKey[string(r.Key)]++
		if n, err := schemas.ReplayCount(r.Headers); err != nil || n != 1 {
			t.Errorf("request %s sent with replay count %d, %v", r.Key, n, err)
		}
	}
	if len(sent) != 3 || byKey["a-1"] != 1 || byKey["a-2"] != 1 || byKey["g-1"] != 1 {
		t.Errorf("sent %v, want each of a-1, a-2, g-1 once", byKey)
	}
	if markers := e.read(t, e.progress); len(markers) != 3 {
		t.Errorf("%d markers, want 3", len(markers))
	}
}

// TestRunRefusesWithoutAProgressTopic: a replay needs its progress topic; a dry run reads
// none as nothing replayed.
func TestRunRefusesWithoutAProgressTopic(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t)
	e.progress += "-missing"
	e.write(t, requestDeadLetter(t, e.serde, 0, schemas.ReasonUnknownRuleset, request("a-1", "acme", "rs")))
	if _, _, err := e.run(t, Filter{}, false, nil); !errors.Is(err, stream.ErrUnknownTopic) {
		t.Fatalf("replay without the progress topic: %v", err)
	}
	outs, rep, err := e.run(t, Filter{}, true, nil)
	if err != nil || !rep.NoProgressTopic || len(outs) != 1 || outs[0].Status != StatusReplayable {
		t.Fatalf("dry run without the progress topic: %v, %+v, %v", err, rep, statuses(outs))
	}
}
