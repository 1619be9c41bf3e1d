package consumer

import (
	"math"
	"time"
)

// usageHalfLife is how fast a tenant's use of the handling slots is forgotten: a slot-second
// used now weighs half as much a minute later. It trades two things, and a minute sits well
// between them; it was chosen so, not fitted to a measurement.
//   - Usage should tell a sustained load from a tenant's last few requests, and so be long
//     beside what one message holds a slot (a model call takes seconds, a large request tens
//     of seconds): a tenant keeping four slots busy then stands at hundreds of slot-seconds
//     while one sending a few requests a minute stands at a few. The longer it is beside a
//     message, the closer the weights hold too: the decay pulls the shares of tenants that
//     all wait toward equal by at most λd/2 (λ = ln 2 / the half-life, d a message's time).
//   - Priority should not cost the others for long: a tenant that starts using every slot
//     catches up, within one half-life, with a tenant of the same weight that has held every
//     slot for as long as it likes (its usage grows as the other's decays), so a newcomer's
//     flood holds an established tenant back for about a minute at most; and a tenant's own
//     past flood weighs against it for minutes, not hours (3% of it is left after five).
const usageHalfLife = time.Minute

// usageForgotten is the usage, in slot-seconds, below which a tenant holding no slot is
// forgotten: a millisecond of one slot, too little to matter against any tenant but another
// forgotten one, which it ties. It keeps the tenants remembered to those active lately.
const usageForgotten = 1e-3

// usage is each tenant's recent use of the handling slots, in slot-seconds: the time each of
// its messages held a slot, counted while the slot is held, each second weighted by how
// recent it is (exponential decay, half-life usageHalfLife). A message is charged as it runs,
// not when it starts, because how long it will hold its slot is not known then; the charge is
// exact once it is done, whatever its cost.
//
// It is not safe for concurrent use.
type usage struct {
	halfLife time.Duration
	// decay is the rate of the exponential decay, per second: ln 2 / halfLife.
	decay   float64
	tenants map[string]*tenantUsage
	// swept is when the tenants last were swept for those to forget.
	swept time.Time
}

type tenantUsage struct {
	// value is the usage as of at, in slot-seconds.
	value float64
	at    time.Time
	// holding is how many slots the tenant's messages hold.
	holding int
}

func newUsage(halfLife time.Duration) *usage {
	return &usage{halfLife: halfLife, decay: math.Ln2 / halfLife.Seconds(), tenants: make(map[string]*tenantUsage)}
}

// valueAt is t's usage at now: its value decayed since t.at, plus what its slots held since,
// each moment decayed from its own time (the integral of holding·e^(−decay·(now−s)) over s).
func (u *usage) valueAt(t *tenantUsage, now time.Time) float64 {
	dt := now.Sub(t.at).Seconds()
	if dt <= 0 {
		return t.value
	}
	kept := math.Exp(-u.decay * dt)
	return t.value*kept + float64(t.holding)*(1-kept)/u.decay
}

// of is tenant's usage at now; 0 for a tenant not seen lately.
func (u *usage) of(tenant string, now time.Time) float64 {
	t, ok := u.tenants[tenant]
	if !ok {
		return 0
	}
	return u.valueAt(t, now)
}

// holding is how many slots tenant's messages hold.
func (u *usage) holding(tenant string) int {
	if t, ok := u.tenants[tenant]; ok {
		return t.holding
	}
	return 0
}

// start records that a message of tenant took a slot at now.
func (u *usage) start(tenant string, now time.Time) {
	t, ok := u.tenants[tenant]
	if !ok {
		t = &tenantUsage{at: now}
		u.tenants[tenant] = t
	}
	u.advance(t, now)
	t.holding++
}

// end records that a message of tenant gave its slot back at now, and forgets, at most once a
// half-life, the tenants whose usage has decayed to nothing.
func (u *usage) end(tenant string, now time.Time) {
	if t, ok := u.tenants[tenant]; ok && t.holding > 0 {
		u.advance(t, now)
		t.holding--
	}
	if now.Sub(u.swept) >= u.halfLife {
		u.sweep(now)
	}
}

// advance brings t's value up to now, keeping it as it is when now is not after t.at.
func (u *usage) advance(t *tenantUsage, now time.Time) {
	if now.After(t.at) {
		t.value, t.at = u.valueAt(t, now), now
	}
}

// sweep forgets the tenants that hold no slot and whose usage is under usageForgotten.
func (u *usage) sweep(now time.Time) {
	u.swept = now
	for tenant, t := range u.tenants {
		if t.holding == 0 && u.valueAt(t, now) < usageForgotten {
			delete(u.tenants, tenant)
		}
	}
}
