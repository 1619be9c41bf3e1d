package consumer

import "slices"

// tenantQueues holds items queued per tenant and hands them out by a rank the caller gives:
// the next item is the first of the tenant ranked lowest among those that may start, ties
// going to the tenant whose first item came first (the lower seq). The consumer ranks the
// tenants by their recent usage of the slots per weight (slots.rankLocked); with every rank
// equal it is the order of seq, first come first served.
//
// Within a tenant, items come out in the order of their seq, not of their push: a message put
// back (a key's next message, once the one before it is handled) goes before the tenant's
// messages fetched after it.
//
// A pick looks at every tenant with items, so it costs their number; they are at most the
// messages read ahead.
//
// It is not safe for concurrent use.
type tenantQueues[T any] struct {
	queues map[string]*tenantQueue[T]
	n      int
}

type tenantQueue[T any] struct {
	tenant string
	items  []queued[T] // ascending seq
}

type queued[T any] struct {
	seq  uint64
	item T
}

func newTenantQueues[T any]() *tenantQueues[T] {
	return &tenantQueues[T]{queues: make(map[string]*tenantQueue[T])}
}

// push queues item for tenant, at its place by seq among the tenant's items.
func (s *tenantQueues[T]) push(tenant string, seq uint64, item T) {
	q, ok := s.queues[tenant]
	if !ok {
		q = &tenantQueue[T]{tenant: tenant}
		s.queues[tenant] = q
	}
	i := len(q.items)
	for i > 0 && q.items[i-1].seq > seq {
		i--
	}
	q.items = slices.Insert(q.items, i, queued[T]{seq: seq, item: item})
	s.n++
}

// pop takes the first item of the tenant rank puts first: the lowest rank among the tenants
// with items that may start, ties going to the one whose first item has the lowest seq. rank
// is called once for each tenant with items (nil: every tenant may start, all ranked equal).
// A tenant that may not start is passed over, and the others share the item. ok is false
// when no tenant that may start has items queued.
func (s *tenantQueues[T]) pop(rank func(tenant string) (r float64, mayStart bool)) (item T, tenant string, ok bool) {
	var (
		best     *tenantQueue[T]
		bestRank float64
	)
	for _, q := range s.queues {
		var r float64
		if rank != nil {
			var may bool
			if r, may = rank(q.tenant); !may {
				continue
			}
		}
		if best == nil || r < bestRank || r == bestRank && q.items[0].seq < best.items[0].seq {
			best, bestRank = q, r
		}
	}
	if best == nil {
		return item, "", false
	}
	item = best.items[0].item
	best.items[0] = queued[T]{}
	best.items = best.items[1:]
	if len(best.items) == 0 {
		delete(s.queues, best.tenant)
	}
	s.n--
	return item, best.tenant, true
}

// len is the number of items queued.
func (s *tenantQueues[T]) len() int { return s.n }

// each calls f with every item queued, in no particular order.
func (s *tenantQueues[T]) each(f func(T)) {
	for _, q := range s.queues {
		for _, e := range q.items {
			f(e.item)
		}
	}
}

// clear removes every item and returns them, in no particular order.
func (s *tenantQueues[T]) clear() []T {
	out := make([]T, 0, s.n)
	s.each(func(item T) { out = append(out, item) })
	s.queues = make(map[string]*tenantQueue[T])
	s.n = 0
	return out
}
