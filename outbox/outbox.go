// Package outbox delivers the callbacks waiting on the callback topic. The
// pipeline writes a request's callback there with its events, before the
// request's offset is committed; a consumer group of its own reads them with
// Handler, which POSTs each one and lets its offset be committed only once it
// is delivered or given up for good. A restart, a drain or a rebalance thus
// loses none: what was not finished is delivered by the partition's next
// owner. Delivery is at least once; receivers de-duplicate on the event id.
package outbox

import (
	"context"
	"fmt"
	"log/slog"

	"rulevalidator/callback"
	"rulevalidator/consumer"
	"rulevalidator/producer"
	"rulevalidator/stream"
)

// Deliverer POSTs one notification and says how it ended (a
// *callback.Notifier).
type Deliverer interface {
	Deliver(ctx context.Context, rawURL string, payload []byte, eventID string, stopRetrying <-chan struct{}) callback.Delivery
}

// Handler returns the consumer.Handler of the callback topic. For each
// record it delivers the value to the URL in its producer.HeaderCallbackURL
// header, signed, with producer.HeaderEventID (else the key) as the event id,
// and returns:
//   - nil once it is delivered, or given up: the URL refused, an answer that
//     retrying does not change (4xx), the attempts spent, or a record without a
//     URL. Those are logged and counted (callback.Config.OnDone) and never
//     tried again, so that one receiver cannot hold the others' callbacks.
//   - an error wrapping consumer.ErrDraining when the consumer starts draining
//     (SIGTERM, a rebalance) while it waits to retry, or the drain deadline
//     interrupts an attempt: the offset is not committed and the callback is
//     delivered after the restart, by whichever member owns the partition then.
//
// A delivery that panics is handled as a request that panics is: recovered,
// dead-lettered to deadLetters with reason internal, and committed, rather
// than stopping the consumer to crash-loop the service on the same record.
//
// Retrying a delivery is the Deliverer's (its attempts and backoff), not the
// consumer's: the Retry middleware in the chain, shaped by retry, only ever
// retries a dead-letter publish that failed, since every callback given up
// returns nil and a drain returns at once.
func Handler(d Deliverer, deadLetters consumer.DeadLetterPublisher, retry consumer.RetryPolicy, logger *slog.Logger) consumer.Handler {
	h := handler{d: d, log: logger, draining: consumer.Draining}.handle
	return consumer.Chain(h,
		consumer.Retry(retry, logger),
		consumer.DeadLetter(deadLetters, logger),
		consumer.Recover(logger),
	)
}

type handler struct {
	d   Deliverer
	log *slog.Logger
	// draining is consumer.Draining; tests replace it.
	draining func(context.Context) <-chan struct{}
}

func (h handler) handle(ctx context.Context, m *consumer.Message) error {
	eventID := header(m, producer.HeaderEventID)
	if eventID == "" {
		eventID = string(m.Key)
	}
	url := header(m, producer.HeaderCallbackURL)
	if url == "" {
		h.log.Error("callback record without a URL: given up", "event_id", eventID, "position", m.Where(), "header", producer.HeaderCallbackURL)
	}
	d := h.d.Deliver(ctx, url, m.Value, eventID, h.draining(ctx))
	if d.Interrupted() {
		return fmt.Errorf("callback %s (%s): %w; it is delivered after the restart: %w", eventID, m.Where(), consumer.ErrDraining, d.Err)
	}
	// Delivered, or given up (the Deliverer has logged why): committed.
	return nil
}

func header(m *consumer.Message, key string) string {
	v, _ := stream.HeaderValue(m.Headers, key)
	return string(v)
}
