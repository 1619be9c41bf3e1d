package limit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// round takes every slot the limit allows (the limit in use) and gives them
// all back with out; it returns the limit after.
func round(t *testing.T, l *Limiter, out Outcome) int {
	t.Helper()
	n := l.State().Limit
	slots := make([]*Slot, n)
	for i := range slots {
		s, err := l.Acquire(t.Context())
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		slots[i] = s
	}
	for _, s := range slots {
		s.Release(Result{Outcome: out})
	}
	return l.State().Limit
}

const (
	ok   = Succeeded
	over = Overloaded
	none = Ignored
)

func TestAdapt(t *testing.T) {
	type step struct {
		out  Outcome
		want int // the limit after a round of out
	}
	// rounds repeats one step n times.
	rounds := func(n int, out Outcome, want ...int) []step {
		s := make([]step, n)
		for i := range s {
			s[i] = step{out, want[min(i, len(want)-1)]}
		}
		return s
	}
	tests := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"a window of successes at the limit grows it by one", Config{Initial: 2},
			[]step{{ok, 3}, {ok, 4}, {ok, 5}}},
		{"growth stops at Max", Config{Initial: 3, Max: 4},
			[]step{{ok, 4}, {ok, 4}, {ok, 4}}},
		{"an overload halves the limit, once per round", Config{Initial: 16},
			[]step{{over, 8}, {over, 4}, {over, 2}}},
		{"the limit never falls below 1", Config{Initial: 3},
			[]step{{over, 1}, {over, 1}, {over, 1}}},
		{"odd limits halve downwards", Config{Initial: 5},
			[]step{{over, 2}}},
		{"ignored outcomes change nothing", Config{Initial: 4},
			[]step{{none, 4}, {none, 4}, {none, 4}}},
		{"Initial above Max starts at Max", Config{Initial: 20, Max: 6},
			[]step{{none, 6}}},
		{"defaults: 4, growing to 16", Config{},
			append(rounds(12, ok, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16), step{ok, 16})},
		{
			// Cut at 4: growing back to 4 takes 4 windows (4 × 3
			// successes at 3); a window of 4 × 4 at 4 shows 4 holds,
			// and growth is quick again.
			"growing back to the limit that overloaded probes slowly", Config{Initial: 4},
			append(append(append([]step{{over, 2}, {ok, 3}},
				rounds(4, ok, 3, 3, 3, 4)...),
				rounds(4, ok, 4, 4, 4, 5)...),
				step{ok, 6}, step{ok, 7}),
		},
		{
			// Cut at 3 to 1, back to 2 at once, then 2 → 3 takes 4 windows;
			// overloaded at 3 again, it takes 8.
			"each overload at the ceiling again doubles the probe", Config{Initial: 3},
			append(append(append([]step{{over, 1}, {ok, 2}},
				rounds(4, ok, 2, 2, 2, 3)...),
				step{over, 1}, step{ok, 2}),
				rounds(8, ok, 2, 2, 2, 2, 2, 2, 2, 3)...),
		},
		{
			// Cut at 8 (ceiling 8), then overloaded at 4, below it: the
			// ceiling is 4 now and the probe factor starts afresh.
			"an overload below the ceiling lowers it", Config{Initial: 8},
			append([]step{{over, 4}, {over, 2}, {ok, 3}},
				rounds(4, ok, 3, 3, 3, 4)...),
		},
		{"ProbeWindow sets the probe factor", Config{Initial: 4, ProbeWindow: 2},
			[]step{{over, 2}, {ok, 3}, {ok, 3}, {ok, 4}}},
		{"Fixed stays at Max whatever happens", Config{Initial: 2, Max: 5, Fixed: true},
			[]step{{ok, 5}, {over, 5}, {over, 5}, {ok, 5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(tt.cfg)
			for i, s := range tt.steps {
				if got := round(t, l, s.out); got != s.want {
					t.Fatalf("after round %d (%s): limit %d, want %d", i+1, s.out, got, s.want)
				}
			}
			if st := l.State(); st.InFlight != 0 || st.Waiting != 0 {
				t.Errorf("state %+v, want no slot held and none waiting", st)
			}
		})
	}
}

// A limit not in use is no evidence that it holds: calls one at a time
// under a limit of 4 never grow it.
func TestNoGrowthBelowTheLimit(t *testing.T) {
	l := New(Config{Initial: 4})
	for range 100 {
		s, err := l.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		s.Release(Result{Outcome: Succeeded})
	}
	if got := l.State().Limit; got != 4 {
		t.Errorf("limit %d after 100 lone successes, want 4", got)
	}
}

