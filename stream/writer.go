package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// Defaults for WriterConfig's zero fields.
const (
	// DefaultBatchTimeout is short (kafka-go's own default is 1s) because a longer wait buys
	// nothing and delays every request: 5ms cost about a third of the end-to-end throughput at
	// the default concurrency (bench/).
	DefaultBatchTimeout = time.Millisecond
	DefaultWriteTimeout = 30 * time.Second
	DefaultMaxAttempts  = 3
	// defaultMaxMessageBytes is Kafka's own default of message.max.bytes, used for a topic
	// whose limit could not be read yet.
	defaultMaxMessageBytes = 1048588
)

// ErrTooLarge marks a record larger than its topic accepts (max.message.bytes).
var ErrTooLarge = errors.New("record larger than the topic's max.message.bytes")

// WriterConfig configures a Writer.
type WriterConfig struct {
	// Client says how to reach the cluster. Required.
	Client *Client
	// Topics are the topics this writer writes to; each one's max.message.bytes is read at
	// start and bounds its batches and records. Required.
	Topics []string
	// BatchTimeout bounds how long a batch stays open for other writes (default
	// DefaultBatchTimeout).
	BatchTimeout time.Duration
	// WriteTimeout bounds one write, acks included (default DefaultWriteTimeout).
	WriteTimeout time.Duration
	// MaxAttempts is how often a write is tried before it fails (default DefaultMaxAttempts).
	MaxAttempts int
	// Completed, when set, is called with the records of each acknowledged batch, their
	// Partition and Offset filled in, before Write returns.
	Completed func(records []Record)
	// Logger receives warnings (a topic limit that could not be read). Optional.
	Logger *slog.Logger
}

