// Package producer writes the service's events to Kafka: one verdict event
// per rule and one summary per request, written together, and dead letters.
// Every write waits for all in-sync replicas (acks=all).
package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/consumer"
	"rulevalidator/schemas"
)

// CloudEvents binary-mode and tracing headers carried by every event.
const (
	HeaderCEID          = "ce_id"
	HeaderCEType        = "ce_type"
	HeaderCESource      = "ce_source"
	HeaderCESpecVersion = "ce_specversion"
	HeaderCETime        = "ce_time"
	HeaderCESubject     = "ce_subject"
	HeaderContentType   = "content-type"
	HeaderTraceparent   = "traceparent"
	HeaderTracestate    = "tracestate"
	// HeaderEventID repeats ce_id under the project's own name, for consumers
	// that de-duplicate without knowing CloudEvents.
	HeaderEventID = "rv-event-id"
	HeaderTenant  = "rv-tenant-id"

	// Dead-letter headers, after Kafka Connect's __connect.errors.* convention.
	HeaderDLQTopic     = "__connect.errors.topic"
	HeaderDLQPartition = "__connect.errors.partition"
	HeaderDLQOffset    = "__connect.errors.offset"
	HeaderDLQReason    = "__connect.errors.exception.class.name"
	HeaderDLQMessage   = "__connect.errors.exception.message"
	HeaderDLQReasonRV  = "rv-dlq-reason"

	contentTypeAvro = "application/avro"
	ceSpecVersion   = "1.0"
)

// DefaultBatchTimeout is Config.BatchTimeout's default. It is short (kafka-go's
// own default is 1s) because a longer wait buys nothing and delays every
// request: 5ms cost about a third of the end-to-end throughput at the default
// concurrency (bench/).
const DefaultBatchTimeout = time.Millisecond

// Config configures a Producer.
type Config struct {
	Brokers []string
	// VerdictTopic, SummaryTopic and DeadLetterTopic are where each kind of
	// event goes (defaults rulevalidator.verdicts, rulevalidator.summaries,
	// rulevalidator.deadletter).
	VerdictTopic    string
	SummaryTopic    string
	DeadLetterTopic string
	// Source is the CloudEvents ce_source (default "rulevalidator").
	Source string
	// BatchTimeout bounds how long a batch stays open for other writes
	// (default DefaultBatchTimeout). A request's events join their batches in
	// one call, and the request holds a consumer slot while it waits.
	BatchTimeout time.Duration
	// WriteTimeout bounds one write, acks included (default 30s).
	WriteTimeout time.Duration
	// MaxAttempts is how often kafka-go tries a write before giving up
	// (default 3); the consumer's retry middleware retries after that.
	MaxAttempts int
	// Transport overrides kafka-go's default transport (tests, TLS, SASL).
	Transport kafka.RoundTripper
	Logger    *slog.Logger
}

func (c *Config) setDefaults() {
	if c.VerdictTopic == "" {
		c.VerdictTopic = "rulevalidator.verdicts"
	}
	if c.SummaryTopic == "" {
		c.SummaryTopic = "rulevalidator.summaries"
	}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = "rulevalidator.deadletter"
	}
	if c.Source == "" {
		c.Source = "rulevalidator"
	}
	if c.BatchTimeout == 0 {
		c.BatchTimeout = DefaultBatchTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 3
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first problem with the configuration.
func (c *Config) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("producer: no brokers configured")
	}
	for i, b := range c.Brokers {
		if b == "" {
			return fmt.Errorf("producer: Brokers[%d] is empty", i)
		}
	}
	if c.BatchTimeout < 0 || c.WriteTimeout <= 0 || c.MaxAttempts < 1 {
		return fmt.Errorf("producer: BatchTimeout %v, WriteTimeout %v and MaxAttempts %d must be positive", c.BatchTimeout, c.WriteTimeout, c.MaxAttempts)
	}
	if c.VerdictTopic == c.SummaryTopic || c.VerdictTopic == c.DeadLetterTopic || c.SummaryTopic == c.DeadLetterTopic {
		return fmt.Errorf("producer: the verdict (%q), summary (%q) and dead-letter (%q) topics must differ", c.VerdictTopic, c.SummaryTopic, c.DeadLetterTopic)
	}
	return nil
}

// Producer encodes and writes events. It is safe for concurrent use.
type Producer struct {
	cfg   Config
	serde *schemas.Serde
	w     *kafka.Writer
}

// New returns a Producer writing with serde's wire format.
func New(cfg Config, serde *schemas.Serde) (*Producer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if serde == nil {
		return nil, errors.New("producer: a serde is required")
	}
	w := &kafka.Writer{
		Addr: kafka.TCP(cfg.Brokers...),
		// Hash on the key (the request id) keeps one request's events in
		// one partition, in order.
		Balancer:               &kafka.Hash{},
		RequiredAcks:           kafka.RequireAll,
		BatchTimeout:           cfg.BatchTimeout,
		WriteTimeout:           cfg.WriteTimeout,
		MaxAttempts:            cfg.MaxAttempts,
		AllowAutoTopicCreation: false,
		Transport:              cfg.Transport,
	}
	return &Producer{cfg: cfg, serde: serde, w: w}, nil
}

// Close flushes and closes the writer.
func (p *Producer) Close() error { return p.w.Close() }

// Result is what one handled request publishes.
type Result struct {
	Verdicts []schemas.VerdictEvent
	Summary  schemas.SummaryEvent
	// Trace holds the W3C trace context of the request (traceparent and
	// tracestate headers), carried onto every event.
	Trace []kafka.Header
}

