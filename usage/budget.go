package usage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"rulevalidator/internal/fault"
	"rulevalidator/schemas"
)

// Budget is a tenant's token budget: the most tokens (in and out) its judged requests may
// use in an hour and in a day (UTC windows), 0 for none.
type Budget struct {
	TokensPerHour int64
	TokensPerDay  int64
	// Delay: a request past the budget waits for its window to end (on_exceed: delay)
	// rather than fail (reject).
	Delay bool
}

// set reports whether b bounds anything.
func (b Budget) set() bool { return b.TokensPerHour > 0 || b.TokensPerDay > 0 }

// QuotaError says which budget a tenant has used up.
type QuotaError struct {
	Tenant string
	// Window is "hour" or "day".
	Window string
	Limit  int64
	Spent  int64
	// Until is when the window ends.
	Until time.Time
	// Delay: the tenant's requests past the budget wait for Until.
	Delay bool
}

// DelayUntil is when the request refused may be judged, and whether its tenant's requests
// wait for it (on_exceed: delay).
func (e *QuotaError) DelayUntil() (time.Time, bool) { return e.Until, e.Delay }

func (e *QuotaError) Error() string {
	key := "tokens_per_" + e.Window
	return fmt.Sprintf("tenant %q has used %d tokens this %s (UTC), its budget %s is %d; the window ends at %s",
		e.Tenant, e.Spent, e.Window, key, e.Limit, e.Until.Format(time.RFC3339))
}

// reservation is what a request admitted under a budget holds of it until its usage is
// counted (Store.Record) or it ends without any (Store.Release).
type reservation struct {
	Tokens int64 `json:"tokens"`
	// Expires lets a reservation go when its holder is gone (a replica killed while
	// judging): the request, redelivered, reserves again.
	Expires time.Time `json:"expires"`
}

// errBusy: the budget left is reserved by requests being judged; one may use less than it
// reserved, so the request waits for them rather than being refused.
var errBusy = errors.New("usage: the budget left is reserved by requests being judged")

// Reserve admits a request of tenant under budget b at now, or refuses it with a
// *QuotaError when the tenant has used its hour's or its day's budget up. An admitted
// request reserves the most tokens one of the tenant's requests used in this window or
// the one before (the whole budget left when none has been counted yet), until it is
// counted or released, or until hold has passed. A request is admitted only while the
// tokens used and reserved are under the budget, and the reservations live in the window
// document that every replica updates by conditional writes, so that replicas together
// overshoot a budget by at most the last request admitted, as long as no request uses more
// than the largest before it. When only the reservations stand in the way, Reserve returns
// errBusy. A request counted already, or holding a reservation (a redelivery), is admitted
// again.
func (s *Store) Reserve(ctx context.Context, tenant, requestID string, b Budget, now time.Time, hold time.Duration) error {
	hour, id := Hour(now), requestHash(requestID)
	// The window before is read first: a request counted in this window after this read
	// has its reservation there still, or is in what update reads below, so that nothing
	// is missed (at worst a request is seen twice, which only delays).
	prev, _, err := s.read(ctx, tenant, hour.Add(-time.Hour))
	if err != nil {
		return err
	}
	var before int64 // tokens counted in the day's earlier windows
	if b.TokensPerDay > 0 {
		if before, err = s.dayBefore(ctx, tenant, hour); err != nil {
			return err
		}
	}
	return s.update(ctx, tenant, hour, func(w *window) (bool, error) {
		if prev != nil {
			if _, held := prev.Reserved[id]; held || slices.Contains(prev.Counted, id) {
				return false, nil
			}
		}
		if slices.Contains(w.Counted, id) {
			return false, nil
		}
		dropExpired(w, now)
		if r, held := w.Reserved[id]; held {
			r.Expires = now.Add(hold)
			w.Reserved[id] = r
			return true, nil
		}
		reserved := reservedTokens(w, now) + reservedTokens(prev, now)
		spent := w.Total.Tokens()
		left := int64(-1) // the least budget left; -1 when unbounded
		for _, c := range []struct {
			window string
			limit  int64
			spent  int64
			until  time.Time
		}{
			{"hour", b.TokensPerHour, spent, hour.Add(time.Hour)},
			{"day", b.TokensPerDay, before + spent, hour.Truncate(24 * time.Hour).Add(24 * time.Hour)},
		} {
			if c.limit <= 0 {
				continue
			}
			if c.spent >= c.limit {
				return false, refuse(&QuotaError{Tenant: tenant, Window: c.window, Limit: c.limit, Spent: c.spent, Until: c.until, Delay: b.Delay})
			}
			if c.spent+reserved >= c.limit {
				return false, errBusy
			}
			if l := c.limit - c.spent - reserved; left < 0 || l < left {
				left = l
			}
		}
		estimate := max(w.Largest, largest(prev))
		if estimate == 0 {
			estimate = left
		}
		if w.Reserved == nil {
			w.Reserved = map[string]reservation{}
		}
		w.Reserved[id] = reservation{Tokens: estimate, Expires: now.Add(hold)}
		return true, nil
	})
}

