// Package consumer runs a Kafka consumer group loop around a Handler: bounded concurrency,
// per-key ordering within a partition, offsets committed in order only after their messages
// were handled, dead letters for permanent failures, and a graceful drain on shutdown. It
// delivers at least once: a message whose handling did not finish is redelivered.
//
// It knows nothing of what the messages mean; the handler does.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

const (
	// Backoff between failed fetches; kafka-go reconnects in the meantime.
	fetchBackoffMin = 100 * time.Millisecond
	fetchBackoffMax = 5 * time.Second
	// handlerExitGrace is how long Run waits, after cancelling the handlers' context at the
	// drain deadline, for them to return before abandoning them.
	handlerExitGrace = 5 * time.Second
	// joinGroupBackoff is the pause before rejoining the group after a failed join; kafka-go's
	// 5s default adds needlessly to the recovery from a broker restart.
	joinGroupBackoff = time.Second
)

// Consumer consumes one topic as a member of a consumer group and hands each message to a
// Handler. Its configuration is fixed at New; Run may be called again after it returns.
type Consumer struct {
	cfg     Config
	handler Handler
	log     *slog.Logger
}

// New checks cfg, after filling in its defaults, and returns a Consumer that passes each
// message to h.
func New(cfg Config, h Handler) (*Consumer, error) {
	if h == nil {
		return nil, errors.New("consumer: handler is nil")
	}
	cfg.Brokers = slices.Clone(cfg.Brokers)
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Consumer{
		cfg:     cfg,
		handler: h,
		log:     cfg.Logger.With("component", "consumer", "topic", cfg.Topic, "group", cfg.GroupID),
	}, nil
}

// Run consumes until ctx is cancelled, then stops fetching, lets in-flight messages finish for
// up to DrainTimeout, commits what finished, leaves the group and returns nil. Messages that did
// not finish are not committed and will be redelivered.
//
// Fetch and commit errors (a broker restarting, a rebalance) are logged and retried. A handler
// error while the handler still had time to finish stops the consumer the same way and is
// returned: committing past that message would lose it. Compose Retry and DeadLetter so that
// only a shutdown ends a handler with an error.
func (c *Consumer) Run(ctx context.Context) error {
	reader := kafka.NewReader(c.readerConfig())

	fetchCtx, stopFetching := context.WithCancelCause(ctx)
	defer stopFetching(nil)
	// Handlers outlive ctx by up to DrainTimeout, keeping its values.
	handlerCtx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()

	r := &run{
		cfg:          c.cfg,
		handler:      c.handler,
		log:          c.log,
		reader:       reader,
		slots:        make(chan struct{}, c.cfg.Concurrency),
		handlerCtx:   handlerCtx,
		stopFetching: stopFetching,
		offsets:      newOffsetTracker(),
		keyQueues:    make(map[keyRef][]*Message),
	}

	stopCommitting := make(chan struct{})
	committerDone := make(chan struct{})
	go func() {
		defer close(committerDone)
		r.commitEvery(c.cfg.CommitInterval, stopCommitting)
	}()

	c.log.Info("consumer started", "brokers", c.cfg.Brokers, "concurrency", c.cfg.Concurrency)
	r.fetchLoop(fetchCtx)
	c.log.Info("consumer stopping: draining in-flight messages",
		"cause", context.Cause(fetchCtx), "in_flight", r.inFlight(), "drain_timeout", c.cfg.DrainTimeout)
	r.drain(cancelHandlers)

	close(stopCommitting)
	<-committerDone
	if !r.commit() {
		c.log.Warn("final commit failed; messages handled since the last commit will be redelivered")
	}
	if err := reader.Close(); err != nil {
		c.log.Warn("closing the Kafka reader", "err", err)
	}
	failure := r.firstFailure()
	c.log.Info("consumer stopped", "err", failure)
	return failure
}

