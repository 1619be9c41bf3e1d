package consumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/internal/kafkatest"
	"rulevalidator/stream"
)

// waitTimeout bounds every wait in these tests; they normally finish far sooner.
const waitTimeout = 60 * time.Second

// env is one test's topic and group on the real broker.
type env struct {
	bootstrap, topic, group string
	partitions              int
}

func newEnv(t *testing.T, partitions int) env {
	t.Helper()
	return newEnvOn(t, kafkatest.Broker(t), partitions)
}

// newEnvOn is newEnv on the broker at bootstrap.
func newEnvOn(t *testing.T, bootstrap string, partitions int) env {
	t.Helper()
	topic := kafkatest.UniqueTopic(t, "consumer")
	kafkatest.CreateTopic(t, bootstrap, topic, partitions)
	return env{bootstrap: bootstrap, topic: topic, group: kafkatest.UniqueTopic(t, "group"), partitions: partitions}
}

func (e env) config(t *testing.T) Config {
	client, err := stream.NewClient(stream.ClientConfig{Brokers: []string{e.bootstrap}})
	if err != nil {
		t.Fatalf("stream.NewClient: %v", err)
	}
	return Config{
		GroupConfig:    stream.GroupConfig{Client: client, GroupID: e.group, Topic: e.topic, Logger: testLogger(t)},
		CommitInterval: 50 * time.Millisecond,
		DrainTimeout:   10 * time.Second,
	}
}

// record is a message to produce to a chosen partition, with its tenant in tenantHeader
// when it names one.
type record struct {
	partition          int
	key, value, tenant string
}

// tenantHeader is the header the tests name a record's tenant in.
const tenantHeader = "tenant"

// produce writes records, each to its partition, and waits for the broker to acknowledge them.
func (e env) produce(t *testing.T, records ...record) {
	t.Helper()
	// A transport of its own: the shared one caches metadata, and would not see partitions
	// added a moment ago.
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	w := &kafka.Writer{
		Addr:         kafka.TCP(e.bootstrap),
		Transport:    transport,
		Topic:        e.topic,
		Balancer:     kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return m.Partition }),
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond,
	}
	defer w.Close()
	msgs := make([]kafka.Message, len(records))
	for i, r := range records {
		msgs[i] = kafka.Message{Partition: r.partition, Value: []byte(r.value)}
		if r.key != "" {
			msgs[i].Key = []byte(r.key)
		}
		if r.tenant != "" {
			msgs[i].Headers = []kafka.Header{{Key: tenantHeader, Value: []byte(r.tenant)}}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("producing %d records to %s: %v", len(msgs), e.topic, err)
	}
}

// spread returns n keyless records, round-robin over the partitions, valued "v<i>".
func (e env) spread(n int) []record {
	out := make([]record, n)
	for i := range out {
		out[i] = record{partition: i % e.partitions, value: fmt.Sprintf("v%d", i)}
	}
	return out
}

// committed asks the broker for the group's committed offset in every partition (-1: none).
func (e env) committed(t *testing.T) map[int]int64 {
	t.Helper()
	parts := make([]int, e.partitions)
	for i := range parts {
		parts[i] = i
	}
	client := &kafka.Client{Addr: kafka.TCP(e.bootstrap)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: e.group, Topics: map[string][]int{e.topic: parts}})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		t.Fatalf("fetching committed offsets of group %s: %v", e.group, err)
	}
	out := make(map[int]int64)
	for _, p := range res.Topics[e.topic] {
		if p.Error != nil {
			t.Fatalf("committed offset of partition %d: %v", p.Partition, p.Error)
		}
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

// running is a Consumer running in the background.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// start runs a Consumer until the returned running is stopped (or the test ends).
func start(t *testing.T, cfg Config, h Handler) *running {
	t.Helper()
	c, err := New(cfg, h)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = c.Run(ctx)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run and returns its result.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.wait(t)
}

// wait waits for Run to return by itself.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(waitTimeout):
		t.Fatalf("Run did not return within %s", waitTimeout)
		return nil
	}
}

// waitFor polls cond until it holds, failing the test with what after waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", waitTimeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pos is a message's place in the topic.
type pos struct {
	partition int
	offset    int64
}

// seen counts handled messages by position.
type seen struct {
	mu sync.Mutex
	n  map[pos]int
}

