package usage

import (
	"context"
	"fmt"
	"time"

	"rulevalidator/internal/fault"
	"rulevalidator/schemas"
)

// Budget is a tenant's token budget: the most tokens (in and out) its judged requests may
// use in an hour and in a day (UTC windows), 0 for none.
type Budget struct {
	TokensPerHour int64
	TokensPerDay  int64
}

// QuotaError says which budget a tenant has used up.
type QuotaError struct {
	Tenant string
	// Window is "hour" or "day".
	Window string
	Limit  int64
	Spent  int64
	// Until is when the window ends.
	Until time.Time
}

func (e *QuotaError) Error() string {
	key := "tokens_per_" + e.Window
	return fmt.Sprintf("tenant %q has used %d tokens this %s (UTC), its budget %s is %d; the window ends at %s",
		e.Tenant, e.Spent, e.Window, key, e.Limit, e.Until.Format(time.RFC3339))
}

// Admission checks tenants' budgets against their usage in the store.
type Admission struct {
	Usage *Store
	// Budget is a tenant's budget (from the tenants file).
	Budget func(tenant string) Budget
	Now    func() time.Time
}

// Admit returns a *QuotaError, marked permanent with reason quota_exceeded (the failure
// table's message fault: the request fails, dead-lettered), when tenant has used up its
// hour's or its day's budget; an error reading the usage when it cannot tell; and nil when the tenant may have a request
// judged. A tenant under its budget is admitted whatever the request will use: a budget is
// overshot by the requests admitted before the usage of the others is recorded.
func (a *Admission) Admit(ctx context.Context, tenant string) error {
	b := a.Budget(tenant)
	if b.TokensPerHour <= 0 && b.TokensPerDay <= 0 {
		return nil
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	at := now()
	hour, day, err := a.Usage.Spent(ctx, tenant, at, b.TokensPerDay > 0)
	if err != nil {
		return err
	}
	if b.TokensPerHour > 0 && hour >= b.TokensPerHour {
		return refuse(&QuotaError{Tenant: tenant, Window: "hour", Limit: b.TokensPerHour, Spent: hour, Until: Hour(at).Add(time.Hour)})
	}
	if b.TokensPerDay > 0 && day >= b.TokensPerDay {
		return refuse(&QuotaError{Tenant: tenant, Window: "day", Limit: b.TokensPerDay, Spent: day, Until: Hour(at).Truncate(24 * time.Hour).Add(24 * time.Hour)})
	}
	return nil
}

func refuse(e *QuotaError) error { return fault.Permanent(string(schemas.ReasonQuotaExceeded), e) }
