package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

// free reports how many bytes of sem, of limit, nobody holds (it takes and gives them back).
func free(sem *semaphore.Weighted, limit int64) int64 {
	for n := limit; n > 0; n-- {
		if sem.TryAcquire(n) {
			sem.Release(n)
			return n
		}
	}
	return 0
}

// newMessage is a message that holds weight of sem, handled alone by its worker.
func newMessage(sem *semaphore.Weighted, limit, weight int64, ended <-chan struct{}) *messageReservation {
	return &messageReservation{res: newReservation(sem, limit, weight, ended), weight: weight}
}

// reserved runs Reserve in the background; the channel yields its result.
func reserved(ctx context.Context, r *messageReservation, n int64) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := r.Reserve(ctx, n)
		done <- err
	}()
	return done
}

func waitErr(t *testing.T, what string, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitTimeout):
		t.Fatalf("%s: still waiting after %s", what, waitTimeout)
		return nil
	}
}

func stillWaiting(t *testing.T, what string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v), want it to wait", what, err)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestReserveGrowsTheWeightAndReleaseGivesItBack(t *testing.T) {
	const limit = 100
	sem := semaphore.NewWeighted(limit)
	sem.Acquire(context.Background(), 10)
	r := newMessage(sem, limit, 10, nil)

	release, err := r.Reserve(context.Background(), 30)
	if err != nil {
		t.Fatalf("Reserve(30) = %v", err)
	}
	if got := free(sem, limit); got != 60 {
		t.Errorf("after Reserve(30) on a weight of 10, %d bytes free, want 60", got)
	}
	release()
	release() // a second call gives nothing back twice
	if got := free(sem, limit); got != 90 {
		t.Errorf("after its release, %d bytes free, want 90 (the weight still held)", got)
	}
	r.end()
	if got := free(sem, limit); got != limit {
		t.Errorf("after the message is let go, %d bytes free, want %d", got, limit)
	}
	if _, err := r.Reserve(context.Background(), 1); !errors.Is(err, errLetGo) {
		t.Errorf("Reserve after the message was let go = %v, want errLetGo", err)
	}
}

func TestReserveBlocksAnotherMessageUntilRelease(t *testing.T) {
	const limit = 100
	sem := semaphore.NewWeighted(limit)
	sem.Acquire(context.Background(), 20)
	a := newMessage(sem, limit, 10, nil)
	b := newMessage(sem, limit, 10, nil)

	releaseA, err := a.Reserve(context.Background(), 70)
	if err != nil {
		t.Fatalf("a.Reserve(70) = %v", err)
	}
	done := reserved(context.Background(), b, 20)
	stillWaiting(t, "b.Reserve(20) with 10 bytes free", done)
	releaseA()
	if err := waitErr(t, "b.Reserve(20) after a's release", done); err != nil {
		t.Fatalf("b.Reserve(20) = %v", err)
	}
	if got := free(sem, limit); got != 60 {
		t.Errorf("%d bytes free, want 60 (a holds 10, b 30)", got)
	}
}

// A message that asks for more than the bound holds the bound, so it runs once it is alone.
func TestReserveIsCappedAtTheBound(t *testing.T) {
	const limit = 100
	sem := semaphore.NewWeighted(limit)
	sem.Acquire(context.Background(), 20)
	big := newMessage(sem, limit, 10, nil)
	other := newMessage(sem, limit, 10, nil)

	done := reserved(context.Background(), big, 10*limit)
	stillWaiting(t, "Reserve of ten times the bound beside another message", done)
	other.end()
	if err := waitErr(t, "Reserve of ten times the bound, alone", done); err != nil {
		t.Fatalf("Reserve(%d) = %v", 10*limit, err)
	}
	if got := free(sem, limit); got != 0 {
		t.Errorf("%d bytes free, want 0: the message holds the whole bound", got)
	}
	if _, err := big.Reserve(context.Background(), 5); err != nil {
		t.Errorf("a further Reserve at the cap = %v, want nil at once", err)
	}
	big.end()
	if got := free(sem, limit); got != limit {
		t.Errorf("after the message is let go, %d bytes free, want %d", got, limit)
	}
}

func TestReserveGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		// stop ends the wait: the context or the generation.
		stop func(cancel context.CancelFunc, ended chan struct{})
		want error
	}{
		{"context ends", func(cancel context.CancelFunc, _ chan struct{}) { cancel() }, context.Canceled},
		{"generation ends", func(_ context.CancelFunc, ended chan struct{}) { close(ended) }, ErrDraining},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const limit = 100
			sem := semaphore.NewWeighted(limit)
			sem.Acquire(context.Background(), 90)
			ended := make(chan struct{})
			waiting := newMessage(sem, limit, 10, ended)
			holder := newMessage(sem, limit, 80, ended)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := reserved(ctx, waiting, 50)
			stillWaiting(t, "Reserve(50) with nothing free", done)
			tc.stop(cancel, ended)
			if err := waitErr(t, "Reserve after "+tc.name, done); !errors.Is(err, tc.want) {
				t.Fatalf("Reserve = %v, want an error wrapping %v", err, tc.want)
			}
			// Whatever the waiting message still holds goes back when it is let go.
			waiting.end()
			holder.end()
			if got := free(sem, limit); got != limit {
				t.Errorf("after both messages are let go, %d bytes free, want %d", got, limit)
			}
		})
	}
}

// Messages that each hold part of the bound and each want more than is left all finish:
// a message that waits holds nothing.
func TestReserveDoesNotDeadlock(t *testing.T) {
	const limit = 100
	for _, n := range []int{2, 8} {
		t.Run(fmt.Sprint(n, " messages"), func(t *testing.T) {
			sem := semaphore.NewWeighted(limit)
			rs := make([]*messageReservation, n)
			for i := range rs {
				weight := int64(limit / n)
				sem.Acquire(context.Background(), weight)
				rs[i] = newMessage(sem, limit, weight, nil)
			}
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i, r := range rs {
				wg.Go(func() {
					defer r.end()
					for round := range 20 {
						release, err := r.Reserve(context.Background(), int64(40+i+round))
						if err != nil {
							errs <- err
							return
						}
						time.Sleep(time.Millisecond)
						release()
					}
				})
			}
			done := make(chan struct{})
			go func() {
				wg.Wait()
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(waitTimeout):
				t.Fatal("messages growing at once deadlocked")
			}
			close(errs)
			for err := range errs {
				t.Errorf("Reserve = %v", err)
			}
			if got := free(sem, limit); got != limit {
				t.Errorf("after every message is let go, %d bytes free, want %d", got, limit)
			}
		})
	}
}

func TestReserveWithoutAConsumerReservesNothing(t *testing.T) {
	release, err := Reserve(context.Background(), 1<<40)
	if err != nil || release == nil {
		t.Fatalf("Reserve on a plain context = (release nil: %t), %v; want a no-op release and nil", release == nil, err)
	}
	release()

	sem := semaphore.NewWeighted(100)
	r := newMessage(sem, 100, 0, nil)
	if _, err := Reserve(WithReserver(context.Background(), r), 40); err != nil {
		t.Fatalf("Reserve through WithReserver = %v", err)
	}
	if got := free(sem, 100); got != 60 {
		t.Errorf("%d bytes free, want 60", got)
	}
}

