// Package consumer runs a consumer group loop around a Handler: bounded concurrency,
// per-key ordering within a partition, offsets committed in order only after their messages
// were handled, dead letters for permanent failures, and a graceful drain on shutdown and on
// every rebalance. It delivers at least once: a message whose handling did not finish is
// redelivered.
//
// Work is scoped to a group generation (stream.Group): what a generation fetched is
// committed in that generation only. When a rebalance revokes the partitions, the messages
// in flight get up to DrainTimeout to finish, what finished is committed, and the rest is
// abandoned with its commit state, so that a member never commits for a partition it no
// longer owns and the group's committed offsets never move backwards.
//
// # Scheduling
//
// A message is taken on when fetched: its offset is recorded then, in partition order, and it
// holds room among the messages in flight and its weight of MaxBytesInFlight from then until
// it is let go. It then waits for a handling slot (Concurrency) in a queue of messages ready
// to start, unless a message with its key (in its partition) is being handled or waits
// there: it then waits behind that one, with its key, and joins the queue once that one is
// handled, so that a key's messages run one at a time, in order, each on one slot. Without
// Fairness the queue is the order of fetching and the room is Concurrency, so a message
// starts as soon as it is fetched.
//
// # Fair share across tenants
//
// Many tenants may share one topic: in fetch order a tenant's messages wait behind every
// message fetched before them, however many another tenant queued. With Config.Fairness the
// consumer reads up to Fairness.ReadAhead messages ahead of those it handles and queues each
// under its tenant (Fairness.Tenant). A slot that comes free goes to the tenant with the least
// recent usage per weight among those with a message ready, ties going to the one whose
// message came first. A tenant's usage is the slot-seconds its messages held, counted while
// they hold their slots (how long a message will take is not known when it starts), each
// second weighing half as much a minute later; it is divided by the tenant's weight
// (Fairness.Weight, read at each pick, 1 by default). So:
//   - A tenant arriving behind a flood, having used little lately, takes the next free slots,
//     ahead of the flood, until its usage reaches the flood's; the flood takes the slots it
//     leaves, and a tenant alone gets every slot.
//   - Tenants that all have messages waiting get slot time in proportion to their weights over
//     a long stretch, messages that hold a slot twice as long counting twice. The decay
//     forgives the tenant picked last part of its lead, which favours the lighter weights by
//     at most λd/2 of the slot time (λ = ln 2 a minute, d a message's time): 0.6% for
//     messages of a second, 6% for messages of ten seconds on one slot, less on more slots
//     (1% for those on eight).
//   - A tenant that starts flooding catches up within about a minute with one of the same
//     weight that has flooded all along, which may start nothing meanwhile; a tenant's past
//     flood weighs against it for minutes.
//
// The usage is kept across generations, so that a rebalance does not forget who has been
// flooding. A message behind more than ReadAhead messages of its partition still waits for
// the excess: the partition is read in order.
//
// Fairness.MaxInFlight caps a tenant's messages being handled at once: a tenant at its cap
// is passed over for a free slot, whatever its usage, while the others start theirs; a slot
// stays free only while every message waiting is of a tenant at its cap. Its messages read
// ahead wait with their room and bytes, so a capped tenant's backlog that fills ReadAhead
// holds the fetching back to its cap's pace.
//
// What holds without it holds with it:
//   - A partition's commit point is its lowest offset fetched and not handled, read ahead or
//     not: messages handled out of order are committed once everything before them is.
//   - A key's messages keep their order and never hold two slots, as above; only the one
//     at the head of its key waits to be picked.
//   - Messages read ahead hold their bytes while they wait, so MaxBytesInFlight bounds them
//     with the rest. One exception keeps the consumer from stalling: when every handler
//     waits in Reserve for bytes while messages wait that cannot start (no slot is free, or
//     their tenants are at their caps), those messages cannot start before a handler
//     finishes, so they lend their bytes to the waiting handlers (as a waiting handler gives
//     back those of the messages queued behind it with its key) and take them back before
//     they start, waiting if need be. The bytes in memory may then exceed the bound by those
//     of the messages read ahead.
//   - When the partitions are revoked, the messages read ahead and not started are let go
//     uncommitted, with those queued behind them with their keys, and redelivered to the
//     partitions' next owner; the messages being handled drain as always. Messages handled
//     past a message let go are committed with it, by the next owner, after handling them
//     again: the larger ReadAhead, the more a rebalance may redo.
//
// It knows nothing of what the messages mean; the handler does.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"

	"rulevalidator/internal/tracing"
	"rulevalidator/stream"
)

