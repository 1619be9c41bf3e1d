package consumer

import (
	"math"
	"sync"
	"time"
)

// slots bound the messages being handled, across generations: a handler abandoned at a drain
// keeps its slot until it returns. The generation being served is told when one comes back.
// With Fairness they also rank the tenants for a free slot, by their recent usage of the
// slots per weight, and count each tenant's slots, for its cap.
type slots struct {
	mu      sync.Mutex
	free    int
	serving *run
	// usage is each tenant's recent use of the slots and the slots it holds, kept across
	// generations so that a rebalance does not wipe out who has been flooding; nil without
	// Fairness. weight and maxInFlight are Fairness's (nil: 1 each, no caps).
	usage       *usage
	weight      func(tenant string) int
	maxInFlight func(tenant string) int
	now         func() time.Time
	// held holds tenants back until a deferral's time (Defer), with a timer each that
	// wakes the generation being served then.
	held   map[string]time.Time
	timers map[string]*time.Timer
}

// newSlots returns n slots, shared by fairness (nil: first come first served).
func newSlots(n int, fairness *Fairness) *slots {
	s := &slots{free: n, now: time.Now, held: map[string]time.Time{}, timers: map[string]*time.Timer{}}
	if fairness != nil {
		s.usage = newUsage(usageHalfLife)
		s.weight, s.maxInFlight = fairness.Weight, fairness.MaxInFlight
	}
	return s
}

// serve makes r the generation that gets the slots given back from now on.
func (s *slots) serve(r *run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serving = r
}

// standing is a tenant's place for a free slot: its rank, the lowest first, whether it may
// start a message, and whether it is held by a deferral (then it may not).
type standing struct {
	rank     float64
	mayStart bool
	held     bool
}

// take takes a slot, if one is free, for the message pick picks by the standing of each
// tenant (standingLocked, the moment of the take), and reports whether it did: false when
// no slot is free, or pick found nothing. pick runs with s.mu held.
func (s *slots) take(pick func(standing func(tenant string) standing) (tenant string, ok bool)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free == 0 {
		return false
	}
	now := s.now()
	tenant, ok := pick(func(tenant string) standing { return s.standingLocked(tenant, now) })
	if !ok {
		return false
	}
	s.free--
	if s.usage != nil {
		s.usage.start(tenant, now)
	}
	return true
}

// standingLocked is tenant's standing for a free slot at now: its recent usage of the slots
// per weight; it may not start at its cap, nor while it is held. Without Fairness every
// tenant ranks 0. The weight and the cap are read at each decision, so that changed ones
// apply at once; a tenant over a lowered cap starts nothing until it is under it. Weights
// below 1 count as 1: a tenant is never stopped, or its messages would hold the consumer's
// read-ahead room forever. s.mu is held.
func (s *slots) standingLocked(tenant string, now time.Time) standing {
	if until, held := s.held[tenant]; held {
		if now.Before(until) {
			return standing{held: true}
		}
		delete(s.held, tenant)
	}
	if s.usage == nil {
		return standing{mayStart: true}
	}
	if s.maxInFlight != nil {
		if limit := s.maxInFlight(tenant); limit > 0 && s.usage.holding(tenant) >= limit {
			return standing{}
		}
	}
	weight := 1
	if s.weight != nil {
		weight = max(s.weight(tenant), 1)
	}
	return standing{rank: s.usage.of(tenant, now) / float64(weight), mayStart: true}
}

// hold holds tenant back until until (a deferral), and wakes the generation being served
// then, to start what waits.
func (s *slots) hold(tenant string, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, held := s.held[tenant]; held && !until.After(prev) {
		return
	}
	s.held[tenant] = until
	if t, ok := s.timers[tenant]; ok {
		t.Stop()
	}
	s.timers[tenant] = time.AfterFunc(time.Until(until), func() { s.wake(tenant) })
}

// wake starts what waits once tenant's hold has ended.
func (s *slots) wake(tenant string) {
	s.mu.Lock()
	delete(s.timers, tenant)
	serving := s.serving
	s.mu.Unlock()
	if serving != nil {
		serving.schedule()
	}
}

// give gives back a slot a message of tenant held and returns the generation being served,
// to start what waits.
func (s *slots) give(tenant string) *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free++
	if s.usage != nil {
		s.usage.end(tenant, s.now())
	}
	return s.serving
}