// A worker's messages queued behind the one it handles (same key) cannot finish first, so their
// weights are its own to give back while it waits: a message wanting the whole bound runs
// once the other workers are done, even with messages queued behind it, and one queued during
// its wait.
func TestReserveCountsTheKeyQueue(t *testing.T) {
	const limit = 100
	sem := semaphore.NewWeighted(limit)
	// The weights of a, b queued behind it, another worker's message, and c, fetched before a
	// waits and queued during its wait.
	sem.Acquire(context.Background(), 35)
	res := newReservation(sem, limit, 10, nil)
	a := &messageReservation{res: res, weight: 10}
	res.adopt(10) // b, queued behind a
	other := newMessage(sem, limit, 10, nil)

	done := reserved(context.Background(), a, 10*limit)
	stillWaiting(t, "Reserve of ten times the bound beside another worker", done)
	// c is fetched and queued behind a while a waits (its weight was taken before a waited).
	res.adopt(5)
	other.end()
	if err := waitErr(t, "Reserve of ten times the bound, alone", done); err != nil {
		t.Fatalf("Reserve(%d) = %v", 10*limit, err)
	}
	if got := free(sem, limit); got != 0 {
		t.Errorf("%d bytes free, want 0: the worker holds the whole bound", got)
	}
	a.end()
	if got := free(sem, limit); got != limit-15 {
		t.Errorf("after a is let go, %d bytes free, want %d (b's and c's weights still held)", got, limit-15)
	}
	b := &messageReservation{res: res, weight: 10}
	b.end()
	res.shrink(5) // c dropped unhandled
	if got := free(sem, limit); got != limit {
		t.Errorf("after every message is let go, %d bytes free, want %d", got, limit)
	}
}

// A reservation whose messages cannot start lends all it holds, and a grow of nothing takes it
// back before they start, waiting if it is taken meanwhile; its waits are reported.
func TestReserveLendsAndTakesBack(t *testing.T) {
	const limit = 100
	sem := semaphore.NewWeighted(limit)
	sem.Acquire(context.Background(), 15)
	ended := make(chan struct{})
	res := newReservation(sem, limit, 10, ended)
	res.adopt(5) // a message queued behind, with the same key
	var waits []bool
	var mu sync.Mutex
	res.waits = func(waiting bool) {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, waiting)
	}

	res.lend()
	if got := free(sem, limit); got != limit {
		t.Fatalf("after lend, %d bytes free, want %d", got, limit)
	}
	sem.Acquire(context.Background(), 7)
	res.adopt(7) // fetched while lent: its weight, taken by the fetch, is held
	if got := free(sem, limit); got != limit-7 {
		t.Fatalf("after adopting 7 while lent, %d bytes free, want %d", got, limit-7)
	}
	if err := res.settle(context.Background()); err != nil {
		t.Fatalf("taking back = %v", err)
	}
	if got := free(sem, limit); got != limit-22 {
		t.Fatalf("after taking back, %d bytes free, want %d (10, 5 and 7)", got, limit-22)
	}

	// Lent again, and the bytes taken by another meanwhile: taking back waits for them.
	res.lend()
	sem.Acquire(context.Background(), 90)
	done := make(chan error, 1)
	go func() { done <- res.settle(context.Background()) }()
	stillWaiting(t, "taking back 22 bytes with 10 free", done)
	sem.Release(90)
	if err := waitErr(t, "taking back once the bytes are free", done); err != nil {
		t.Fatalf("taking back = %v", err)
	}
	mu.Lock()
	if !slices.Equal(waits, []bool{true, false}) {
		t.Errorf("waits reported %v, want a wait begun and ended", waits)
	}
	mu.Unlock()

	// Lent, and the generation ends before the bytes come back: the wait gives up.
	res.lend()
	sem.Acquire(context.Background(), 90)
	go func() { done <- res.settle(context.Background()) }()
	stillWaiting(t, "taking back with 10 free", done)
	close(ended)
	if err := waitErr(t, "taking back when the generation ends", done); !errors.Is(err, ErrDraining) {
		t.Fatalf("taking back = %v, want ErrDraining", err)
	}
	sem.Release(90)
	res.shrink(22) // the messages let go
	if got := free(sem, limit); got != limit {
		t.Errorf("after every message is let go, %d bytes free, want %d", got, limit)
	}
}