const (
	// handlerExitGrace is how long a drain waits, after cancelling the handlers' context at the
	// drain deadline, for them to return before abandoning them.
	handlerExitGrace = 5 * time.Second
	// rebalanceMargin is added to the time a drain may take to give the coordinator's
	// rebalance timeout: a member that drains must still be waited for.
	rebalanceMargin = 15 * time.Second
)

// Consumer consumes one topic as a member of a consumer group and hands each message to a
// Handler. Its configuration is fixed at New; Run may be called again after it returns.
type Consumer struct {
	cfg     Config
	handler Handler
	group   *stream.Group
	log     *slog.Logger
	// tracer makes each message's process span (see Trace); nil makes none.
	tracer trace.Tracer
}

// New checks cfg, after filling in its defaults, and returns a Consumer that passes each
// message to h.
func New(cfg Config, h Handler) (*Consumer, error) {
	if h == nil {
		return nil, errors.New("consumer: handler is nil")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	group, err := stream.NewGroup(cfg.GroupConfig)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	c := &Consumer{
		cfg:     cfg,
		handler: h,
		group:   group,
		log:     cfg.Logger.With("component", "consumer", "topic", cfg.Topic, "group", cfg.GroupID),
	}
	if cfg.TracerProvider != nil {
		c.tracer = cfg.TracerProvider.Tracer(tracerName)
	}
	return c, nil
}

// Run consumes until ctx is cancelled, then stops fetching, lets in-flight messages finish for
// up to DrainTimeout, commits what finished, leaves the group and returns nil. Messages that did
// not finish are not committed and will be redelivered. Each rebalance drains the same way
// before the partitions are given up.
//
// Fetch and commit errors (a broker restarting, a rebalance) are logged and retried. A handler
// error while the handler still had time to finish stops the consumer the same way and is
// returned: committing past that message would lose it. Compose Retry and DeadLetter so that
// only a shutdown ends a handler with an error.
func (c *Consumer) Run(ctx context.Context) error {
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	// The bounds hold across generations: a handler abandoned at a drain keeps its slot, and
	// its message its room, until it returns.
	room := make(chan struct{}, c.cfg.Concurrency+c.cfg.readAhead())
	slots := newSlots(c.cfg.Concurrency, c.cfg.Fairness)
	inFlightBytes := semaphore.NewWeighted(c.cfg.MaxBytesInFlight)
	c.log.Info("consumer started", "brokers", c.cfg.Client.Brokers(), "concurrency", c.cfg.Concurrency,
		"fair", c.cfg.Fairness != nil, "read_ahead", c.cfg.readAhead())
	err := c.group.Run(runCtx, func(gen *stream.Generation) error {
		r := &run{
			cfg:       c.cfg,
			handler:   c.handler,
			tracer:    c.tracer,
			log:       c.log.With("generation", gen.ID),
			gen:       gen,
			room:      room,
			slots:     slots,
			bytes:     inFlightBytes,
			stop:      stop,
			offsets:   newOffsetTracker(),
			keyQueues: make(map[keyRef]*keyQueue),
			ahead:     newTenantQueues[*pending](),
			waitingOf: map[string]int{},
		}
		// Handlers outlive the generation by up to DrainTimeout, keeping ctx's values.
		r.draining = make(chan struct{})
		hctx := context.WithValue(context.WithoutCancel(ctx), drainingKey{}, (<-chan struct{})(r.draining))
		r.handlerCtx, r.cancelHandlers = context.WithCancel(hctx)
		defer r.cancelHandlers()
		return r.session(runCtx)
	})
	c.log.Info("consumer stopped", "err", err)
	return err
}

// session is one generation's work: fetch and handle until the generation ends, then drain,
// commit what finished, and forget the rest.
func (r *run) session(ctx context.Context) error {
	r.log.Info("partitions assigned", "partitions", r.gen.Partitions())
	if h := r.cfg.Hooks.Assigned; h != nil {
		h(r.gen.Partitions())
	}
	stopCommitting := make(chan struct{})
	committerDone := make(chan struct{})
	go func() {
		defer close(committerDone)
		r.commitEvery(r.cfg.CommitInterval, stopCommitting)
	}()

	r.slots.serve(r)
	r.fetchLoop(ctx)
	r.stopStarting()
	close(r.draining)
	if h := r.cfg.Hooks.Revoked; h != nil {
		h(r.gen.Partitions())
	}
	r.log.Info("partitions revoked: draining in-flight messages",
		"cause", context.Cause(ctx), "in_flight", r.inFlight(), "drain_timeout", r.cfg.DrainTimeout)
	r.drain()

	close(stopCommitting)
	<-committerDone
	if !r.commit() {
		r.log.Warn("final commit of the generation failed; messages handled since the last commit will be redelivered")
	}
	r.mu.Lock()
	// Those never started were let go, and said so, at the start of the drain.
	abandoned := r.offsets.inFlightCount() - r.notStarted
	// The generation's commit state goes with it: the partitions' next owner starts from
	// what was committed, and nothing fetched here is committed later.
	r.offsets, r.closed = newOffsetTracker(), true
	r.mu.Unlock()
	if abandoned > 0 {
		r.log.Warn("partitions given up with messages unfinished; their next owner handles them", "abandoned", abandoned)
	}
	return r.firstFailure()
}

// keyRef names one key's queue within a partition.
type keyRef struct {
	partition int
	key       string
}

// keyQueue is what follows, with one key, the message of that key being handled or waiting
// to be started, and the reservation that holds all their weights (see reservation).
type keyQueue struct {
	queue []*pending
	res   *reservation
}

// run is the state of one generation.
type run struct {
	cfg     Config
	handler Handler
	tracer  trace.Tracer
	log     *slog.Logger
	gen     *stream.Generation

	// room bounds the messages in flight: one is taken before each fetch and given back when
	// the message is let go. It holds Concurrency, and ReadAhead more with Fairness.
	room chan struct{}
	// slots bound the messages being handled.
	slots *slots
	// bytes bounds the bytes of the messages in flight; each holds messageWeight of it, and
	// what its handler reserved (Reserve), up to the bound in all.
	bytes          *semaphore.Weighted
	handlerCtx     context.Context
	cancelHandlers context.CancelFunc
	// draining is closed when the generation ends (shutdown or rebalance), before the drain:
	// handlers waiting to retry give their message up at once (see Draining).
	draining chan struct{}
	// stop stops the whole consumer, after a handler failure.
	stop    context.CancelCauseFunc
	workers sync.WaitGroup

	mu      sync.Mutex
	offsets *offsetTracker
	// keyQueues holds, for each key with a message being handled or waiting in ahead, the
	// later messages with that key, in offset order. A present entry, even empty, means the
	// key is taken: its next message goes to the queue.
	keyQueues map[keyRef]*keyQueue
	// ahead holds the messages fetched and waiting for a slot, by tenant: keyless ones, and
	// the first of each key (see keyQueues). Without Fairness there is one tenant, so it is
	// the order of fetching.
	ahead *tenantQueues[*pending]
	// waitingOf counts each tenant's messages waiting, in ahead or behind their keys.
	waitingOf map[string]int
	// seq numbers the messages in the order they were fetched: the last one's.
	seq uint64
	// atWork is this generation's workers, each holding a slot; waiting is those of them
	// waiting for bytes.
	atWork, waiting int
	// stopped is set when nothing more may start: the generation ended, or a handler failed.
	stopped bool
	// notStarted counts the messages let go unstarted when the generation ended.
	notStarted int
	failure    error
	// closed is set once the generation's partitions were given up; a handler abandoned at
	// the drain that returns afterwards is not recorded.
	closed bool
}

// fetchLoop fetches until the generation ends or ctx does, taking room before each fetch
// so that the messages in flight stay within it.
func (r *run) fetchLoop(ctx context.Context) {
	for {
		select {
		case r.room <- struct{}{}:
		case <-r.gen.Done():
			return
		case <-ctx.Done():
			return
		}
		rec, err := r.gen.Fetch(ctx)
		if err != nil {
			<-r.room
			return // the generation ended, or ctx did
		}
		m := &rec
		if !r.acquireBytes(ctx, m) {
			<-r.room
			return // not recorded as fetched: its next owner, or a restart, reads it again
		}
		r.take(m)
		// After take: from here the message can be scheduled, so what the hook records
		// (the fetch's position, and for the tests its moment) holds for the scheduler too.
		r.cfg.Hooks.fetched(m)
	}
}

// handle runs the handler on p's message, records the outcome and gives its slot and its
// share of res back. It reports whether the handler succeeded, or deferred the message: a
// deferred message keeps its room, to wait again (run.work).
func (r *run) handle(p *pending, res *reservation) (ok bool, deferral *DeferredError) {
	m := p.m
	start := time.Now()
	share := &messageReservation{res: res, weight: r.messageWeight(m)}
	// What the message's reservation lent while it waited is taken back first.
	settled := res.settle(r.handlerCtx)
	err := settled
	ctx := r.handlerCtx
	var span trace.Span
	if err == nil {
		ctx = WithReserver(ctx, share)
		if r.cfg.Fairness != nil && !p.overHeld {
			ctx = withMayDefer(ctx)
		}
		if r.tracer != nil {
			ctx, span = startProcess(ctx, r.tracer, r.cfg.GroupID, m)
		}
		err = r.call(ctx, m)
	}
	took := time.Since(start)

	outcome := OutcomeOK
	d, isDeferred := deferred(err)
	switch {
	case settled != nil:
		outcome = OutcomeInterrupted
		r.log.Info("not started: the drain began while it waited for its bytes; it will be redelivered",
			append(logAttrs(m), "err", err)...)
	case err == nil:
		r.mu.Lock()
		closed := r.closed
		known := closed || r.offsets.handled(m.Partition, m.Offset)
		r.mu.Unlock()
		if closed {
			r.log.Info("handled after its partition was given up; not committed here, its next owner handles it again", logAttrs(m)...)
		}
		if !known {
			// Cannot happen: dispatch recorded it. Say so loudly rather than guess.
			r.log.Error("handled an offset the tracker does not hold", logAttrs(m)...)
		}
	case isDeferred && r.cfg.Fairness != nil && !p.overHeld:
		outcome = OutcomeDeferred
		r.log.Info("deferred: its tenant is held back until then", append(logAttrs(m), "until", d.Until, "why", d.Why)...)
	case errors.Is(err, ErrDraining):
		outcome = OutcomeInterrupted
		r.log.Info("retry given up at the drain; not committed, it will be redelivered",
			append(logAttrs(m), "err", err)...)
	case r.handlerCtx.Err() != nil:
		outcome = OutcomeInterrupted
		r.log.Warn("handler interrupted at the drain deadline; not committed, it will be redelivered",
			append(logAttrs(m), "err", err)...)
	default:
		outcome = OutcomeFailed
		r.fail(fmt.Errorf("consumer: handling %s: %w", where(m), err))
	}
	r.cfg.Hooks.handled(ctx, outcome, took)
	if span != nil {
		tracing.End(span, err) // after the hook, which sees the span
	}
	if outcome == OutcomeDeferred {
		share.endHandler(false)
		return false, d // still in flight: it keeps its room and its weight
	}
	share.end()
	// The hook goes first, so that the next message's +1 cannot be observed before this -1.
	r.cfg.Hooks.inFlight(-1)
	<-r.room
	return err == nil, nil
}

// call runs the handler with ctx, turning a panic that no Recover middleware caught into an
// error.
func (r *run) call(ctx context.Context, m *Message) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v", errHandlerPanicked, v)
		}
	}()
	return r.handler(ctx, m)
}