func (c *WriterConfig) setDefaults() {
	if c.BatchTimeout == 0 {
		c.BatchTimeout = DefaultBatchTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem with the configuration.
func (c *WriterConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kafka writer config: "+format, args...))
	}
	if c.Client == nil {
		bad("Client is nil")
	}
	if len(c.Topics) == 0 {
		bad("Topics is empty; name every topic the writer writes to")
	}
	for i, t := range c.Topics {
		if t == "" {
			bad("Topics[%d] is empty", i)
		}
	}
	if c.BatchTimeout < 0 {
		bad("BatchTimeout must not be negative, got %s", c.BatchTimeout)
	}
	if c.WriteTimeout <= 0 {
		bad("WriteTimeout must be positive, got %s", c.WriteTimeout)
	}
	if c.MaxAttempts < 1 {
		bad("MaxAttempts must be positive, got %d", c.MaxAttempts)
	}
	return errors.Join(errs...)
}

// Writer writes records to the topics it was made for, each acknowledged by every in-sync
// replica. Every record is placed by one partitioner, murmur2 of its key as the Java client's
// default partitioner does (positive hash modulo the partition count), so a key lands on the
// same partition whichever producer wrote it. It is safe for concurrent use.
type Writer struct {
	cfg WriterConfig
	log *slog.Logger

	mu     sync.Mutex
	topics map[string]*topicWriter
	// byLimit holds one kafka-go writer per batch limit: topics with the same limit share
	// one, so that one request's events for several topics go out in one call.
	byLimit map[int]*kafka.Writer
}

// topicWriter is one topic's limit and the kafka-go writer whose batch limit it is.
type topicWriter struct {
	w        *kafka.Writer
	maxBytes int
	known    bool      // maxBytes was read from the cluster
	nextTry  time.Time // when an unknown limit may be asked for again
}

// limitRetry spaces the attempts to read a topic's limit while the cluster does not answer,
// so that writes do not each wait for the question.
const limitRetry = 30 * time.Second

// batchMargin is kept free in every batch for the batch's own framing, which kafka-go does
// not count against BatchBytes but brokers count against max.message.bytes.
const batchMargin = 64

// NewWriter checks cfg and reads each topic's max.message.bytes. A topic the cluster does
// not have is an error; a limit that cannot be read now (a broker down) is read again at the
// first write to that topic, Kafka's default standing in until then.
func NewWriter(ctx context.Context, cfg WriterConfig) (*Writer, error) {
	cfg.Topics = slices.Compact(slices.Sorted(slices.Values(cfg.Topics)))
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Writer{cfg: cfg, log: cfg.Logger.With("component", "kafka-writer"), topics: make(map[string]*topicWriter), byLimit: make(map[int]*kafka.Writer)}
	errs := make([]error, len(cfg.Topics))
	var wg sync.WaitGroup
	for i, topic := range cfg.Topics {
		wg.Go(func() { _, errs[i] = w.topic(ctx, topic) })
	}
	wg.Wait()
	for _, err := range errs {
		if errors.Is(err, ErrUnknownTopic) {
			w.Close()
			return nil, err
		}
	}
	return w, nil
}

// topic returns topic's writer, reading its limit when it is not known yet. The question
// goes to the cluster without the lock held; while it is out, other writes use the stand-in.
func (w *Writer) topic(ctx context.Context, topic string) (*topicWriter, error) {
	w.mu.Lock()
	tw := w.topics[topic]
	if tw != nil && (tw.known || time.Now().Before(tw.nextTry)) {
		w.mu.Unlock()
		return tw, nil
	}
	if tw == nil && !slices.Contains(w.cfg.Topics, topic) {
		w.mu.Unlock()
		return nil, fmt.Errorf("kafka writer: topic %q is not one of %v", topic, w.cfg.Topics)
	}
	if tw != nil {
		tw.nextTry = time.Now().Add(limitRetry) // this caller asks; the others go on
	}
	w.mu.Unlock()

	limit, err := w.cfg.Client.MaxMessageBytes(ctx, topic)

	w.mu.Lock()
	defer w.mu.Unlock()
	if cur := w.topics[topic]; cur != nil && (cur.known || err != nil) {
		return cur, nil // known meanwhile, or keep the stand-in
	}
	switch {
	case errors.Is(err, ErrUnknownTopic):
		return nil, err
	case err != nil:
		w.log.Warn("cannot read the topic's max.message.bytes yet; assuming Kafka's default", "topic", topic, "default", defaultMaxMessageBytes, "err", err)
		limit = defaultMaxMessageBytes
	}
	kw := w.byLimit[limit]
	if kw == nil {
		kw = w.kafkaWriter(limit)
		w.byLimit[limit] = kw
	}
	// A stand-in's writer stays: other topics, or writes under way, may use it.
	tw = &topicWriter{maxBytes: limit, known: err == nil, nextTry: time.Now().Add(limitRetry), w: kw}
	w.topics[topic] = tw
	return tw, nil
}

func (w *Writer) kafkaWriter(limit int) *kafka.Writer {
	kw := &kafka.Writer{
		Addr:     kafka.TCP(w.cfg.Client.cfg.Brokers...),
		Balancer: &kafka.Murmur2Balancer{},
		// The batch limit is the topic's: a record the topic accepts is never refused here.
		BatchBytes:             int64(max(limit-batchMargin, batchMargin)),
		RequiredAcks:           kafka.RequireAll,
		BatchTimeout:           w.cfg.BatchTimeout,
		WriteTimeout:           w.cfg.WriteTimeout,
		MaxAttempts:            w.cfg.MaxAttempts,
		AllowAutoTopicCreation: false,
		Transport:              w.cfg.Client.transport,
	}
	if done := w.cfg.Completed; done != nil {
		kw.Completion = func(msgs []kafka.Message, err error) {
			if err != nil {
				return
			}
			recs := make([]Record, len(msgs))
			for i, m := range msgs {
				recs[i] = fromKafka(m)
			}
			done(recs)
		}
	}
	return kw
}

// MaxRecordBytes is the largest record topic accepts, as Record.Size counts it.
func (w *Writer) MaxRecordBytes(ctx context.Context, topic string) (int, error) {
	tw, err := w.topic(ctx, topic)
	if err != nil {
		return 0, err
	}
	return tw.maxBytes, nil
}

// Write writes records, each to its Topic, and returns once every one is acknowledged. A
// record larger than its topic accepts fails the write at once with ErrTooLarge, before
// anything is sent. Records for one topic keep their order; topics whose limits differ are
// written in parallel.
func (w *Writer) Write(ctx context.Context, records ...Record) error {
	if len(records) == 0 {
		return nil
	}
	var order []*kafka.Writer
	batches := make(map[*kafka.Writer][]kafka.Message)
	writers := make(map[string]*topicWriter)
	for i := range records {
		r := &records[i]
		tw, ok := writers[r.Topic]
		if !ok {
			var err error
			if tw, err = w.topic(ctx, r.Topic); err != nil {
				return err
			}
			writers[r.Topic] = tw
		}
		if size := r.Size(); size > tw.maxBytes {
			return fmt.Errorf("writing key %q to topic %s: %d bytes, the topic takes at most %d: %w", r.Key, r.Topic, size, tw.maxBytes, ErrTooLarge)
		}
		if _, seen := batches[tw.w]; !seen {
			order = append(order, tw.w)
		}
		batches[tw.w] = append(batches[tw.w], toKafka(*r))
	}
	write := func(kw *kafka.Writer) error {
		msgs := batches[kw]
		if err := kw.WriteMessages(ctx, msgs...); err != nil {
			if tooLarge(err) {
				err = fmt.Errorf("%w: %w", ErrTooLarge, err)
			}
			return fmt.Errorf("writing %d record(s) to %s: %w", len(msgs), topicsOf(msgs), err)
		}
		return nil
	}
	if len(order) == 1 {
		return write(order[0])
	}
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, kw := range order {
		wg.Go(func() { errs[i] = write(kw) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// topicsOf names the topics of msgs for errors: "topic a" or "topics a, b".
func topicsOf(msgs []kafka.Message) string {
	var names []string
	for _, m := range msgs {
		if !slices.Contains(names, m.Topic) {
			names = append(names, m.Topic)
		}
	}
	if len(names) == 1 {
		return "topic " + names[0]
	}
	return "topics " + strings.Join(names, ", ")
}

// tooLarge says whether a kafka-go error is about a record's or a batch's size.
func tooLarge(err error) bool {
	var mtl kafka.MessageTooLargeError
	if errors.As(err, &mtl) || errors.Is(err, kafka.MessageSizeTooLarge) {
		return true
	}
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) {
		for _, e := range werrs {
			if e != nil && tooLarge(e) {
				return true
			}
		}
	}
	return false
}

// Close flushes and closes the writer.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for _, kw := range w.byLimit {
		errs = append(errs, kw.Close())
	}
	clear(w.topics)
	clear(w.byLimit)
	return errors.Join(errs...)
}

// Partition is the partition murmur2 puts key in, of n: the Java client's default
// partitioner for records with a key (toPositive(murmur2(key)) % n).
func Partition(key []byte, n int) int {
	if n <= 0 {
		return 0
	}
	if key == nil {
		key = []byte{}
	}
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	return (&kafka.Murmur2Balancer{Consistent: true}).Balance(kafka.Message{Key: key}, ids...)
}
