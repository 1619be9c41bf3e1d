package tenants

import (
	"container/list"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultMaxBuckets is RateLimiterOptions.MaxBuckets's default.
const DefaultMaxBuckets = 10_000

// idleAfter is how long a bucket unused is kept. A bucket is full again a burst's worth of
// its rate after its last use: 6 seconds from a rate of 10 a minute up (a tenth of the rate),
// 60/rate seconds below it, at most a minute (1 a minute). One unused for a minute is full,
// so forgetting it, and making a new full one at the tenant's next request, changes nothing.
const idleAfter = time.Minute

// Burst is how many requests a tenant limited to perMinute may make at once: a tenth of the
// rate, at least 1. Past it, requests are admitted at the rate, one every 60/perMinute
// seconds.
func Burst(perMinute int) int { return max(perMinute/10, 1) }

// RateLimitError is a request refused by a RateLimiter, naming the limit.
type RateLimitError struct {
	Tenant    string
	PerMinute int
	// RetryAfter is how long until the tenant's next request would be admitted.
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("tenant %q is over its rate limit of %d requests per minute (bursts of up to %d) on this replica; retry after %s",
		e.Tenant, e.PerMinute, Burst(e.PerMinute), e.RetryAfter.Round(time.Millisecond))
}

// RateLimiterOptions configures a RateLimiter.
type RateLimiterOptions struct {
	// MaxBuckets bounds the tenants whose buckets are kept (default DefaultMaxBuckets). Past
	// it, the bucket used longest ago is forgotten, its tenant's next request finding a full
	// one: at worst a burst more for the tenant idle the longest.
	MaxBuckets int
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// RateLimiter admits each tenant's requests at its rate by a token bucket of the tenant's
// own, kept in memory: the limit holds per process, so N replicas admit up to N times the
// rate. The rate is read at every request, so that a changed one applies at once: the bucket
// keeps the tokens it has (up to the new burst) and refills at the new rate. Buckets unused
// for a minute are full again and forgotten, and at most MaxBuckets are kept, so that a flood
// of distinct tenants cannot grow it without bound. It is safe for concurrent use.
type RateLimiter struct {
	perMinute func(tenant string) int
	max       int
	now       func() time.Time

	mu      sync.Mutex
	buckets map[string]*list.Element // of *bucket
	// byUse holds the buckets, the one used last at the front.
	byUse *list.List
}

type bucket struct {
	tenant    string
	perMinute int
	limiter   *rate.Limiter
	used      time.Time
}

// NewRateLimiter returns a RateLimiter reading each tenant's rate through perMinute (0 or
// less: no limit), such as File.RequestsPerMinute.
func NewRateLimiter(perMinute func(tenant string) int, opts RateLimiterOptions) *RateLimiter {
	if opts.MaxBuckets <= 0 {
		opts.MaxBuckets = DefaultMaxBuckets
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &RateLimiter{perMinute: perMinute, max: opts.MaxBuckets, now: opts.Now,
		buckets: make(map[string]*list.Element), byUse: list.New()}
}

// Admit takes one request of tenant. It returns a nil error when the request is admitted;
// otherwise how long until one would be, and a *RateLimitError naming the limit.
func (l *RateLimiter) Admit(tenant string) (retryAfter time.Duration, err error) {
	perMinute := l.perMinute(tenant)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgetIdle(now)
	if perMinute <= 0 {
		return 0, nil
	}
	b := l.bucket(tenant, perMinute, now)
	b.used = now
	if b.perMinute != perMinute {
		b.perMinute = perMinute
		b.limiter.SetLimitAt(now, perSecond(perMinute))
		b.limiter.SetBurstAt(now, Burst(perMinute))
	}
	if b.limiter.AllowN(now, 1) {
		return 0, nil
	}
	missing := 1 - b.limiter.TokensAt(now)
	wait := max(time.Duration(math.Ceil(missing*float64(time.Minute)/float64(perMinute))), time.Millisecond)
	return wait, &RateLimitError{Tenant: tenant, PerMinute: perMinute, RetryAfter: wait}
}

// Buckets is how many tenants' buckets are kept now.
func (l *RateLimiter) Buckets() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// bucket is tenant's bucket, moved to the front, or a new full one at perMinute. l.mu is
// held.
func (l *RateLimiter) bucket(tenant string, perMinute int, now time.Time) *bucket {
	if e, ok := l.buckets[tenant]; ok {
		l.byUse.MoveToFront(e)
		return e.Value.(*bucket)
	}
	for len(l.buckets) >= l.max {
		l.remove(l.byUse.Back())
	}
	b := &bucket{tenant: tenant, perMinute: perMinute, used: now,
		limiter: rate.NewLimiter(perSecond(perMinute), Burst(perMinute))}
	l.buckets[tenant] = l.byUse.PushFront(b)
	return b
}

// forgetIdle forgets the buckets unused for idleAfter, the oldest at the back. l.mu is held.
func (l *RateLimiter) forgetIdle(now time.Time) {
	for e := l.byUse.Back(); e != nil && now.Sub(e.Value.(*bucket).used) >= idleAfter; e = l.byUse.Back() {
		l.remove(e)
	}
}

func (l *RateLimiter) remove(e *list.Element) {
	l.byUse.Remove(e)
	delete(l.buckets, e.Value.(*bucket).tenant)
}

func perSecond(perMinute int) rate.Limit { return rate.Limit(float64(perMinute) / 60) }
