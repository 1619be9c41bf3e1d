package consumer

import (
	"maps"
	"math"
	"slices"
	"testing"
	"time"
)

// sim runs the consumer's slots and queue of messages waiting for them on a clock of its own:
// each message holds its slot for its own time, and a slot given back goes at once to the
// message the scheduler picks, one slot at a time, as in the consumer.
type sim struct {
	// vary makes each message take its time given times 0.5 to 1.5, from a fixed sequence,
	// so that the slots do not all come free at once.
	vary    bool
	lcg     uint64
	now     time.Time
	slots   *slots
	queue   *tenantQueues[*simMessage]
	seq     uint64
	running []*simMessage
	// started and done are the messages in the order they started and ended.
	started, done []*simMessage
}

type simMessage struct {
	tenant                      string
	takes                       time.Duration
	arrived, started, ended     time.Time
	runningAtStart, tenantsTurn int // slots held at its start, in all and by its tenant
}

// latency is from the message's arrival to its end.
func (m *simMessage) latency() time.Duration { return m.ended.Sub(m.arrived) }

func newSim(n int, fairness *Fairness) *sim {
	s := &sim{now: t0, queue: newTenantQueues[*simMessage]()}
	s.slots = newSlots(n, fairness)
	s.slots.now = func() time.Time { return s.now }
	return s
}

// arrive queues n messages of tenant, each taking takes, and starts what may start.
func (s *sim) arrive(tenant string, n int, takes time.Duration) {
	for range n {
		d := takes
		if s.vary {
			s.lcg = s.lcg*6364136223846793005 + 1442695040888963407
			d = time.Duration(float64(takes) * (0.5 + float64(s.lcg>>11)/(1<<53)))
		}
		s.seq++
		s.queue.push(tenant, s.seq, &simMessage{tenant: tenant, takes: d, arrived: s.now})
	}
	s.startWhatMay()
}

func (s *sim) startWhatMay() {
	for {
		var m *simMessage
		if !s.slots.take(func(standingOf func(string) standing) (string, bool) {
			var ok bool
			m, _, ok = s.queue.pop(func(tenant string) (float64, bool) {
				st := standingOf(tenant)
				return st.rank, st.mayStart
			})
			if !ok {
				return "", false
			}
			return m.tenant, true
		}) {
			return
		}
		m.started = s.now
		m.runningAtStart = len(s.running) + 1
		for _, r := range s.running {
			if r.tenant == m.tenant {
				m.tenantsTurn++
			}
		}
		m.tenantsTurn++
		s.running = append(s.running, m)
		s.started = append(s.started, m)
	}
}

// runUntil ends the messages due by until, the earliest first, each giving its slot back to
// what waits; the clock is then at until.
func (s *sim) runUntil(until time.Time) {
	for len(s.running) > 0 {
		i := 0
		for j, m := range s.running {
			if m.started.Add(m.takes).Before(s.running[i].started.Add(s.running[i].takes)) {
				i = j
			}
		}
		m := s.running[i]
		end := m.started.Add(m.takes)
		if end.After(until) {
			break
		}
		s.now, m.ended = end, end
		s.running = slices.Delete(s.running, i, i+1)
		s.done = append(s.done, m)
		s.slots.give(m.tenant)
		s.startWhatMay()
	}
	s.now = until
}

// runFor is runUntil d from now.
func (s *sim) runFor(d time.Duration) { s.runUntil(s.now.Add(d)) }

// startsOf counts the messages of tenant that started in [from, to).
func (s *sim) startsOf(tenant string, from, to time.Time) int {
	n := 0
	for _, m := range s.started {
		if m.tenant == tenant && !m.started.Before(from) && m.started.Before(to) {
			n++
		}
	}
	return n
}

// worstLatency is the longest latency of tenant's messages that arrived at or after since.
func (s *sim) worstLatency(tenant string, since time.Time) time.Duration {
	var worst time.Duration
	for _, m := range s.done {
		if m.tenant == tenant && !m.arrived.Before(since) {
			worst = max(worst, m.latency())
		}
	}
	return worst
}

func fairness(weights, caps map[string]int) *Fairness {
	f := &Fairness{Tenant: func(*Message) string { return "" }}
	if weights != nil {
		f.Weight = func(tenant string) int {
			if w, ok := weights[tenant]; ok {
				return w
			}
			return 1
		}
	}
	if caps != nil {
		f.MaxInFlight = func(tenant string) int { return caps[tenant] }
	}
	return f
}

