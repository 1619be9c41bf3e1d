package api

import (
	"context"
	"fmt"
	"net/http"
	"sync"
)

// healthz answers while the process serves: liveness, nothing more.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

type readiness struct {
	Status string        `json:"status"` // ready or not_ready
	Checks []checkResult `json:"checks"`
}

type checkResult struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok or failed
	Error  string `json:"error,omitempty"`
}

// readyz runs every check at once, each bounded by ReadyTimeout, and
// answers 200 when all pass, 503 naming the ones that failed.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	results := make([]checkResult, len(s.cfg.Readiness))
	var wg sync.WaitGroup
	for i, c := range s.cfg.Readiness {
		wg.Go(func() {
			results[i] = checkResult{Name: c.Name, Status: "ok"}
			if err := s.probe(r.Context(), c); err != nil {
				results[i].Status, results[i].Error = "failed", err.Error()
			}
		})
	}
	wg.Wait()
	body := readiness{Status: "ready", Checks: results}
	status := http.StatusOK
	for _, res := range results {
		if res.Status != "ok" {
			body.Status, status = "not_ready", http.StatusServiceUnavailable
			s.log.Warn("api: not ready", "check", res.Name, "err", res.Error)
		}
	}
	writeJSON(w, status, body)
}

// probe runs one check, turning a panic or an overrun into an error.
func (s *Server) probe(ctx context.Context, c Check) (err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- fmt.Errorf("check panicked: %v", v)
			}
		}()
		done <- c.Probe(ctx)
	}()
	select {
	case err = <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer within %v", s.cfg.ReadyTimeout)
	}
}
