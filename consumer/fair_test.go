package consumer

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// commitCheck checks, at every commit the consumer reports, that the commit passes no message
// the handler did not finish: all offsets below it in its partition were handled.
type commitCheck struct {
	mu         sync.Mutex
	handled    map[pos]bool
	violations []string
	commits    *commits
}

func newCommitCheck() *commitCheck {
	return &commitCheck{handled: make(map[pos]bool), commits: newCommits()}
}

// done records m handled; the handler calls it before it returns nil.
func (c *commitCheck) done(m *Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handled[pos{m.Partition, m.Offset}] = true
}

// hook is Hooks.Committed.
func (c *commitCheck) hook(partition int, offset int64) {
	c.mu.Lock()
	for o := range offset {
		if !c.handled[pos{partition, o}] {
			c.violations = append(c.violations, fmt.Sprintf("partition %d committed at %d with offset %d not handled", partition, offset, o))
			break
		}
	}
	c.mu.Unlock()
	c.commits.hook(partition, offset)
}

// stopWhenAllCommitted waits until every partition is committed up to next (the offset its
// next record would get), then stops r, which must return nil.
func (c *commitCheck) stopWhenAllCommitted(t *testing.T, r *running, next []int64) {
	t.Helper()
	waitFor(t, "every message is committed", func() bool {
		for p := range next {
			if c.commits.get(p) != next[p] {
				return false
			}
		}
		return true
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}

func (c *commitCheck) check(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.violations) > 0 {
		t.Errorf("commits passed messages not handled: %v", c.violations)
	}
}

// floodResult is what one run of the flood scenario measured.
type floodResult struct {
	calmWorst, floodLast time.Duration
	// At worst over the calm tenant's messages, how many of the flooding tenant's started
	// before the calm message did, and of those how many after it was fetched.
	floodsBefore, floodsAfterFetch int
	// floodsAmidCalm is how many of the flooding tenant's messages started between the calm
	// tenant's first start and its last, once all of its messages were read ahead.
	floodsAmidCalm int
	starts         []string // tenants in the order their messages started
}

// floodScenario is one tenant's flood of messages, on keys of their own or on a few shared
// keys, queued before a calm tenant's, consumed with Concurrency slots and handlers that take
// work each.
type floodScenario struct {
	flood, calm, concurrency int
	// floodKeys is how many keys the flood's messages share, 0 for a key each.
	floodKeys int
	work      time.Duration
}

// runFlood runs sc, timing from the partitions' assignment.
func runFlood(t *testing.T, fairness *Fairness, sc floodScenario) floodResult {
	t.Helper()
	e := newEnv(t, 2)
	var recs []record
	next := make([]int64, e.partitions) // the offset each partition's next record gets
	calmAt := make(map[pos]bool)
	for i := range sc.flood {
		p := i % e.partitions
		key := fmt.Sprint("flood-", i)
		if sc.floodKeys > 0 {
			key = fmt.Sprint("flood-", i%sc.floodKeys)
		}
		recs = append(recs, record{partition: p, key: key, value: fmt.Sprint("f", i), tenant: "flood"})
		next[p]++
	}
	for i := range sc.calm {
		p := i % e.partitions
		recs = append(recs, record{partition: p, key: fmt.Sprint("calm-", i), value: fmt.Sprint("c", i), tenant: "calm"})
		calmAt[pos{p, next[p]}] = true
		next[p]++
	}
	e.produce(t, recs...)

	var (
		mu                       sync.Mutex
		assigned                 time.Time
		starts                   []string
		startsAt                 = make(map[pos]int) // how many messages had started when a calm one was fetched
		calmWorst, floodLast     time.Duration
		floodsBefore, afterFetch int
	)
	order := newKeyOrder()
	commits := newCommitCheck()
	cfg := e.config(t)
	cfg.Concurrency = sc.concurrency
	cfg.Fairness = fairness
	cfg.Hooks = Hooks{
		Assigned: func([]int) {
			mu.Lock()
			defer mu.Unlock()
			if assigned.IsZero() {
				assigned = time.Now()
			}
		},
		Fetched: func(_ string, partition int, offset, _ int64) {
			if at := (pos{partition, offset}); calmAt[at] {
				mu.Lock()
				startsAt[at] = len(starts)
				mu.Unlock()
			}
		},
		Committed: commits.hook,
	}
	r := start(t, cfg, func(ctx context.Context, m *Message) error {
		at := pos{m.Partition, m.Offset}
		tenant := TenantHeader(tenantHeader)(m)
		mu.Lock()
		if calmAt[at] {
			before, after := 0, 0
			for i, s := range starts {
				if s == "flood" {
					before++
					if i >= startsAt[at] {
						after++
					}
				}
			}
			floodsBefore, afterFetch = max(floodsBefore, before), max(afterFetch, after)
		}
		starts = append(starts, tenant)
		mu.Unlock()
		order.start(m)
		time.Sleep(sc.work)
		order.end(m)
		commits.done(m)
		mu.Lock()
		took := time.Since(assigned)
		if calmAt[at] {
			calmWorst = max(calmWorst, took)
		} else {
			floodLast = max(floodLast, took)
		}
		mu.Unlock()
		return nil
	})
	commits.stopWhenAllCommitted(t, r, next)
	counts := order.check(t)
	commits.check(t)
	total := 0
	for _, n := range counts {
		total += n
	}
	if total != sc.flood+sc.calm {
		t.Errorf("%d messages handled, want %d: %v", total, sc.flood+sc.calm, counts)
	}
	mu.Lock()
	defer mu.Unlock()
	allFetched := 0 // how many messages had started when the last calm one was fetched
	for _, n := range startsAt {
		allFetched = max(allFetched, n)
	}
	return floodResult{calmWorst: calmWorst, floodLast: floodLast, floodsBefore: floodsBefore, floodsAfterFetch: afterFetch,
		floodsAmidCalm: floodsAmid(starts, allFetched), starts: slices.Clone(starts)}
}

// floodsAmid counts the flood's starts between the calm tenant's first and its last, from
// the from-th start on: once every calm message is read ahead (one fetched later cannot go
// before the flood messages that started meanwhile).
func floodsAmid(starts []string, from int) int {
	first, last := slices.Index(starts, "calm"), -1
	for i, s := range starts {
		if s == "calm" {
			last = i
		}
	}
	n := 0
	for _, s := range starts[max(first, from, 0) : last+1] {
		if s == "flood" {
			n++
		}
	}
	return n
}

// TestFairShareCalmTenant: one tenant's flood of 60, on six keys, is queued ahead of another
// tenant's 3, on two partitions, with four slots and handlers of 50ms. In fetch order the calm
// tenant waits for the flood; with Fairness its messages take the next free slots together,
// its usage being nothing beside the flood's. Each key's order and the order of commits hold either way. The
// calm tenant's worst latency, from the partitions' assignment, is logged side by side.
func TestFairShareCalmTenant(t *testing.T) {
	t.Parallel()
	sc := floodScenario{flood: 60, calm: 3, concurrency: 4, floodKeys: 6, work: 50 * time.Millisecond}
	off := runFlood(t, nil, sc)
	on := runFlood(t, &Fairness{Tenant: TenantHeader(tenantHeader)}, sc)
	logFlood(t, sc, off, on)

	checkCalmFirst(t, sc, on)
	if off.floodsBefore < sc.flood/2 {
		t.Errorf("fairness off: only %d flood messages started ahead of a calm one; the scenario does not queue the calm tenant behind the flood", off.floodsBefore)
	}
	if on.calmWorst >= off.calmWorst/2 {
		t.Errorf("fairness on: calm tenant's worst latency %s, want well under fairness off's %s", on.calmWorst, off.calmWorst)
	}
}

// TestFairShareCalmTenantAtScale is the measurement: a model at 1s a call, four
// slots, 120 requests of one tenant queued ahead of another's 3. It takes over a minute, so it
// runs only with RULEVALIDATOR_MEASURE_FAIRNESS=1.
func TestFairShareCalmTenantAtScale(t *testing.T) {
	if os.Getenv("RULEVALIDATOR_MEASURE_FAIRNESS") != "1" {
		t.Skip("a measurement of over a minute; set RULEVALIDATOR_MEASURE_FAIRNESS=1 to run it")
	}
	t.Parallel()
	sc := floodScenario{flood: 120, calm: 3, concurrency: 4, work: time.Second}
	off := runFlood(t, nil, sc)
	on := runFlood(t, &Fairness{Tenant: TenantHeader(tenantHeader)}, sc)
	logFlood(t, sc, off, on)
	checkCalmFirst(t, sc, on)
	if on.calmWorst >= off.calmWorst/2 {
		t.Errorf("fairness on: calm tenant's worst latency %s, want well under fairness off's %s", on.calmWorst, off.calmWorst)
	}
}

// checkCalmFirst checks that, with Fairness, the calm tenant's messages took the slots that
// came free once they were read ahead, all of them ahead of the flood's. sc.calm is at most
// sc.concurrency: past that, the calm tenant's usage may reach the flood's before its last
// message starts, when the flood has not run long. Starts are recorded as the handlers
// begin, which may be a moment after their slots were taken, so each count allows for that:
// at most Concurrency flood messages started between a calm message's fetch and its start,
// those already holding the slots when it was queued, and one more that a slot taken
// alongside its own went to; at most one between the calm tenant's first start and its
// last once all of them are read ahead, that one. Equal turns would put a flood message between each two calm ones.
func checkCalmFirst(t *testing.T, sc floodScenario, on floodResult) {
	t.Helper()
	if most := sc.concurrency + 1; on.floodsAfterFetch > most {
		t.Errorf("fairness on: %d flood messages started between a calm message's fetch and its start, want at most %d; starts %v",
			on.floodsAfterFetch, most, on.starts)
	}
	if most := 1; on.floodsAmidCalm > most {
		t.Errorf("fairness on: %d flood messages started between the calm tenant's first start and its last, want at most %d; starts %v",
			on.floodsAmidCalm, most, on.starts)
	}
}

// logFlood logs sc's results without and with fairness side by side.
func logFlood(t *testing.T, sc floodScenario, off, on floodResult) {
	t.Helper()
	t.Logf("flood of %d queued ahead of %d calm messages, Concurrency %d, %s a message:", sc.flood, sc.calm, sc.concurrency, sc.work)
	for _, row := range []struct {
		name string
		r    floodResult
	}{{"off", off}, {"on ", on}} {
		t.Logf("  fairness %s: calm tenant's worst latency %6s; flood done at %6s; flood messages started before a calm one: %3d, %d of them after it was fetched; amid the calm ones: %d",
			row.name, row.r.calmWorst.Round(time.Millisecond), row.r.floodLast.Round(time.Millisecond), row.r.floodsBefore, row.r.floodsAfterFetch, row.r.floodsAmidCalm)
	}
}

// TestFairWeights: two tenants with weights 3 and 1, both with plenty queued, share one slot
// three to one in slot time, and a tenant alone gets the slot every time. Each message holds
// the slot for 20ms; a first message, of a third tenant, holds it until every other message
// is read ahead, so that gold and standard start level.
func TestFairWeights(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	const each, hold = 20, 20 * time.Millisecond
	recs := []record{{value: "first", tenant: "first"}}
	for i := range each {
		recs = append(recs, record{value: fmt.Sprint("g", i), tenant: "gold"}, record{value: fmt.Sprint("s", i), tenant: "standard"})
	}
	e.produce(t, recs...)

	type turn struct {
		tenant string
		took   time.Duration // how long its handler held the slot
	}
	var (
		mu      sync.Mutex
		turns   []turn // in the order handled: with one slot, the order started
		fetched int
	)
	allFetched := make(chan struct{})
	cfg := e.config(t)
	cfg.Concurrency = 1
	cfg.Fairness = &Fairness{
		Tenant: TenantHeader(tenantHeader),
		Weight: func(tenant string) int {
			if tenant == "gold" {
				return 3
			}
			return 1
		},
	}
	cfg.Hooks.Fetched = func(string, int, int64, int64) {
		mu.Lock()
		defer mu.Unlock()
		if fetched++; fetched == len(recs) {
			close(allFetched)
		}
	}
	handled := newSeen()
	r := start(t, cfg, func(ctx context.Context, m *Message) error {
		tenant := TenantHeader(tenantHeader)(m)
		began := time.Now()
		if tenant == "first" { // started as soon as fetched: let the rest be read ahead before the next
			select {
			case <-allFetched:
			case <-ctx.Done():
				return ctx.Err()
			}
		} else {
			time.Sleep(hold)
		}
		mu.Lock()
		turns = append(turns, turn{tenant: tenant, took: time.Since(began)})
		mu.Unlock()
		handled.add(m)
		return nil
	})
	waitFor(t, "every message is handled", func() bool { return handled.distinct() == len(recs) })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}

	mu.Lock()
	defer mu.Unlock()
	// While both wait, up to gold's last
	// start, the slot goes to the one with the least slot time per weight, so that gold's
	// slot time is three times standard's to within one message's (the longest held), and a
	// little for the consumer's own time around each handler.
	order := make([]string, len(turns))
	var gold, standard, longest time.Duration
	lastGold := 0
	for i, s := range turns {
		order[i] = s.tenant
		if s.tenant == "gold" {
			lastGold = i
		}
	}
	for _, s := range turns[1:lastGold] {
		switch s.tenant {
		case "gold":
			gold += s.took
		case "standard":
			standard += s.took
		}
		longest = max(longest, s.took)
	}
	t.Logf("up to gold's last start: gold held the slot %s, standard %s; starts %v", gold, standard, order)
	if gap, most := (gold/3 - standard).Abs(), longest+5*time.Millisecond; gap > most {
		t.Errorf("up to gold's last start: gold held the slot %s, standard %s; want 3:1 within %s (weights 3:1); starts %v",
			gold, standard, most, order)
	}
	if n := len(turns) - 1 - lastGold; n < 10 {
		t.Errorf("standard alone after gold's last start: %d starts, want the rest of its %d (about 13); starts %v", n, each, order)
	}
	for _, s := range order[lastGold+1:] {
		if s != "standard" {
			t.Errorf("after gold's last start: %s started; want standard alone; starts %v", s, order)
			break
		}
	}
}