// News from before a change is told apart: the overloads of calls started
// before a cut do not cut again, and their successes do not count toward
// the next window.
func TestStaleNews(t *testing.T) {
	l := New(Config{Initial: 8})
	var old []*Slot
	for range 8 {
		s, _ := l.Acquire(t.Context())
		old = append(old, s)
	}
	old[0].Release(Result{Outcome: Overloaded})
	for _, s := range old[1:4] {
		s.Release(Result{Outcome: Overloaded})
	}
	if got := l.State().Limit; got != 4 {
		t.Fatalf("limit %d after 4 overloads of one round, want 4 (one cut)", got)
	}
	// 4 slots of the old round are still in flight: the limit of 4 is in
	// use. Their successes are from before the cut.
	for _, s := range old[4:] {
		s.Release(Result{Outcome: Succeeded})
	}
	if got := l.State().Limit; got != 4 {
		t.Errorf("limit %d after successes of calls started before the cut, want 4", got)
	}
}

// A call in flight while the limit came into use counts, even when it
// started below it.
func TestSuccessCountsWhenTheLimitWasReachedLater(t *testing.T) {
	l := New(Config{Initial: 2})
	a, _ := l.Acquire(t.Context()) // 1 of 2: not yet at the limit
	b, _ := l.Acquire(t.Context()) // 2 of 2
	b.Release(Result{Outcome: Succeeded})
	a.Release(Result{Outcome: Succeeded})
	if got := l.State().Limit; got != 3 {
		t.Errorf("limit %d, want 3", got)
	}
}

func TestReleaseTwiceCountsOnce(t *testing.T) {
	l := New(Config{Initial: 2})
	s, _ := l.Acquire(t.Context())
	s.Release(Result{Outcome: Overloaded})
	s.Release(Result{Outcome: Overloaded})
	s.Release(Result{})
	var nilSlot *Slot
	nilSlot.Release(Result{}) // no panic
	if st := l.State(); st.InFlight != 0 || st.Limit != 1 {
		t.Errorf("state %+v, want limit 1 and nothing in flight", st)
	}
}

func TestPause(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		results []Result // given back in turn, each by a slot of its own
		want    time.Duration
	}{
		{"Retry-After on an overload", Config{}, []Result{{Overloaded, 2 * time.Second}}, 2 * time.Second},
		{"a rate limit's reset on a success", Config{}, []Result{{Succeeded, 3 * time.Second}}, 3 * time.Second},
		{"on an ignored outcome too", Config{}, []Result{{Ignored, time.Second}}, time.Second},
		{"a shorter pause does not cut a longer one", Config{}, []Result{{Overloaded, 5 * time.Second}, {Overloaded, time.Second}}, 5 * time.Second},
		{"a longer pause extends a shorter one", Config{}, []Result{{Overloaded, time.Second}, {Overloaded, 4 * time.Second}}, 4 * time.Second},
		{"bounded by MaxPause", Config{MaxPause: 10 * time.Second}, []Result{{Overloaded, time.Hour}}, 10 * time.Second},
		{"Fixed ignores pauses", Config{Fixed: true}, []Result{{Overloaded, time.Hour}}, 0},
		{"no pause asked", Config{}, []Result{{Overloaded, 0}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tt.cfg.Initial = 8 // room for every slot, after a cut too
				l := New(tt.cfg)
				held, _ := l.Acquire(t.Context()) // in flight through the pause
				slots := make([]*Slot, len(tt.results))
				for i := range slots {
					slots[i], _ = l.Acquire(t.Context())
				}
				start := time.Now()
				for i, r := range tt.results {
					slots[i].Release(r)
				}
				s, err := l.Acquire(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if waited := time.Since(start); waited != tt.want {
					t.Errorf("the next call started after %s, want %s", waited, tt.want)
				}
				s.Release(Result{})
				held.Release(Result{})
				if st := l.State(); st.InFlight != 0 || st.Waiting != 0 {
					t.Errorf("state %+v, want nothing in flight or waiting", st)
				}
			})
		})
	}
}

// A pause holds every waiter, not only the next; when it passes they start
// up to the limit.
func TestPauseHoldsWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Initial: 4})
		s, _ := l.Acquire(t.Context())
		s.Release(Result{Outcome: Ignored, Pause: time.Second})
		start := time.Now()
		var mu sync.Mutex
		var started []time.Duration
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				s, err := l.Acquire(t.Context())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				started = append(started, time.Since(start))
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
				s.Release(Result{})
			})
		}
		synctest.Wait()
		if st := l.State(); st.Waiting != 6 || st.InFlight != 0 {
			t.Fatalf("during the pause: %+v, want 6 waiting and none in flight", st)
		}
		wg.Wait()
		want := []time.Duration{time.Second, time.Second, time.Second, time.Second, 1100 * time.Millisecond, 1100 * time.Millisecond}
		if len(started) != len(want) {
			t.Fatalf("started %v, want %v", started, want)
		}
		for i := range want {
			if started[i] != want[i] {
				t.Errorf("started %v, want %v", started, want)
				break
			}
		}
	})
}

