package openai

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"rulevalidator/internal/limit"
)

// loadResult is what an attempt says about the server's load, for its
// concurrency limit: an overload on a 429, a 503, a 504 or an attempt
// timeout; a success on an answer; nothing otherwise (a refused request, a
// failed connection, the caller giving up). The pause is the longer of a
// failure's Retry-After and the wait the rate limit headers ask for.
func loadResult(h http.Header, f *failure, timedOut bool, now time.Time) limit.Result {
	var r limit.Result
	switch {
	case f == nil:
		r.Outcome = limit.Succeeded
	case timedOut, f.status == http.StatusTooManyRequests, f.status == http.StatusServiceUnavailable, f.status == http.StatusGatewayTimeout:
		r.Outcome = limit.Overloaded
	}
	if f != nil && f.hasRetryAfter {
		r.Pause = f.retryAfter
	}
	r.Pause = max(r.Pause, rateLimitWait(h, now))
	return r
}

// rateLimitWait is the wait a server's rate limit headers ask for, OpenAI's
// spelling: until x-ratelimit-reset-requests when
// x-ratelimit-remaining-requests is 0, until x-ratelimit-reset-tokens when
// x-ratelimit-remaining-tokens is 0, the longer of the two. 0 when no limit
// is spent or its reset cannot be read.
func rateLimitWait(h http.Header, now time.Time) time.Duration {
	var wait time.Duration
	for _, kind := range []string{"requests", "tokens"} {
		remaining := strings.TrimSpace(h.Get("x-ratelimit-remaining-" + kind))
		if n, err := strconv.ParseFloat(remaining, 64); err != nil || n > 0 {
			continue
		}
		if d, ok := parseReset(h.Get("x-ratelimit-reset-"+kind), now); ok {
			wait = max(wait, d)
		}
	}
	return wait
}

// unixSeconds is where a bare number in a reset header stops being seconds
// to wait and becomes a Unix time (2001-09-09): no limit resets in 30 years.
const unixSeconds = 1e9

// parseReset reads a rate limit's reset: a Go-style duration (OpenAI's
// "1s", "6m0s", "20ms"), a number of seconds, a Unix time in seconds, an
// RFC 3339 time or an HTTP-date. A time in the past means no wait.
func parseReset(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if d, err := time.ParseDuration(v); err == nil {
		return max(d, 0), true
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs >= unixSeconds {
			return max(time.Unix(0, int64(secs*float64(time.Second))).Sub(now), 0), true
		}
		return max(time.Duration(secs*float64(time.Second)), 0), true
	}
	for _, parse := range []func(string) (time.Time, error){
		func(v string) (time.Time, error) { return time.Parse(time.RFC3339, v) },
		http.ParseTime,
	} {
		if at, err := parse(v); err == nil {
			return max(at.Sub(now), 0), true
		}
	}
	return 0, false
}