// TestFairRevocationLetsReadAheadGo: partitions are revoked while messages read ahead wait
// for a slot, some handled after them in the partition and one before them still being
// handled, by a shutdown or a rebalance. The ones waiting are let go, those being handled
// finish in the drain, and nothing is committed past a message not handled: the partition's
// next owner starts at the first one let go and handles everything from there.
func TestFairRevocationLetsReadAheadGo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// revoke ends the first consumer's generation.
		revoke func(t *testing.T, e env, first *running, cfg Config, handler Handler) (second *running)
	}{
		{"shutdown", func(t *testing.T, e env, first *running, cfg Config, handler Handler) *running {
			first.cancel()
			return nil
		}},
		{"rebalance", func(t *testing.T, e env, first *running, cfg Config, handler Handler) *running {
			cfg.Hooks = Hooks{}
			return start(t, cfg, handler)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testRevocationLetsReadAheadGo(t, tc.revoke)
		})
	}
}

func testRevocationLetsReadAheadGo(t *testing.T, revoke func(t *testing.T, e env, first *running, cfg Config, handler Handler) *running) {
	e := newEnv(t, 1)
	// Offset 0 is slow; 1..9 and 13..39 are the flood's, on four keys; 10..12 a calm tenant's.
	const total = 40
	var recs []record
	for i := range total {
		rec := record{key: fmt.Sprint("flood-", i%4), value: fmt.Sprint("v", i), tenant: "flood"}
		if i >= 10 && i < 13 {
			rec.key, rec.tenant = fmt.Sprint("calm-", i), "calm"
		}
		recs = append(recs, rec)
	}
	e.produce(t, recs...)
	watch := watchOffsets(t, e)

	var (
		mu       sync.Mutex
		finished = make(map[pos][]time.Time) // completions, by any consumer
		firsts   = newSeen()                 // what the first consumer handled to completion
		revoked  bool
		// The first consumer's generations, and in each the messages it let go and those
		// it handled (or tried to).
		generation      int
		letGo, attempts = make(map[int]int), make(map[int]int)
	)
	release := make(chan struct{})
	var inFlight gauge
	var holding atomic.Bool // the first consumer's handlers wait for the revocation
	handler := func(first bool) Handler {
		return func(ctx context.Context, m *Message) error {
			if first && (m.Offset == 0 || holding.Load()) {
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			} else {
				time.Sleep(20 * time.Millisecond)
			}
			mu.Lock()
			at := pos{m.Partition, m.Offset}
			finished[at] = append(finished[at], time.Now())
			mu.Unlock()
			if first {
				firsts.add(m)
			}
			return nil
		}
	}
	cfg := e.config(t)
	cfg.Concurrency = 2
	cfg.Fairness = &Fairness{Tenant: TenantHeader(tenantHeader), ReadAhead: 16}
	cfgFirst := cfg
	cfgFirst.Hooks = Hooks{
		Assigned: func([]int) {
			mu.Lock()
			defer mu.Unlock()
			generation++
		},
		InFlight: func(delta int) {
			inFlight.add(delta)
			if delta < 0 {
				mu.Lock()
				defer mu.Unlock()
				letGo[generation]++
			}
		},
		Handled: func(context.Context, string, time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			attempts[generation]++
		},
		Revoked: func([]int) {
			mu.Lock()
			defer mu.Unlock()
			if !revoked {
				revoked = true
				// The slow message finishes a moment into the drain.
				go func() {
					time.Sleep(200 * time.Millisecond)
					close(release)
				}()
			}
		},
	}
	first := start(t, cfgFirst, handler(true))
	calmDone := func() bool {
		got := firsts.snapshot()
		return got[pos{0, 10}] > 0 && got[pos{0, 11}] > 0 && got[pos{0, 12}] > 0
	}
	waitFor(t, "the calm tenant's messages handled past the slow one", calmDone)
	// Both slots are taken until the revocation, so that messages read ahead wait for one.
	holding.Store(true)
	second := revoke(t, e, first, cfg, handler(false))

	if second == nil { // shutdown: the first returns, then a second picks up
		if err := first.wait(t); err != nil {
			t.Fatalf("first Run = %v, want nil", err)
		}
		if cur := inFlight.cur.Load(); cur != 0 {
			t.Errorf("in flight after Run returned = %d, want 0: messages read ahead must be let go", cur)
		}
		second = start(t, cfg, handler(false))
	}
	waitFor(t, "every message committed", func() bool {
		watch.mu.Lock()
		defer watch.mu.Unlock()
		return watch.last[0] == total
	})
	if err := second.stop(t); err != nil {
		t.Errorf("second Run = %v", err)
	}
	if err := first.stop(t); err != nil {
		t.Errorf("first Run = %v", err)
	}
	watch.close()

	watch.mu.Lock()
	defer watch.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	// In its first generation the first consumer let messages go unstarted, after it had
	// handled the calm ones past them.
	if firsts.snapshot()[pos{0, 0}] == 0 {
		t.Error("the slow message was not finished in the drain")
	}
	if unstarted := letGo[1] - attempts[1]; unstarted <= 0 {
		t.Errorf("the first consumer let %d messages go and handled %d in its first generation; the test needs messages read ahead at the revocation",
			letGo[1], attempts[1])
	} else {
		t.Logf("the first consumer's first generation handled %d messages and let %d go unstarted", attempts[1], unstarted)
	}
	if len(watch.backwards) > 0 {
		t.Errorf("committed offsets moved backwards: %v", watch.backwards)
	}
	for off := range int64(total) {
		at := pos{0, off}
		if len(finished[at]) == 0 {
			t.Errorf("offset %d never handled", off)
			continue
		}
		// A commit past a message comes after it was handled by someone.
		if passed, ok := watch.passed[at]; ok && finished[at][0].After(passed) {
			t.Errorf("offset %d committed past %s before it was handled", off, finished[at][0].Sub(passed))
		}
	}
}

