package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/internal/backoff"
)

// Defaults for ReaderConfig's zero fields.
const (
	DefaultPartitionRefresh = 30 * time.Second
	DefaultReaderMaxBytes   = 16 << 20 // 16 MiB
)

const (
	// readerFetchWait is how long the broker holds a fetch open when there is nothing new; it
	// also bounds how long a reader takes to notice ctx ending.
	readerFetchWait = 500 * time.Millisecond
	// readerBackoffMin and readerBackoffMax bound the pause before a reconnect or a listing
	// after a broker failure.
	readerBackoffMin = 100 * time.Millisecond
	readerBackoffMax = 5 * time.Second
)

// ReaderConfig configures a Reader.
type ReaderConfig struct {
	// Client says how to reach the cluster. Required.
	Client *Client
	// Topics are read, every partition of each. Required.
	Topics []string
	// Start is where the partitions found at the first listing are read from (default
	// FromStart). Partitions added later are read from their first offset: all they hold is
	// newer than the Reader.
	Start Start
	// Handle receives every record, in offset order within a partition, with a context that
	// ends when Run's does: a handler that blocks (on a consumer of its own, a schema
	// registry) returns then, and Run with it. It is called from one goroutine per partition,
	// so it must be safe for concurrent use; while it runs, its partition waits. Required.
	Handle func(ctx context.Context, r Record)
	// PartitionRefresh is how often the topics are listed again for added partitions
	// (default DefaultPartitionRefresh).
	PartitionRefresh time.Duration
	// MaxBytes bounds one fetch and must hold the largest record (default 16 MiB).
	MaxBytes int
	// Logger receives reconnects and progress. Optional.
	Logger *slog.Logger
}

func (c *ReaderConfig) setDefaults() {
	if c.PartitionRefresh == 0 {
		c.PartitionRefresh = DefaultPartitionRefresh
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultReaderMaxBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem with the configuration.
func (c *ReaderConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kafka reader config: "+format, args...))
	}
	if c.Client == nil {
		bad("Client is nil")
	}
	if len(c.Topics) == 0 {
		bad("Topics is empty")
	}
	for i, t := range c.Topics {
		if t == "" {
			bad("Topics[%d] is empty", i)
		}
	}
	if c.Start != FromStart && c.Start != FromEnd {
		bad("Start must be FromStart or FromEnd, got %d", int(c.Start))
	}
	if c.Handle == nil {
		bad("Handle is nil")
	}
	if c.PartitionRefresh <= 0 {
		bad("PartitionRefresh must be positive, got %s", c.PartitionRefresh)
	}
	if c.MaxBytes < 1 {
		bad("MaxBytes must be positive, got %d", c.MaxBytes)
	}
	return errors.Join(errs...)
}

// Reader reads every partition of its topics without a consumer group: nothing is
// committed, and every process reading sees every record. It reads each partition from the
// start (or the end), then follows it; it picks up partitions added to a topic; it recovers
// from any failure (a broker restarting, a leader moving) by reconnecting and resuming
// where it stopped, never giving a partition up.
//
// Read from the start, a compacted topic is a table: Ready says when every partition has
// been read up to where it ended when the Reader first reached it.
type Reader struct {
	cfg   ReaderConfig
	log   *slog.Logger
	retry backoff.Policy

	ready chan struct{} // closed once every partition of the first listing caught up

	mu      sync.Mutex
	parts   map[topicPartition]*partitionProgress
	listed  bool // the first listing is done
	pending int  // partitions of the first listing not caught up yet
	isReady bool
}

type topicPartition struct {
	topic     string
	partition int
}

// partitionProgress tracks one partition's reading.
type partitionProgress struct {
	start    int64 // where to begin: kafka.FirstOffset or kafka.LastOffset
	next     int64 // next offset to read; -1 before the first connection
	target   int64 // end offset at the first connection; -1 before it
	caughtUp bool
	initial  bool // found at the first listing
}

// NewReader checks cfg; nothing is read until Run.
func NewReader(cfg ReaderConfig) (*Reader, error) {
	cfg.Topics = slices.Clone(cfg.Topics)
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Reader{
		cfg:   cfg,
		log:   cfg.Logger.With("component", "kafka-reader", "topics", strings.Join(cfg.Topics, ",")),
		retry: backoff.Policy{Initial: readerBackoffMin, Max: readerBackoffMax},
		ready: make(chan struct{}),
		parts: make(map[topicPartition]*partitionProgress),
	}, nil
}

// Run reads until ctx ends, then returns nil. Broker failures, a topic that does not exist
// yet included, are logged and retried with backoff, never returned.
func (r *Reader) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		var parts map[string][]int
		err := r.retry.Retry(ctx, func(int) error {
			var err error
			parts, err = r.cfg.Client.partitions(ctx, r.cfg.Topics...)
			return err
		}, backoff.OnRetry(func(_ int, wait time.Duration, err error) {
			r.log.Warn("cannot list the partitions; retrying", "retry_in", wait, "err", err)
		}))
		if err != nil {
			return nil // only ctx ends an unbounded retry
		}
		for _, tp := range r.add(parts) {
			wg.Go(func() { r.readPartition(ctx, tp) })
		}
		if backoff.Sleep(ctx, r.cfg.PartitionRefresh) != nil {
			return nil
		}
	}
}

