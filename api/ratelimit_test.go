package api

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"rulevalidator/tenants"
)

var _ RateLimiter = (*tenants.RateLimiter)(nil)

// testClock is a settable time.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// rateLimited is a tenants.RateLimiter on a clock of the test's: trial at 10 a minute (a
// burst of 1), every other tenant unlimited.
func rateLimited() (*tenants.RateLimiter, *testClock) {
	clock := &testClock{t: time.Now()}
	rates := map[string]int{"trial": 10}
	return tenants.NewRateLimiter(func(tenant string) int { return rates[tenant] }, tenants.RateLimiterOptions{Now: clock.now}), clock
}

// checkRateLimited checks a 429 answer: rate_limited, Retry-After in whole seconds, the
// message naming the limit.
func checkRateLimited(t *testing.T, r response, retryAfter string) {
	t.Helper()
	if r.status != http.StatusTooManyRequests || r.errorCode() != CodeRateLimited {
		t.Fatalf("over the limit: %s, want 429 %s", r, CodeRateLimited)
	}
	if got := r.header.Get("Retry-After"); got != retryAfter {
		t.Errorf("Retry-After %q, want %q", got, retryAfter)
	}
	for _, want := range []string{`"trial"`, "10 requests per minute"} {
		if !strings.Contains(r.errorMessage(), want) {
			t.Errorf("message %q does not name the limit (%s)", r.errorMessage(), want)
		}
	}
}

// TestSubmitRateLimited: a tenant past its burst is answered 429 with Retry-After, its
// request not queued, while another tenant is unaffected; once the wait is over it is
// admitted again.
func TestSubmitRateLimited(t *testing.T) {
	id := newIdentity(t)
	limiter, clock := rateLimited()
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier, RateLimit: limiter})
	trial, acme := id.token(t, "trial"), id.token(t, "acme")

	if r := call(t, http.MethodPost, ts.URL+"/v1/validations", trial, validationBody("trial-1")); r.status != http.StatusAccepted {
		t.Fatalf("trial's first: %s", r)
	}
	checkRateLimited(t, call(t, http.MethodPost, ts.URL+"/v1/validations", trial, validationBody("trial-2")), "6")
	clock.advance(4500 * time.Millisecond)
	checkRateLimited(t, call(t, http.MethodPost, ts.URL+"/v1/validations", trial, validationBody("trial-2")), "2")
	for i := range 5 {
		if r := call(t, http.MethodPost, ts.URL+"/v1/validations", acme, validationBody(fmt.Sprint("acme-", i))); r.status != http.StatusAccepted {
			t.Fatalf("acme's request %d: %s", i+1, r)
		}
	}
	clock.advance(1500 * time.Millisecond)
	if r := call(t, http.MethodPost, ts.URL+"/v1/validations", trial, validationBody("trial-2")); r.status != http.StatusAccepted {
		t.Fatalf("trial's after the wait: %s", r)
	}
	queued := map[string]bool{}
	for _, req := range runner.requests() {
		queued[req.RequestID] = true
	}
	if len(queued) != 7 || !queued["trial-1"] || !queued["trial-2"] {
		t.Errorf("queued %v, want trial-1, trial-2 and acme's five", queued)
	}
	// A request without a valid token is refused before it counts.
	if r := call(t, http.MethodPost, ts.URL+"/v1/validations", "", validationBody("anon")); r.status != http.StatusUnauthorized {
		t.Errorf("without a token: %s", r)
	}
}

// TestExecuteAsyncRateLimited: an internal caller's execution request counts against the
// tenant it names.
func TestExecuteAsyncRateLimited(t *testing.T) {
	limiter, _ := rateLimited()
	_, ts := serveWithPipeline(t, Config{Internal: internalVerifier(t), RateLimit: limiter})
	body := func(tenant, job string) []byte {
		return []byte(`{"job_id":"` + job + `","tenant_id":"` + tenant + `","agent_config":{"type_config":` + specRuleset + `},"inputs":` + specInputs + `}`)
	}
	if r := call(t, http.MethodPost, ts.URL+"/internal/execute-async", internalToken, body("trial", "job-1")); r.status != http.StatusAccepted {
		t.Fatalf("trial's first: %s", r)
	}
	checkRateLimited(t, call(t, http.MethodPost, ts.URL+"/internal/execute-async", internalToken, body("trial", "job-2")), "6")
	if r := call(t, http.MethodPost, ts.URL+"/internal/execute-async", internalToken, body("acme", "job-3")); r.status != http.StatusAccepted {
		t.Fatalf("acme's: %s", r)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for wait, want := range map[time.Duration]int{
		time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 6 * time.Second: 6, time.Minute: 60,
	} {
		if got := retryAfterSeconds(wait); got != want {
			t.Errorf("retryAfterSeconds(%s) = %d, want %d", wait, got, want)
		}
	}
}
