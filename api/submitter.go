package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/producer"
	"rulevalidator/schemas"
)

// KafkaSubmitterConfig configures a KafkaSubmitter.
type KafkaSubmitterConfig struct {
	Brokers []string
	// Topic is the requests topic (default rulevalidator.requests).
	Topic string
	// WriteTimeout bounds one write, acks included (default 10s); the
	// request's context may end it sooner.
	WriteTimeout time.Duration
	// Transport overrides kafka-go's default transport (TLS, SASL).
	Transport kafka.RoundTripper
}

// KafkaSubmitter publishes validation requests to the requests topic, keyed
// by request id, waiting for every in-sync replica.
type KafkaSubmitter struct {
	serde  *schemas.Serde
	writer *kafka.Writer
	topic  string
}

// NewKafkaSubmitter checks cfg and returns a submitter encoding with serde.
func NewKafkaSubmitter(cfg KafkaSubmitterConfig, serde *schemas.Serde) (*KafkaSubmitter, error) {
	if cfg.Topic == "" {
		cfg.Topic = "rulevalidator.requests"
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	switch {
	case len(cfg.Brokers) == 0:
		return nil, errors.New("api: KafkaSubmitterConfig.Brokers is empty")
	case serde == nil:
		return nil, errors.New("api: a KafkaSubmitter needs a serde")
	case cfg.WriteTimeout < 0:
		return nil, fmt.Errorf("api: KafkaSubmitterConfig.WriteTimeout %v must be positive", cfg.WriteTimeout)
	}
	for i, b := range cfg.Brokers {
		if b == "" {
			return nil, fmt.Errorf("api: KafkaSubmitterConfig.Brokers[%d] is empty", i)
		}
	}
	return &KafkaSubmitter{
		serde: serde,
		topic: cfg.Topic,
		writer: &kafka.Writer{
			Addr: kafka.TCP(cfg.Brokers...),
			// The Java client's partitioner, so that requests keyed by the
			// same id land where upstream Java producers put them.
			Balancer:               &kafka.Murmur2Balancer{},
			RequiredAcks:           kafka.RequireAll,
			BatchTimeout:           5 * time.Millisecond,
			WriteTimeout:           cfg.WriteTimeout,
			MaxAttempts:            3,
			AllowAutoTopicCreation: false,
			Transport:              cfg.Transport,
		},
	}, nil
}

// Submit encodes req and writes it, returning once it is acknowledged. The
// W3C trace context of the HTTP request, when it had one, goes along in the
// traceparent and tracestate headers.
func (k *KafkaSubmitter) Submit(ctx context.Context, req *schemas.Request) error {
	value, sh, err := k.serde.Encode(k.topic, req)
	if err != nil {
		return fmt.Errorf("api: encoding request %q: %w", req.RequestID, err)
	}
	headers := make([]kafka.Header, 0, len(sh)+3)
	for _, h := range sh {
		headers = append(headers, kafka.Header{Key: h.Key, Value: h.Value})
	}
	headers = append(headers, kafka.Header{Key: producer.HeaderTenant, Value: []byte(req.TenantID)})
	if tc, ok := traceFrom(ctx); ok {
		headers = append(headers, kafka.Header{Key: producer.HeaderTraceparent, Value: []byte(tc.traceparent)})
		if tc.tracestate != "" {
			headers = append(headers, kafka.Header{Key: producer.HeaderTracestate, Value: []byte(tc.tracestate)})
		}
	}
	err = k.writer.WriteMessages(ctx, kafka.Message{
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
