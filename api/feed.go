package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/schemas"
)

// JobFeedConfig configures a JobFeed.
type JobFeedConfig struct {
	Brokers []string
	// SummaryTopic and VerdictTopic are read (defaults
	// rulevalidator.summaries and rulevalidator.verdicts).
	SummaryTopic, VerdictTopic string
	// Serde decodes the events. Required.
	Serde *schemas.Serde
	// Jobs receives them. Required.
	Jobs *JobStore
	// Dialer overrides kafka-go's default dialer for the readers (TLS, SASL).
	Dialer *kafka.Dialer
	// Transport overrides kafka-go's default transport for the metadata and
	// offset requests.
	Transport kafka.RoundTripper
	// RetryDelay is the wait before retrying a failed start (default 2s).
	RetryDelay time.Duration
	Logger     *slog.Logger
}

// JobFeed reads the summary and verdict topics from their end, every
// partition, without a consumer group (each API process sees every event and
// commits nothing), and records the events in a JobStore so that GET
// /v1/validations/{id} answers for requests judged by the serve pipeline.
// Only job status is updated here: callbacks of such requests are the serve
// pipeline's to send. Partitions added after Run started are not read until
// the next start.
type JobFeed struct {
	cfg   JobFeedConfig
	log   *slog.Logger
	ready chan struct{}
}

// NewJobFeed checks cfg and returns a feed; Run starts it.
func NewJobFeed(cfg JobFeedConfig) (*JobFeed, error) {
	if cfg.SummaryTopic == "" {
		cfg.SummaryTopic = "rulevalidator.summaries"
	}
	if cfg.VerdictTopic == "" {
		cfg.VerdictTopic = "rulevalidator.verdicts"
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch {
	case len(cfg.Brokers) == 0:
		return nil, errors.New("api: JobFeedConfig.Brokers is empty")
	case cfg.Serde == nil:
		return nil, errors.New("api: JobFeedConfig.Serde is required")
	case cfg.Jobs == nil:
		return nil, errors.New("api: JobFeedConfig.Jobs is required")
	case cfg.SummaryTopic == cfg.VerdictTopic:
		return nil, fmt.Errorf("api: JobFeedConfig: the summary and verdict topics are both %q", cfg.SummaryTopic)
	}
	return &JobFeed{
		cfg:   cfg,
		log:   cfg.Logger.With("component", "jobfeed"),
		ready: make(chan struct{}),
	}, nil
}

// Ready is closed once every partition's reader is positioned at the end
// offset it had when Run started: events written after that are seen.
func (f *JobFeed) Ready() <-chan struct{} { return f.ready }

// Run reads until ctx is cancelled, then returns nil. Failing to list the
// partitions or their offsets is logged and retried.
func (f *JobFeed) Run(ctx context.Context) error {
	var starts []partitionStart
	for {
		var err error
		starts, err = f.endOffsets(ctx)
		if err == nil {
			break
		}
		f.log.Warn("api: job feed cannot start; retrying", "error", err, "retry_in", f.cfg.RetryDelay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(f.cfg.RetryDelay):
		}
	}
	var wg sync.WaitGroup
	for _, s := range starts {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   f.cfg.Brokers,
			Topic:     s.topic,
			Partition: s.partition,
			Dialer:    f.cfg.Dialer,
			MinBytes:  1,
			MaxBytes:  10 << 20,
			MaxWait:   500 * time.Millisecond,
		})
		if err := r.SetOffset(s.offset); err != nil {
			r.Close()
			return fmt.Errorf("api: job feed: %s[%d]: setting offset %d: %w", s.topic, s.partition, s.offset, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			f.read(ctx, r, s)
		}()
	}
	f.log.Info("api: job feed started", "partitions", len(starts))
	close(f.ready)
	wg.Wait()
	return nil
}

type partitionStart struct {
	topic     string
	partition int
	offset    int64
}

// endOffsets lists every partition of both topics with its end offset.
func (f *JobFeed) endOffsets(ctx context.Context) ([]partitionStart, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(f.cfg.Brokers...), Transport: f.cfg.Transport}
	topics := []string{f.cfg.SummaryTopic, f.cfg.VerdictTopic}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("reading metadata of %v: %w", topics, err)
	}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for _, t := range meta.Topics {
		if t.Error != nil {
			return nil, fmt.Errorf("topic %q: %w", t.Name, t.Error)
		}
		for _, p := range t.Partitions {
			req.Topics[t.Name] = append(req.Topics[t.Name], kafka.LastOffsetOf(p.ID))
		}
	}
	for _, name := range topics {
		if len(req.Topics[name]) == 0 {
			return nil, fmt.Errorf("topic %q has no partitions", name)
		}
	}
	offsets, err := client.ListOffsets(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("listing the end offsets of %v: %w", topics, err)
	}
	var starts []partitionStart
	for topic, parts := range offsets.Topics {
		for _, p := range parts {
			if p.Error != nil {
				return nil, fmt.Errorf("end offset of %s[%d]: %w", topic, p.Partition, p.Error)
			}
			starts = append(starts, partitionStart{topic: topic, partition: p.Partition, offset: p.LastOffset})
		}
	}
	return starts, nil
}

// read records each event of one partition; undecodable ones are logged and
// skipped, since the feed only mirrors status.
func (f *JobFeed) read(ctx context.Context, r *kafka.Reader, s partitionStart) {
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() == nil {
				f.log.Error("api: job feed stopped reading", "topic", s.topic, "partition", s.partition, "error", err)
			}
			return
		}
		headers := make([]schemas.Header, len(m.Headers))
		for i, h := range m.Headers {
			headers[i] = schemas.Header{Key: h.Key, Value: h.Value}
		}
		ev, err := f.cfg.Serde.Decode(ctx, m.Topic, m.Value, headers)
		if err != nil {
			f.log.Warn("api: job feed skipped an event it cannot decode", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "error", err)
			continue
		}
		switch e := ev.(type) {
		case *schemas.SummaryEvent:
			f.cfg.Jobs.RecordSummary(*e)
		case *schemas.VerdictEvent:
			f.cfg.Jobs.RecordVerdict(*e)
		default:
			f.log.Warn("api: job feed skipped an event of an unexpected kind", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "schema", ev.SchemaName())
		}
	}
}