func (c *Consumer) readerConfig() kafka.ReaderConfig {
	logger := c.cfg.Logger.With("component", "kafka-go", "topic", c.cfg.Topic, "group", c.cfg.GroupID)
	var debug kafka.Logger
	// kafka-go logs every rebalance step and partition reader start; format those only when
	// someone reads them.
	if logger.Enabled(context.Background(), slog.LevelDebug) {
		debug = kafka.LoggerFunc(func(msg string, args ...any) {
			logger.Debug(fmt.Sprintf(msg, args...))
		})
	}
	return kafka.ReaderConfig{
		Brokers:     c.cfg.Brokers,
		GroupID:     c.cfg.GroupID,
		Topic:       c.cfg.Topic,
		Dialer:      c.cfg.Dialer,
		MinBytes:    c.cfg.MinBytes,
		MaxBytes:    c.cfg.MaxBytes,
		MaxWait:     c.cfg.MaxWait,
		StartOffset: c.cfg.StartOffset,
		// Synchronous commits: the consumer itself decides what to commit and when.
		CommitInterval: 0,
		// Lag comes from the high-water mark on each message; no extra requests for it.
		ReadLagInterval: -1,
		// Pick up partitions added to the topic without a restart.
		WatchPartitionChanges: true,
		SessionTimeout:        c.cfg.SessionTimeout,
		JoinGroupBackoff:      joinGroupBackoff,
		Logger:                debug,
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			logger.Warn(fmt.Sprintf(msg, args...))
		}),
	}
}

// keyRef names one key's queue within a partition.
type keyRef struct {
	partition int
	key       string
}

// run is the state of one Run call.
type run struct {
	cfg     Config
	handler Handler
	log     *slog.Logger
	reader  *kafka.Reader

	// slots bounds the messages in flight: one is taken before each fetch and given back when
	// the message is let go.
	slots        chan struct{}
	handlerCtx   context.Context
	stopFetching context.CancelCauseFunc
	workers      sync.WaitGroup

	mu      sync.Mutex
	offsets *offsetTracker
	// keyQueues holds, for each key with a message being handled, the later messages with that
	// key, in offset order. A present entry, even empty, means a worker owns the key.
	keyQueues map[keyRef][]*Message
	failure   error
}

// fetchLoop fetches until ctx ends, taking a slot before each fetch so that at most
// Concurrency messages are ever in flight.
func (r *run) fetchLoop(ctx context.Context) {
	backoff := fetchBackoffMin
	for {
		select {
		case r.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		km, err := r.reader.FetchMessage(ctx)
		if err != nil {
			<-r.slots
			if ctx.Err() != nil {
				return
			}
			wait := jitter(backoff)
			r.log.Warn("fetching from Kafka failed; retrying", "err", err, "retry_in", wait)
			if !sleep(ctx, wait) {
				return
			}
			backoff = min(2*backoff, fetchBackoffMax)
			continue
		}
		backoff = fetchBackoffMin
		m := fromKafka(km)
		r.cfg.Hooks.fetched(m)
		r.dispatch(m)
	}
}

// dispatch starts handling m, or queues it behind an earlier message with the same key, or
// drops it as a redelivery. m holds a slot.
func (r *run) dispatch(m *Message) {
	r.mu.Lock()
	if !r.offsets.fetched(m.Partition, m.Offset) {
		r.mu.Unlock()
		<-r.slots
		r.log.Debug("skipping a message fetched again after a rebalance", logAttrs(m)...)
		return
	}
	r.cfg.Hooks.inFlight(+1)
	if len(m.Key) == 0 {
		r.mu.Unlock()
		r.workers.Add(1)
		go func() {
			defer r.workers.Done()
			r.handle(m)
		}()
		return
	}
	k := keyRef{partition: m.Partition, key: string(m.Key)}
	if queue, busy := r.keyQueues[k]; busy {
		r.keyQueues[k] = append(queue, m)
		r.mu.Unlock()
		return
	}
	r.keyQueues[k] = nil
	r.mu.Unlock()
	r.workers.Add(1)
	go func() {
		defer r.workers.Done()
		r.workKey(k, m)
	}()
}

// workKey handles m and then the messages queued behind it with the same key, one at a time.
// When one does not succeed the rest are let go unhandled: they must not overtake it, and
// they will be redelivered.
func (r *run) workKey(k keyRef, m *Message) {
	for {
		ok := r.handle(m)
		r.mu.Lock()
		queue := r.keyQueues[k]
		if len(queue) == 0 || !ok || r.handlerCtx.Err() != nil {
			delete(r.keyQueues, k)
			r.mu.Unlock()
			for _, dropped := range queue {
				r.log.Info("not handled: an earlier message with the same key did not finish; it will be redelivered",
					logAttrs(dropped)...)
				r.release()
			}
			return
		}
		m, r.keyQueues[k] = queue[0], queue[1:]
		r.mu.Unlock()
	}
}

// handle runs the handler on m, records the outcome and gives m's slot back. It reports
// whether the handler succeeded.
func (r *run) handle(m *Message) bool {
	start := time.Now()
	err := r.call(m)
	took := time.Since(start)

	outcome := OutcomeOK
	switch {
	case err == nil:
		r.mu.Lock()
		known := r.offsets.handled(m.Partition, m.Offset)
		r.mu.Unlock()
		if !known {
			// Cannot happen: dispatch recorded it. Say so loudly rather than guess.
			r.log.Error("handled an offset the tracker does not hold", logAttrs(m)...)
		}
	case r.handlerCtx.Err() != nil:
		outcome = OutcomeInterrupted
		r.log.Warn("handler interrupted at the drain deadline; not committed, it will be redelivered",
			append(logAttrs(m), "err", err)...)
	default:
		outcome = OutcomeFailed
		r.fail(fmt.Errorf("consumer: handling %s: %w", where(m), err))
	}
	r.cfg.Hooks.handled(outcome, took)
	r.release()
	return err == nil
}

// call runs the handler, turning a panic that no Recover middleware caught into an error.
func (r *run) call(m *Message) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v", errHandlerPanicked, v)
		}
	}()
	return r.handler(r.handlerCtx, m)
}