// messageWeight is what m holds of MaxBytesInFlight: its cost, capped at the bound so that a
// costlier message can still be taken on, alone.
func (r *run) messageWeight(m *Message) int64 {
	n := Size(m)
	if r.cfg.Cost != nil {
		n = r.cfg.Cost(m)
	}
	return min(max(n, 1), r.cfg.MaxBytesInFlight)
}

// Size is the bytes of m's key, value and headers.
func Size(m *Message) int64 {
	n := int64(len(m.Key) + len(m.Value))
	for _, h := range m.Headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}

// acquireBytes waits until m fits in MaxBytesInFlight, or the generation or ctx ends
// (reported false).
func (r *run) acquireBytes(ctx context.Context, m *Message) bool {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.gen.Done():
			cancel()
		case <-actx.Done():
		}
	}()
	return r.bytes.Acquire(actx, r.messageWeight(m)) == nil
}

// fail records the first handler failure and stops fetching and starting messages.
func (r *run) fail(err error) {
	r.mu.Lock()
	first := r.failure == nil
	if first {
		r.failure = err
	}
	r.stopped = true
	r.mu.Unlock()
	r.log.Error("handler failed; stopping the consumer so that the message is not committed", "err", err)
	if first {
		r.stop(err)
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
func (r *run) drain() {
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
	r.cancelHandlers()
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
	offsets := make(map[int]int64, len(points))
	for _, p := range points {
		offsets[p.partition] = p.offset
	}
	if err := r.commitWithin(offsets); err != nil {
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

// commitWithin commits through the generation, giving up after CommitTimeout (the commit
// itself goes on in the background and is harmless: the offsets are the generation's own).
func (r *run) commitWithin(offsets map[int]int64) error {
	done := make(chan error, 1)
	go func() { done <- r.gen.Commit(offsets) }()
	t := time.NewTimer(r.cfg.CommitTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("commit not answered within %s", r.cfg.CommitTimeout)
	}
}

func (p commitPoint) String() string { return fmt.Sprintf("%d@%d", p.partition, p.offset) }

type drainingKey struct{}

// Draining returns a channel closed once the generation that handed the message over ends
// (SIGTERM, or a rebalance taking its partition away): a handler waiting, rather than working,
// should then return, leaving the message uncommitted for its next owner. It is nil, never
// closed, for a context that did not come from a Consumer.
func Draining(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(drainingKey{}).(<-chan struct{})
	return ch
}