// Ready is closed once every partition found at the first listing has been read up to the
// end offset it had when the Reader first reached it.
func (r *Reader) Ready() <-chan struct{} { return r.ready }

// WaitReady waits for Ready, failing when ctx ends first with the partitions still behind.
func (r *Reader) WaitReady(ctx context.Context) error {
	select {
	case <-r.ready:
		return nil
	case <-ctx.Done():
		select {
		case <-r.ready:
			return nil
		default:
		}
		return fmt.Errorf("topics %s not read to the end yet (%s): %w", strings.Join(r.cfg.Topics, ", "), r.Lagging(), context.Cause(ctx))
	}
}

// Lagging describes the partitions not caught up yet, for error messages.
func (r *Reader) Lagging() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.listed {
		return "partitions not listed yet"
	}
	var out []string
	keys := slices.SortedFunc(maps.Keys(r.parts), func(a, b topicPartition) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return a.partition - b.partition
	})
	for _, tp := range keys {
		p := r.parts[tp]
		switch {
		case p.caughtUp:
		case p.target < 0:
			out = append(out, fmt.Sprintf("%s partition %d not reached", tp.topic, tp.partition))
		default:
			out = append(out, fmt.Sprintf("%s partition %d at offset %d of %d", tp.topic, tp.partition, p.next, p.target))
		}
	}
	if len(out) == 0 {
		return "all caught up"
	}
	return strings.Join(out, ", ")
}

// Partitions returns how many partitions are being read.
func (r *Reader) Partitions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.parts)
}

// add registers the partitions not seen before and returns them.
func (r *Reader) add(parts map[string][]int) []topicPartition {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := !r.listed
	r.listed = true
	var added []topicPartition
	for _, topic := range r.cfg.Topics {
		for _, id := range parts[topic] {
			tp := topicPartition{topic, id}
			if r.parts[tp] != nil {
				continue
			}
			p := &partitionProgress{start: kafka.FirstOffset, next: -1, target: -1, initial: first}
			if first {
				p.start = r.cfg.Start.offset()
				r.pending++
			} else {
				r.log.Info("reading a partition added to the topic", "topic", topic, "partition", id)
			}
			r.parts[tp] = p
			added = append(added, tp)
		}
	}
	if first && r.pending == 0 {
		r.markReady()
	}
	return added
}

// readPartition reads one partition until ctx ends, reconnecting with backoff, and resuming
// where it stopped, after any failure. A connection that read something ends a round of
// retries: it is reconnected at once, and failures after that back off from the minimum again.
func (r *Reader) readPartition(ctx context.Context, tp topicPartition) {
	next := int64(-1)
	logFailure := func(wait time.Duration, err error) {
		r.log.Warn("reading failed; reconnecting", "topic", tp.topic, "partition", tp.partition, "next_offset", next, "retry_in", wait, "err", err)
	}
	for ctx.Err() == nil {
		_ = r.retry.Retry(ctx, func(int) error {
			progressed, err := r.session(ctx, tp, &next)
			if progressed && ctx.Err() == nil {
				logFailure(0, err)
				return nil
			}
			return err
		}, backoff.OnRetry(func(_ int, wait time.Duration, err error) { logFailure(wait, err) }))
	}
}