func newSeen() *seen { return &seen{n: make(map[pos]int)} }

func (s *seen) add(m *Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[pos{m.Partition, m.Offset}]++
}

func (s *seen) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.n)
}

func (s *seen) snapshot() map[pos]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[pos]int, len(s.n))
	for k, v := range s.n {
		out[k] = v
	}
	return out
}

// commits remembers the highest offset Hooks.Committed reported per partition.
type commits struct {
	mu   sync.Mutex
	last map[int]int64
}

func newCommits() *commits { return &commits{last: make(map[int]int64)} }

func (c *commits) hook(partition int, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.last[partition]; !ok || offset > old {
		c.last[partition] = offset
	}
}

func (c *commits) get(partition int) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.last[partition]; ok {
		return v
	}
	return -1
}

// gauge tracks a concurrent count and its peak.
type gauge struct{ cur, peak atomic.Int64 }

func (g *gauge) add(d int) {
	v := g.cur.Add(int64(d))
	for {
		p := g.peak.Load()
		if v <= p || g.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

func TestRunHandlesEveryMessageAndCommits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	const perPartition = 20
	e.produce(t, e.spread(3*perPartition)...)

	handled := newSeen()
	var running, inFlight gauge
	commit := newCommits()
	var lagMu sync.Mutex
	lastLag := make(map[int]int64) // lag behind the highest fetched offset, per partition
	cfg := e.config(t)
	cfg.Concurrency = 4
	cfg.Hooks = Hooks{
		Fetched: func(topic string, partition int, offset, hwm int64) {
			lagMu.Lock()
			defer lagMu.Unlock()
			lastLag[partition] = hwm - offset - 1
		},
		Committed: commit.hook,
		InFlight:  inFlight.add,
	}
	r := start(t, cfg, func(ctx context.Context, m *Message) error {
		running.add(1)
		defer running.add(-1)
		time.Sleep(3 * time.Millisecond)
		if m.Topic != e.topic || !strings.HasPrefix(string(m.Value), "v") || m.Time.IsZero() {
			return Permanent("test", fmt.Errorf("unexpected message %+v", m))
		}
		handled.add(m)
		return nil
	})

	waitFor(t, "every message is committed", func() bool {
		for p := range e.partitions {
			if commit.get(p) != perPartition {
				return false
			}
		}
		return true
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}

	for p, n := range handled.snapshot() {
		if n != 1 {
			t.Errorf("%v handled %d times, want once", p, n)
		}
	}
	if got := handled.distinct(); got != 3*perPartition {
		t.Errorf("handled %d distinct messages, want %d", got, 3*perPartition)
	}
	if peak := running.peak.Load(); peak > int64(cfg.Concurrency) || peak < 2 {
		t.Errorf("peak concurrent handlers = %d, want between 2 and Concurrency %d", peak, cfg.Concurrency)
	}
	if peak := inFlight.peak.Load(); peak > int64(cfg.Concurrency) {
		t.Errorf("peak in flight = %d, want at most Concurrency %d", peak, cfg.Concurrency)
	}
	if cur := inFlight.cur.Load(); cur != 0 {
		t.Errorf("in flight after Run returned = %d, want 0", cur)
	}
	for p, off := range e.committed(t) {
		if off != perPartition {
			t.Errorf("broker: partition %d committed at %d, want %d", p, off, perPartition)
		}
	}
	lagMu.Lock()
	defer lagMu.Unlock()
	for p := range e.partitions {
		if lag, ok := lastLag[p]; !ok || lag != 0 {
			t.Errorf("partition %d: lag at the last fetch = %d (reported %v), want 0", p, lag, ok)
		}
	}
}

// keyOrder watches handlers for the ordering of keys: a message must not start while another
// with its key (in its partition) is being handled, and each key's messages must start in
// offset order.
type keyOrder struct {
	mu       sync.Mutex
	active   map[keyRef]bool
	order    map[keyRef][]int64
	overlaps []string
}

func newKeyOrder() *keyOrder {
	return &keyOrder{active: make(map[keyRef]bool), order: make(map[keyRef][]int64)}
}

// start is called as a handler begins; end as it returns. Keyless messages are ignored.
func (o *keyOrder) start(m *Message) {
	if len(m.Key) == 0 {
		return
	}
	k := keyOf(m)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.active[k] {
		o.overlaps = append(o.overlaps, fmt.Sprintf("%s@%d:%d", k.key, k.partition, m.Offset))
	}
	o.active[k] = true
	o.order[k] = append(o.order[k], m.Offset)
}

func (o *keyOrder) end(m *Message) {
	if len(m.Key) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.active[keyOf(m)] = false
}

// check fails t for overlaps and keys started out of order, and returns how many messages
// each key started.
func (o *keyOrder) check(t *testing.T) map[string]int {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.overlaps) > 0 {
		t.Errorf("messages started while another with the same key ran: %v", o.overlaps)
	}
	counts := make(map[string]int)
	for k, offsets := range o.order {
		if !slices.IsSorted(offsets) {
			t.Errorf("key %s in partition %d handled in order %v, want offsets ascending", k.key, k.partition, offsets)
		}
		counts[k.key] += len(offsets)
	}
	return counts
}

func TestRunKeepsEachKeyInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	keys := []string{"request-a", "request-b", "request-c"}
	var records []record
	for i := range 8 {
		for _, k := range keys {
			records = append(records, record{key: k, value: fmt.Sprintf("%s-%d", k, i)})
		}
		records = append(records, record{value: fmt.Sprintf("keyless-%d", i)})
	}
	e.produce(t, records...)

	order := newKeyOrder()
	var running gauge
	handled := newSeen()
	cfg := e.config(t)
	cfg.Concurrency = 8
	r := start(t, cfg, func(ctx context.Context, m *Message) error {
		running.add(1)
		defer running.add(-1)
		order.start(m)
		time.Sleep(20 * time.Millisecond)
		order.end(m)
		handled.add(m)
		return nil
	})
	waitFor(t, "every message is handled", func() bool { return handled.distinct() == len(records) })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}

	counts := order.check(t)
	for _, k := range keys {
		if counts[k] != 8 {
			t.Errorf("key %s: %d messages handled, want 8", k, counts[k])
		}
	}
	if peak := running.peak.Load(); peak < 3 {
		t.Errorf("peak concurrent handlers = %d; different keys and keyless messages should run together", peak)
	}
}

func TestRunCommitIsHeldBySlowMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	const slow, after = 5, 50 // offset 5 is slow; 6..55 finish while it runs
	total := slow + 1 + after
	e.produce(t, e.spread(total)...)

	release := make(chan struct{})
	handled := newSeen()
	commit := newCommits()
	cfg := e.config(t)
	cfg.Concurrency = 8
	cfg.Hooks.Committed = commit.hook
	r := start(t, cfg, func(ctx context.Context, m *Message) error {
		if m.Offset == slow {
			<-release
		}
		handled.add(m)
		return nil
	})

	waitFor(t, "every message but the slow one is handled", func() bool { return handled.distinct() == total-1 })
	waitFor(t, "the offsets before the slow one are committed", func() bool { return commit.get(0) == slow })
	time.Sleep(5 * cfg.CommitInterval) // time for a wrong commit to happen
	if got := commit.get(0); got != slow {
		t.Fatalf("committed %d while offset %d was in flight, want %d", got, slow, slow)
	}
	if got := e.committed(t)[0]; got != slow {
		t.Fatalf("broker: committed %d while offset %d was in flight, want %d", got, slow, slow)
	}

	close(release)
	waitFor(t, "everything is committed once the slow message finishes", func() bool { return commit.get(0) == int64(total) })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if got := e.committed(t)[0]; got != int64(total) {
		t.Fatalf("broker: committed %d, want %d", got, total)
	}
}

