package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/engine"
)

// VersionHeader is the optional record header naming the ruleset's version.
// The ruleset's own version field wins; a record where both are set and
// differ is rejected.
const VersionHeader = "rv-ruleset-version"

// TopicConfig configures a Topic.
type TopicConfig struct {
	// Brokers are bootstrap addresses (host:port). Required.
	Brokers []string
	// Topic is the compacted topic of rulesets, keyed by ruleset id. Required.
	Topic string
	// Logger receives rejected records, reconnects and progress. Default slog.Default().
	Logger *slog.Logger
}

const (
	// fetchWait is how long the broker holds a fetch open when there is
	// nothing new; it also bounds how long a reader takes to notice ctx ending.
	fetchWait = 500 * time.Millisecond
	// ioTimeout bounds each exchange with a broker, so a silent one is noticed.
	ioTimeout = 10 * time.Second
	// maxFetchBytes bounds one fetch; rulesets can be a few MiB.
	maxFetchBytes = 16 << 20
	// partitionRefresh is how often partitions added to the topic are looked for.
	partitionRefresh = time.Minute
	backoffMin       = 100 * time.Millisecond
	backoffMax       = 5 * time.Second
)

// Topic serves the rulesets published to a compacted Kafka topic. Each record
// is keyed by ruleset id and holds the ruleset as JSON or YAML; a record with
// no value (a tombstone) deletes the id. Every partition is read from its
// first offset, without a consumer group, and every (id, version) seen is kept;
// latest is the most recent record for the id, whatever its version.
//
// Records for one id are expected in one partition (the key decides it). Were
// an id found in two partitions, records are ordered across them by timestamp.
type Topic struct {
	brokers []string
	topic   string
	log     *slog.Logger
	dialer  *kafka.Dialer

	started atomic.Bool
	stopped chan struct{} // closed when Run returns
	ready   chan struct{} // closed once every partition caught up

	mu       sync.RWMutex
	rulesets map[string]*topicRuleset
	parts    map[int]*partitionProgress
	pending  int // partitions not yet caught up
	isReady  bool
}

// partitionProgress tracks a partition's catching up.
type partitionProgress struct {
	next     int64 // next offset to read; -1 before the first connection
	target   int64 // high-water mark at the first connection; -1 before it
	caughtUp bool
}

// position is where a record sits, to order records for one id.
type position struct {
	partition int
	offset    int64
	time      time.Time
}

// after says whether p is a later record than q.
func (p position) after(q position) bool {
	if p.partition == q.partition {
		return p.offset > q.offset
	}
	return !p.time.Before(q.time)
}

type topicRuleset struct {
	versions map[string]*topicVersion
	latest   string
	last     position // the most recent record applied, a tombstone included
	deleted  bool
}

type topicVersion struct {
	entry Entry
	pos   position
}

// NewTopic checks cfg; nothing is read until Run.
func NewTopic(cfg TopicConfig) (*Topic, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("registry: TopicConfig.Brokers is empty: give at least one bootstrap address")
	}
	for i, b := range cfg.Brokers {
		if strings.TrimSpace(b) == "" {
			return nil, fmt.Errorf("registry: TopicConfig.Brokers[%d] is empty", i)
		}
	}
	if cfg.Topic == "" {
		return nil, errors.New("registry: TopicConfig.Topic is empty")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Topic{
		brokers:  slices.Clone(cfg.Brokers),
		topic:    cfg.Topic,
		log:      cfg.Logger.With("ruleset_topic", cfg.Topic),
		dialer:   &kafka.Dialer{Timeout: ioTimeout, ClientID: "rulevalidator-registry"},
		stopped:  make(chan struct{}),
		ready:    make(chan struct{}),
		rulesets: make(map[string]*topicRuleset),
		parts:    make(map[int]*partitionProgress),
	}, nil
}

// Run reads every partition of the topic until ctx ends, then returns nil.
// Broker failures are logged and retried with backoff, never returned. Run
// may be called once.
func (t *Topic) Run(ctx context.Context) error {
	if !t.started.CompareAndSwap(false, true) {
		return fmt.Errorf("registry: topic %s: Run called twice", t.topic)
	}
	defer close(t.stopped)
	var wg sync.WaitGroup
	defer wg.Wait()

	wait := time.Duration(0)
	for attempt := 1; ; {
		if !sleep(ctx, wait) {
			return nil
		}
		parts, err := t.partitions(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			wait = backoff(attempt)
			attempt++
			t.log.Warn("registry: cannot list the ruleset topic's partitions; retrying", "retry_in", wait, "err", err)
			continue
		}
		attempt, wait = 1, partitionRefresh
		for _, p := range t.addPartitions(parts) {
			wg.Go(func() { t.readPartition(ctx, p) })
		}
	}
}

