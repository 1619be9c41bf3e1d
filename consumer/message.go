package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Header is one Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Message is one fetched Kafka record, free of kafka-go types so that handlers depend on this
// package only.
type Message struct {
	Topic     string
	Partition int
	Offset    int64
	// HighWaterMark is the partition's high-water mark when the record was fetched: the offset
	// the next produced record will get. HighWaterMark - Offset - 1 records are behind this one.
	HighWaterMark int64
	Key, Value    []byte
	Headers       []Header
	Time          time.Time
}

// Handler processes one message. Returning nil means the message's effects are durable and its
// offset may be committed. Errors are transient unless marked with Permanent.
type Handler func(ctx context.Context, m *Message) error

// Middleware wraps a Handler with cross-cutting behaviour.
type Middleware func(Handler) Handler

// Chain wraps h in mw, the first middleware outermost: Chain(h, a, b) is a(b(h)).
//
// The order that gives the documented semantics is
//
//	Chain(h, Retry(policy, log), DeadLetter(pub, log), Recover(log))
//
// Recover innermost turns a panic into a permanent error, DeadLetter publishes permanent errors
// and reports the message handled, and Retry outermost retries every transient error, a failed
// dead-letter publish included.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// fromKafka copies a fetched kafka-go record into a Message.
func fromKafka(km kafka.Message) *Message {
	m := &Message{
		Topic:         km.Topic,
		Partition:     km.Partition,
		Offset:        km.Offset,
		HighWaterMark: km.HighWaterMark,
		Key:           km.Key,
		Value:         km.Value,
		Time:          km.Time,
	}
	if len(km.Headers) > 0 {
		m.Headers = make([]Header, len(km.Headers))
		for i, h := range km.Headers {
			m.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	return m
}

// where names a message's position for errors: "topic t partition 2 offset 41".
func where(m *Message) string {
	return fmt.Sprintf("topic %s partition %d offset %d", m.Topic, m.Partition, m.Offset)
}

// logAttrs are the structured log fields that locate a message.
func logAttrs(m *Message) []any {
	return []any{"topic", m.Topic, "partition", m.Partition, "offset", m.Offset}
}
