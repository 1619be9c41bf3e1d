package consumer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"rulevalidator/internal/kafkatest"
)

// offsetWatch polls the group's committed offsets, records every time one moved backwards,
// and when each offset was first committed past.
type offsetWatch struct {
	mu        sync.Mutex
	last      map[int]int64
	passed    map[pos]time.Time // when the committed offset first went past the position
	backwards []string
	stop      chan struct{}
	done      chan struct{}
}

func watchOffsets(t *testing.T, e env) *offsetWatch {
	w := &offsetWatch{last: map[int]int64{}, passed: map[pos]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	client := e.config(t).Client
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			got, err := client.CommittedOffsets(ctx, e.group, e.topic)
			cancel()
			if err != nil {
				continue // the coordinator is busy rebalancing; ask again
			}
			now := time.Now()
			w.mu.Lock()
			for p, off := range got {
				prev, ok := w.last[p]
				if ok && off < prev {
					w.backwards = append(w.backwards, fmt.Sprintf("partition %d: %d after %d", p, off, prev))
				}
				if !ok || off > prev {
					w.last[p] = off
				}
				for o := range off {
					if _, seen := w.passed[pos{p, o}]; !seen {
						w.passed[pos{p, o}] = now
					}
				}
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.close)
	return w
}

func (w *offsetWatch) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// TestRebalanceNeverMovesCommitsBack reproduces a scale-out: instance A owns every partition
// with a slow request in flight on each when instance B joins. The partitions A gives up are
// drained first: the slow requests that finish within the drain timeout are committed by A in
// its generation, so nothing on their partitions is handled twice; those that do not are
// abandoned with their commit state and left to the partitions' next owner, which handles
// them and what followed them again (at least once). The group's committed offsets never move
// backwards, nothing is handled once an owner committed past it, and a restart afterwards has
// nothing left to judge.
func TestRebalanceNeverMovesCommitsBack(t *testing.T) {
	const (
		partitions = 4
		perPart    = 10
		slowOffset = 2
	)
	e := newEnv(t, partitions)
	var recs []record
	for i := range partitions * perPart {
		recs = append(recs, record{partition: i % partitions, value: fmt.Sprintf("v%d", i)})
	}
	e.produce(t, recs...)
	watch := watchOffsets(t, e)

	var (
		mu        sync.Mutex
		completed = map[pos][]string{}    // who handled each message to completion
		finished  = map[pos][]time.Time{} // and when
		slowSeen  = map[int]bool{}        // partitions whose slow message was taken on once
		inSlow    = map[int]bool{}
	)
	release := make(chan struct{}) // lets A's slow messages on the even partitions finish
	var releaseOnce sync.Once
	handler := func(name string) Handler {
		return func(ctx context.Context, m *Message) error {
			mu.Lock()
			slow := m.Offset == slowOffset && !slowSeen[m.Partition]
			if slow {
				slowSeen[m.Partition] = true
				inSlow[m.Partition] = true
			}
			mu.Unlock()
			if slow {
				// Even partitions: a slow call that ends during the drain. Odd ones: one that
				// outlasts it and honours the cancellation. Either half may move to B, so
				// one of each kind does.
				if m.Partition%2 == 0 {
					select {
					case <-release:
					case <-ctx.Done():
						return ctx.Err()
					}
				} else {
					<-ctx.Done()
					return ctx.Err()
				}
			}
			mu.Lock()
			at := pos{m.Partition, m.Offset}
			completed[at] = append(completed[at], name)
			finished[at] = append(finished[at], time.Now())
			mu.Unlock()
			return nil
		}
	}

	cfgA := e.config(t)
	cfgA.Concurrency = 16
	cfgA.DrainTimeout = 3 * time.Second
	cfgA.Hooks.Revoked = func([]int) {
		// The rebalance began: the slow calls on even partitions finish a moment into the drain.
		go func() {
			time.Sleep(500 * time.Millisecond)
			releaseOnce.Do(func() { close(release) })
		}()
	}
	a := start(t, cfgA, handler("A"))
	waitFor(t, "A to handle everything but the slow messages", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(completed) == partitions*(perPart-1) && len(inSlow) == partitions
	})
	// A commits up to the slow message on every partition, no further.
	waitFor(t, "A's commits up to the slow messages", func() bool {
		watch.mu.Lock()
		defer watch.mu.Unlock()
		for p := range partitions {
			if watch.last[p] != slowOffset {
				return false
			}
		}
		return true
	})

	cfgB := e.config(t)
	cfgB.DrainTimeout = 3 * time.Second
	assignedB := make(chan []int, 4)
	cfgB.Hooks.Assigned = func(ps []int) { assignedB <- ps }
	b := start(t, cfgB, handler("B"))

	waitFor(t, "every partition committed to its end", func() bool {
		watch.mu.Lock()
		defer watch.mu.Unlock()
		for p := range partitions {
			if watch.last[p] != perPart {
				return false
			}
		}
		return true
	})
	var gotB []int
	for len(gotB) == 0 {
		select {
		case gotB = <-assignedB:
		case <-time.After(waitTimeout):
			t.Fatal("B was never assigned partitions")
		}
	}
	if err := a.stop(t); err != nil {
		t.Errorf("A: %v", err)
	}
	if err := b.stop(t); err != nil {
		t.Errorf("B: %v", err)
	}

	// A restart finds nothing to do: no work done before is judged again. A marker after the
	// end of each partition shows when it has read everything it would redo.
	var markers []record
	for p := range partitions {
		markers = append(markers, record{partition: p, value: "marker"})
	}
	e.produce(t, markers...)
	restarted := newSeen()
	c := start(t, e.config(t), func(_ context.Context, m *Message) error { restarted.add(m); return nil })
	waitFor(t, "the restarted instance to reach every partition's marker", func() bool {
		got := restarted.snapshot()
		for p := range partitions {
			if got[pos{p, perPart}] == 0 {
				return false
			}
		}
		return true
	})
	if err := c.stop(t); err != nil {
		t.Errorf("restarted instance: %v", err)
	}
	watch.close()

	watch.mu.Lock()
	defer watch.mu.Unlock()
	if len(watch.backwards) > 0 {
		t.Errorf("committed offsets moved backwards: %v", watch.backwards)
	}
	mu.Lock()
	defer mu.Unlock()
	for p := range partitions {
		for off := range int64(perPart) {
			at := pos{p, off}
			who := completed[at]
			switch {
			case len(who) == 0:
				t.Errorf("partition %d offset %d never handled to completion", p, off)
			case p%2 == 0 && len(who) != 1:
				// The slow message finished in the drain and was committed: nothing here is redone.
				t.Errorf("partition %d offset %d handled to completion by %v, want exactly once", p, off, who)
			}
			for i, when := range finished[at] {
				// A completion comes before its commit, which comes before the watch sees it.
				if passed, ok := watch.passed[at]; ok && when.After(passed) {
					t.Errorf("partition %d offset %d handled by %s %s after the group committed past it", p, off, who[i], when.Sub(passed))
				}
			}
		}
	}
	var redone []pos
	for at := range restarted.snapshot() {
		if at.offset < perPart {
			redone = append(redone, at)
		}
	}
	if len(redone) != 0 {
		t.Errorf("after the rebalance a restart handled %d messages again: %v", len(redone), redone)
	}
	// The slow messages on even partitions were finished by A during its drain; those on odd
	// ones by whichever instance owns them now.
	for p := 0; p < partitions; p += 2 {
		if who := completed[pos{p, slowOffset}]; len(who) == 1 && who[0] != "A" {
			t.Errorf("partition %d's slow message was finished by %s, want A, in its drain", p, who[0])
		}
	}
	t.Logf("B was assigned %v; slow messages finished by: p0 %v, p1 %v, p2 %v, p3 %v", gotB,
		completed[pos{0, slowOffset}], completed[pos{1, slowOffset}], completed[pos{2, slowOffset}], completed[pos{3, slowOffset}])
}

// TestAddedPartitionIsConsumed: a partition added to the topic while the consumer runs is
// consumed and committed without a restart.
func TestAddedPartitionIsConsumed(t *testing.T) {
	e := newEnv(t, 1)
	cfg := e.config(t)
	cfg.PartitionWatchInterval = 500 * time.Millisecond
	seen := newSeen()
	commits := newCommits()
	cfg.Hooks.Committed = commits.hook
	r := start(t, cfg, func(_ context.Context, m *Message) error { seen.add(m); return nil })
	e.produce(t, record{partition: 0, value: "before"})
	waitFor(t, "the first record committed", func() bool { return commits.get(0) == 1 })

	kafkatest.AddPartitions(t, e.bootstrap, e.topic, 2)
	e.partitions = 2
	e.produce(t, record{partition: 1, value: "on the new partition"})
	waitFor(t, "the record on the added partition committed", func() bool { return commits.get(1) == 1 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := e.committed(t); got[0] != 1 || got[1] != 1 {
		t.Errorf("committed %v, want 1 on both partitions", got)
	}
	if seen.distinct() != 2 {
		t.Errorf("handled %v", seen.snapshot())
	}
}