// WaitReady returns nil once Run has read every partition up to the
// high-water mark it found there at start, so that a ruleset published before
// the service started is known. It fails when ctx ends first, saying which
// partitions are behind, or when Run stopped before that.
func (t *Topic) WaitReady(ctx context.Context) error {
	select {
	case <-t.ready:
		return nil
	case <-t.stopped:
		if t.readyNow() {
			return nil
		}
		return fmt.Errorf("registry: topic %s: stopped before it was read to the end", t.topic)
	case <-ctx.Done():
		if t.readyNow() {
			return nil
		}
		return fmt.Errorf("registry: topic %s not read to the end yet (%s): %w", t.topic, t.lagging(), context.Cause(ctx))
	}
}

// Resolve returns the ruleset id at version, or the one of the id's most
// recent record when version is "". Until the topic has been read to the end
// (see WaitReady) a latest or unknown reference waits for that, so a ruleset
// still loading is never reported unknown; if ctx ends first the error does
// not wrap ErrUnknownRuleset. Run must be running for that wait to end.
func (t *Topic) Resolve(ctx context.Context, id, version string) (*engine.Ruleset, error) {
	for {
		rs, err := t.lookup(id, version)
		if t.readyNow() || (err == nil && version != "") {
			return rs, err
		}
		select {
		case <-t.ready:
		case <-t.stopped:
			if !t.readyNow() {
				return nil, fmt.Errorf("registry: ruleset %q: topic %s stopped before it was read to the end", id, t.topic)
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("registry: ruleset %q: topic %s still loading (%s): %w", id, t.topic, t.lagging(), context.Cause(ctx))
		}
	}
}

// List returns every ruleset version held, ordered by id and then version.
func (t *Topic) List() []Entry {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []Entry
	for _, id := range slices.Sorted(maps.Keys(t.rulesets)) {
		r := t.rulesets[id]
		for _, v := range slices.SortedFunc(maps.Keys(r.versions), CompareVersions) {
			out = append(out, r.versions[v].entry)
		}
	}
	return out
}

func (t *Topic) lookup(id, version string) (*engine.Ruleset, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r := t.rulesets[id]
	if r == nil || r.deleted {
		return nil, &unknownError{id: id, version: version}
	}
	if version == "" {
		version = r.latest
	}
	v := r.versions[version]
	if v == nil {
		return nil, &unknownError{id: id, version: version, known: slices.SortedFunc(maps.Keys(r.versions), CompareVersions)}
	}
	return v.entry.Ruleset, nil
}

func (t *Topic) readyNow() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.isReady
}

// lagging describes the partitions not yet caught up, for error messages.
func (t *Topic) lagging() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(t.parts) == 0 {
		return "partitions not listed yet"
	}
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(t.parts)) {
		p := t.parts[id]
		switch {
		case p.caughtUp:
		case p.target < 0:
			parts = append(parts, fmt.Sprintf("partition %d not reached", id))
		default:
			parts = append(parts, fmt.Sprintf("partition %d at offset %d of %d", id, p.next, p.target))
		}
	}
	return strings.Join(parts, ", ")
}

// partitions asks the brokers, in turn, for the topic's partitions. Unlike a
// plain metadata request from kafka.Conn, kafka.Client's never asks the
// broker to create the topic.
func (t *Topic) partitions(ctx context.Context) ([]int, error) {
	transport := &kafka.Transport{DialTimeout: ioTimeout, ClientID: t.dialer.ClientID}
	defer transport.CloseIdleConnections()
	var errs []error
	for _, broker := range t.brokers {
		client := &kafka.Client{Addr: kafka.TCP(broker), Transport: transport, Timeout: ioTimeout}
		meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{t.topic}})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", broker, err))
			continue
		}
		for _, topic := range meta.Topics {
			if topic.Name != t.topic {
				continue
			}
			if topic.Error != nil {
				return nil, fmt.Errorf("%s: topic %s: %w", broker, t.topic, topic.Error)
			}
			ids := make([]int, len(topic.Partitions))
			for i, p := range topic.Partitions {
				ids[i] = p.ID
			}
			if len(ids) == 0 {
				return nil, fmt.Errorf("%s: topic %s has no partitions", broker, t.topic)
			}
			slices.Sort(ids)
			return ids, nil
		}
		errs = append(errs, fmt.Errorf("%s: topic %s not in the metadata", broker, t.topic))
	}
	return nil, errors.Join(errs...)
}

