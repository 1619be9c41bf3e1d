package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/semaphore"
)

// Reserver grows what the message being handled holds of MaxBytesInFlight, for memory the
// handler learns of only while it works (a document it downloads). Reserve takes n more bytes
// for the message, waiting until they fit, and returns the function that gives them back;
// the consumer gives back whatever is left when the message is let go.
type Reserver interface {
	Reserve(ctx context.Context, n int64) (release func(), err error)
}

type reserverKey struct{}

// WithReserver returns ctx carrying r, for Reserve. The consumer does this for every message
// it hands over; tests and other callers of a handler may give their own.
func WithReserver(ctx context.Context, r Reserver) context.Context {
	return context.WithValue(ctx, reserverKey{}, r)
}

// Reserve takes n more bytes of MaxBytesInFlight for the message whose handler got ctx (see
// Reserver). A context that did not come from a Consumer, or WithReserver, reserves nothing
// and succeeds. A wait that cannot finish returns an error: ctx's, or one wrapping
// ErrDraining when the generation ends first (return it: the message is then redelivered to
// the partition's next owner).
func Reserve(ctx context.Context, n int64) (release func(), err error) {
	r, ok := ctx.Value(reserverKey{}).(Reserver)
	if !ok || r == nil {
		return func() {}, nil
	}
	return r.Reserve(ctx, n)
}

// errLetGo is what a Reserve returns after its message was let go (a goroutine the handler
// left behind).
var errLetGo = errors.New("consumer: the message was let go; nothing can be reserved for it")

// reservation is what one message holds of the bytes in flight: its weight, taken before it
// was fetched, and what its handler reserved since. The total is capped at the bound, as the
// weight is, so that a message wanting more than the bound still runs, alone.
type reservation struct {
	sem   *semaphore.Weighted
	limit int64
	// ended is closed when the generation ends: a wait then gives up (ErrDraining).
	ended <-chan struct{}

	// mu is held across a wait, so that one message's reservations are taken in turn.
	mu sync.Mutex
	// want is what the message asked for in all, its weight included; held is what it holds
	// of sem, min(want, limit), or less after a wait that gave up.
	want, held int64
	letGo      bool
}

func newReservation(sem *semaphore.Weighted, limit, weight int64, ended <-chan struct{}) *reservation {
	return &reservation{sem: sem, limit: limit, ended: ended, want: weight, held: weight}
}

// Reserve implements Reserver. When the bytes are not free at once it gives back all the
// message holds and waits for the whole new total: a waiting message then holds nothing, so
// two messages that both grow cannot each hold what the other waits for. The semaphore is
// FIFO, so the wait ends once the messages that are not waiting give back enough.
func (s *reservation) Reserve(ctx context.Context, n int64) (func(), error) {
	if n <= 0 {
		return func() {}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.letGo {
		return nil, errLetGo
	}
	target := min(s.want+n, s.limit)
	if delta := target - s.held; delta <= 0 || s.sem.TryAcquire(delta) {
		s.want, s.held = s.want+n, max(target, s.held)
		return s.releaser(n), nil
	}
	s.sem.Release(s.held)
	before := s.held
	s.held = 0
	if err := s.acquire(ctx, target); err != nil {
		// Take the old share back if it is free; if not, the message goes on holding nothing
		// until its handler, told to stop, returns.
		if s.sem.TryAcquire(before) {
			s.held = before
		}
		return nil, fmt.Errorf("reserving %d bytes in flight: %w", n, err)
	}
	s.want, s.held = s.want+n, target
	return s.releaser(n), nil
}

// acquire waits for n bytes until ctx or the generation ends.
func (s *reservation) acquire(ctx context.Context, n int64) error {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-s.ended:
			cancel(ErrDraining)
		case <-actx.Done():
		}
	}()
	if err := s.sem.Acquire(actx, n); err != nil {
		return context.Cause(actx)
	}
	return nil
}

// releaser gives n of what the message asked for back, once.
func (s *reservation) releaser(n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.letGo {
				return
			}
			s.want -= n
			if target := min(s.want, s.limit); target < s.held {
				s.sem.Release(s.held - target)
				s.held = target
			}
		})
	}
}

// letGoAll gives back all the message holds, when it is let go.
func (s *reservation) letGoAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.letGo {
		return
	}
	s.letGo = true
	if s.held > 0 {
		s.sem.Release(s.held)
	}
	s.held = 0
}
