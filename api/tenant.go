package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"rulevalidator/auth"
)

// Internal callers name the tenant they act for: in the tenant_id query
// parameter of the internal routes that read (queryTenant), in the body of
// an execution request. Both are checked by checkTenant.

// checkTenant refuses tenant ids an internal caller may not name: what the
// token verifier refuses in a tenant claim (auth.CheckTenant), and ids
// holding a path separator or "..".
func checkTenant(t string) error {
	if err := auth.CheckTenant(t); err != nil {
		return err
	}
	if t == "." || strings.Contains(t, "..") || strings.ContainsAny(t, `/\`) {
		return errors.New(`holds "/", "\" or ".."`)
	}
	return nil
}

// queryTenant is the tenant of the tenant_id query parameter, given exactly
// once and accepted by checkTenant; it answers 400 itself otherwise.
func queryTenant(w http.ResponseWriter, r *http.Request) (string, bool) {
	values := r.URL.Query()["tenant_id"]
	if len(values) != 1 {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, fmt.Sprintf("give the tenant_id query parameter exactly once (got it %d times)", len(values)))
		return "", false
	}
	if err := checkTenant(values[0]); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "tenant_id "+err.Error())
		return "", false
	}
	return values[0], true
}

// internalTenant is the preamble of every internal read route: 404 when
// internal routes are off, the internal caller's credential checked, then
// the tenant_id query parameter. It answers the error itself and reports
// false then.
func (s *Server) internalTenant(w http.ResponseWriter, r *http.Request) (string, bool) {
	if s.cfg.Internal == nil {
		writeError(w, http.StatusNotFound, CodeNotFound, "no such route")
		return "", false
	}
	if !s.internalCaller(w, r) {
		return "", false
	}
	return queryTenant(w, r)
}
