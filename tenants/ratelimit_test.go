package tenants

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable time for RateLimiterOptions.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// rates is a settable rate per tenant.
type rates struct {
	mu sync.Mutex
	m  map[string]int
}

func (r *rates) perMinute(tenant string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[tenant]
}

func (r *rates) set(tenant string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[tenant] = n
}

// near says whether a wait is want, give or take a microsecond of floating point.
func near(wait, want time.Duration) bool { return (wait - want).Abs() <= time.Microsecond }

func TestBurst(t *testing.T) {
	for perMinute, want := range map[int]int{1: 1, 9: 1, 10: 1, 19: 1, 20: 2, 600: 60, 1_000_000: 100_000} {
		if got := Burst(perMinute); got != want {
			t.Errorf("Burst(%d) = %d, want %d", perMinute, got, want)
		}
	}
}

// TestIdleBucketsAreFull: a bucket unused for idleAfter is full again at every rate a file
// may give, so forgetting it changes nothing.
func TestIdleBucketsAreFull(t *testing.T) {
	for perMinute := 1; perMinute <= MaxLimit; perMinute = perMinute*3/2 + 1 {
		refill := time.Duration(float64(Burst(perMinute)) * float64(time.Minute) / float64(perMinute))
		if refill > idleAfter {
			t.Errorf("%d a minute: an empty bucket takes %s to fill, longer than idleAfter %s", perMinute, refill, idleAfter)
		}
	}
}

// TestRateLimiterBurstThenRate: a tenant at 60 a minute gets its burst of 6 at once, then one
// a second; each refusal says when to retry and names the limit; another tenant is unaffected.
func TestRateLimiterBurstThenRate(t *testing.T) {
	c := newClock()
	r := &rates{m: map[string]int{"trial": 60}}
	l := NewRateLimiter(r.perMinute, RateLimiterOptions{Now: c.now})
	for i := range 6 {
		if _, err := l.Admit("trial"); err != nil {
			t.Fatalf("request %d of the burst refused: %v", i+1, err)
		}
	}
	wait, err := l.Admit("trial")
	var rle *RateLimitError
	if !errors.As(err, &rle) {
		t.Fatalf("past the burst: %v, want a *RateLimitError", err)
	}
	if !near(wait, time.Second) || rle.RetryAfter != wait || rle.Tenant != "trial" || rle.PerMinute != 60 {
		t.Errorf("refusal: wait %s, %+v; want 1s for trial at 60", wait, rle)
	}
	for _, want := range []string{`"trial"`, "60 requests per minute", "bursts of up to 6", "retry after 1s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not say %q", err, want)
		}
	}
	for i := range 100 {
		if _, err := l.Admit("other"); err != nil {
			t.Fatalf("an unlimited tenant refused at request %d: %v", i+1, err)
		}
	}
	c.advance(400 * time.Millisecond)
	if wait, err := l.Admit("trial"); err == nil || !near(wait, 600*time.Millisecond) {
		t.Errorf("0.4s later: wait %s, %v; want a refusal for 0.6s more", wait, err)
	}
	c.advance(600 * time.Millisecond)
	if _, err := l.Admit("trial"); err != nil {
		t.Errorf("a second later: %v, want admitted", err)
	}
	if _, err := l.Admit("trial"); err == nil {
		t.Error("the token of that second was used twice")
	}
	if n := l.Buckets(); n != 1 {
		t.Errorf("%d buckets kept, want 1: an unlimited tenant needs none", n)
	}
}

// TestRateLimiterRateChanges: a changed rate applies at the next request, the bucket keeping
// what it has.
func TestRateLimiterRateChanges(t *testing.T) {
	c := newClock()
	r := &rates{m: map[string]int{"acme": 10}}
	l := NewRateLimiter(r.perMinute, RateLimiterOptions{Now: c.now})
	if _, err := l.Admit("acme"); err != nil {
		t.Fatal(err)
	}
	if wait, err := l.Admit("acme"); err == nil || !near(wait, 6*time.Second) {
		t.Fatalf("past a burst of 1 at 10 a minute: wait %s, %v; want 6s", wait, err)
	}
	r.set("acme", 600) // ten a second, bursts of 60; the bucket is empty
	if wait, err := l.Admit("acme"); err == nil || !near(wait, 100*time.Millisecond) {
		t.Errorf("raised to 600 a minute, the bucket empty: wait %s, %v; want 100ms", wait, err)
	}
	c.advance(time.Second)
	admitted := 0
	for range 20 {
		if _, err := l.Admit("acme"); err == nil {
			admitted++
		}
	}
	if admitted != 10 {
		t.Errorf("a second at 600 a minute admitted %d, want 10", admitted)
	}
	r.set("acme", 0)
	for range 50 {
		if _, err := l.Admit("acme"); err != nil {
			t.Fatalf("the limit lifted, still refused: %v", err)
		}
	}
	r.set("acme", 1)
	c.advance(time.Hour)
	if _, err := l.Admit("acme"); err != nil {
		t.Errorf("lowered to 1 a minute after an idle hour: %v, want the burst of 1", err)
	}
	if wait, err := l.Admit("acme"); err == nil || !near(wait, time.Minute) {
		t.Errorf("past it: wait %s, %v; want a minute", wait, err)
	}
}

// TestRateLimiterBounded: buckets unused for a minute are forgotten, and no more than
// MaxBuckets are kept whatever the number of tenants, the one used longest ago going first.
func TestRateLimiterBounded(t *testing.T) {
	c := newClock()
	l := NewRateLimiter(func(string) int { return 10 }, RateLimiterOptions{Now: c.now, MaxBuckets: 100})
	for i := range 1000 {
		l.Admit(fmt.Sprint("t", i))
		if n := l.Buckets(); n > 100 {
			t.Fatalf("%d buckets kept after %d tenants, over MaxBuckets 100", n, i+1)
		}
	}
	// The last 100 are kept: each of them still refused.
	if _, err := l.Admit("t999"); err == nil {
		t.Error("t999's bucket was forgotten while it was among the 100 used last")
	}
	c.advance(30 * time.Second)
	l.Admit("t998") // refused or not, used now
	c.advance(30 * time.Second)
	l.Admit("fresh")
	if n := l.Buckets(); n != 2 {
		t.Errorf("%d buckets kept after a minute, want 2: t998's, used 30s ago, and fresh's", n)
	}
}

func TestRateLimiterConcurrent(t *testing.T) {
	l := NewRateLimiter(func(string) int { return 600 }, RateLimiterOptions{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := l.Admit(fmt.Sprint("t", g%2)); err == nil {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	// Two tenants, a burst of 60 each, and what the test's time refills.
	if admitted < 120 || admitted > 140 {
		t.Errorf("%d admitted, want about two bursts of 60", admitted)
	}
}
