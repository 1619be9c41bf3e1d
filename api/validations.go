package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"rulevalidator/docread"
	"rulevalidator/internal/ids"
	"rulevalidator/jobs"
	"rulevalidator/objstore"
	"rulevalidator/request"
	"rulevalidator/schemas"
)

// requestIDPattern is what a client-chosen request_id may look like: it
// becomes a Kafka key, an event id prefix and a URL path segment.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:~-]{0,127}$`)

// submitValidation accepts a request in its JSON form (request.FromMap:
// the specification's input shapes and this service's own keys). The tenant
// is the token's; request_id is optional; submitted_at is set here. It
// answers 202 once the request is queued; a request id already known for the
// tenant answers 202 with that job and queues nothing.
func (s *Server) submitValidation(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	if s.cfg.Submitter == nil {
		writeError(w, http.StatusNotFound, CodeNotFound, "no such route")
		return
	}
	// Before the body is read: a tenant over its rate costs little.
	if !s.admitted(w, p.Tenant) {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || trimmed[0] != '{' {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "not a request in JSON form: the body must be a JSON object")
		return
	}
	m, err := request.DecodeObject(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "not a request in JSON form: "+strings.TrimPrefix(err.Error(), "inputs: "))
		return
	}
	req, readErr := request.FromMap(m)
	if req.TenantID != "" && req.TenantID != p.Tenant {
		writeError(w, http.StatusForbidden, CodeForbidden, fmt.Sprintf("tenant_id %q is not the tenant of your token; leave tenant_id out, the token's tenant is used", req.TenantID))
		return
	}
	req.TenantID = p.Tenant
	s.submit(w, r, req, readErr, s.accepted)
}

// readBody reads the request body, answering 413 or 400 itself.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("the request body is over the limit of %d bytes", tooLarge.Limit))
			return nil, false
		}
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "reading the request body: "+err.Error())
		return nil, false
	}
	return body, true
}

// submit checks a request whose tenant is settled, records its job and
// queues it; every way into the service goes through here.
// readErr is what reading the request found wrong, reported with the rest;
// respond answers 202 with the job.
func (s *Server) submit(w http.ResponseWriter, r *http.Request, req *schemas.Request, readErr error, respond func(http.ResponseWriter, jobs.Job)) {
	var idErr error
	if req.RequestID == "" {
		req.RequestID = ids.NewRequestID()
	} else if !requestIDPattern.MatchString(req.RequestID) {
		idErr = fmt.Errorf("request_id %q: want 1 to 128 characters of A-Z a-z 0-9 . _ : ~ -, starting with a letter or digit", req.RequestID)
	}
	req.SubmittedAt = s.cfg.Now().UTC().Truncate(time.Millisecond)
	if err := request.JoinProblems(readErr, idErr, req.Validate(), inlineRulesetProblems(req)); err != nil {
		writeInvalid(w, err)
		return
	}
	if !s.claimable(w, req) || !s.readable(w, r.Context(), req) {
		return
	}
	callbackURL := ""
	if cb := req.Options.CallbackURL; cb != nil {
		if msg := s.checkCallback(*cb); msg != "" {
			writeError(w, http.StatusBadRequest, CodeInvalidRequest, "options.callback_url: "+msg)
			return
		}
		callbackURL = *cb
	}

	// The job is recorded before the request is published, so that a
	// replica answering GET knows it from the moment POST answers.
	job, created, err := s.cfg.Jobs.Create(r.Context(), jobs.Job{
		TenantID:    req.TenantID,
		RequestID:   req.RequestID,
		Status:      jobs.Pending,
		SubmittedAt: req.SubmittedAt,
		CallbackURL: callbackURL,
	})
	if err != nil {
		s.log.WarnContext(r.Context(), "api: recording a validation's job failed", "tenant_id", req.TenantID, "request_id", req.RequestID, "err", err)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "job status storage is unavailable; try again shortly")
		return
	}
	if !created {
		s.log.InfoContext(r.Context(), "api: request id submitted again; answering with the existing job", "tenant_id", job.TenantID, "request_id", job.RequestID, "status", job.Status)
		respond(w, job)
		return
	}
	traceparent, tracestate := traceContext(r.Header)
	if err := s.cfg.Submitter.Submit(r.Context(), Submission{Request: req, Traceparent: traceparent, Tracestate: tracestate}); err != nil {
		s.forget(r.Context(), req)
		if errors.Is(err, ErrRequestTooLarge) {
			// The request itself is too large for the requests topic: sending it
			// again will not help, its documents by uri will.
			writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, "the request is larger than the requests topic takes as one message; send its documents by uri (claim checks) instead of inline")
			return
		}
		s.log.WarnContext(r.Context(), "api: submitting a validation failed", "tenant_id", req.TenantID, "request_id", req.RequestID, "err", err)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "the request could not be queued; try again shortly")
		return
	}
	// The request is queued whatever happens here: a job left unmarked only
	// lets its id be submitted again after a while.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.RequestTimeout)
	defer cancel()
	if err := s.cfg.Jobs.Queued(ctx, job); err != nil {
		s.log.WarnContext(ctx, "api: the job could not be marked queued", "tenant_id", req.TenantID, "request_id", req.RequestID, "err", err)
	}
	s.log.InfoContext(ctx, "api: validation accepted", "tenant_id", req.TenantID, "request_id", req.RequestID, "route", r.Pattern)
	respond(w, job)
}

