package consumer

import "slices"

// drr hands out items queued per tenant by deficit round robin (Shreedhar and Varghese, 1995):
// the tenants with items queued take turns, in the order they got their first item; a turn
// credits the tenant with its weight and lasts until the credit is spent, one per item, or
// the tenant runs out of items. A tenant without items leaves the round and its credit is
// forgotten, so that nobody saves up turns while it has nothing queued; one that gets items
// again joins at the end of the round. Over a busy stretch each tenant gets items in
// proportion to its weight, a tenant alone gets every item, and a tenant that joins waits at
// most one round: the turns of the tenants ahead of it.
//
// Every item costs one: the consumer shares handling slots, and how long a message will hold
// one is not known when it starts. Weights are read at every pick, so that a weight changed
// meanwhile takes effect at once: a raised one from the tenant's next turn, a lowered one
// cutting a turn in progress short. Within a tenant, items come out in the order of their
// seq, not of their push: a message put back (a key's next message, once the one before it is
// handled) goes before the tenant's messages fetched after it.
//
// A tenant may be held back from a pick (popWhere: the consumer's cap on a tenant's messages
// being handled): it is passed over where it stands, and the others share the item.
//
// It is not safe for concurrent use.
type drr[T any] struct {
	weight func(tenant string) int
	queues map[string]*tenantQueue[T]
	// round holds the tenants with items, round[0] the one whose turn is current or next.
	round []*tenantQueue[T]
	n     int
}

type tenantQueue[T any] struct {
	tenant string
	items  []queued[T] // ascending seq
	// credit is what is left of the current turn; 0 between turns.
	credit int
}

type queued[T any] struct {
	seq  uint64
	item T
}

// newDRR returns an empty scheduler reading each tenant's weight through weight (nil: 1 for
// every tenant). Weights below 1 count as 1: a tenant is never stopped, or its messages would
// hold the consumer's read-ahead room forever.
func newDRR[T any](weight func(tenant string) int) *drr[T] {
	return &drr[T]{weight: weight, queues: make(map[string]*tenantQueue[T])}
}

func (s *drr[T]) weightOf(tenant string) int {
	if s.weight == nil {
		return 1
	}
	return max(s.weight(tenant), 1)
}

// push queues item for tenant, at its place by seq among the tenant's items.
func (s *drr[T]) push(tenant string, seq uint64, item T) {
	q, ok := s.queues[tenant]
	if !ok {
		q = &tenantQueue[T]{tenant: tenant}
		s.queues[tenant] = q
		s.round = append(s.round, q)
	}
	i := len(q.items)
	for i > 0 && q.items[i-1].seq > seq {
		i--
	}
	q.items = slices.Insert(q.items, i, queued[T]{seq: seq, item: item})
	s.n++
}

// pop takes the next item: the first of the tenant whose turn it is. ok is false when
// nothing is queued.
func (s *drr[T]) pop() (item T, tenant string, ok bool) { return s.popWhere(nil) }

// popWhere is pop among the tenants that may start (nil: all of them). A tenant that may not
// is passed over where it stands: it keeps its place in the round and what is left of its
// turn, and the item goes to the next tenant in the round that may, whose turn it then is.
// So a tenant held back does not hold the others back, and goes on with its turn once it
// may start again. ok is false when no tenant that may start has items queued.
func (s *drr[T]) popWhere(mayStart func(tenant string) bool) (item T, tenant string, ok bool) {
	at := -1
	for i, q := range s.round {
		if mayStart == nil || mayStart(q.tenant) {
			at = i
			break
		}
	}
	if at < 0 {
		return item, "", false
	}
	q := s.round[at]
	w := s.weightOf(q.tenant)
	if q.credit == 0 {
		q.credit = w // a turn begins
	} else {
		q.credit = min(q.credit, w) // the weight was lowered during the turn
	}
	item = q.items[0].item
	q.items[0] = queued[T]{}
	q.items = q.items[1:]
	q.credit--
	s.n--
	switch {
	case len(q.items) == 0:
		s.round = slices.Delete(s.round, at, at+1)
		delete(s.queues, q.tenant)
	case q.credit == 0:
		s.round = append(slices.Delete(s.round, at, at+1), q)
	}
	return item, q.tenant, true
}

// len is the number of items queued.
func (s *drr[T]) len() int { return s.n }

// each calls f with every item queued.
func (s *drr[T]) each(f func(T)) {
	for _, q := range s.round {
		for _, e := range q.items {
			f(e.item)
		}
	}
}

// clear removes every item and returns them, tenant after tenant.
func (s *drr[T]) clear() []T {
	out := make([]T, 0, s.n)
	s.each(func(item T) { out = append(out, item) })
	s.queues = make(map[string]*tenantQueue[T])
	s.round, s.n = nil, 0
	return out
}
