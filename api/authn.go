package api

import (
	"errors"
	"net/http"

	"rulevalidator/auth"
)

// principal verifies the request's bearer JWT, answering 401 itself when
// it is missing or refused. Why it was refused is logged, never told.
func (s *Server) principal(w http.ResponseWriter, r *http.Request) (auth.Principal, bool) {
	token, err := auth.FromRequest(r)
	if err != nil {
		s.refused(r, err)
		writeUnauthorized(w, !errors.Is(err, auth.ErrNoToken))
		return auth.Principal{}, false
	}
	p, err := s.cfg.Verifier.Verify(r.Context(), token)
	if err == nil && p.Tenant == "" {
		err = errors.New("the verified token names no tenant")
	}
	if err != nil {
		s.refused(r, err)
		writeUnauthorized(w, true)
		return auth.Principal{}, false
	}
	return p, true
}

// internalCaller checks the internal callers' token, answering 401 itself.
// A public JWT is not the internal token and is refused like any other.
func (s *Server) internalCaller(w http.ResponseWriter, r *http.Request) bool {
	token, err := auth.FromRequest(r)
	if err == nil {
		err = s.cfg.Internal.Verify(token)
	}
	if err != nil {
		s.refused(r, err)
		writeUnauthorized(w, !errors.Is(err, auth.ErrNoToken))
		return false
	}
	return true
}

func (s *Server) refused(r *http.Request, err error) {
	s.log.Info("api: credentials refused", "method", r.Method, "route", r.Pattern, "remote", r.RemoteAddr, "reason", err)
}
