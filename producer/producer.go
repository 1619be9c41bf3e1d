// Package producer writes the service's events to Kafka through the stream
// boundary's one writer: one verdict event per rule and one summary per
// request, written together, and dead letters of any size. Every write waits
// for all in-sync replicas (acks=all).
package producer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"rulevalidator/bucket"
	"rulevalidator/consumer"
	"rulevalidator/schemas"
	"rulevalidator/stream"
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
	// HeaderCallbackURL is where a callback record's value is to be POSTed.
	HeaderCallbackURL = "rv-callback-url"
	// HeaderCallbackVerdictsOmitted is set ("true") on a callback record whose
	// payload left the verdicts out because they did not fit the topic.
	HeaderCallbackVerdictsOmitted = "rv-callback-verdicts-omitted"

	// Dead-letter headers, after Kafka Connect's __connect.errors.* convention.
	HeaderDLQTopic     = "__connect.errors.topic"
	HeaderDLQPartition = "__connect.errors.partition"
	HeaderDLQOffset    = "__connect.errors.offset"
	HeaderDLQReason    = "__connect.errors.exception.class.name"
	HeaderDLQMessage   = "__connect.errors.exception.message"
	HeaderDLQReasonRV  = "rv-dlq-reason"
	// A dead letter whose original value did not fit the dead-letter topic
	// says where the value went: HeaderDLQValueURI names the object holding
	// it byte for byte (a claim check), or HeaderDLQValueTruncated gives the
	// length of the truncated copy kept in original_value. Either way
	// HeaderDLQValueBytes and HeaderDLQValueSHA256 describe the original.
	HeaderDLQValueURI       = "rv-dlq-value-uri"
	HeaderDLQValueTruncated = "rv-dlq-value-truncated"
	HeaderDLQValueBytes     = "rv-dlq-value-bytes"
	HeaderDLQValueSHA256    = "rv-dlq-value-sha256"

	contentTypeAvro = "application/avro"
	contentTypeJSON = "application/json"
	ceSpecVersion   = "1.0"
)

// DefaultBatchTimeout is Config.BatchTimeout's default (see
// stream.DefaultBatchTimeout for why it is short).
const DefaultBatchTimeout = stream.DefaultBatchTimeout

// DefaultClaimTimeout is Config.ClaimTimeout's default.
const DefaultClaimTimeout = 30 * time.Second

// ObjectWriter stores the original value of a dead letter too large for the
// dead-letter topic (an *objstore.Store).
type ObjectWriter interface {
	Put(ctx context.Context, key string, body []byte, contentType string, meta map[string]string) (bucket.ObjectInfo, error)
	URI(key string) string
}

// Config configures a Producer.
type Config struct {
	// Client says how to reach the cluster. Required.
	Client *stream.Client
	// VerdictTopic, SummaryTopic and DeadLetterTopic are where each kind of
	// event goes (defaults rulevalidator.verdicts, rulevalidator.summaries,
	// rulevalidator.deadletter).
	VerdictTopic    string
	SummaryTopic    string
	DeadLetterTopic string
	// CallbackTopic is where callbacks wait for delivery (an outbox read by
	// its own consumer group); empty disables them, and a Result with a
	// Callback then fails to encode.
	CallbackTopic string
	// Source is the CloudEvents ce_source (default "rulevalidator").
	Source string
	// BatchTimeout bounds how long a batch stays open for other writes
	// (default DefaultBatchTimeout). A request's events join their batches in
	// one call, and the request holds a consumer slot while it waits.
	BatchTimeout time.Duration
	// WriteTimeout bounds one write, acks included (default 30s).
	WriteTimeout time.Duration
	// MaxAttempts is how often a write is tried before giving up (default
	// 3); the consumer's retry middleware retries after that.
	MaxAttempts int
	// Objects, when set, keeps the original value of a dead letter too large
	// for the dead-letter topic (a claim check); without it, or when storing
	// fails, the dead letter keeps a truncated copy with the original's length
	// and SHA-256.
	Objects ObjectWriter
	// ClaimTimeout bounds storing one such value (default 30s).
	ClaimTimeout time.Duration
	// TracerProvider makes a PRODUCER span per topic written (see send);
	// nil makes none, and the events carry the trace context of ctx.
	TracerProvider trace.TracerProvider
	Logger         *slog.Logger
}