// Waiters get slots in the order they came.
func TestFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Initial: 1})
		first, _ := l.Acquire(t.Context())
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				s, err := l.Acquire(t.Context())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				s.Release(Result{})
			})
			synctest.Wait() // waiter i is queued before i+1 starts
		}
		first.Release(Result{})
		wg.Wait()
		for i, got := range order {
			if got != i {
				t.Fatalf("slots went in order %v, want 0..7", order)
			}
		}
	})
}

func TestCancelledWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Initial: 1})
		held, _ := l.Acquire(t.Context())

		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			s, err := l.Acquire(ctx)
			s.Release(Result{}) // nil on error: nothing to give back
			errc <- err
		}()
		later := make(chan *Slot, 1)
		go func() {
			s, _ := l.Acquire(t.Context())
			later <- s
		}()
		synctest.Wait()
		if st := l.State(); st.Waiting != 2 {
			t.Fatalf("waiting %d, want 2", st.Waiting)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire = %v, want context.Canceled", err)
		}
		if st := l.State(); st.Waiting != 1 || st.InFlight != 1 {
			t.Fatalf("after the cancel: %+v, want 1 waiting, 1 in flight", st)
		}
		held.Release(Result{})
		s := <-later // the cancelled waiter took nothing
		s.Release(Result{})
		if st := l.State(); st.Waiting != 0 || st.InFlight != 0 {
			t.Errorf("at the end: %+v, want nothing", st)
		}

		// A context already ended takes no slot, even a free one.
		done, cancelDone := context.WithCancel(t.Context())
		cancelDone()
		if _, err := l.Acquire(done); !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire with an ended context = %v, want context.Canceled", err)
		}
		if st := l.State(); st.InFlight != 0 {
			t.Errorf("in flight %d after a refused Acquire", st.InFlight)
		}
	})
}

// Waiters whose contexts end as slots are granted leak no slot: each slot
// granted to an ended wait is handed on.
func TestCancelRacingGrants(t *testing.T) {
	l := New(Config{Initial: 2})
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), time.Duration(i%7)*100*time.Microsecond)
			defer cancel()
			s, err := l.Acquire(ctx)
			if err != nil {
				return
			}
			time.Sleep(50 * time.Microsecond)
			s.Release(Result{})
		})
	}
	wg.Wait()
	if st := l.State(); st.InFlight != 0 || st.Waiting != 0 {
		t.Errorf("state %+v, want nothing in flight or waiting", st)
	}
}

func TestDo(t *testing.T) {
	t.Run("gives the slot back with f's result", func(t *testing.T) {
		l := New(Config{Initial: 2})
		if err := l.Do(t.Context(), func() Result { return Result{Outcome: Overloaded} }); err != nil {
			t.Fatal(err)
		}
		if st := l.State(); st.InFlight != 0 || st.Limit != 1 {
			t.Errorf("state %+v, want limit 1 and nothing in flight", st)
		}
	})
	t.Run("a panic gives the slot back", func(t *testing.T) {
		l := New(Config{Initial: 1})
		func() {
			defer func() {
				if recover() == nil {
					t.Error("the panic did not go on")
				}
			}()
			_ = l.Do(t.Context(), func() Result { panic("boom") })
		}()
		if st := l.State(); st.InFlight != 0 || st.Limit != 1 {
			t.Errorf("state %+v, want the slot back and the limit unchanged", st)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := l.Do(ctx, func() Result { return Result{} }); err != nil {
			t.Errorf("the next Do: %v", err)
		}
	})
	t.Run("an ended context runs nothing", func(t *testing.T) {
		l := New(Config{Initial: 1})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		ran := false
		err := l.Do(ctx, func() Result { ran = true; return Result{} })
		if !errors.Is(err, context.Canceled) || ran {
			t.Errorf("Do = %v, ran %v; want context.Canceled, not run", err, ran)
		}
		if st := l.State(); st.InFlight != 0 {
			t.Errorf("in flight %d", st.InFlight)
		}
	})
}

func TestOnChange(t *testing.T) {
	var seen []State
	l := New(Config{Initial: 1, OnChange: func(s State) { seen = append(seen, s) }})
	s, _ := l.Acquire(t.Context())
	s.Release(Result{Outcome: Succeeded})
	want := []State{{Limit: 1, InFlight: 1}, {Limit: 2, InFlight: 0}}
	if len(seen) != len(want) {
		t.Fatalf("told %+v, want %+v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("told %+v, want %+v", seen, want)
		}
	}
}
