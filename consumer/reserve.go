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

// reservation is what one worker holds of the bytes in flight: the weight of the message it
// handles, taken before the message was fetched, what the handler reserved since, and the
// weights of the messages queued behind it with the same key. Those cannot finish before it,
// so they are its to give back while it waits: otherwise it could wait for them forever. The
// total is capped at the bound, as a weight is, so that a message wanting more than the bound
// still runs, once it is alone.
type reservation struct {
	sem   *semaphore.Weighted
	limit int64
	// ended is closed when the generation ends: a wait then gives up (ErrDraining).
	ended <-chan struct{}

	// growing makes one grow wait at a time; mu is never held across a wait.
	growing sync.Mutex
	mu      sync.Mutex
	// want is what was asked for in all; held is what is held of sem: min(want, limit)
	// except during a wait (then nothing), after a wait that gave up, or after lend (then
	// less, until the next grow).
	want, held int64
	waiting    bool

	// waits, when set, is told when a wait for bytes begins (true) and ends (false); it is
	// called with neither mutex held.
	waits func(waiting bool)
	// Kept by the consumer's run under its own mutex: whether a worker handles the
	// reservation's messages now, and whether it counts it among those waiting for bytes.
	atWork, counted bool
}

func newReservation(sem *semaphore.Weighted, limit, weight int64, ended <-chan struct{}) *reservation {
	return &reservation{sem: sem, limit: limit, ended: ended, want: weight, held: weight}
}

// adopt adds the weight of a message queued behind the worker, already taken from sem.
func (s *reservation) adopt(weight int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want += weight
	if s.waiting {
		s.sem.Release(weight) // a waiting worker holds nothing; the wait's end takes it again
		return
	}
	s.held += weight
}

// lend gives back all that is held while the messages cannot start: they wait for a handling
// slot, and every slot's worker waits for bytes, which these would otherwise hold from them
// forever. settle takes them back before a message is handled.
func (s *reservation) lend() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting || s.held == 0 {
		return
	}
	s.sem.Release(s.held)
	s.held = 0
}

// settle takes back, before a message is handled, what was lent (or not taken back after a
// wait that gave up): a grow of nothing, waiting as grow does. Most often nothing is missing.
func (s *reservation) settle(ctx context.Context) error {
	s.mu.Lock()
	whole := !s.waiting && s.held >= min(s.want, s.limit)
	s.mu.Unlock()
	if whole {
		return nil
	}
	return s.grow(ctx, 0)
}

// shrink gives n of what was asked for back.
func (s *reservation) shrink(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want -= n
	s.trim()
}

// trim gives back what is held beyond what is wanted. s.mu is held.
func (s *reservation) trim() {
	if target := min(s.want, s.limit); !s.waiting && target < s.held {
		s.sem.Release(s.held - target)
		s.held = target
	}
}

// grow takes n more. When that is not free at once it gives back all it holds and waits for
// the whole new total: a waiting worker then holds nothing, so two that both grow cannot each
// hold what the other waits for. The semaphore is FIFO, so the wait ends once the workers
// that are not waiting give back enough.
func (s *reservation) grow(ctx context.Context, n int64) error {
	s.growing.Lock()
	defer s.growing.Unlock()
	s.mu.Lock()
	s.want += n
	defer s.mu.Unlock()
	for {
		target := min(s.want, s.limit)
		if target <= s.held {
			s.trim()
			return nil
		}
		if s.sem.TryAcquire(target - s.held) {
			s.held = target
			return nil
		}
		before := s.held
		s.sem.Release(before)
		s.held, s.waiting = 0, true
		s.mu.Unlock()
		s.notify(true)
		err := s.acquire(ctx, target)
		s.notify(false)
		s.mu.Lock()
		s.waiting = false
		if err != nil {
			s.want -= n
			// Take the old share back if it is free; if not, the worker goes on holding less
			// until its handler, told to stop, returns.
			if back := min(before, s.want, s.limit); back > 0 && s.sem.TryAcquire(back) {
				s.held = back
			}
			return err
		}
		s.held = target
		s.trim() // given back during the wait; what was queued meanwhile is taken next round
	}
}

func (s *reservation) notify(waiting bool) {
	if s.waits != nil {
		s.waits(waiting)
	}
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

// messageReservation is one message's share of its worker's reservation: its weight and what
// its handler reserved and did not give back, all given back when it is let go.
type messageReservation struct {
	res    *reservation
	weight int64

	mu          sync.Mutex
	outstanding int64
	letGo       bool
}

// Reserve implements Reserver.
func (v *messageReservation) Reserve(ctx context.Context, n int64) (func(), error) {
	if n <= 0 {
		return func() {}, nil
	}
	if v.isLetGo() {
		return nil, errLetGo
	}
	if err := v.res.grow(ctx, n); err != nil {
		return nil, fmt.Errorf("reserving %d bytes in flight: %w", n, err)
	}
	v.mu.Lock()
	if v.letGo {
		v.mu.Unlock()
		v.res.shrink(n)
		return nil, errLetGo
	}
	v.outstanding += n
	v.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			v.mu.Lock()
			if v.letGo {
				v.mu.Unlock()
				return
			}
			v.outstanding -= n
			v.mu.Unlock()
			v.res.shrink(n)
		})
	}, nil
}

func (v *messageReservation) isLetGo() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.letGo
}

// end gives back the message's weight and all its handler still holds.
func (v *messageReservation) end() { v.endHandler(true) }

// endHandler gives back all the handler still holds, and the message's weight with
// message true; a deferred message keeps its weight while it waits to be handled again.
func (v *messageReservation) endHandler(message bool) {
	v.mu.Lock()
	if v.letGo {
		v.mu.Unlock()
		return
	}
	v.letGo = true
	n := v.outstanding
	if message {
		n += v.weight
	}
	v.mu.Unlock()
	v.res.shrink(n)
}
