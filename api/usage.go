package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"rulevalidator/usage"
)

// getUsage serves the token's tenant's usage by hour, GET /v1/usage?from=…&to=… (RFC 3339):
// the hourly windows (UTC) from the hour of from up to to, each with its tokens in and out,
// model calls and requests judged (and its cost with a price table), and their total. The
// range is at most usage.MaxRange (31 days).
func (s *Server) getUsage(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var problems []string
	times := map[string]time.Time{}
	for _, name := range []string{"from", "to"} {
		v := q.Get(name)
		if v == "" {
			problems = append(problems, fmt.Sprintf("%s is required (an RFC 3339 time, such as 2026-03-04T00:00:00Z)", name))
			continue
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %q is not an RFC 3339 time (such as 2026-03-04T00:00:00Z)", name, v))
			continue
		}
		times[name] = t
	}
	if len(problems) > 0 {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, problems[0], problems...)
		return
	}
	report, err := s.cfg.Usage.Hours(r.Context(), p.Tenant, times["from"], times["to"])
	switch {
	case errors.Is(err, usage.ErrRange):
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, err.Error())
		return
	case err != nil:
		s.log.Warn("api: usage could not be read", "tenant_id", p.Tenant, "err", err)
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "usage storage is unavailable; try again shortly")
		return
	}
	writeJSON(w, http.StatusOK, report)
}
