package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// ReviewWriterConfig configures a ReviewWriter.
type ReviewWriterConfig struct {
	// Client says how to reach the cluster. Required.
	Client *stream.Client
	// Topic is the reviews topic (default schemas.TopicReviews).
	Topic string
	// Source is the CloudEvents ce_source (default "rulevalidator").
	Source string
	// WriteTimeout bounds one write, acks included (default 10s).
	WriteTimeout time.Duration
	// TracerProvider makes a PRODUCER span per write (see send); nil makes
	// none.
	TracerProvider trace.TracerProvider
}

// ReviewWriter publishes reviews to the reviews topic, each with the
// CloudEvents headers every event carries, keyed request_id/rule_id so
// that one rule's reviews keep their order. It is safe for concurrent use.
type ReviewWriter struct {
	serde  *schemas.Serde
	writer *stream.Writer
	topic  string
	source string
	tracer trace.Tracer
}

// NewReviewWriter checks cfg and returns a writer encoding with serde.
func NewReviewWriter(ctx context.Context, cfg ReviewWriterConfig, serde *schemas.Serde) (*ReviewWriter, error) {
	if cfg.Topic == "" {
		cfg.Topic = schemas.TopicReviews
	}
	if cfg.Source == "" {
		cfg.Source = "rulevalidator"
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	switch {
	case cfg.Client == nil:
		return nil, errors.New("producer: ReviewWriterConfig.Client is nil")
	case serde == nil:
		return nil, errors.New("producer: a ReviewWriter needs a serde")
	case cfg.WriteTimeout < 0:
		return nil, fmt.Errorf("producer: ReviewWriterConfig.WriteTimeout %v must be positive", cfg.WriteTimeout)
	}
	w, err := stream.NewWriter(ctx, stream.WriterConfig{Client: cfg.Client, Topics: []string{cfg.Topic}, WriteTimeout: cfg.WriteTimeout})
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	return &ReviewWriter{serde: serde, writer: w, topic: cfg.Topic, source: cfg.Source, tracer: tracerOf(cfg.TracerProvider)}, nil
}

// PublishReview writes r and returns once it is acknowledged.
func (w *ReviewWriter) PublishReview(ctx context.Context, r *schemas.ReviewEvent) error {
	rec, err := ReviewRecord(w.serde, w.topic, w.source, r)
	if err != nil {
		return err
	}
	if err := send(ctx, w.tracer, w.writer, []stream.Record{rec}); err != nil {
		return fmt.Errorf("producer: writing review %q to %s: %w", r.EventID, w.topic, err)
	}
	return nil
}

// Close flushes and closes the writer.
func (w *ReviewWriter) Close() error { return w.writer.Close() }

// ReviewRecord is the record of a review on topic: the review in serde's
// wire format, keyed request_id/rule_id, with the CloudEvents headers (the
// rule as ce_subject) and the tenant.
func ReviewRecord(serde *schemas.Serde, topic, source string, r *schemas.ReviewEvent) (stream.Record, error) {
	return eventRecord(serde, source, topic, schemas.ReviewEventKey(r.RequestID, r.RuleID), r.EventID, r.TenantID, r.RuleID, r.ReviewedAt, r, nil)
}
