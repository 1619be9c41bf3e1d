package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"rulevalidator/producer"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// KafkaSubmitterConfig configures a KafkaSubmitter.
type KafkaSubmitterConfig struct {
	// Client says how to reach the cluster. Required.
	Client *stream.Client
	// Topic is the requests topic (default rulevalidator.requests).
	Topic string
	// WriteTimeout bounds one write, acks included (default 10s); the
	// request's context may end it sooner.
	WriteTimeout time.Duration
}

// KafkaSubmitter publishes validation requests to the requests topic, keyed
// by request id, waiting for every in-sync replica. The stream writer's
// murmur2 partitioner puts a request id on the partition `rulevalidator
// produce` and upstream Java or librdkafka (murmur2) producers put it on.
type KafkaSubmitter struct {
	serde  *schemas.Serde
	writer *stream.Writer
	topic  string
}

// NewKafkaSubmitter checks cfg and returns a submitter encoding with serde.
// It reads the requests topic's size limit (see stream.NewWriter).
func NewKafkaSubmitter(ctx context.Context, cfg KafkaSubmitterConfig, serde *schemas.Serde) (*KafkaSubmitter, error) {
	if cfg.Topic == "" {
		cfg.Topic = "rulevalidator.requests"
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	switch {
	case cfg.Client == nil:
		return nil, errors.New("api: KafkaSubmitterConfig.Client is nil")
	case serde == nil:
		return nil, errors.New("api: a KafkaSubmitter needs a serde")
	case cfg.WriteTimeout < 0:
		return nil, fmt.Errorf("api: KafkaSubmitterConfig.WriteTimeout %v must be positive", cfg.WriteTimeout)
	}
	w, err := stream.NewWriter(ctx, stream.WriterConfig{
		Client:       cfg.Client,
		Topics:       []string{cfg.Topic},
		WriteTimeout: cfg.WriteTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	return &KafkaSubmitter{serde: serde, topic: cfg.Topic, writer: w}, nil
}

// Submit encodes req and writes it, returning once it is acknowledged. The
// W3C trace context of the HTTP request, when it had one, goes along in the
// traceparent and tracestate headers.
func (k *KafkaSubmitter) Submit(ctx context.Context, req *schemas.Request) error {
	value, sh, err := k.serde.Encode(k.topic, req)
	if err != nil {
		return fmt.Errorf("api: encoding request %q: %w", req.RequestID, err)
	}
	headers := make([]stream.Header, 0, len(sh)+3)
	for _, h := range sh {
		headers = append(headers, stream.Header{Key: h.Key, Value: h.Value})
	}
	headers = append(headers, stream.Header{Key: producer.HeaderTenant, Value: []byte(req.TenantID)})
	if tc, ok := traceFrom(ctx); ok {
		headers = append(headers, stream.Header{Key: producer.HeaderTraceparent, Value: []byte(tc.traceparent)})
		if tc.tracestate != "" {
			headers = append(headers, stream.Header{Key: producer.HeaderTracestate, Value: []byte(tc.tracestate)})
		}
	}
	err = k.writer.Write(ctx, stream.Record{
		Topic:   k.topic,
		Key:     []byte(req.RequestID),
		Value:   value,
		Headers: headers,
	})
	if err != nil {
		return fmt.Errorf("api: writing request %q to %s: %w", req.RequestID, k.topic, err)
	}
	return nil
}

// Close flushes and closes the writer.
func (k *KafkaSubmitter) Close() error { return k.writer.Close() }