// readable reads the documents req carries as files, answering 422 naming
// the first that cannot be read, as the pipeline would dead-letter it
// (unreadable_document). The request is queued with the files as they came:
// the pipeline reads them again, so what is judged is what was sent.
func (s *Server) readable(w http.ResponseWriter, ctx context.Context, req *schemas.Request) bool {
	if s.cfg.Documents == nil {
		return true
	}
	for _, group := range []struct {
		field string
		docs  []schemas.Document
	}{{"primary_docs", req.PrimaryDocs}, {"auxiliary_docs", req.AuxiliaryDocs}} {
		for i, d := range group.docs {
			if d.Data == nil {
				continue
			}
			ct := ""
			if d.ContentType != nil {
				ct = *d.ContentType
			}
			_, err := s.cfg.Documents.Read(ctx, docread.Source{Name: d.Name, Data: d.Data, MediaType: ct})
			var de *docread.Error
			switch {
			case errors.As(err, &de):
				writeError(w, http.StatusUnprocessableEntity, CodeUnreadable, fmt.Sprintf("%s[%d] (%q): %v", group.field, i, d.Name, err))
				return false
			case errors.Is(err, docread.ErrEngineStarting):
				// The service has just started; the document is not at fault.
				w.Header().Set("Retry-After", "10")
				writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "the PDF engine is still starting; try again shortly")
				return false
			case errors.Is(err, context.DeadlineExceeded):
				writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("%s[%d] (%q): the document could not be read within the request's time; send it by uri, and the service reads it as it judges", group.field, i, d.Name))
				return false
			case err != nil:
				s.log.WarnContext(ctx, "api: reading a document failed", "tenant_id", req.TenantID, "request_id", req.RequestID, "document", d.Name, "err", err)
				w.Header().Set("Retry-After", "5")
				writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "the document reader is unavailable; try again shortly")
				return false
			}
		}
	}
	return true
}

// claimable checks that every document req gives by uri names an object its
// tenant may read, answering 403 naming the first that does not. Nothing is
// read: the pipeline reads the object, and checks again.
func (s *Server) claimable(w http.ResponseWriter, req *schemas.Request) bool {
	if s.cfg.Claims == nil {
		return true
	}
	for label, d := range req.ClaimChecks() {
		if err := s.cfg.Claims.CheckClaim(req.TenantID, *d.URI); err != nil {
			var op *objstore.OpError
			if errors.As(err, &op) {
				err = op.Err // the refusal itself, without the store's own prefix
			}
			writeError(w, http.StatusForbidden, CodeForbidden, fmt.Sprintf("%s: uri %s: %v", label, *d.URI, err))
			return false
		}
	}
	return true
}

