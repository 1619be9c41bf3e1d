package api

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// admitted takes one submission of tenant from the rate limit, answering 429 rate_limited
// itself, with Retry-After in whole seconds rounded up, when the tenant is over it.
func (s *Server) admitted(w http.ResponseWriter, tenant string) bool {
	if s.cfg.RateLimit == nil {
		return true
	}
	wait, err := s.cfg.RateLimit.Admit(tenant)
	if err == nil {
		return true
	}
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
	writeError(w, http.StatusTooManyRequests, CodeRateLimited, err.Error())
	return false
}

// retryAfterSeconds is a wait as Retry-After gives it: whole seconds, rounded up, at least 1.
func retryAfterSeconds(wait time.Duration) int {
	return max(int(math.Ceil(wait.Seconds())), 1)
}