// pending is a message taken on and not yet let go, with the reservation that holds its
// weight: its own, or its key's, shared with the messages of the key that follow it.
type pending struct {
	m      *Message
	weight int64
	tenant string
	// seq numbers the messages in the order they were fetched.
	seq uint64
	res *reservation
	// overHeld is set when its tenant, held, had too many messages waiting (Fairness.MaxHeld):
	// it is started to be ended, not deferred again.
	overHeld bool
}

func keyOf(m *Message) keyRef { return keyRef{partition: m.Partition, key: string(m.Key)} }

// take takes m on, holding room and its weight of bytes: it queues m in ahead, or behind the
// message of its key that is being handled or waits in ahead, or drops it as a redelivery.
func (r *run) take(m *Message) {
	p := &pending{m: m, weight: r.messageWeight(m), tenant: r.cfg.tenantOf(m)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.offsets.fetched(m.Partition, m.Offset) {
		r.bytes.Release(p.weight)
		<-r.room
		r.log.Debug("skipping a message fetched again after a rebalance", logAttrs(m)...)
		return
	}
	r.cfg.Hooks.inFlight(+1)
	r.waitingOf[p.tenant]++
	r.seq++
	p.seq = r.seq
	if len(m.Key) > 0 {
		k := keyOf(m)
		if kq, taken := r.keyQueues[k]; taken {
			kq.queue = append(kq.queue, p)
			kq.res.adopt(p.weight)
			p.res = kq.res
			r.scheduleLocked() // to lend its bytes too, if its key's message cannot start
			return
		}
		p.res = r.newReservation(p.weight)
		r.keyQueues[k] = &keyQueue{res: p.res}
	} else {
		p.res = r.newReservation(p.weight)
	}
	r.ahead.push(p.tenant, p.seq, p)
	r.scheduleLocked()
}

// newReservation is a reservation holding weight, taken when its message was fetched, whose
// waits for bytes are counted while a worker handles its messages.
func (r *run) newReservation(weight int64) *reservation {
	res := newReservation(r.bytes, r.cfg.MaxBytesInFlight, weight, r.gen.Done())
	res.waits = func(waiting bool) { r.waitingForBytes(res, waiting) }
	return res
}

// schedule is scheduleLocked, for a slot given back by another generation's worker.
func (r *run) schedule() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scheduleLocked()
}

// scheduleLocked starts messages from ahead while slots are free, each the first of the
// tenant with the least recent usage of the slots per weight, passing over the tenants at
// their cap (Fairness.MaxInFlight) and those held by a deferral, but for a held tenant with
// more than Fairness.MaxHeld messages waiting: its oldest goes first, not to be deferred
// again (pending.overHeld). When messages still wait and none of them can start (no
// slot is free, or their tenants are at their caps) while every worker of this generation
// waits for bytes, those workers wait for the bytes the waiting messages hold, which cannot
// start before a worker finishes: the waiting messages then lend their bytes
// (reservation.lend), to take them back when they start. r.mu is held.
func (r *run) scheduleLocked() {
	for !r.stopped && r.ahead.len() > 0 {
		var p *pending
		started := r.slots.take(func(standingOf func(string) standing) (string, bool) {
			var ok bool
			p, _, ok = r.ahead.pop(func(tenant string) (float64, bool) {
				st := standingOf(tenant)
				if st.held {
					return math.Inf(-1), r.waitingOf[tenant] > r.cfg.maxHeld()
				}
				return st.rank, st.mayStart
			})
			if !ok {
				return "", false
			}
			p.overHeld = standingOf(p.tenant).held
			return p.tenant, true
		})
		if !started {
			break
		}
		r.stopWaiting(p)
		r.atWork++
		p.res.atWork = true
		r.workers.Add(1)
		go r.work(p)
	}
	// What waits could not start: the loop ended with messages in ahead.
	if !r.stopped && r.ahead.len() > 0 && r.atWork > 0 && r.waiting == r.atWork {
		r.ahead.each(func(p *pending) { p.res.lend() })
	}
}

// waitingForBytes counts the workers waiting for bytes, told by their reservation.
func (r *run) waitingForBytes(res *reservation, waiting bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case waiting && res.atWork && !res.counted:
		res.counted = true
		r.waiting++
		r.scheduleLocked()
	case !waiting && res.counted:
		res.counted = false
		r.waiting--
	}
}