func TestTenantHeader(t *testing.T) {
	tenant := TenantHeader("rv-tenant-id")
	for _, tc := range []struct {
		name    string
		headers []Header
		want    string
	}{
		{"none", nil, ""},
		{"other headers", []Header{{Key: "traceparent", Value: []byte("00-x")}}, ""},
		{"named", []Header{{Key: "traceparent", Value: []byte("00-x")}, {Key: "rv-tenant-id", Value: []byte("acme")}}, "acme"},
		{"the last wins", []Header{{Key: "rv-tenant-id", Value: []byte("a")}, {Key: "rv-tenant-id", Value: []byte("b")}}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tenant(&Message{Headers: tc.headers}); got != tc.want {
				t.Errorf("tenant = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFairMaxInFlight: a tenant capped at two never has more than two messages handled at
// once, while another tenant's messages fill the other slots; alone, the capped tenant leaves
// the slots beyond its cap free. Each key's order and the order of commits hold.
func TestFairMaxInFlight(t *testing.T) {
	t.Parallel()
	const concurrency, capped = 5, 2
	for _, tc := range []struct {
		name    string
		tenants []string
	}{
		{"beside another tenant", []string{"capped", "free"}},
		{"alone", []string{"capped"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 2)
			const each = 24
			var recs []record
			next := make([]int64, e.partitions)
			for i := range each {
				for _, tenant := range tc.tenants {
					p := i % e.partitions
					// Half of each tenant's messages on a few keys of their own, half keyless.
					key := ""
					if i%2 == 0 {
						key = fmt.Sprint(tenant, "-", i%3)
					}
					recs = append(recs, record{partition: p, key: key, value: fmt.Sprint(tenant, i), tenant: tenant})
					next[p]++
				}
			}
			e.produce(t, recs...)

			var (
				mu            sync.Mutex
				busy, peak    = make(map[string]int), make(map[string]int)
				total, maxAll int
				// fullBeside counts the starts that found the capped tenant at its cap and
				// every other slot taken.
				fullBeside int
			)
			order := newKeyOrder()
			commits := newCommitCheck()
			cfg := e.config(t)
			cfg.Concurrency = concurrency
			cfg.Fairness = &Fairness{
				Tenant: TenantHeader(tenantHeader),
				MaxInFlight: func(tenant string) int {
					if tenant == "capped" {
						return capped
					}
					return 0
				},
			}
			cfg.Hooks.Committed = commits.hook
			r := start(t, cfg, func(ctx context.Context, m *Message) error {
				tenant := TenantHeader(tenantHeader)(m)
				mu.Lock()
				busy[tenant]++
				total++
				peak[tenant] = max(peak[tenant], busy[tenant])
				maxAll = max(maxAll, total)
				if busy["capped"] == capped && total == concurrency {
					fullBeside++
				}
				mu.Unlock()
				order.start(m)
				time.Sleep(30 * time.Millisecond)
				order.end(m)
				commits.done(m)
				mu.Lock()
				busy[tenant]--
				total--
				mu.Unlock()
				return nil
			})
			commits.stopWhenAllCommitted(t, r, next)
			counts := order.check(t)
			commits.check(t)
			handled := 0
			for _, n := range counts {
				handled += n
			}
			if wantKeyed := each / 2 * len(tc.tenants); handled != wantKeyed {
				t.Errorf("%d keyed messages handled, want %d", handled, wantKeyed)
			}

			mu.Lock()
			defer mu.Unlock()
			if peak["capped"] != capped {
				t.Errorf("the capped tenant had at most %d messages handled at once, want its cap, %d", peak["capped"], capped)
			}
			if maxAll > concurrency {
				t.Errorf("%d messages handled at once, over Concurrency %d", maxAll, concurrency)
			}
			if len(tc.tenants) > 1 {
				if peak["free"] < concurrency-capped {
					t.Errorf("the other tenant had at most %d messages handled at once; want the %d slots the cap leaves", peak["free"], concurrency-capped)
				}
				if fullBeside == 0 {
					t.Error("no start found the capped tenant at its cap beside a full set of slots: the other tenant did not fill them")
				}
			} else if maxAll != capped {
				t.Errorf("alone, the capped tenant had %d messages handled at once, want %d", maxAll, capped)
			}
		})
	}
}

// TestFairDeferral: a handler defers the messages of a tenant over its budget until a time.
// The tenant is held until then, its messages waiting without a slot while the other
// tenant's are handled; past Fairness.MaxHeld waiting, its oldest are started not to be
// deferred (MayDefer false), and the handler ends them. At the time, the rest are handled,
// in key order; no commit passes a message not handled.
func TestFairDeferral(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	const each, maxHeld = 12, 3
	var recs []record
	next := make([]int64, e.partitions)
	for i := range each {
		for _, tenant := range []string{"held", "free"} {
			p := i % e.partitions
			recs = append(recs, record{partition: p, key: fmt.Sprint(tenant, "-", i%4), value: fmt.Sprint(tenant, i), tenant: tenant})
			next[p]++
		}
	}
	e.produce(t, recs...)

	var (
		mu                                  sync.Mutex
		until                               time.Time
		deferrals, ended, heldEarly, freeAt int
		heldHandled                         []time.Time
		freeLast                            time.Time
	)
	order := newKeyOrder()
	commits := newCommitCheck()
	cfg := e.config(t)
	cfg.Concurrency = 3
	cfg.Fairness = &Fairness{Tenant: TenantHeader(tenantHeader), MaxHeld: maxHeld}
	cfg.Hooks.Committed = commits.hook
	r := start(t, cfg, func(ctx context.Context, m *Message) error {
		tenant := TenantHeader(tenantHeader)(m)
		mu.Lock()
		if until.IsZero() {
			until = time.Now().Add(time.Second)
		}
		now := time.Now()
		if tenant == "held" && now.Before(until) {
			if MayDefer(ctx) {
				deferrals++
				mu.Unlock()
				return Defer(until, fmt.Errorf("tenant %q is over its budget", tenant))
			}
			ended++ // what a handler does with a message it may not defer: ends it
		}
		mu.Unlock()
		order.start(m)
		time.Sleep(20 * time.Millisecond)
		order.end(m)
		commits.done(m)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case tenant == "free":
			freeAt++
			freeLast = time.Now()
		case now.Before(until):
			heldEarly++
		default:
			heldHandled = append(heldHandled, now)
		}
		return nil
	})
	commits.stopWhenAllCommitted(t, r, next)
	order.check(t)
	commits.check(t)

	mu.Lock()
	defer mu.Unlock()
	if deferrals == 0 {
		t.Fatal("nothing was deferred")
	}
	if freeAt != each || !freeLast.Before(until) {
		t.Errorf("the other tenant: %d of %d handled, the last at %v, want all before the held tenant's time %v",
			freeAt, each, freeLast.Format(time.StampMilli), until.Format(time.StampMilli))
	}
	if ended == 0 || ended != heldEarly {
		t.Errorf("%d of the held tenant's messages ended before its time (%d started so), want some: %d were waiting at most", heldEarly, ended, maxHeld)
	}
	if ended+len(heldHandled) != each {
		t.Errorf("held tenant: %d ended and %d handled after its time, want %d in all", ended, len(heldHandled), each)
	}
	if len(heldHandled) == 0 || len(heldHandled) > maxHeld+cfg.Concurrency {
		t.Errorf("%d of the held tenant's messages waited for its time, want 1 to %d (MaxHeld, and those deferred from the slots)", len(heldHandled), maxHeld+cfg.Concurrency)
	}
	t.Logf("held tenant: %d deferrals, %d ended, %d handled after its time; the other's last at %v before it",
		deferrals, ended, len(heldHandled), until.Sub(freeLast).Round(time.Millisecond))
}