// Encode turns a result into the messages to write: the verdicts in rule
// order, then the summary, all keyed by the request id. Encoding is separate
// from writing so a redelivered request can be answered with the very same
// bytes.
func (p *Producer) Encode(r Result) ([]kafka.Message, error) {
	msgs := make([]kafka.Message, 0, len(r.Verdicts)+1)
	for i := range r.Verdicts {
		v := &r.Verdicts[i]
		m, err := p.message(p.cfg.VerdictTopic, v.RequestID, v.EventID, v.TenantID, v.RuleID, v.CompletedAt, v, r.Trace)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	s := &r.Summary
	m, err := p.message(p.cfg.SummaryTopic, s.RequestID, s.EventID, s.TenantID, "", s.CompletedAt, s, r.Trace)
	if err != nil {
		return nil, err
	}
	return append(msgs, m), nil
}

func (p *Producer) message(topic, key, id, tenant, subject string, at time.Time, ev schemas.Event, trace []kafka.Header) (kafka.Message, error) {
	value, sh, err := p.serde.Encode(topic, ev)
	if err != nil {
		return kafka.Message{}, fmt.Errorf("producer: encoding %s %q: %w", ev.SchemaName(), id, err)
	}
	headers := []kafka.Header{
		{Key: HeaderCEID, Value: []byte(id)},
		{Key: HeaderCEType, Value: []byte(ev.SchemaName())},
		{Key: HeaderCESource, Value: []byte(p.cfg.Source)},
		{Key: HeaderCESpecVersion, Value: []byte(ceSpecVersion)},
		{Key: HeaderCETime, Value: []byte(at.UTC().Format(time.RFC3339Nano))},
		{Key: HeaderContentType, Value: []byte(contentTypeAvro)},
		{Key: HeaderEventID, Value: []byte(id)},
		{Key: HeaderTenant, Value: []byte(tenant)},
	}
	if subject != "" {
		headers = append(headers, kafka.Header{Key: HeaderCESubject, Value: []byte(subject)})
	}
	headers = append(headers, trace...)
	for _, h := range sh {
		headers = append(headers, kafka.Header{Key: h.Key, Value: h.Value})
	}
	return kafka.Message{Topic: topic, Key: []byte(key), Value: value, Headers: headers, Time: at}, nil
}

// Write writes messages in one WriteMessages call and returns once every one
// is acknowledged by all in-sync replicas.
func (p *Producer) Write(ctx context.Context, msgs []kafka.Message) error {
	if err := p.w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("producer: writing %d events: %w", len(msgs), err)
	}
	return nil
}

// PublishDeadLetter writes m, byte for byte, inside a dead-letter event with
// its position and the reason, to the dead-letter topic. It implements
// consumer.DeadLetterPublisher.
func (p *Producer) PublishDeadLetter(ctx context.Context, m *consumer.Message, reason string, cause error) error {
	message := ""
	if cause != nil {
		message = cause.Error()
	}
	// A reason the schema has no symbol for (a middleware's own label) is
	// recorded as internal; the headers keep the label as given.
	dlReason := schemas.Reason(reason)
	if !dlReason.Known() {
		dlReason = schemas.ReasonInternal
		message = reason + ": " + message
	}
	dl := &schemas.DeadLetter{
		OriginalTopic:     m.Topic,
		OriginalPartition: m.Partition,
		OriginalOffset:    m.Offset,
		OriginalTimestamp: m.Time,
		OriginalKey:       m.Key,
		OriginalValue:     m.Value,
		Reason:            dlReason,
		Message:           message,
		FailedAt:          time.Now().UTC(),
		Attempts:          1,
	}
	for _, h := range m.Headers {
		dl.OriginalHeaders = append(dl.OriginalHeaders, schemas.Header{Key: h.Key, Value: h.Value})
	}
	value, sh, err := p.serde.Encode(p.cfg.DeadLetterTopic, dl)
	if err != nil {
		return fmt.Errorf("producer: encoding the dead letter for %s/%d/%d: %w", m.Topic, m.Partition, m.Offset, err)
	}
	id := fmt.Sprintf("%s/%d/%d", m.Topic, m.Partition, m.Offset)
	headers := []kafka.Header{
		{Key: HeaderDLQTopic, Value: []byte(m.Topic)},
		{Key: HeaderDLQPartition, Value: []byte(strconv.Itoa(m.Partition))},
		{Key: HeaderDLQOffset, Value: []byte(strconv.FormatInt(m.Offset, 10))},
		{Key: HeaderDLQReason, Value: []byte(reason)},
		{Key: HeaderDLQMessage, Value: []byte(message)},
		{Key: HeaderDLQReasonRV, Value: []byte(reason)},
		{Key: HeaderCEID, Value: []byte(id)},
		{Key: HeaderCEType, Value: []byte(dl.SchemaName())},
		{Key: HeaderCESource, Value: []byte(p.cfg.Source)},
		{Key: HeaderCESpecVersion, Value: []byte(ceSpecVersion)},
		{Key: HeaderCETime, Value: []byte(dl.FailedAt.Format(time.RFC3339Nano))},
		{Key: HeaderContentType, Value: []byte(contentTypeAvro)},
	}
	for _, h := range m.Headers {
		if h.Key == HeaderTraceparent || h.Key == HeaderTracestate {
			headers = append(headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
	}
	for _, h := range sh {
		headers = append(headers, kafka.Header{Key: h.Key, Value: h.Value})
	}
	err = p.w.WriteMessages(ctx, kafka.Message{Topic: p.cfg.DeadLetterTopic, Key: m.Key, Value: value, Headers: headers})
	if err != nil {
		return fmt.Errorf("producer: writing the dead letter for %s: %w", id, err)
	}
	return nil
}