// TestRunDrainsOnShutdown cancels Run with four messages in flight: three finish during the
// drain on a live context and are committed; one outlasts DrainTimeout, sees its context
// cancelled, and is not committed. A new consumer in the group starts again from it.
func TestRunDrainsOnShutdown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	e.produce(t, e.spread(10)...)

	const stuck = 3
	release := make(chan struct{})
	started := make(chan int64, 10)
	var mu sync.Mutex
	finished := make(map[int64]error) // offset -> handler ctx.Err() when it returned
	var outcomes sync.Map             // outcome -> *atomic.Int64
	cfg := e.config(t)
	cfg.Concurrency = 4
	cfg.DrainTimeout = time.Second
	revoked := make(chan struct{})
	cfg.Hooks.Revoked = func([]int) { close(revoked) }
	cfg.Hooks.Handled = func(_ context.Context, outcome string, _ time.Duration) {
		n, _ := outcomes.LoadOrStore(outcome, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	r := start(t, cfg, func(ctx context.Context, m *Message) error {
		started <- m.Offset
		if m.Offset == stuck {
			<-ctx.Done() // like Retry waiting on a broken dependency
			return fmt.Errorf("stuck: %w", ctx.Err())
		}
		<-release
		mu.Lock()
		finished[m.Offset] = ctx.Err()
		mu.Unlock()
		return nil
	})
	for range cfg.Concurrency {
		select {
		case <-started:
		case <-time.After(waitTimeout):
			t.Fatalf("%d messages did not start", cfg.Concurrency)
		}
	}

	r.cancel()
	select {
	case <-revoked: // Run is draining now; fetching has stopped
	case <-time.After(waitTimeout):
		t.Fatal("Run did not start draining after the cancel")
	}
	close(release)
	began := time.Now()
	if err := r.wait(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if waited := time.Since(began); waited < cfg.DrainTimeout-300*time.Millisecond {
		t.Errorf("Run returned %s after the release; it should have waited out DrainTimeout %s for offset %d", waited, cfg.DrainTimeout, stuck)
	}

	mu.Lock()
	for _, off := range []int64{0, 1, 2} {
		if err, ok := finished[off]; !ok || err != nil {
			t.Errorf("offset %d: finished %v with ctx.Err() = %v, want finished on a live context", off, ok, err)
		}
	}
	if len(finished) != 3 {
		t.Errorf("finished offsets %v, want only 0..2: nothing may be fetched after cancellation", finished)
	}
	mu.Unlock()
	if len(started) != 0 {
		t.Errorf("%d more messages started after cancellation", len(started))
	}
	for outcome, want := range map[string]int64{OutcomeOK: 3, OutcomeInterrupted: 1} {
		n, _ := outcomes.LoadOrStore(outcome, new(atomic.Int64))
		if got := n.(*atomic.Int64).Load(); got != want {
			t.Errorf("Hooks.Handled outcome %q seen %d times, want %d", outcome, got, want)
		}
	}
	if got := e.committed(t)[0]; got != stuck {
		t.Fatalf("broker: committed %d, want %d (the interrupted message is redelivered)", got, stuck)
	}

	// The next member of the group picks up at the interrupted message.
	again := newSeen()
	cfg.Hooks = Hooks{}
	r2 := start(t, cfg, func(ctx context.Context, m *Message) error { again.add(m); return nil })
	waitFor(t, "the rest is redelivered", func() bool { return again.distinct() == 10-stuck })
	if err := r2.stop(t); err != nil {
		t.Fatalf("second Run = %v, want nil", err)
	}
	for p := range again.snapshot() {
		if p.offset < stuck {
			t.Errorf("offset %d redelivered although it was committed", p.offset)
		}
	}
}

func TestRunAtLeastOnceAcrossRestarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	const total = 40
	e.produce(t, e.spread(total)...)

	first, second := newSeen(), newSeen()
	commit := newCommits()
	cfg := e.config(t)
	cfg.Concurrency = 2
	cfg.Hooks.Committed = commit.hook
	r := start(t, cfg, func(ctx context.Context, m *Message) error {
		time.Sleep(20 * time.Millisecond)
		first.add(m)
		return nil
	})
	waitFor(t, "the first consumer handles some", func() bool { return first.distinct() >= total/3 })
	if err := r.stop(t); err != nil {
		t.Fatalf("first Run = %v, want nil", err)
	}
	if first.distinct() == total {
		t.Fatal("the first consumer handled everything; the test needs it stopped half-way")
	}

	cfg.Hooks = Hooks{}
	r2 := start(t, cfg, func(ctx context.Context, m *Message) error { second.add(m); return nil })
	waitFor(t, "every message is handled by one consumer or the other", func() bool {
		all := first.snapshot()
		for p := range second.snapshot() {
			all[p]++
		}
		return len(all) == total
	})
	if err := r2.stop(t); err != nil {
		t.Fatalf("second Run = %v, want nil", err)
	}

	// The second consumer starts exactly where the first committed: nothing lost, nothing the
	// first had committed redone.
	for p := range e.partitions {
		want := max(commit.get(p), 0)
		var lowest int64 = -1
		for q := range second.snapshot() {
			if q.partition == p && (lowest < 0 || q.offset < lowest) {
				lowest = q.offset
			}
		}
		if lowest >= 0 && lowest != want {
			t.Errorf("partition %d: the second consumer started at %d, want the committed %d", p, lowest, want)
		}
	}
	t.Logf("first consumer handled %d, second %d, of %d", first.distinct(), second.distinct(), total)
}

func TestRunDeadLettersPoisonMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	var records []record
	wantReasons := make(map[string]string) // value -> reason
	for i := range 30 {
		r := record{partition: i % 2, value: fmt.Sprintf("good-%d", i)}
		switch {
		case i%7 == 3:
			r.value = fmt.Sprintf("poison-%d", i)
			wantReasons[r.value] = "undecodable"
		case i == 10 || i == 21:
			r.value = fmt.Sprintf("panic-%d", i)
			wantReasons[r.value] = ReasonInternal
		}
		records = append(records, r)
	}
	e.produce(t, records...)

	good := newSeen()
	dl := &deadLetters{failFirst: 1} // the first publish fails: that must delay, not lose, it
	var dlMu sync.Mutex
	dlValues := make(map[string]string)
	commit := newCommits()
	cfg := e.config(t)
	cfg.Hooks.Committed = commit.hook
	logger := cfg.Logger
	handler := func(ctx context.Context, m *Message) error {
		v := string(m.Value)
		switch {
		case strings.HasPrefix(v, "poison"):
			return Permanent("undecodable", fmt.Errorf("value %q is not Avro", v))
		case strings.HasPrefix(v, "panic"):
			panic("nil pointer dereference")
		}
		good.add(m)
		return nil
	}
	record := DeadLetterPublisher(publisherFunc(func(ctx context.Context, m *Message, reason string, cause error) error {
		if err := dl.PublishDeadLetter(ctx, m, reason, cause); err != nil {
			return err
		}
		dlMu.Lock()
		defer dlMu.Unlock()
		dlValues[string(m.Value)] = reason
		return nil
	}))
	r := start(t, cfg, Chain(handler, Retry(fastRetry, logger), DeadLetter(record, logger), Recover(logger)))

	waitFor(t, "every offset is committed", func() bool { return commit.get(0) == 15 && commit.get(1) == 15 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if got, want := good.distinct(), len(records)-len(wantReasons); got != want {
		t.Errorf("handled %d good messages, want %d", got, want)
	}
	dlMu.Lock()
	defer dlMu.Unlock()
	for v, want := range wantReasons {
		if got := dlValues[v]; got != want {
			t.Errorf("%s dead-lettered with reason %q, want %q", v, got, want)
		}
	}
	if len(dlValues) != len(wantReasons) {
		t.Errorf("dead-lettered %v, want exactly %v", dlValues, wantReasons)
	}
	for p, off := range e.committed(t) {
		if off != 15 {
			t.Errorf("broker: partition %d committed at %d, want 15 (past the poison messages)", p, off)
		}
	}
}

type publisherFunc func(ctx context.Context, m *Message, reason string, cause error) error

func (f publisherFunc) PublishDeadLetter(ctx context.Context, m *Message, reason string, cause error) error {
	return f(ctx, m, reason, cause)
}

// TestRunStopsOnHandlerFailure: an error that no middleware dealt with stops the consumer
// rather than committing past the message; so does a panic that no Recover caught.
func TestRunStopsOnHandlerFailure(t *testing.T) {
	t.Parallel()
	errBroken := errors.New("ruleset store unreachable")
	tests := []struct {
		name  string
		fail  func() error
		check func(t *testing.T, err error)
	}{
		{"error", func() error { return errBroken }, func(t *testing.T, err error) {
			if !errors.Is(err, errBroken) {
				t.Errorf("Run = %v, want it to wrap %v", err, errBroken)
			}
		}},
		{"panic without Recover", func() error { panic("index out of range") }, func(t *testing.T, err error) {
			if !errors.Is(err, errHandlerPanicked) || !strings.Contains(err.Error(), "index out of range") {
				t.Errorf("Run = %v, want a handler panic", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 1)
			e.produce(t, e.spread(10)...)
			const bad = 4
			cfg := e.config(t)
			cfg.Concurrency = 1
			r := start(t, cfg, func(ctx context.Context, m *Message) error {
				if m.Offset == bad {
					return tt.fail()
				}
				return nil
			})
			err := r.wait(t) // no cancel: the failure ends Run
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("partition 0 offset %d", bad)) {
				t.Fatalf("Run = %v, want an error naming offset %d", err, bad)
			}
			tt.check(t, err)
			if got := e.committed(t)[0]; got != bad {
				t.Errorf("broker: committed %d, want %d (not past the failed message)", got, bad)
			}
		})
	}
}

// TestRunSurvivesBrokerRestart restarts the broker between two halves of the stream: a broker
// of the test's own, so that the other tests run on meanwhile.
func TestRunSurvivesBrokerRestart(t *testing.T) {
	t.Parallel()
	broker := kafkatest.OwnBroker(t)
	e := newEnvOn(t, broker.Addr, 2)
	const half = 20
	e.produce(t, e.spread(half)...)

	handled := newSeen()
	commit := newCommits()
	cfg := e.config(t)
	cfg.Hooks.Committed = commit.hook
	r := start(t, cfg, func(ctx context.Context, m *Message) error { handled.add(m); return nil })
	waitFor(t, "the first half is committed", func() bool { return commit.get(0) == half/2 && commit.get(1) == half/2 })

	began := time.Now()
	broker.Restart(t)
	t.Logf("broker restarted in %s", time.Since(began).Round(time.Millisecond))
	e.produce(t, e.spread(half)...)
	waitFor(t, "the second half is committed", func() bool { return commit.get(0) == half && commit.get(1) == half })
	t.Logf("consumer caught up %s after the restart began", time.Since(began).Round(time.Millisecond))
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if got := handled.distinct(); got != 2*half {
		t.Errorf("handled %d distinct messages, want %d", got, 2*half)
	}
}

// testLogger sends the consumer's warnings to the test log, dropping any that arrive after
// the test ended.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	mu     sync.Mutex
	t      *testing.T
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}

var _ io.Writer = (*testWriter)(nil)

// TestRunBoundsBytesInFlight: with room for many messages by count but for only three by bytes,
// no more than three 1 KiB messages are ever in flight, and every message is still handled.
func TestRunBoundsBytesInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	const n = 24
	value := strings.Repeat("x", 1024)
	var recs []record
	for i := range n {
		recs = append(recs, record{partition: i % 2, value: fmt.Sprintf("v%d-%s", i, value)})
	}
	e.produce(t, recs...)

	handled := newSeen()
	var running gauge
	commit := newCommits()
	cfg := e.config(t)
	cfg.Concurrency = 16
	cfg.MaxBytesInFlight = 3*1024 + 3*8 // three values with their "v<i>-" prefixes
	cfg.Hooks = Hooks{Committed: commit.hook}
	r := start(t, cfg, func(ctx context.Context, m *Message) error {
		running.add(1)
		defer running.add(-1)
		time.Sleep(10 * time.Millisecond)
		handled.add(m)
		return nil
	})
	waitFor(t, "every message is committed", func() bool { return commit.get(0) == n/2 && commit.get(1) == n/2 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if got := handled.distinct(); got != n {
		t.Errorf("handled %d distinct messages, want %d", got, n)
	}
	if peak := running.peak.Load(); peak > 3 || peak < 2 {
		t.Errorf("peak concurrent handlers = %d, want 2 or 3 (the bytes bound), not up to Concurrency %d", peak, cfg.Concurrency)
	}
}

// TestRunBoundsCostInFlight: with Cost set, the bytes bound counts what the handler says a
// message costs, not its size: small messages costing a third of the bound each run at
// most three at a time.
func TestRunBoundsCostInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	const n = 24
	var recs []record
	for i := range n {
		recs = append(recs, record{partition: i % 2, value: fmt.Sprintf("v%d", i)})
	}
	e.produce(t, recs...)

	handled := newSeen()
	var running gauge
	commit := newCommits()
	cfg := e.config(t)
	cfg.Concurrency = 16
	cfg.MaxBytesInFlight = 3 << 20
	cfg.Cost = func(m *Message) int64 { return 1 << 20 }
	cfg.Hooks = Hooks{Committed: commit.hook}
	r := start(t, cfg, func(ctx context.Context, m *Message) error {
		running.add(1)
		defer running.add(-1)
		time.Sleep(10 * time.Millisecond)
		handled.add(m)
		return nil
	})
	waitFor(t, "every message is committed", func() bool { return commit.get(0) == n/2 && commit.get(1) == n/2 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if got := handled.distinct(); got != n {
		t.Errorf("handled %d distinct messages, want %d", got, n)
	}
	if peak := running.peak.Load(); peak > 3 || peak < 2 {
		t.Errorf("peak concurrent handlers = %d, want 2 or 3 (the cost bound), not up to Concurrency %d", peak, cfg.Concurrency)
	}
}

// TestRunCountsReservedBytes: what a handler reserves counts toward the bound with the
// message's weight, and goes back when the message is let go: messages that weigh nothing
// but reserve a third of the bound each run at most three at a time, and all finish.
func TestRunCountsReservedBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	const n = 24
	var recs []record
	for i := range n {
		recs = append(recs, record{partition: i % 2, value: fmt.Sprintf("v%d", i)})
	}
	e.produce(t, recs...)

	handled := newSeen()
	var running gauge
	commit := newCommits()
	cfg := e.config(t)
	cfg.Concurrency = 16
	cfg.MaxBytesInFlight = 3 << 20
	cfg.Cost = func(m *Message) int64 { return 1 }
	cfg.Hooks = Hooks{Committed: commit.hook}
	r := start(t, cfg, func(ctx context.Context, m *Message) error {
		if _, err := Reserve(ctx, 1<<20-1); err != nil {
			return err
		}
		running.add(1)
		defer running.add(-1)
		time.Sleep(10 * time.Millisecond)
		handled.add(m)
		return nil
	})
	waitFor(t, "every message is committed", func() bool { return commit.get(0) == n/2 && commit.get(1) == n/2 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if got := handled.distinct(); got != n {
		t.Errorf("handled %d distinct messages, want %d", got, n)
	}
	if peak := running.peak.Load(); peak > 3 || peak < 2 {
		t.Errorf("peak concurrent handlers = %d, want 2 or 3 (the reserved bytes), not up to Concurrency %d", peak, cfg.Concurrency)
	}
}

// TestRunReserveOfTheWholeBound: messages that each reserve more than the bound run one at a
// time and all finish, those queued behind a message with the same key included (their
// weights, held while they wait, do not keep it from running).
func TestRunReserveOfTheWholeBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		fairness *Fairness
	}{
		{"in fetch order", nil},
		// The messages read ahead hold bytes too, and cannot start while every slot's
		// handler waits for the whole bound: they must lend them.
		{"fair, reading ahead", &Fairness{Tenant: TenantHeader(tenantHeader)}},
		// Slots are free, but every message waiting is of a tenant at its cap: they cannot
		// start either, and must lend their bytes all the same.
		{"fair, every tenant capped", &Fairness{Tenant: TenantHeader(tenantHeader), MaxInFlight: func(string) int { return 1 }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testReserveOfTheWholeBound(t, tc.fairness)
		})
	}
}

func testReserveOfTheWholeBound(t *testing.T, fairness *Fairness) {
	e := newEnv(t, 2)
	const n = 16
	var recs []record
	for i := range n {
		key := ""
		if i%2 == 0 {
			key = "same"
		}
		recs = append(recs, record{partition: 0, key: key, value: fmt.Sprintf("v%d", i), tenant: fmt.Sprint("t", i%3)})
	}
	e.produce(t, recs...)

	handled := newSeen()
	var running gauge
	commit := newCommits()
	cfg := e.config(t)
	cfg.Concurrency = 8
	cfg.MaxBytesInFlight = 1 << 20
	cfg.Fairness = fairness
	cfg.Hooks = Hooks{Committed: commit.hook}
	r := start(t, cfg, func(ctx context.Context, m *Message) error {
		time.Sleep(50 * time.Millisecond) // until Concurrency messages are fetched, some queued
		release, err := Reserve(ctx, 2<<20)
		if err != nil {
			return err
		}
		defer release()
		running.add(1)
		defer running.add(-1)
		time.Sleep(5 * time.Millisecond)
		handled.add(m)
		return nil
	})
	waitFor(t, "every message is committed", func() bool { return commit.get(0) == n })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if got := handled.distinct(); got != n {
		t.Errorf("handled %d distinct messages, want %d", got, n)
	}
	if peak := running.peak.Load(); peak != 1 {
		t.Errorf("peak concurrent handlers = %d, want 1: each holds the whole bound", peak)
	}
}