// dayBefore is the tokens tenant counted in the windows of hour's day before hour.
func (s *Store) dayBefore(ctx context.Context, tenant string, hour time.Time) (int64, error) {
	hours, err := s.windows(ctx, tenant, hour.Format(time.DateOnly))
	if err != nil {
		return 0, err
	}
	var tokens int64
	for _, h := range hours {
		if !h.Before(hour) {
			continue
		}
		w, _, err := s.read(ctx, tenant, h)
		if err != nil {
			return 0, err
		}
		if w != nil {
			tokens += w.Total.Tokens()
		}
	}
	return tokens, nil
}

// dropExpired removes w's reservations expired at now.
func dropExpired(w *window, now time.Time) {
	maps.DeleteFunc(w.Reserved, func(_ string, r reservation) bool { return !now.Before(r.Expires) })
}

// reservedTokens is the tokens w's reservations unexpired at now hold.
func reservedTokens(w *window, now time.Time) int64 {
	if w == nil {
		return 0
	}
	var n int64
	for _, r := range w.Reserved {
		if now.Before(r.Expires) {
			n += r.Tokens
		}
	}
	return n
}

func largest(w *window) int64 {
	if w == nil {
		return 0
	}
	return w.Largest
}

// Admission admits tenants' requests under their budgets (Store.Reserve).
type Admission struct {
	Usage *Store
	// Budget is a tenant's budget (from the tenants file).
	Budget func(tenant string) Budget
	// Hold is how long a reservation outlives its replica: the longest a request may be
	// judged (default 15m).
	Hold time.Duration
	// Poll is the first wait for the requests holding the budget left (default 100ms),
	// doubling to a second.
	Poll time.Duration
	Now  func() time.Time
}

// Admit returns a *QuotaError, marked permanent with reason quota_exceeded (the failure
// table's message fault: the request fails, dead-lettered), when tenant has used up its
// hour's or its day's budget; an error reading or writing the usage when it cannot tell;
// and nil when the request may be judged, its reservation made. While the budget left is
// reserved by the tenant's requests being judged, it waits for them, as long as ctx lasts.
func (a *Admission) Admit(ctx context.Context, tenant, requestID string) error {
	b := a.Budget(tenant)
	if !b.set() {
		return nil
	}
	hold, poll := a.Hold, a.Poll
	if hold <= 0 {
		hold = 15 * time.Minute
	}
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	// A replay reserves under the id it is counted by (countedID), so that counting it lets
	// its reservation go.
	requestID = countedID(ctx, requestID)
	for {
		err := a.Usage.Reserve(ctx, tenant, requestID, b, a.now(), hold)
		if !errors.Is(err, errBusy) {
			return err
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for the budget of tenant %q held by its requests being judged: %w", tenant, ctx.Err())
		case <-t.C:
		}
		poll = min(2*poll, time.Second)
	}
}

// Release lets go of what a request admitted and not counted reserved.
func (a *Admission) Release(ctx context.Context, tenant, requestID string) error {
	if !a.Budget(tenant).set() {
		return nil
	}
	return a.Usage.Release(ctx, tenant, countedID(ctx, requestID), a.now())
}

func (a *Admission) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func refuse(e *QuotaError) error { return fault.Permanent(string(schemas.ReasonQuotaExceeded), e) }
