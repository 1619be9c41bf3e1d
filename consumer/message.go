package consumer

import (
	"context"

	"rulevalidator/stream"
)

// Header is one record header.
type Header = stream.Header

// Message is one fetched record: the stream boundary's own type, so that handlers depend on
// no Kafka client.
type Message = stream.Record

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

// where names a message's position for errors: "topic t partition 2 offset 41".
func where(m *Message) string { return m.Where() }

// logAttrs are the structured log fields that locate a message.
func logAttrs(m *Message) []any {
	return []any{"topic", m.Topic, "partition", m.Partition, "offset", m.Offset}
}
