package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"rulevalidator/engine"
	"rulevalidator/stream"
)

// VersionHeader is the optional record header naming the ruleset's version.
// The ruleset's own version field wins; a record where both are set and
// differ is rejected.
const VersionHeader = "rv-ruleset-version"

// TopicConfig configures a Topic.
type TopicConfig struct {
	// Client says how to reach the cluster. Required.
	Client *stream.Client
	// Topic is the compacted topic of rulesets, keyed by ruleset id. Required.
	Topic string
	// PartitionRefresh is how often partitions added to the topic are looked
	// for (default 1m).
	PartitionRefresh time.Duration
	// Logger receives rejected records, reconnects and progress. Default slog.Default().
	Logger *slog.Logger
}

// partitionRefresh is TopicConfig.PartitionRefresh's default.
const partitionRefresh = time.Minute

// Topic serves the rulesets published to a compacted Kafka topic. Each record
// is keyed by ruleset id and holds the ruleset as JSON or YAML; a record with
// no value (a tombstone) deletes the id. Every partition is read from its
// first offset, without a consumer group, and every (id, version) seen is kept;
// latest is the most recent record for the id, whatever its version.
//
// Records for one id are expected in one partition (the key decides it). Were
// an id found in two partitions, records are ordered across them by timestamp.
// Partitions added to the topic are read as they appear.
type Topic struct {
	topic  string
	log    *slog.Logger
	reader *stream.Reader

	started atomic.Bool
	stopped chan struct{} // closed when Run returns
	loaded  chan struct{} // closed once every partition was read to the end

	mu       sync.RWMutex
	rulesets map[string]*topicRuleset
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
	if cfg.Client == nil {
		return nil, errors.New("registry: TopicConfig.Client is nil")
	}
	if cfg.Topic == "" {
		return nil, errors.New("registry: TopicConfig.Topic is empty")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PartitionRefresh == 0 {
		cfg.PartitionRefresh = partitionRefresh
	}
	t := &Topic{
		topic:    cfg.Topic,
		log:      cfg.Logger.With("ruleset_topic", cfg.Topic),
		stopped:  make(chan struct{}),
		loaded:   make(chan struct{}),
		rulesets: make(map[string]*topicRuleset),
	}
	r, err := stream.NewReader(stream.ReaderConfig{
		Client:           cfg.Client,
		Topics:           []string{cfg.Topic},
		Start:            stream.FromStart,
		Handle:           t.apply,
		PartitionRefresh: cfg.PartitionRefresh,
		Logger:           cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	t.reader = r
	return t, nil
}

// Run reads every partition of the topic until ctx ends, then returns nil.
// Broker failures are logged and retried with backoff, never returned. Run
// may be called once.
func (t *Topic) Run(ctx context.Context) error {
	if !t.started.CompareAndSwap(false, true) {
		return fmt.Errorf("registry: topic %s: Run called twice", t.topic)
	}
	defer close(t.stopped)
	go func() {
		select {
		case <-t.reader.Ready():
			t.mu.RLock()
			versions := 0
			for _, r := range t.rulesets {
				versions += len(r.versions)
			}
			t.mu.RUnlock()
			t.log.Info("registry: ruleset topic read to the end", "partitions", t.reader.Partitions(), "ruleset_versions", versions)
			close(t.loaded)
		case <-t.stopped:
		}
	}()
	return t.reader.Run(ctx)
}

// WaitReady returns nil once Run has read every partition up to the
// high-water mark it found there at start, so that a ruleset published before
// the service started is known. It fails when ctx ends first, saying which
// partitions are behind, or when Run stopped before that.
func (t *Topic) WaitReady(ctx context.Context) error {
	select {
	case <-t.loaded:
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
		return fmt.Errorf("registry: topic %s not read to the end yet (%s): %w", t.topic, t.reader.Lagging(), context.Cause(ctx))
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
		case <-t.loaded:
		case <-t.stopped:
			if !t.readyNow() {
				return nil, fmt.Errorf("registry: ruleset %q: topic %s stopped before it was read to the end", id, t.topic)
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("registry: ruleset %q: topic %s still loading (%s): %w", id, t.topic, t.reader.Lagging(), context.Cause(ctx))
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
	select {
	case <-t.loaded:
		return true
	default:
		return false
	}
}

// apply takes one record into the rulesets held; a record that is not a valid
// ruleset for its key is logged and skipped.
func (t *Topic) apply(ctx context.Context, msg stream.Record) {
	partition := msg.Partition
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

	ready := t.readyNow()
	t.mu.Lock()
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
	log.Log(ctx, level, "registry: ruleset loaded", "ruleset_version", rs.Version, "latest", newest)
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
func parseRecord(key string, msg stream.Record) (*engine.Ruleset, error) {
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
	if header, ok := stream.HeaderValue(msg.Headers, VersionHeader); ok && len(header) > 0 {
		switch {
		case rs.Version == "":
			rs.Version = string(header)
		case rs.Version != string(header):
			return nil, fmt.Errorf("the ruleset's version %q differs from the %s header %q", rs.Version, VersionHeader, header)
		}
	}
	return rs, nil
}
