package consumer

import (
	"math"
	"testing"
	"time"
)

// usageEvent is a slot taken (+1) or given back (-1) by tenant, at seconds from the start.
type usageEvent struct {
	at     float64
	tenant string
	delta  int
}

// t0 is the start of the usage tests' clock.
var t0 = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func at(seconds float64) time.Time { return t0.Add(time.Duration(seconds * float64(time.Second))) }

// TestUsage: a tenant's usage is the slot-seconds its messages held, each second weighing
// half as much every half-life after it. The half-life here is 1s, so that the figures read:
// a slot held for one half-life adds (1 - 1/2) / ln 2 = 0.7213 slot-seconds.
func TestUsage(t *testing.T) {
	const unit = 1 / math.Ln2 // what a slot held forever adds up to: the mean age of a weight
	tests := []struct {
		name   string
		events []usageEvent
		tenant string
		at     float64
		want   float64
	}{
		{"a tenant never seen", nil, "a", 5, 0},
		{"a slot held, at once", []usageEvent{{0, "a", +1}}, "a", 0, 0},
		{"a slot held for a half-life", []usageEvent{{0, "a", +1}}, "a", 1, unit / 2},
		{"two slots held for two half-lives", []usageEvent{{0, "a", +1}, {0, "a", +1}}, "a", 2, 2 * unit * 3 / 4},
		{"a slot held for long tends to 1/ln 2", []usageEvent{{0, "a", +1}}, "a", 60, unit},
		{"given back, it halves every half-life",
			[]usageEvent{{0, "a", +1}, {1, "a", -1}}, "a", 3, unit / 2 / 4},
		{"what each message held adds up, the older decayed more",
			[]usageEvent{{0, "a", +1}, {1, "a", -1}, {1, "a", +1}, {2, "a", -1}}, "a", 2, unit/2/2 + unit/2},
		{"each tenant its own", []usageEvent{{0, "a", +1}, {0, "b", +1}, {0, "b", +1}}, "a", 1, unit / 2},
		{"a slot given back that was never taken is ignored", []usageEvent{{0, "a", -1}, {0, "a", +1}}, "a", 1, unit / 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUsage(time.Second)
			for _, e := range tt.events {
				if e.delta > 0 {
					u.start(e.tenant, at(e.at))
				} else {
					u.end(e.tenant, at(e.at))
				}
			}
			if got := u.of(tt.tenant, at(tt.at)); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("usage at %gs = %.6f, want %.6f", tt.at, got, tt.want)
			}
		})
	}
}

// TestUsageIsTheDecayedIntegral: however the slots are taken and given back, and whenever
// the usage is brought up to date, it is the integral over time of the slots held, each
// moment weighted by 2^(-age/half-life), here summed in steps of a millisecond.
func TestUsageIsTheDecayedIntegral(t *testing.T) {
	const halfLife = 2 * time.Second
	u := newUsage(halfLife)
	// The slots tenant a holds over 10s, changing at these seconds.
	events := []usageEvent{{0, "a", +1}, {0.5, "a", +1}, {0.5, "a", +1}, {1.25, "a", -1}, {3, "a", -1},
		{3, "a", +1}, {4.5, "a", -1}, {4.5, "a", -1}, {6, "a", +1}, {7.75, "a", +1}, {9, "a", -1}}
	for _, e := range events {
		if e.delta > 0 {
			u.start(e.tenant, at(e.at))
		} else {
			u.end(e.tenant, at(e.at))
		}
	}
	const end, step = 10.0, 0.001
	want := 0.0
	for s := step / 2; s < end; s += step {
		held := 0
		for _, e := range events {
			if e.at <= s {
				held += e.delta
			}
		}
		want += float64(held) * step * math.Exp2(-(end-s)/halfLife.Seconds())
	}
	if got := u.of("a", at(end)); math.Abs(got-want) > 1e-6 {
		t.Errorf("usage at %gs = %.9f, want the integral %.9f", end, got, want)
	}
	if got := u.holding("a"); got != 1 {
		t.Errorf("holding = %d, want 1", got)
	}
}

// TestUsageForgets: a tenant holding no slot is forgotten once its usage has decayed to
// nothing, at most a half-life after the last sweep; one holding a slot never is.
func TestUsageForgets(t *testing.T) {
	u := newUsage(time.Second)
	u.start("idle", at(0))
	u.end("idle", at(1))
	u.start("busy", at(0))
	u.start("other", at(0))
	// 0.72 slot-seconds at 1s fall under a millisecond's worth in log2(721) = 9.5 half-lives.
	u.end("other", at(5))
	if _, ok := u.tenants["idle"]; !ok {
		t.Fatal("forgotten at 5s, with usage left")
	}
	u.start("other", at(12))
	u.end("other", at(12))
	if _, ok := u.tenants["idle"]; ok {
		t.Errorf("remembered at 12s with usage %g", u.of("idle", at(12)))
	}
	if _, ok := u.tenants["busy"]; !ok {
		t.Error("a tenant holding a slot was forgotten")
	}
	if got := u.of("idle", at(12)); got != 0 {
		t.Errorf("a forgotten tenant's usage = %g, want 0", got)
	}
}
