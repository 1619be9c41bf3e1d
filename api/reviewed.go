package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"rulevalidator/engine"
	"rulevalidator/jobs"
	"rulevalidator/report"
	"rulevalidator/reviews"
)

// reviewedBody is a validation's status with its reviews: each verdict as
// the model gave it, with its current review, its review history and its
// final outcome, and the summary with the aggregates of the final outcomes
// beside the model's.
type reviewedBody struct {
	jobs.Body
	Result *reviewedResult `json:"result"`
}

type reviewedResult struct {
	Summary  json.RawMessage   `json:"summary"`
	Verdicts []json.RawMessage `json:"verdicts"`
}

// reviewedStatus is job's status body with its reviews.
func (s *Server) reviewedStatus(ctx context.Context, job jobs.Job) (any, error) {
	body := jobs.NewBody(job)
	if body.Result == nil {
		return body, nil
	}
	all, err := s.cfg.Reviews.List(ctx, job.TenantID, job.RequestID)
	if err != nil {
		return nil, err
	}
	summary, err := withFields(body.Result.Summary, field{"final_aggregates", reviews.FinalAggregates(body.Result.Summary, body.Result.Verdicts, all)})
	if err != nil {
		return nil, err
	}
	out := reviewedBody{Body: body, Result: &reviewedResult{Summary: summary, Verdicts: make([]json.RawMessage, len(body.Result.Verdicts))}}
	for i, v := range body.Result.Verdicts {
		current := reviews.Current(all, v.RuleID)
		if out.Result.Verdicts[i], err = withFields(v,
			field{"review", current},
			field{"review_history", reviews.History(all, v.RuleID)},
			field{"final", reviews.FinalOf(v, current)}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type field struct {
	name  string
	value any
}

// withFields is v's JSON object with fields added at its end, keeping the
// order v writes its own (events write theirs in Avro order).
func withFields(v any, fields ...field) (json.RawMessage, error) {
	obj, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	obj = bytes.TrimSpace(obj)
	if len(obj) < 2 || obj[len(obj)-1] != '}' {
		return nil, fmt.Errorf("api: %T is not written as a JSON object", v)
	}
	out := bytes.Clone(obj[:len(obj)-1])
	for _, f := range fields {
		val, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = fmt.Appendf(out, "%q:", f.name)
		out = append(out, val...)
	}
	return append(out, '}'), nil
}

// RouteReviewedReport is the validation's report with the reviewers'
// columns, built on request from its status and reviews.
const RouteReviewedReport = "GET " + jobs.StatusPath + "{request_id}/report"

// getReviewedReport answers the workbook of a completed validation with
// each rule's current review and final outcome beside the model's verdict.
func (s *Server) getReviewedReport(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	job, ok := s.completedJob(w, r, p.Tenant, "only a completed validation has a report")
	if !ok {
		return
	}
	all, err := s.cfg.Reviews.List(r.Context(), p.Tenant, job.RequestID)
	if err != nil {
		s.unavailable(w, "reading reviews failed", err, p.Tenant, job.RequestID)
		return
	}
	meta := report.Meta{RequestID: job.RequestID, TenantID: p.Tenant, GeneratedAt: s.cfg.Now().UTC(), Reviews: map[string]report.Review{}}
	for _, v := range job.Verdicts {
		cur := reviews.Current(all, v.RuleID)
		if cur == nil {
			continue
		}
		final := reviews.FinalOf(v, cur)
		meta.Reviews[v.RuleID] = report.Review{Decision: string(cur.Decision), Reviewer: cur.Reviewer, ReviewedAt: cur.ReviewedAt,
			Note: cur.Note, Final: outcomeWord(final)}
	}
	body, err := report.Build(meta, nil, reviews.EngineResult(*job.Summary, job.Verdicts))
	if err != nil {
		s.log.Error("api: building a reviewed report", "tenant_id", p.Tenant, "request_id", job.RequestID, "err", err)
		writeError(w, http.StatusInternalServerError, CodeInternal, "internal error")
		return
	}
	h := w.Header()
	h.Set("Content-Type", report.MIMEType)
	h.Set("Content-Disposition", contentDisposition(report.FileName(meta)))
	h.Set("Cache-Control", "private, no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// outcomeWord is a final outcome in one word, a score as its number.
func outcomeWord(f reviews.Final) string {
	if f.Outcome == engine.OutcomeScore && f.NumericalOutput != nil {
		return strconv.Itoa(*f.NumericalOutput)
	}
	return string(f.Outcome)
}