// TestSchedulePriority runs the scheduler through the scenarios on a simulated clock,
// four slots and messages of 1s unless said otherwise.
func TestSchedulePriority(t *testing.T) {
	const sec = time.Second
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a tenant alone gets every slot", func(t *testing.T) {
			s := newSim(4, fairness(nil, nil))
			s.arrive("a", 10, sec)
			s.runFor(10 * sec)
			if n := s.startsOf("a", t0, t0.Add(sec)); n != 4 {
				t.Errorf("%d started at once, want 4", n)
			}
			if last := s.done[len(s.done)-1].ended; !last.Equal(t0.Add(3 * sec)) {
				t.Errorf("10 messages on 4 slots done at %s, want 3s", last.Sub(t0))
			}
		}},
		{"a calm tenant behind a flood takes the next free slots, the flood the one left", func(t *testing.T) {
			s := newSim(4, fairness(nil, nil))
			s.arrive("flood", 120, sec)
			s.runFor(sec / 2)
			s.arrive("calm", 3, sec)
			s.runFor(sec / 2)
			if calm, flood := s.startsOf("calm", t0.Add(sec), t0.Add(sec+1)), s.startsOf("flood", t0.Add(sec), t0.Add(sec+1)); calm != 3 || flood != 1 {
				t.Errorf("at the first free slots: %d calm, %d flood; want 3 and 1", calm, flood)
			}
			s.runFor(40 * sec)
			// Alone it takes 1s; here the wait for the first free slot, 0.5s, and its own 1s.
			if worst := s.worstLatency("calm", t0); worst != 1500*time.Millisecond {
				t.Errorf("calm worst latency %s, want 1.5s", worst)
			}
			if n := len(s.done); n != 123 {
				t.Errorf("%d done, want 123", n)
			}
			// Work-conserving: the flood drains in the time 123 messages take on 4 slots.
			if last := s.done[len(s.done)-1].ended; last.After(t0.Add(31 * sec)) {
				t.Errorf("all done at %s, want 31s", last.Sub(t0))
			}
		}},
		{"the calm tenant's own use a few seconds ago weighs less than the flood's running slots", func(t *testing.T) {
			// The end-to-end measurement's order: the calm tenant alone, then the flood,
			// then the calm tenant again.
			s := newSim(4, fairness(nil, nil))
			s.arrive("calm", 3, sec)
			s.runFor(1500 * time.Millisecond)
			s.arrive("flood", 120, sec)
			s.runFor(sec / 2)
			s.arrive("calm", 3, sec)
			s.runFor(40 * sec)
			if worst := s.worstLatency("calm", t0.Add(2*sec)); worst != 1500*time.Millisecond {
				t.Errorf("calm worst latency under the flood %s, want 1.5s: its three at the first free slots", worst)
			}
		}},
		{"the flood takes every slot the calm tenant does not use", func(t *testing.T) {
			s := newSim(4, fairness(nil, nil))
			s.arrive("flood", 40, sec)
			s.runFor(sec / 2)
			s.arrive("calm", 1, sec)
			s.runFor(20 * sec)
			for at := time.Duration(0); at < 10*sec; at += sec {
				from := t0.Add(at)
				if n := s.startsOf("flood", from, from.Add(sec)) + s.startsOf("calm", from, from.Add(sec)); n != 4 {
					t.Errorf("%d started at %s, want all 4 slots", n, at)
				}
			}
		}},
		{"a newcomer flood gets the free slots until its usage reaches the old flood's, then they share", func(t *testing.T) {
			s := newSim(4, fairness(nil, nil))
			s.arrive("old", 4000, sec)
			// Five half-lives: "old" stands near its most, 4 slots held a mean age of
			// 1/ln 2 half-lives. "new" joins between two rounds.
			s.runFor(300*sec + sec/2)
			joined := s.now
			s.arrive("new", 4000, sec)
			s.runFor(200 * sec)
			// "new" takes every slot while its usage is under "old"'s: with both at full rate
			// they meet within a half-life, as usageHalfLife's comment says.
			caughtUp := joined
			for _, m := range s.started {
				if !m.started.Before(joined) && m.tenant == "old" {
					caughtUp = m.started
					break
				}
			}
			if wait := caughtUp.Sub(joined); wait < usageHalfLife*3/4 || wait > usageHalfLife+sec {
				t.Errorf("the old flood started again %s after the new one joined, want about a half-life (%s)", wait, usageHalfLife)
			}
			if n := s.startsOf("old", joined, caughtUp); n != 0 {
				t.Errorf("the old flood started %d before the new one caught up, want 0", n)
			}
			// From then on they share the slots half and half.
			from := caughtUp.Add(10 * sec)
			oldN, newN := s.startsOf("old", from, s.now), s.startsOf("new", from, s.now)
			t.Logf("the old flood started again %s after the new one joined; from 10s later, %d and %d starts",
				caughtUp.Sub(joined), oldN, newN)
			if math.Abs(float64(oldN-newN)) > 8 {
				t.Errorf("after catching up: old %d, new %d starts; want equal within two rounds", oldN, newN)
			}
			// And their usage stays level: no round goes to one tenant for longer than the other's.
			u := s.slots.usage
			if o, n := u.of("old", s.now), u.of("new", s.now); math.Abs(o-n) > 4 {
				t.Errorf("usage at the end: old %.1f, new %.1f slot-seconds; want within one round (4)", o, n)
			}
		}},
		{"ties go to arrival order", func(t *testing.T) {
			s := newSim(1, fairness(nil, nil))
			s.arrive("a", 2, sec)
			s.arrive("b", 2, sec)
			s.runFor(10 * sec)
			var got []string
			for _, m := range s.started {
				got = append(got, m.tenant)
			}
			if want := []string{"a", "b", "a", "b"}; !slices.Equal(got, want) {
				t.Errorf("started %v, want %v", got, want)
			}
		}},
		{"caps are respected and the other tenant fills the slots they leave", func(t *testing.T) {
			s := newSim(5, fairness(nil, map[string]int{"capped": 2}))
			s.arrive("capped", 100, sec)
			s.arrive("free", 100, sec)
			s.runFor(30 * sec)
			full := 0
			for _, m := range s.started {
				if m.tenant == "capped" && m.tenantsTurn > 2 {
					t.Fatalf("capped tenant held %d slots at %s, over its cap 2", m.tenantsTurn, m.started.Sub(t0))
				}
				if m.runningAtStart == 5 {
					full++
				}
			}
			if full == 0 {
				t.Error("the slots were never all taken")
			}
			if n := s.startsOf("capped", t0, t0.Add(10*sec)); n != 20 {
				t.Errorf("capped tenant started %d in 10s, want 20: its cap, all along", n)
			}
		}},
		{"a capped tenant alone leaves the slots beyond its cap free", func(t *testing.T) {
			s := newSim(5, fairness(nil, map[string]int{"capped": 2}))
			s.arrive("capped", 10, sec)
			s.runFor(10 * sec)
			if n := s.startsOf("capped", t0, t0.Add(sec)); n != 2 {
				t.Errorf("%d started at once, want 2", n)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// TestScheduleShares: tenants always backlogged share the slot time in proportion to their
// weights over a long run, in slot-seconds: a tenant whose messages take twice as long gets
// half as many. The messages vary in length, so that the slots come free one at a time as in
// the service. The shares are off by what the decay forgives: at pick time the tenant picked
// last stands above the others by its message, and that lead decays like the rest of its
// usage, a share of about λd/2 at most (λ = ln 2 / usageHalfLife, d a message's time; 0.6% for
// messages of 1s, and less the more slots there are).
func TestScheduleShares(t *testing.T) {
	const sec = time.Second
	tests := []struct {
		name    string
		slots   int
		weights map[string]int
		takes   map[string]time.Duration // 1s for a tenant not named
	}{
		{"equal", 1, map[string]int{"a": 1, "b": 1, "c": 1}, nil},
		{"3:1 on one slot", 1, map[string]int{"gold": 3, "standard": 1}, nil},
		{"3:1 on four slots", 4, map[string]int{"gold": 3, "standard": 1}, nil},
		{"5:2:1 on eight slots", 8, map[string]int{"big": 5, "mid": 2, "small": 1}, nil},
		{"equal weights, messages of 2s and 1s", 4, map[string]int{"slow": 1, "quick": 1},
			map[string]time.Duration{"slow": 2 * sec}},
		{"3:1, the heavier's messages half as long", 2, map[string]int{"gold": 3, "standard": 1},
			map[string]time.Duration{"gold": sec / 2}},
		{"3:1, messages of 10s on eight slots", 8, map[string]int{"gold": 3, "standard": 1},
			map[string]time.Duration{"gold": 10 * sec, "standard": 10 * sec}},
	}
	decay := math.Ln2 / usageHalfLife.Seconds()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(tt.slots, fairness(tt.weights, nil))
			s.vary = true
			tenants := slices.Sorted(maps.Keys(tt.weights))
			total := 0
			for _, w := range tt.weights {
				total += w
			}
			takes := func(tenant string) time.Duration {
				if d, ok := tt.takes[tenant]; ok {
					return d
				}
				return sec
			}
			longest := sec
			for _, d := range tt.takes {
				longest = max(longest, d)
			}
			run := 2000 * longest
			for _, tenant := range tenants {
				// More than the run can start: every tenant stays backlogged.
				s.arrive(tenant, 2*int(run/takes(tenant))*tt.slots, takes(tenant))
			}
			s.runFor(run)
			held := make(map[string]time.Duration)
			var all time.Duration
			for _, m := range s.done {
				held[m.tenant] += m.takes
				all += m.takes
			}
			if busy := time.Duration(tt.slots) * run; all < busy-time.Duration(tt.slots)*2*longest {
				t.Errorf("slots held %s in all, want %s: every slot busy", all, busy)
			}
			most := decay * longest.Seconds() / 2
			for _, tenant := range tenants {
				share := float64(held[tenant]) / float64(all)
				want := float64(tt.weights[tenant]) / float64(total)
				if math.Abs(share-want) > most {
					t.Errorf("%s (weight %d) held %.4f of the slot time, want %.4f ± %.4f", tenant, tt.weights[tenant], share, want, most)
				} else {
					t.Logf("%s (weight %d) held %.4f of the slot time, want %.4f ± %.4f", tenant, tt.weights[tenant], share, want, most)
				}
			}
		})
	}
}