// release gives a message's slot back. The hook goes first, so that the next message's +1
// cannot be observed before this -1.
func (r *run) release() {
	r.cfg.Hooks.inFlight(-1)
	<-r.slots
}

// fail records the first handler failure and stops fetching.
func (r *run) fail(err error) {
	r.mu.Lock()
	first := r.failure == nil
	if first {
		r.failure = err
	}
	r.mu.Unlock()
	r.log.Error("handler failed; stopping the consumer so that the message is not committed", "err", err)
	if first {
		r.stopFetching(err)
	}
}

func (r *run) firstFailure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failure
}

func (r *run) inFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.offsets.inFlightCount()
}

// drain waits for the in-flight messages to finish, cancelling their context when DrainTimeout
// runs out and abandoning handlers that ignore it a little later.
func (r *run) drain(cancelHandlers context.CancelFunc) {
	done := make(chan struct{})
	go func() {
		r.workers.Wait()
		close(done)
	}()
	deadline := time.NewTimer(r.cfg.DrainTimeout)
	defer deadline.Stop()
	select {
	case <-done:
		return
	case <-deadline.C:
	}
	r.log.Warn("drain timeout: cancelling in-flight handlers", "in_flight", r.inFlight())
	cancelHandlers()
	grace := time.NewTimer(handlerExitGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		r.log.Error("handlers ignore cancellation; abandoning them uncommitted", "in_flight", r.inFlight())
	}
}

// commitEvery commits the finished offsets every interval until stop is closed.
func (r *run) commitEvery(interval time.Duration, stop <-chan struct{}) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
			r.commit()
		}
	}
}

// commit commits every partition's commit point that moved since the last commit. It reports
// whether everything due was committed; a failure is logged and retried on the next call.
func (r *run) commit() bool {
	r.mu.Lock()
	points := r.offsets.uncommitted()
	r.mu.Unlock()
	if len(points) == 0 {
		return true
	}
	msgs := make([]kafka.Message, len(points))
	for i, p := range points {
		// kafka-go commits a message's offset + 1: the next one to read.
		msgs[i] = kafka.Message{Topic: r.cfg.Topic, Partition: p.partition, Offset: p.offset - 1}
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.CommitTimeout)
	defer cancel()
	if err := r.reader.CommitMessages(ctx, msgs...); err != nil {
		r.log.Warn("committing offsets failed; retrying at the next commit", "err", err, "offsets", fmt.Sprint(points))
		return false
	}
	r.mu.Lock()
	for _, p := range points {
		r.offsets.committed(p.partition, p.offset)
	}
	r.mu.Unlock()
	for _, p := range points {
		r.cfg.Hooks.committed(p.partition, p.offset)
	}
	return true
}

func (p commitPoint) String() string { return fmt.Sprintf("%d@%d", p.partition, p.offset) }

// jitter picks a duration in [d/2, d] ("equal jitter"), so that clients failing together do
// not retry in lockstep.
func jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + rand.N(d-half+1)
}
