package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"rulevalidator/jobs"
	"rulevalidator/reviews"
)

// Route patterns of the review routes.
const (
	RoutePostReview = "POST " + jobs.StatusPath + "{request_id}/reviews"
	RouteQueue      = "GET /v1/reviews"
	RouteAgreement  = "GET /v1/reviews/agreement"
)

// reviewSubmission is a posted review: the fields a client sets.
type reviewSubmission struct {
	ReviewID        string   `json:"review_id"`
	RuleID          string   `json:"rule_id"`
	Decision        string   `json:"decision"`
	BooleanOutput   *bool    `json:"boolean_output"`
	NumericalOutput *int     `json:"numerical_output"`
	NotApplicable   bool     `json:"not_applicable"`
	Note            string   `json:"note"`
	PassageIDs      []string `json:"passage_ids"`
}

// postReview records a person's review of one verdict of the tenant's
// validation through the review use case (reviews.Recorder): 201 with the
// stored review, 200 with it when its id was posted before with the same
// review, 409 when the id holds another, 400 for a review the use case
// refuses, 503 when storage or the broker fails. A review is published only
// once it is stored: when the publish fails the review stays stored and the
// answer is 503, and the client's retry publishes it (see
// reviews.Recorder.Record).
func (s *Server) postReview(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	if s.cfg.ReviewScope != "" && !slices.Contains(p.Scopes, s.cfg.ReviewScope) {
		writeError(w, http.StatusForbidden, CodeForbidden, fmt.Sprintf("reviewing needs a token with the %q scope", s.cfg.ReviewScope))
		return
	}
	if p.Subject == "" {
		writeError(w, http.StatusForbidden, CodeForbidden, "the token names no subject (sub): a review must say who made it")
		return
	}
	job, ok := s.completedJob(w, r, p.Tenant, notReviewable)
	if !ok {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var sub reviewSubmission
	if err := decodeStrict(body, &sub); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "not a review: "+err.Error())
		return
	}
	stored, created, err := s.reviews.Record(r.Context(), job, reviews.Review{
		ReviewID: sub.ReviewID, RuleID: sub.RuleID, Decision: reviews.Decision(sub.Decision),
		BooleanOutput: sub.BooleanOutput, NumericalOutput: sub.NumericalOutput, NotApplicable: sub.NotApplicable,
		Note: sub.Note, PassageIDs: sub.PassageIDs, Reviewer: p.Subject,
	})
	var invalid *reviews.FieldError
	switch {
	case errors.As(err, &invalid):
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "invalid review: "+err.Error())
		return
	case errors.Is(err, reviews.ErrConflict):
		writeError(w, http.StatusConflict, CodeConflict, fmt.Sprintf("review_id %q is taken by another review of this validation; a review is never edited, post a new one to supersede it", sub.ReviewID))
		return
	case errors.Is(err, reviews.ErrNotCompleted):
		writeError(w, http.StatusConflict, CodeConflict, fmt.Sprintf("validation %q is %s: %s", job.RequestID, job.Status, notReviewable))
		return
	case err != nil:
		s.unavailable(w, "recording a review failed", err, p.Tenant, job.RequestID)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, stored)
}

// notReviewable says why a validation not completed cannot be reviewed.
const notReviewable = "only a completed validation's verdicts can be reviewed"

// completedJob reads the tenant's completed job named by the path, answering
// 404 (see lookup) or 409, with why, for one not completed.
func (s *Server) completedJob(w http.ResponseWriter, r *http.Request, tenant, why string) (jobs.Job, bool) {
	job, ok := s.lookup(w, r, tenant, r.PathValue("request_id"))
	if !ok {
		return jobs.Job{}, false
	}
	if job.Status != jobs.Completed || job.Summary == nil {
		writeError(w, http.StatusConflict, CodeConflict, fmt.Sprintf("validation %q is %s: %s", job.RequestID, job.Status, why))
		return jobs.Job{}, false
	}
	return job, true
}

// decodeStrict decodes one JSON object into v, refusing unknown fields and
// naming the field of a value of the wrong type.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return fmt.Errorf("%s: must be %s (got %s)", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
		}
		if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return fmt.Errorf("unknown field %s", msg)
		}
		return fmt.Errorf("the body must be one JSON object: %v", err)
	}
	if dec.More() {
		return errors.New("the body must be one JSON object, and nothing after it")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool", "ptr":
		return "true, false or null where allowed"
	case "int", "int64":
		return "an integer"
	case "slice":
		return "an array of strings"
	}
	return "another type"
}

// unavailable answers 503 for a dependency that failed, logging why.
func (s *Server) unavailable(w http.ResponseWriter, what string, err error, tenant, requestID string) {
	s.log.Warn("api: "+what, "tenant_id", tenant, "request_id", requestID, "err", err)
	w.Header().Set("Retry-After", "5")
	writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "a dependency (storage or broker) is unavailable; try again shortly")
}

// queueItem is an item as the queue answers it, with its age.
type queueItem struct {
	reviews.Item
	AgeSeconds int64 `json:"age_seconds"`
}

// getQueue answers the tenant's verdicts waiting for a review, least
// confident first (see reviews.Queue), filtered by ruleset_id and rule_id,
// paged by limit and cursor.
func (s *Server) getQueue(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	if st := q.Get("status"); st != "" && st != "pending" {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, fmt.Sprintf("status: %q is not pending (the queue holds the verdicts waiting for a review)", st))
		return
	}
	query := reviews.QueueQuery{RulesetID: q.Get("ruleset_id"), RuleID: q.Get("rule_id"), Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > reviews.MaxPageSize {
			writeError(w, http.StatusBadRequest, CodeInvalidRequest, fmt.Sprintf("limit: %q is not a whole number from 1 to %d", l, reviews.MaxPageSize))
			return
		}
		query.Limit = n
	}
	items, err := s.cfg.Reviews.Pending(r.Context(), p.Tenant)
	if err != nil {
		s.unavailable(w, "reading the review queue failed", err, p.Tenant, "")
		return
	}
	page, err := reviews.Queue(items, query)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "cursor: not one this service gave; start again without it")
		return
	}
	now := s.cfg.Now()
	out := struct {
		Items []queueItem `json:"items"`
		Next  *string     `json:"next"`
	}{Items: make([]queueItem, len(page.Items))}
	for i, it := range page.Items {
		out.Items[i] = queueItem{Item: it, AgeSeconds: reviews.Age(it, now)}
	}
	if page.Next != "" {
		out.Next = &page.Next
	}
	writeJSON(w, http.StatusOK, out)
}

// getAgreement answers, per rule, how often the model agreed with the
// tenant's reviewers (reviews.Agreement), optionally of one ruleset.
func (s *Server) getAgreement(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	rulesetID := r.URL.Query().Get("ruleset_id")
	var all [][]reviews.Review
	err := s.cfg.Reviews.Reviewed(r.Context(), p.Tenant, func(_ string, list []reviews.Review) error {
		if rulesetID != "" {
			list = slices.DeleteFunc(slices.Clone(list), func(rv reviews.Review) bool { return rv.RulesetID != rulesetID })
		}
		all = append(all, list)
		return nil
	})
	if err != nil {
		s.unavailable(w, "reading reviews failed", err, p.Tenant, "")
		return
	}
	writeJSON(w, http.StatusOK, struct {
		MinReviews int                     `json:"min_reviews"`
		Rules      []reviews.RuleAgreement `json:"rules"`
	}{reviews.MinAgreementReviews, reviews.Agreement(all)})
}