// work handles p's message holding a slot. A key's next message then waits in ahead to be
// picked, like any other, and the slot is given back; once nothing more starts (the
// drain), the worker goes on with the key's messages itself instead, as long as the handlers'
// context lasts.
func (r *run) work(p *pending) {
	defer r.workers.Done()
	res := p.res
	// The slot is counted as its first message's tenant's, whatever the key's later
	// messages it handles in the drain name.
	tenant := p.tenant
	for {
		ok, deferral := r.handle(p, res)
		r.mu.Lock()
		if deferral != nil {
			r.deferAndUnlock(p, tenant, deferral.Until)
			return
		}
		next := r.nextOfKeyLocked(p, ok)
		if next != nil && r.stopped {
			r.stopWaiting(next)
			r.mu.Unlock()
			p = next
			continue
		}
		r.endWorkLocked(res)
		if next != nil {
			r.ahead.push(next.tenant, next.seq, next)
		}
		r.giveSlotAndUnlock(tenant)
		return
	}
}

// endWorkLocked counts a worker of this generation out. r.mu is held.
func (r *run) endWorkLocked(res *reservation) {
	r.atWork--
	res.atWork = false
	if res.counted { // a Reserve the handler left running
		res.counted = false
		r.waiting--
	}
}

// giveSlotAndUnlock gives back the slot a message of tenant held and starts what waits, here
// or in the generation being served (after releasing r.mu, which is held when called).
func (r *run) giveSlotAndUnlock(tenant string) {
	serving := r.slots.give(tenant)
	if serving == r {
		r.scheduleLocked()
	}
	r.mu.Unlock()
	if serving != nil && serving != r {
		serving.schedule()
	}
}

// deferAndUnlock puts p, deferred by its handler until until, back in ahead at its place,
// holds its tenant until then and gives back the slot tenant held (r.mu is held when
// called, and released). Once nothing more starts (the drain), p and what follows it with
// its key are let go instead, to be redelivered.
func (r *run) deferAndUnlock(p *pending, tenant string, until time.Time) {
	r.endWorkLocked(p.res)
	r.waitingOf[p.tenant]++
	if r.stopped {
		r.letGoLocked(p)
		if len(p.m.Key) > 0 {
			k := keyOf(p.m)
			for _, q := range r.keyQueues[k].queue {
				r.letGoLocked(q)
			}
			delete(r.keyQueues, k)
		}
	} else {
		r.ahead.push(p.tenant, p.seq, p)
	}
	r.slots.hold(p.tenant, until)
	r.giveSlotAndUnlock(tenant)
}

// nextOfKeyLocked is the message that follows p's with its key, now that p's was handled (ok:
// successfully), or nil when none does or the key is given up: when a message does not
// succeed, those that follow it are let go unhandled, for they must not overtake it, and
// they will be redelivered. r.mu is held.
func (r *run) nextOfKeyLocked(p *pending, ok bool) *pending {
	if len(p.m.Key) == 0 {
		return nil
	}
	k := keyOf(p.m)
	kq := r.keyQueues[k]
	if len(kq.queue) == 0 || !ok || r.handlerCtx.Err() != nil {
		delete(r.keyQueues, k)
		for _, dropped := range kq.queue {
			r.log.Info("not handled: an earlier message with the same key did not finish; it will be redelivered",
				logAttrs(dropped.m)...)
			r.letGoLocked(dropped)
		}
		return nil
	}
	next := kq.queue[0]
	kq.queue = kq.queue[1:]
	return next
}

// stopStarting stops messages from starting, at the end of the generation: those waiting in
// ahead, and those queued behind them with their keys, are let go uncommitted, to be
// redelivered to their partitions' next owner. The messages being handled finish, in the
// drain, with what follows them with their keys.
func (r *run) stopStarting() {
	r.mu.Lock()
	r.stopped = true
	n := 0
	for _, p := range r.ahead.clear() {
		r.letGoLocked(p)
		n++
		if len(p.m.Key) > 0 {
			k := keyOf(p.m)
			for _, q := range r.keyQueues[k].queue {
				r.letGoLocked(q)
				n++
			}
			delete(r.keyQueues, k)
		}
	}
	r.notStarted = n
	r.mu.Unlock()
	if n > 0 {
		r.log.Info("messages waiting to be started let go unhandled; they will be redelivered", "count", n)
	}
}

// stopWaiting counts p out of its tenant's messages waiting: it starts, or is let go. r.mu is held.
func (r *run) stopWaiting(p *pending) {
	if r.waitingOf[p.tenant]--; r.waitingOf[p.tenant] <= 0 {
		delete(r.waitingOf, p.tenant)
	}
}

// letGoLocked lets p's message, not being handled, go unhandled: its offset stays
// uncommitted. r.mu is held.
func (r *run) letGoLocked(p *pending) {
	r.stopWaiting(p)
	r.cfg.Hooks.inFlight(-1)
	p.res.shrink(p.weight)
	<-r.room
}
