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

// RequestWriterConfig configures a RequestWriter.
type RequestWriterConfig struct {
	// Client says how to reach the cluster. Required.
	Client *stream.Client
	// Topic is the requests topic (default schemas.TopicRequests).
	Topic string
	// WriteTimeout bounds one write, acks included (default 10s); the
	// caller's context may end it sooner.
	WriteTimeout time.Duration
	// Completed, when set, is told the records of each acknowledged batch,
	// their partitions and offsets filled in, before Write returns.
	Completed func([]stream.Record)
	// TracerProvider makes a PRODUCER span per write (see send), whose
	// context the requests carry; nil makes none.
	TracerProvider trace.TracerProvider
}

// Submission is one validation request to write, with the W3C trace context
// it carries on: traceparent and tracestate headers (see TraceHeaders), none
// when Trace is empty.
type Submission struct {
	Request *schemas.Request
	Trace   []stream.Header
}

// RequestWriter writes validation requests to the requests topic, the way
// every producer of requests in this project does (the API's submissions,
// `rulevalidator produce`): the record RequestRecord builds, waiting for
// every in-sync replica. The stream writer's murmur2 partitioner puts a
// request id on the partition upstream Java or librdkafka (murmur2)
// producers put it on. It is safe for concurrent use.
type RequestWriter struct {
	serde  *schemas.Serde
	writer *stream.Writer
	topic  string
	tracer trace.Tracer
}

// NewRequestWriter checks cfg and returns a writer encoding with serde. It
// reads the requests topic's size limit (see stream.NewWriter).
func NewRequestWriter(ctx context.Context, cfg RequestWriterConfig, serde *schemas.Serde) (*RequestWriter, error) {
	if cfg.Topic == "" {
		cfg.Topic = schemas.TopicRequests
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	switch {
	case cfg.Client == nil:
		return nil, errors.New("producer: RequestWriterConfig.Client is nil")
	case serde == nil:
		return nil, errors.New("producer: a RequestWriter needs a serde")
	case cfg.WriteTimeout < 0:
		return nil, fmt.Errorf("producer: RequestWriterConfig.WriteTimeout %v must be positive", cfg.WriteTimeout)
	}
	w, err := stream.NewWriter(ctx, stream.WriterConfig{
		Client:       cfg.Client,
		Topics:       []string{cfg.Topic},
		WriteTimeout: cfg.WriteTimeout,
		Completed:    cfg.Completed,
	})
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	return &RequestWriter{serde: serde, topic: cfg.Topic, writer: w, tracer: tracerOf(cfg.TracerProvider)}, nil
}

// Write encodes the requests and writes them in one call, returning once
// every one is acknowledged.
func (w *RequestWriter) Write(ctx context.Context, subs ...Submission) error {
	recs := make([]stream.Record, len(subs))
	for i, s := range subs {
		rec, err := RequestRecord(w.serde, w.topic, s)
		if err != nil {
			return err
		}
		recs[i] = rec
	}
	if err := send(ctx, w.tracer, w.writer, recs); err != nil {
		if len(subs) == 1 {
			return fmt.Errorf("producer: writing request %q to %s: %w", subs[0].Request.RequestID, w.topic, err)
		}
		return fmt.Errorf("producer: writing %d requests to %s: %w", len(subs), w.topic, err)
	}
	return nil
}

// Close flushes and closes the writer.
func (w *RequestWriter) Close() error { return w.writer.Close() }

// RequestRecord is the record of a request on topic: the request in serde's
// wire format with its headers, keyed by request id, with HeaderTenant and
// the submission's trace headers.
func RequestRecord(serde *schemas.Serde, topic string, s Submission) (stream.Record, error) {
	req := s.Request
	value, sh, err := serde.Encode(topic, req)
	if err != nil {
		return stream.Record{}, fmt.Errorf("producer: encoding request %q: %w", req.RequestID, err)
	}
	headers := make([]stream.Header, 0, len(sh)+1+len(s.Trace))
	headers = append(headers, sh...)
	headers = append(headers, stream.Header{Key: HeaderTenant, Value: []byte(req.TenantID)})
	headers = append(headers, s.Trace...)
	return stream.Record{Topic: topic, Key: []byte(req.RequestID), Value: value, Headers: headers}, nil
}

// TraceHeaders are the headers of a W3C trace context: traceparent, and
// tracestate when it is not empty; none when traceparent is empty. Checking
// the values is the caller's.
func TraceHeaders(traceparent, tracestate string) []stream.Header {
	if traceparent == "" {
		return nil
	}
	h := []stream.Header{{Key: HeaderTraceparent, Value: []byte(traceparent)}}
	if tracestate != "" {
		h = append(h, stream.Header{Key: HeaderTracestate, Value: []byte(tracestate)})
	}
	return h
}
