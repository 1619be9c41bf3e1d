// Package jobs keeps the status of validations: where a request stands
// (pending, running, delayed, completed, failed) and, once done, its summary and
// verdicts, keyed by (tenant, request id) so that one tenant can never
// address another's job.
//
// Two stores implement Store. MemoryStore keeps recent jobs in this process,
// filled from the summary and verdict topics by a Feed. ObjectStore keeps
// one JSON document per job in object storage, shared by every replica and
// durable; the serve pipeline writes the final one (StoreResult, its
// judging.ResultStore). Body is the JSON form of a job, as the API answers
// it and as callbacks carry it (CallbackPayloads, the pipeline's
// CallbackPayload).
package jobs

import (
	"context"
	"time"

	"rulevalidator/judging"
	"rulevalidator/schemas"
)

// Status is where a validation stands.
type Status string

const (
	// Pending: accepted, no result or event seen yet.
	Pending Status = "pending"
	// Running: some of its events have arrived (MemoryStore).
	Running Status = "running"
	// Delayed: its tenant is over a token budget with on_exceed: delay; it waits for the
	// window to allow it (ObjectStore).
	Delayed Status = "delayed"
	// Completed: the summary and every verdict are in.
	Completed Status = "completed"
	// Failed: the request could not be judged; the summary says why.
	Failed Status = "failed"
)

// Job is one validation as the API tracks it.
type Job struct {
	TenantID  string
	RequestID string
	Status    Status
	// SubmittedAt is zero for a job first seen through its events (submitted
	// elsewhere).
	SubmittedAt time.Time
	// CallbackURL is the request's options.callback_url, "" when none.
	CallbackURL string
	// Delay says, for a Delayed job, until when and why.
	Delay *Delay
	// Summary is set once the summary is known.
	Summary *schemas.SummaryEvent
	// Verdicts are in rule order, de-duplicated by event id.
	Verdicts []schemas.VerdictEvent
	// version is the stored document's ETag as ObjectStore.Create wrote it.
	version string
}

// Delay is why a job waits, and until when.
type Delay struct {
	Until  time.Time `json:"until"`
	Reason string    `json:"reason"`
}

// Done reports whether the job has its final result.
func (j Job) Done() bool { return j.Status == Completed || j.Status == Failed }

// Store keeps the status of validations, keyed by (tenant, request id): a
// *MemoryStore or an *ObjectStore. It is safe for concurrent use.
type Store interface {
	// Create records job unless the tenant has a job with its request id,
	// which is returned instead with created false: submitting a request id
	// twice does not run it twice.
	Create(ctx context.Context, job Job) (_ Job, created bool, _ error)
	// Get returns the tenant's job; ok is false when there is none.
	Get(ctx context.Context, tenant, requestID string) (_ Job, ok bool, _ error)
	// Queued records that the request of job, as Create returned it, is
	// acknowledged by the broker: a pending job never marked queued may be
	// submitted again once its submission must have ended.
	Queued(ctx context.Context, job Job) error
	// Delete forgets a job whose submission failed, so that it may be
	// submitted again.
	Delete(ctx context.Context, tenant, requestID string) error
}

var (
	_ Store = (*MemoryStore)(nil)
	_ Store = (*ObjectStore)(nil)
)

// Finished is the job of a request with its outcome, as the serve pipeline
// leaves it: made from the request alone (its submitted_at and callback URL
// are the ones the API recorded).
func Finished(req *schemas.Request, out judging.Events) Job {
	job := Job{TenantID: req.TenantID, RequestID: req.RequestID, Status: Completed, SubmittedAt: req.SubmittedAt}
	if cb := req.Options.CallbackURL; cb != nil {
		job.CallbackURL = *cb
	}
	if out.Summary.Status == schemas.StatusFailed {
		job.Status = Failed
	}
	summary := out.Summary
	job.Summary, job.Verdicts = &summary, out.Verdicts
	return job
}