// addPartitions registers the partitions not seen before and returns them.
func (t *Topic) addPartitions(ids []int) []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	var added []int
	for _, id := range ids {
		if t.parts[id] != nil {
			continue
		}
		t.parts[id] = &partitionProgress{next: -1, target: -1}
		added = append(added, id)
		if !t.isReady {
			t.pending++
		}
	}
	return added
}

// readPartition reads one partition until ctx ends, reconnecting with
// backoff, and resuming where it stopped, after any failure.
func (t *Topic) readPartition(ctx context.Context, partition int) {
	next := int64(-1)
	for attempt := 1; ; attempt++ {
		conn, err := t.dialLeader(ctx, partition)
		if err == nil {
			var progressed bool
			progressed, err = t.consume(ctx, conn, partition, &next)
			conn.Close()
			if progressed {
				attempt = 1
			}
		}
		if ctx.Err() != nil {
			return
		}
		wait := backoff(attempt)
		t.log.Warn("registry: reading the ruleset topic failed; reconnecting",
			"partition", partition, "next_offset", next, "retry_in", wait, "err", err)
		if !sleep(ctx, wait) {
			return
		}
	}
}

func (t *Topic) dialLeader(ctx context.Context, partition int) (*kafka.Conn, error) {
	var errs []error
	for _, broker := range t.brokers {
		conn, err := t.dialer.DialLeader(ctx, "tcp", broker, t.topic, partition)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", broker, err))
	}
	return nil, fmt.Errorf("connecting to the leader of partition %d: %w", partition, errors.Join(errs...))
}

// consume reads from *next on until ctx ends or the connection fails, keeping
// *next up to date. progressed says whether any fetch succeeded.
func (t *Topic) consume(ctx context.Context, conn *kafka.Conn, partition int, next *int64) (progressed bool, err error) {
	// Closing the connection is what interrupts a read in progress.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	if err := conn.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		return false, err
	}
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return false, fmt.Errorf("reading the offsets of partition %d: %w", partition, err)
	}
	switch {
	case *next < 0:
		*next = first
	case *next < first:
		t.log.Warn("registry: records removed from the ruleset topic before they were read",
			"partition", partition, "from_offset", *next, "to_offset", first)
		*next = first
	case *next > last:
		t.log.Warn("registry: ruleset topic partition ends before the next offset to read (was it recreated?); reading it from the start",
			"partition", partition, "next_offset", *next, "end_offset", last)
		*next = first
	}
	if _, err := conn.Seek(*next, kafka.SeekAbsolute|kafka.SeekDontCheck); err != nil {
		return false, fmt.Errorf("seeking partition %d to offset %d: %w", partition, *next, err)
	}
	// From here on each read sets its own deadline.
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return false, err
	}
	t.advance(partition, *next, last)

	for ctx.Err() == nil {
		if err := conn.SetReadDeadline(time.Now().Add(fetchWait + ioTimeout)); err != nil {
			return progressed, err
		}
		batch := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: maxFetchBytes, MaxWait: fetchWait})
		for {
			if err := conn.SetReadDeadline(time.Now().Add(ioTimeout)); err != nil {
				break
			}
			msg, err := batch.ReadMessage()
			if err != nil {
				break
			}
			t.apply(partition, msg)
		}
		if err := batch.Close(); err != nil {
			if ctx.Err() != nil {
				return progressed, nil
			}
			return progressed, fmt.Errorf("fetching partition %d at offset %d: %w", partition, *next, err)
		}
		progressed = true
		// The connection's offset, not the last record's: it also steps over
		// records compacted away at the end of a batch.
		*next, _ = conn.Offset()
		t.advance(partition, *next, -1)
	}
	return progressed, nil
}