// session connects to tp's leader and reads from *next on until the connection fails or ctx
// ends; progressed says whether any fetch succeeded.
func (r *Reader) session(ctx context.Context, tp topicPartition, next *int64) (progressed bool, err error) {
	conn, err := r.dialLeader(ctx, tp)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	return r.consume(ctx, conn, tp, next)
}

func (r *Reader) dialLeader(ctx context.Context, tp topicPartition) (*kafka.Conn, error) {
	dialer := r.cfg.Client.dialer()
	var errs []error
	for _, broker := range r.cfg.Client.cfg.Brokers {
		conn, err := dialer.DialLeader(ctx, "tcp", broker, tp.topic, tp.partition)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", broker, err))
	}
	return nil, fmt.Errorf("connecting to the leader of %s partition %d: %w", tp.topic, tp.partition, errors.Join(errs...))
}

// consume reads from *next on until ctx ends or the connection fails, keeping *next up to
// date. progressed says whether any fetch succeeded.
func (r *Reader) consume(ctx context.Context, conn *kafka.Conn, tp topicPartition, next *int64) (progressed bool, err error) {
	// Closing the connection is what interrupts a read in progress.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	if err := conn.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		return false, err
	}
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return false, fmt.Errorf("reading the offsets of %s partition %d: %w", tp.topic, tp.partition, err)
	}
	r.mu.Lock()
	start := r.parts[tp].start
	r.mu.Unlock()
	switch {
	case *next < 0 && start == kafka.LastOffset:
		*next = last
	case *next < 0:
		*next = first
	case *next < first:
		r.log.Warn("records removed before they were read", "topic", tp.topic, "partition", tp.partition, "from_offset", *next, "to_offset", first)
		*next = first
	case *next > last:
		r.log.Warn("partition ends before the next offset to read (was the topic recreated?); reading it from the start",
			"topic", tp.topic, "partition", tp.partition, "next_offset", *next, "end_offset", last)
		*next = first
	}
	if _, err := conn.Seek(*next, kafka.SeekAbsolute|kafka.SeekDontCheck); err != nil {
		return false, fmt.Errorf("seeking %s partition %d to offset %d: %w", tp.topic, tp.partition, *next, err)
	}
	// From here on each read sets its own deadline.
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return false, err
	}
	r.advance(tp, *next, last)

	for ctx.Err() == nil {
		if err := conn.SetReadDeadline(time.Now().Add(readerFetchWait + ioTimeout)); err != nil {
			return progressed, err
		}
		batch := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: r.cfg.MaxBytes, MaxWait: readerFetchWait})
		hwm := batch.HighWaterMark()
		for {
			if err := conn.SetReadDeadline(time.Now().Add(ioTimeout)); err != nil {
				break
			}
			msg, err := batch.ReadMessage()
			if err != nil {
				break
			}
			rec := fromKafka(msg)
			rec.Topic, rec.Partition, rec.HighWaterMark = tp.topic, tp.partition, hwm
			r.cfg.Handle(ctx, rec)
		}
		// kafka-go says RequestTimedOut of a fetch that waited its MaxWait and found
		// nothing new: an idle partition, read again on the same connection, as
		// kafka-go's own Reader does.
		if err := batch.Close(); err != nil && !errors.Is(err, kafka.RequestTimedOut) {
			if ctx.Err() != nil {
				return progressed, nil
			}
			return progressed, fmt.Errorf("fetching %s partition %d at offset %d: %w", tp.topic, tp.partition, *next, err)
		}
		progressed = true
		// The connection's offset, not the last record's: it also steps over records
		// compacted away and control records at the end of a batch.
		*next, _ = conn.Offset()
		r.advance(tp, *next, -1)
	}
	return progressed, nil
}

// advance records that tp will be read from next on; target, when not -1, is the
// partition's end offset, kept as the catch-up goal the first time it is given.
func (r *Reader) advance(tp topicPartition, next, target int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.parts[tp]
	p.next = next
	if p.target < 0 && target >= 0 {
		p.target = target
	}
	if p.caughtUp || p.target < 0 || next < p.target {
		return
	}
	p.caughtUp = true
	if !p.initial || r.isReady {
		return
	}
	r.pending--
	if r.pending == 0 {
		r.markReady()
	}
}

// markReady closes ready; r.mu is held.
func (r *Reader) markReady() {
	if r.isReady {
		return
	}
	r.isReady = true
	close(r.ready)
	r.log.Info("read to the end", "partitions", len(r.parts))
}