// forget deletes the job of a request that was not queued, so that its id
// may be submitted again; the deletion outlives the HTTP request's end.
func (s *Server) forget(ctx context.Context, req *schemas.Request) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RequestTimeout)
	defer cancel()
	if err := s.cfg.Jobs.Delete(ctx, req.TenantID, req.RequestID); err != nil {
		s.log.ErrorContext(ctx, "api: the job of a request that was not queued could not be deleted; its request id answers as pending until the job is removed",
			"tenant_id", req.TenantID, "request_id", req.RequestID, "err", err)
	}
}

func (s *Server) accepted(w http.ResponseWriter, job jobs.Job) {
	w.Header().Set("Location", jobs.StatusURL(job.RequestID))
	writeJSON(w, http.StatusAccepted, jobs.NewBody(job))
}

// checkCallback says what is wrong with a callback URL, "" when nothing.
func (s *Server) checkCallback(raw string) string {
	switch {
	case raw == "":
		return "is empty; leave it out for no callback"
	case s.cfg.Callbacks == nil:
		return "callbacks are not enabled on this server"
	}
	if err := s.cfg.Callbacks.CheckURL(raw); err != nil {
		return err.Error()
	}
	return ""
}

// inlineRulesetProblems refuses an inline ruleset that would not load (an
// expression that does not compile, a nested ruleset too deep) here, with
// its problems, rather than after it was queued.
func inlineRulesetProblems(req *schemas.Request) error {
	_, err := request.InlineRuleset(req)
	if err == nil {
		return nil
	}
	err = errors.Unwrap(err) // the ruleset's problems, each named inline_ruleset below
	var out schemas.RequestError
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			out.Problems = append(out.Problems, "inline_ruleset: "+e.Error())
		}
	} else {
		out.Problems = append(out.Problems, "inline_ruleset: "+err.Error())
	}
	return &out
}

// writeInvalid answers 400 for a request's problems, each listed in details.
func writeInvalid(w http.ResponseWriter, err error) {
	var re *schemas.RequestError
	if errors.As(err, &re) {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, err.Error(), re.Problems...)
		return
	}
	writeError(w, http.StatusBadRequest, CodeInvalidRequest, err.Error())
}

// getValidation answers a validation of the token's tenant; another
// tenant's is answered as a missing one.
func (s *Server) getValidation(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	job, ok := s.lookup(w, r, p.Tenant, r.PathValue("request_id"))
	if !ok {
		return
	}
	if s.cfg.Reviews == nil {
		writeJSON(w, http.StatusOK, jobs.NewBody(job))
		return
	}
	body, err := s.reviewedStatus(r.Context(), job)
	if err != nil {
		s.unavailable(w, "reading reviews failed", err, p.Tenant, job.RequestID)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// lookup reads the tenant's job, answering 404 (missing, or another
// tenant's) or 503 (storage unavailable) itself.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, tenant, requestID string) (jobs.Job, bool) {
	job, ok, err := s.cfg.Jobs.Get(r.Context(), tenant, requestID)
	switch {
	case err != nil:
		s.log.WarnContext(r.Context(), "api: reading a job failed", "tenant_id", tenant, "request_id", requestID, "err", err)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "job status storage is unavailable; try again shortly")
		return jobs.Job{}, false
	case !ok:
		writeError(w, http.StatusNotFound, CodeNotFound, msgValidationNotFound)
		return jobs.Job{}, false
	}
	return job, true
}

// traceContext is the trace context the request carries on from the HTTP
// request h: a well-formed traceparent of h and its tracestate, up to 512
// bytes; none for a malformed traceparent.
func traceContext(h http.Header) (traceparent, tracestate string) {
	tp := h.Get("traceparent")
	if ids.CheckTraceparent(tp) != nil {
		return "", ""
	}
	ts := h.Get("tracestate")
	if len(ts) > 512 {
		ts = ""
	}
	return tp, ts
}
