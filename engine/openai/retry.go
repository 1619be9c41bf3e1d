package openai

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// nextWait decides how long to wait before attempt n+1, or that there is to
// be no attempt n+1 (retry false); why then explains, phrased to follow
// "after n attempts over d", unless the attempts simply ran out.
//
// A server's Retry-After is honoured as asked, even above MaxDelay, because
// retrying earlier only earns another 429; when it asks for longer than the
// retry budget (MaxElapsed) has left, the call gives up at once so the
// caller's back-pressure starts now rather than after a doomed wait. Without
// Retry-After the wait is capped exponential backoff with full jitter,
// trimmed to the budget left.
func (c *Client) nextWait(n int, f *failure, elapsed time.Duration) (wait time.Duration, retry bool, why string) {
	if n >= c.cfg.MaxAttempts {
		return 0, false, ""
	}
	left := c.cfg.MaxElapsed - elapsed
	if left <= 0 {
		return 0, false, fmt.Sprintf(" (retry budget of %s spent)", c.cfg.MaxElapsed)
	}
	if f.hasRetryAfter {
		if f.retryAfter > left {
			return 0, false, fmt.Sprintf(" (the server asked to wait %s, more than the %s left of the %s retry budget)",
				roundDuration(f.retryAfter), roundDuration(left), c.cfg.MaxElapsed)
		}
		return f.retryAfter, true, ""
	}
	return min(backoff(n, c.cfg.BaseDelay, c.cfg.MaxDelay), left), true, ""
}

// backoff draws the wait after the n-th failed attempt uniformly from
// [0, min(maxDelay, base·2^(n-1))] ("full jitter"), so that clients failing
// together do not retry together.
func backoff(n int, base, maxDelay time.Duration) time.Duration {
	ceiling := base
	for i := 1; i < n && ceiling < maxDelay; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, maxDelay)
	if ceiling <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}