// advance records that partition will be read from next on; target, when not
// -1, is the partition's high-water mark, kept as the catch-up goal the first
// time it is given.
func (t *Topic) advance(partition int, next, target int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.parts[partition]
	p.next = next
	if p.target < 0 && target >= 0 {
		p.target = target
	}
	if p.caughtUp || p.target < 0 || next < p.target {
		return
	}
	p.caughtUp = true
	if t.isReady {
		return
	}
	t.pending--
	if t.pending == 0 {
		t.isReady = true
		close(t.ready)
		versions := 0
		for _, r := range t.rulesets {
			versions += len(r.versions)
		}
		t.log.Info("registry: ruleset topic read to the end", "partitions", len(t.parts), "ruleset_versions", versions)
	}
}

// apply takes one record into the rulesets held; a record that is not a valid
// ruleset for its key is logged and skipped.
func (t *Topic) apply(partition int, msg kafka.Message) {
	pos := position{partition: partition, offset: msg.Offset, time: msg.Time}
	id := string(msg.Key)
	log := t.log.With("partition", partition, "offset", msg.Offset, "ruleset_id", id)
	if id == "" {
		log.Error("registry: ruleset record skipped: it has no key (the ruleset id)")
		return
	}
	if len(msg.Value) == 0 {
		t.delete(log, id, pos)
		return
	}
	rs, err := parseRecord(id, msg)
	if err != nil {
		log.Error("registry: ruleset record skipped", "err", err)
		return
	}
	entry := Entry{
		ID: rs.ID, Version: rs.Version, Ruleset: rs, Loaded: time.Now(),
		Source: fmt.Sprintf("%s/%d/%d", t.topic, partition, msg.Offset),
	}

	t.mu.Lock()
	ready := t.isReady
	r := t.rulesets[id]
	newest := r == nil || pos.after(r.last)
	switch {
	case r == nil:
		r = &topicRuleset{versions: make(map[string]*topicVersion)}
		t.rulesets[id] = r
	case r.deleted && !newest:
		t.mu.Unlock()
		log.Warn("registry: ruleset record skipped: older than the tombstone that deleted its id", "ruleset_version", rs.Version)
		return
	case r.deleted:
		r.versions = make(map[string]*topicVersion)
		r.deleted = false
	}
	if newest {
		r.last, r.latest = pos, rs.Version
	}
	if v := r.versions[rs.Version]; v == nil || pos.after(v.pos) {
		r.versions[rs.Version] = &topicVersion{entry: entry, pos: pos}
	}
	t.mu.Unlock()

	level := slog.LevelDebug // while catching up, records are many and old
	if ready {
		level = slog.LevelInfo
	}
	log.Log(context.Background(), level, "registry: ruleset loaded", "ruleset_version", rs.Version, "latest", newest)
}

func (t *Topic) delete(log *slog.Logger, id string, pos position) {
	t.mu.Lock()
	r := t.rulesets[id]
	if r != nil && !pos.after(r.last) {
		t.mu.Unlock()
		log.Warn("registry: tombstone skipped: older than the ruleset's latest record")
		return
	}
	t.rulesets[id] = &topicRuleset{last: pos, deleted: true}
	t.mu.Unlock()
	if r != nil && !r.deleted {
		log.Info("registry: ruleset deleted by a tombstone", "versions", len(r.versions))
	}
}

// parseRecord reads a record's ruleset and checks it against the key and the
// version header.
func parseRecord(key string, msg kafka.Message) (*engine.Ruleset, error) {
	rs, err := engine.ParseRuleset(msg.Value)
	if err != nil {
		return nil, err
	}
	switch {
	case rs.ID == "":
		rs.ID = key
	case rs.ID != key:
		return nil, fmt.Errorf("the ruleset's id %q differs from the record key %q", rs.ID, key)
	}
	if header, ok := headerValue(msg.Headers, VersionHeader); ok && header != "" {
		switch {
		case rs.Version == "":
			rs.Version = header
		case rs.Version != header:
			return nil, fmt.Errorf("the ruleset's version %q differs from the %s header %q", rs.Version, VersionHeader, header)
		}
	}
	return rs, nil
}

// headerValue returns the last value of header key.
func headerValue(headers []kafka.Header, key string) (string, bool) {
	for i := len(headers) - 1; i >= 0; i-- {
		if headers[i].Key == key {
			return string(headers[i].Value), true
		}
	}
	return "", false
}

// backoff is the wait before retry attempt (1-based): doubling from
// backoffMin up to backoffMax.
func backoff(attempt int) time.Duration {
	d := backoffMin
	for i := 1; i < attempt && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
}

// sleep waits d or until ctx ends, and says whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
