package openai

import (
	"net/http"
	"testing"
	"time"

	"rulevalidator/internal/limit"
)

func TestRateLimitWait(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"no headers", nil, 0},
		{"requests left", map[string]string{"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "1s"}, 0},
		{"requests spent", map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"}, time.Second},
		{"tokens spent", map[string]string{"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"}, 6 * time.Minute},
		{"both spent: the longer", map[string]string{
			"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "20ms",
			"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1.5s"}, 1500 * time.Millisecond},
		{"only the spent one counts", map[string]string{
			"x-ratelimit-remaining-requests": "9", "x-ratelimit-reset-requests": "1m",
			"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "250ms"}, 250 * time.Millisecond},
		{"spent without a reset", map[string]string{"x-ratelimit-remaining-requests": "0"}, 0},
		{"an unreadable reset", map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "soon"}, 0},
		{"an unreadable remaining", map[string]string{"x-ratelimit-remaining-requests": "none", "x-ratelimit-reset-requests": "1s"}, 0},
		{"seconds as a number", map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2.5"}, 2500 * time.Millisecond},
		{"a Unix time", map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1740830410"}, 10 * time.Second},
		{"an RFC 3339 time", map[string]string{"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "2025-03-01T12:00:30Z"}, 30 * time.Second},
		{"an HTTP-date", map[string]string{"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "Sat, 01 Mar 2025 12:00:04 GMT"}, 4 * time.Second},
		{"a time past", map[string]string{"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "2025-03-01T11:00:00Z"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if got := rateLimitWait(h, now); got != tt.want {
				t.Errorf("rateLimitWait(%v) = %v, want %v", tt.header, got, tt.want)
			}
		})
	}
}

func TestLoadResult(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	spent := http.Header{"X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"2s"}}
	tests := []struct {
		name     string
		header   http.Header
		f        *failure
		timedOut bool
		want     limit.Result
	}{
		{"an answer", nil, nil, false, limit.Result{Outcome: limit.Succeeded}},
		{"an answer with the rate limit spent", spent, nil, false, limit.Result{Outcome: limit.Succeeded, Pause: 2 * time.Second}},
		{"429", nil, &failure{status: 429}, false, limit.Result{Outcome: limit.Overloaded}},
		{"429 with Retry-After", nil, &failure{status: 429, retryAfter: time.Second, hasRetryAfter: true}, false, limit.Result{Outcome: limit.Overloaded, Pause: time.Second}},
		{"429: the longer of Retry-After and the reset", spent, &failure{status: 429, retryAfter: time.Second, hasRetryAfter: true}, false, limit.Result{Outcome: limit.Overloaded, Pause: 2 * time.Second}},
		{"503 with Retry-After", nil, &failure{status: 503, retryAfter: 3 * time.Second, hasRetryAfter: true}, false, limit.Result{Outcome: limit.Overloaded, Pause: 3 * time.Second}},
		{"504", nil, &failure{status: 504}, false, limit.Result{Outcome: limit.Overloaded}},
		{"an attempt timeout", nil, &failure{}, true, limit.Result{Outcome: limit.Overloaded}},
		{"500 says nothing of the load", nil, &failure{status: 500}, false, limit.Result{}},
		{"502 says nothing of the load", nil, &failure{status: 502}, false, limit.Result{}},
		{"a bad request says nothing of the load", nil, &failure{status: 400}, false, limit.Result{}},
		{"a failed connection says nothing of the load", nil, &failure{}, false, limit.Result{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := loadResult(tt.header, tt.f, tt.timedOut, now); got != tt.want {
				t.Errorf("loadResult = %+v, want %+v", got, tt.want)
			}
		})
	}
}