func (c *Config) setDefaults() {
	if c.VerdictTopic == "" {
		c.VerdictTopic = schemas.TopicVerdicts
	}
	if c.SummaryTopic == "" {
		c.SummaryTopic = schemas.TopicSummaries
	}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = schemas.TopicDeadLetter
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
	if c.ClaimTimeout == 0 {
		c.ClaimTimeout = DefaultClaimTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first problem with the configuration.
func (c *Config) Validate() error {
	if c.Client == nil {
		return errors.New("producer: Client is nil")
	}
	if c.ClaimTimeout < 0 {
		return fmt.Errorf("producer: ClaimTimeout %v must be positive", c.ClaimTimeout)
	}
	if c.BatchTimeout < 0 || c.WriteTimeout <= 0 || c.MaxAttempts < 1 {
		return fmt.Errorf("producer: BatchTimeout %v, WriteTimeout %v and MaxAttempts %d must be positive", c.BatchTimeout, c.WriteTimeout, c.MaxAttempts)
	}
	if c.VerdictTopic == c.SummaryTopic || c.VerdictTopic == c.DeadLetterTopic || c.SummaryTopic == c.DeadLetterTopic {
		return fmt.Errorf("producer: the verdict (%q), summary (%q) and dead-letter (%q) topics must differ", c.VerdictTopic, c.SummaryTopic, c.DeadLetterTopic)
	}
	if c.CallbackTopic != "" && (c.CallbackTopic == c.VerdictTopic || c.CallbackTopic == c.SummaryTopic || c.CallbackTopic == c.DeadLetterTopic) {
		return fmt.Errorf("producer: the callback topic %q must differ from the verdict, summary and dead-letter topics", c.CallbackTopic)
	}
	return nil
}

// Producer encodes and writes events. It is safe for concurrent use.
type Producer struct {
	cfg    Config
	serde  *schemas.Serde
	w      *stream.Writer
	log    *slog.Logger
	tracer trace.Tracer
}

// New returns a Producer writing with serde's wire format. It reads the
// topics' size limits (see stream.NewWriter).
func New(ctx context.Context, cfg Config, serde *schemas.Serde) (*Producer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if serde == nil {
		return nil, errors.New("producer: a serde is required")
	}
	// The stream writer's murmur2 partitioner keys every event by its
	// request id, keeping one request's events in one partition, in order.
	topics := []string{cfg.VerdictTopic, cfg.SummaryTopic, cfg.DeadLetterTopic}
	if cfg.CallbackTopic != "" {
		topics = append(topics, cfg.CallbackTopic)
	}
	w, err := stream.NewWriter(ctx, stream.WriterConfig{
		Client:       cfg.Client,
		Topics:       topics,
		BatchTimeout: cfg.BatchTimeout,
		WriteTimeout: cfg.WriteTimeout,
		MaxAttempts:  cfg.MaxAttempts,
		Logger:       cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	return &Producer{cfg: cfg, serde: serde, w: w, log: cfg.Logger.With("component", "producer"),
		tracer: tracerOf(cfg.TracerProvider)}, nil
}

// Close flushes and closes the writer.
func (p *Producer) Close() error { return p.w.Close() }

// Result is what one handled request publishes.
type Result struct {
	Verdicts []schemas.VerdictEvent
	Summary  schemas.SummaryEvent
	// Trace holds the W3C trace context of the request (traceparent and
	// tracestate headers), carried onto every event.
	Trace []stream.Header
	// Callback, when set, is the request's webhook, written to the callback
	// topic with the events so that it is durable before the request's offset
	// is committed.
	Callback *Callback
}

// Callback is a webhook notification waiting for delivery.
type Callback struct {
	// URL is the requester's callback URL.
	URL string
	// Payload is the JSON body to POST.
	Payload []byte
	// Fallback is the body posted instead when Payload does not fit the
	// callback topic's max.message.bytes: the same body without the verdicts,
	// saying where to fetch them. Nil leaves Payload to fail the write.
	Fallback []byte
}

// limitTimeout bounds asking the cluster for the callback topic's limit while
// encoding, when it could not be read before (it is normally known).
const limitTimeout = 5 * time.Second

// Encode turns a result into the messages to write: the verdicts in rule
// order, then the summary, all keyed by the request id, then the callback.
// Encoding is separate from writing so a redelivered request can be answered
// with the very same bytes. A verdict or summary event larger than its topic
// takes is an error wrapping stream.ErrTooLarge that names it: the result's
// fault, found before anything is written. ctx bounds asking the cluster for
// a topic's limit, when it was not read before.
func (p *Producer) Encode(ctx context.Context, r Result) ([]stream.Record, error) {
	msgs := make([]stream.Record, 0, len(r.Verdicts)+2)
	for i := range r.Verdicts {
		v := &r.Verdicts[i]
		m, err := p.message(p.cfg.VerdictTopic, v.RequestID, v.EventID, v.TenantID, v.RuleID, v.CompletedAt, v, r.Trace)
		if err == nil {
			err = p.fits(ctx, m, fmt.Sprintf("the verdict event of rule %q", v.RuleID))
		}
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	s := &r.Summary
	m, err := p.message(p.cfg.SummaryTopic, s.RequestID, s.EventID, s.TenantID, "", s.CompletedAt, s, r.Trace)
	if err == nil {
		err = p.fits(ctx, m, "the summary event")
	}
	if err != nil {
		return nil, err
	}
	msgs = append(msgs, m)
	if r.Callback != nil {
		cb, err := p.callbackRecord(ctx, r.Callback, s, r.Trace)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, cb)
	}
	return msgs, nil
}

// fits checks that rec, described as what, is no larger than its topic takes.
func (p *Producer) fits(ctx context.Context, rec stream.Record, what string) error {
	ctx, cancel := context.WithTimeout(ctx, limitTimeout)
	defer cancel()
	limit, err := p.w.MaxRecordBytes(ctx, rec.Topic)
	if err != nil {
		return fmt.Errorf("producer: %s: %w", what, err)
	}
	if size := rec.Size(); size > limit {
		return fmt.Errorf("producer: %s is %d bytes, over the %d bytes topic %s takes: %w", what, size, limit, rec.Topic, stream.ErrTooLarge)
	}
	return nil
}

// callbackRecord is the callback topic's record for cb: the payload as its
// value, keyed by the event id (tenant/request_id) that receivers de-duplicate
// on, the URL and the event id in headers. A payload too large for the topic
// is replaced by cb.Fallback, marked by HeaderCallbackVerdictsOmitted.
func (p *Producer) callbackRecord(ctx context.Context, cb *Callback, s *schemas.SummaryEvent, trace []stream.Header) (stream.Record, error) {
	if p.cfg.CallbackTopic == "" {
		return stream.Record{}, fmt.Errorf("producer: request %q has a callback but no callback topic is configured", s.EventID)
	}
	if cb.URL == "" {
		return stream.Record{}, fmt.Errorf("producer: the callback of request %q has no URL", s.EventID)
	}
	id := schemas.SummaryEventID(s.TenantID, s.RequestID)
	headers := []stream.Header{
		{Key: HeaderEventID, Value: []byte(id)},
		{Key: HeaderTenant, Value: []byte(s.TenantID)},
		{Key: HeaderCallbackURL, Value: []byte(cb.URL)},
		{Key: HeaderContentType, Value: []byte(contentTypeJSON)},
	}
	headers = append(headers, trace...)
	rec := stream.Record{Topic: p.cfg.CallbackTopic, Key: []byte(id), Value: cb.Payload, Headers: headers, Time: s.CompletedAt}
	if cb.Fallback == nil {
		return rec, nil
	}
	ctx, cancel := context.WithTimeout(ctx, limitTimeout)
	defer cancel()
	limit, err := p.w.MaxRecordBytes(ctx, p.cfg.CallbackTopic)
	if err != nil {
		return stream.Record{}, fmt.Errorf("producer: callback of request %q: %w", id, err)
	}
	if rec.Size() <= limit {
		return rec, nil
	}
	p.log.WarnContext(ctx, "callback payload too large for the callback topic; sending it without the verdicts, which the status URL serves",
		"event_id", id, "bytes", rec.Size(), "limit", limit, "topic", p.cfg.CallbackTopic)
	rec.Value = cb.Fallback
	rec.Headers = append(rec.Headers, stream.Header{Key: HeaderCallbackVerdictsOmitted, Value: []byte("true")})
	return rec, nil
}

func (p *Producer) message(topic, key, id, tenant, subject string, at time.Time, ev schemas.Event, trace []stream.Header) (stream.Record, error) {
	return eventRecord(p.serde, p.cfg.Source, topic, key, id, tenant, subject, at, ev, trace)
}

// eventRecord is ev's record on topic in serde's wire format with the
// CloudEvents binary-mode headers every event carries (ce_subject when
// subject is not empty), the project's event id and tenant headers, and
// trace.
func eventRecord(serde *schemas.Serde, source, topic, key, id, tenant, subject string, at time.Time, ev schemas.Event, trace []stream.Header) (stream.Record, error) {
	value, sh, err := serde.Encode(topic, ev)
	if err != nil {
		return stream.Record{}, fmt.Errorf("producer: encoding %s %q: %w", ev.SchemaName(), id, err)
	}
	headers := []stream.Header{
		{Key: HeaderCEID, Value: []byte(id)},
		{Key: HeaderCEType, Value: []byte(ev.SchemaName())},
		{Key: HeaderCESource, Value: []byte(source)},
		{Key: HeaderCESpecVersion, Value: []byte(ceSpecVersion)},
		{Key: HeaderCETime, Value: []byte(at.UTC().Format(time.RFC3339Nano))},
		{Key: HeaderContentType, Value: []byte(contentTypeAvro)},
		{Key: HeaderEventID, Value: []byte(id)},
		{Key: HeaderTenant, Value: []byte(tenant)},
	}
	if subject != "" {
		headers = append(headers, stream.Header{Key: HeaderCESubject, Value: []byte(subject)})
	}
	headers = append(headers, trace...)
	headers = append(headers, sh...)
	return stream.Record{Topic: topic, Key: []byte(key), Value: value, Headers: headers, Time: at}, nil
}

// Write writes records and returns once every one is acknowledged by all
// in-sync replicas.
func (p *Producer) Write(ctx context.Context, msgs []stream.Record) error {
	if err := send(ctx, p.tracer, p.w, msgs); err != nil {
		return fmt.Errorf("producer: writing %d events: %w", len(msgs), err)
	}
	return nil
}

// PublishDeadLetter writes m inside a dead-letter event with its position
// and the reason, to the dead-letter topic. It implements
// consumer.DeadLetterPublisher.
//
// The original value is kept byte for byte when the dead letter fits the
// topic's max.message.bytes. When it does not, the value goes to object
// storage (a claim check named in the dead letter) or, without storage or
// when storing fails within ClaimTimeout, a truncated copy is kept; the
// original's length and SHA-256 are recorded either way, in the headers and
// the message. A record of any size is thus dead-lettered in bounded time,
// and never retried because it is large.
func (p *Producer) PublishDeadLetter(ctx context.Context, m *consumer.Message, reason string, cause error) error {
	dl, headers := p.deadLetter(m, reason, cause)
	rec, err := p.deadLetterRecord(m, dl, headers)
	if err != nil {
		return err
	}
	limit, err := p.w.MaxRecordBytes(ctx, p.cfg.DeadLetterTopic)
	if err != nil {
		return fmt.Errorf("producer: dead letter for %s: %w", m.Where(), err)
	}
	if rec.Size() <= limit {
		err = send(ctx, p.tracer, p.w, []stream.Record{rec})
		if !errors.Is(err, stream.ErrTooLarge) {
			if err != nil {
				return fmt.Errorf("producer: writing the dead letter for %s: %w", m.Where(), err)
			}
			return nil
		}
		// The broker's limit is lower than the one read at start: make it fit.
		limit = min(limit, rec.Size()-1)
	}
	rec, err = p.oversizedDeadLetter(ctx, m, dl, headers, limit)
	if err != nil {
		return err
	}
	if err := send(ctx, p.tracer, p.w, []stream.Record{rec}); err != nil {
		return fmt.Errorf("producer: writing the dead letter for %s: %w", m.Where(), err)
	}
	return nil
}

// deadLetter builds the dead-letter event for m and its headers, the
// original value in full.
func (p *Producer) deadLetter(m *consumer.Message, reason string, cause error) (*schemas.DeadLetter, []stream.Header) {
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
		Attempts:          attempts(cause),
	}
	dl.OriginalHeaders = slices.Clone(m.Headers)
	id := deadLetterID(m)
	headers := []stream.Header{
		{Key: HeaderDLQTopic, Value: []byte(m.Topic)},
		{Key: HeaderDLQPartition, Value: []byte(strconv.Itoa(m.Partition))},
		{Key: HeaderDLQOffset, Value: []byte(strconv.FormatInt(m.Offset, 10))},
		{Key: HeaderDLQReason, Value: []byte(reason)},
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
			headers = append(headers, h)
		}
	}
	return dl, headers
}

// deadLetterRecord encodes dl into the record to write, with headers and
// the exception message header, which follows dl.Message.
func (p *Producer) deadLetterRecord(m *consumer.Message, dl *schemas.DeadLetter, headers []stream.Header) (stream.Record, error) {
	value, sh, err := p.serde.Encode(p.cfg.DeadLetterTopic, dl)
	if err != nil {
		return stream.Record{}, fmt.Errorf("producer: encoding the dead letter for %s: %w", m.Where(), err)
	}
	all := make([]stream.Header, 0, len(headers)+len(sh)+1)
	all = append(all, headers...)
	all = append(all, stream.Header{Key: HeaderDLQMessage, Value: []byte(dl.Message)})
	all = append(all, sh...)
	return stream.Record{Topic: p.cfg.DeadLetterTopic, Key: m.Key, Value: value, Headers: all}, nil
}

// oversizedDeadLetter is the dead letter for a value that does not fit in
// limit bytes: claim-checked when storage takes it, truncated otherwise.
func (p *Producer) oversizedDeadLetter(ctx context.Context, m *consumer.Message, dl *schemas.DeadLetter, headers []stream.Header, limit int) (stream.Record, error) {
	sum := sha256.Sum256(m.Value)
	digest := hex.EncodeToString(sum[:])
	headers = append(headers,
		stream.Header{Key: HeaderDLQValueBytes, Value: []byte(strconv.Itoa(len(m.Value)))},
		stream.Header{Key: HeaderDLQValueSHA256, Value: []byte(digest)})
	base := dl.Message

	if uri, err := p.claim(ctx, m, digest); err == nil {
		claimed := *dl
		claimed.OriginalValue = []byte{}
		claimed.Message = fmt.Sprintf("%s [original value of %d bytes, SHA-256 %s, stored at %s: too large for the dead-letter topic]", base, len(m.Value), digest, uri)
		rec, err := p.deadLetterRecord(m, &claimed, append(headers, stream.Header{Key: HeaderDLQValueURI, Value: []byte(uri)}))
		if err == nil && rec.Size() <= limit {
			return rec, nil
		}
	} else if p.cfg.Objects != nil {
		p.log.WarnContext(ctx, "cannot store the original value of an oversized dead letter; keeping a truncated copy", "position", m.Where(), "err", err)
	}

	// Truncated: measure everything but the value, then keep what fits.
	truncated := *dl
	truncated.OriginalValue = []byte{}
	note := func(kept int) string {
		return fmt.Sprintf("%s [original value of %d bytes, SHA-256 %s, truncated to its first %d bytes: too large for the dead-letter topic and no object storage took it]", base, len(m.Value), digest, kept)
	}
	truncated.Message = note(len(m.Value))
	hdrs := append(headers, stream.Header{Key: HeaderDLQValueTruncated, Value: []byte(strconv.Itoa(len(m.Value)))})
	empty, err := p.deadLetterRecord(m, &truncated, hdrs)
	if err != nil {
		return stream.Record{}, err
	}
	if empty.Size() > limit {
		// The headers or key alone are too large: keep neither headers nor value.
		truncated.OriginalHeaders = nil
		if empty, err = p.deadLetterRecord(m, &truncated, hdrs); err != nil {
			return stream.Record{}, err
		}
	}
	// A bytes field's length prefix takes at most 10 bytes.
	keep := max(0, min(len(m.Value), limit-empty.Size()-10))
	truncated.OriginalValue = m.Value[:keep]
	truncated.Message = note(keep)
	hdrs[len(hdrs)-1].Value = []byte(strconv.Itoa(keep))
	return p.deadLetterRecord(m, &truncated, hdrs)
}

// DeadLetterPrefix is the key prefix of the original values of dead letters
// too large for their topic.
const DeadLetterPrefix = "deadletter"

// claim stores m's value under a key fixed by its position, so that a
// retried dead letter overwrites the same object, and returns its URI.
func (p *Producer) claim(ctx context.Context, m *consumer.Message, digest string) (string, error) {
	if p.cfg.Objects == nil {
		return "", errors.New("no object storage configured")
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ClaimTimeout)
	defer cancel()
	key := fmt.Sprintf("%s/%s/%d/%d", DeadLetterPrefix, m.Topic, m.Partition, m.Offset)
	meta := map[string]string{"sha256": digest, "original-topic": m.Topic}
	if _, err := p.cfg.Objects.Put(ctx, key, m.Value, "application/octet-stream", meta); err != nil {
		return "", err
	}
	return p.cfg.Objects.URI(key), nil
}

// attempts is how many times the message was processed before it was given up: what the
// cause says (interface{ Attempts() int }, e.g. a request that timed out on every attempt),
// else 1, as a message fault is dead-lettered on its first attempt.
func attempts(cause error) int {
	var a interface{ Attempts() int }
	if errors.As(cause, &a) && a.Attempts() > 0 {
		return a.Attempts()
	}
	return 1
}

func deadLetterID(m *consumer.Message) string {
	return fmt.Sprintf("%s/%d/%d", m.Topic, m.Partition, m.Offset)
}
