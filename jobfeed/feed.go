// Package jobfeed brings the serve pipeline's events back from the event
// topics into a jobs.MemoryStore, so that an API replica without object
// storage answers for the requests the pipeline judged. It is the Kafka side
// of job status: package jobs itself knows no broker.
package jobfeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"rulevalidator/jobs"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// Config configures a Feed.
type Config struct {
	// Client says how to reach the cluster. Required.
	Client *stream.Client
	// SummaryTopic and VerdictTopic are read (defaults
	// rulevalidator.summaries and rulevalidator.verdicts).
	SummaryTopic, VerdictTopic string
	// Serde decodes the events. Required.
	Serde *schemas.Serde
	// Store receives them. Required.
	Store *jobs.MemoryStore
	// OnVerdict, when set, is also told each verdict, after Store.
	OnVerdict func(ctx context.Context, v schemas.VerdictEvent)
	// PartitionRefresh is how often the topics are checked for added
	// partitions (default stream.DefaultPartitionRefresh).
	PartitionRefresh time.Duration
	Logger           *slog.Logger
}

// Feed reads the summary and verdict topics from their end, every
// partition, without a consumer group (each API process sees every event and
// commits nothing), and records the events in a MemoryStore, so that the API
// answers for requests judged by the serve pipeline.
// Only job status is updated here: callbacks of such requests go through the
// callbacks topic (package outbox). Partitions added to the topics later are read from
// their start; a broker failure is retried, never the end of the feed.
type Feed struct {
	cfg    Config
	log    *slog.Logger
	reader *stream.Reader
}

// New checks cfg and returns a feed; Run starts it.
func New(cfg Config) (*Feed, error) {
	if cfg.SummaryTopic == "" {
		cfg.SummaryTopic = schemas.TopicSummaries
	}
	if cfg.VerdictTopic == "" {
		cfg.VerdictTopic = schemas.TopicVerdicts
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch {
	case cfg.Client == nil:
		return nil, errors.New("jobfeed: Config.Client is nil")
	case cfg.Serde == nil:
		return nil, errors.New("jobfeed: Config.Serde is required")
	case cfg.Store == nil:
		return nil, errors.New("jobfeed: Config.Store is required")
	case cfg.SummaryTopic == cfg.VerdictTopic:
		return nil, fmt.Errorf("jobfeed: Config: the summary and verdict topics are both %q", cfg.SummaryTopic)
	}
	f := &Feed{cfg: cfg, log: cfg.Logger.With("component", "jobfeed")}
	r, err := stream.NewReader(stream.ReaderConfig{
		Client:           cfg.Client,
		Topics:           []string{cfg.SummaryTopic, cfg.VerdictTopic},
		Start:            stream.FromEnd,
		Handle:           f.record,
		PartitionRefresh: cfg.PartitionRefresh,
		Logger:           f.log,
	})
	if err != nil {
		return nil, fmt.Errorf("jobfeed: %w", err)
	}
	f.reader = r
	return f, nil
}

// Ready is closed once every partition's reader is positioned at the end
// offset it had when Run started: events written after that are seen.
func (f *Feed) Ready() <-chan struct{} { return f.reader.Ready() }

// Run reads until ctx is cancelled, then returns nil.
func (f *Feed) Run(ctx context.Context) error { return f.reader.Run(ctx) }

// record records one event; undecodable ones are logged and skipped, since
// the feed only mirrors status.
func (f *Feed) record(ctx context.Context, m stream.Record) {
	ev, err := f.cfg.Serde.Decode(ctx, m.Topic, m.Value, m.Headers)
	if err != nil {
		f.log.Warn("jobs: job feed skipped an event it cannot decode", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "err", err)
		return
	}
	switch e := ev.(type) {
	case *schemas.SummaryEvent:
		f.cfg.Store.RecordSummary(*e)
	case *schemas.VerdictEvent:
		f.cfg.Store.RecordVerdict(*e)
		if f.cfg.OnVerdict != nil {
			f.cfg.OnVerdict(ctx, *e)
		}
	default:
		f.log.Warn("jobs: job feed skipped an event of an unexpected kind", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "schema", ev.SchemaName())
	}
}
