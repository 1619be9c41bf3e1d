package usage

import (
	"context"
	"strconv"
	"time"

	"rulevalidator/judging"
	"rulevalidator/schemas"
)

// ResultStore is the serve pipeline's judging.ResultStore when usage is kept: it adds each
// judged request's usage to its tenant's window (Store.Record), then stores the result in
// Results. Both steps are idempotent, so the pipeline's retry of a failed store repeats them
// harmlessly: a request is counted once.
//
// A request counts when it was judged: completed, or failed after calling the model (its
// tokens were spent). A request that failed before any model call (refused by its budget,
// undecodable, an unknown ruleset) is not counted, and what it reserved of its budget is
// let go (Admission.Release). A replay of a dead-lettered request (judging.Replay) counts
// apart from the attempt that failed: its tokens are spent again.
type ResultStore struct {
	Results judging.ResultStore
	Usage   *Store
	// Budgets, when set, admitted the requests under their tenants' budgets.
	Budgets *Admission
	// Now is the clock for a summary without a completion time (tests).
	Now func() time.Time
}

// StoreResult records the request's usage, then stores its result.
func (s ResultStore) StoreResult(ctx context.Context, req *schemas.Request, out judging.Events) error {
	if sum := out.Summary; sum.Status == schemas.StatusCompleted || sum.Usage.LLMCalls > 0 {
		at := sum.CompletedAt
		if at.IsZero() {
			now := time.Now
			if s.Now != nil {
				now = s.Now
			}
			at = now()
		}
		if err := s.Usage.Record(ctx, req.TenantID, countedID(ctx, req.RequestID), sum.Model, at, FromUsage(sum.Usage)); err != nil {
			return err
		}
	} else if s.Budgets != nil {
		if err := s.Budgets.Release(ctx, req.TenantID, req.RequestID); err != nil {
			return err
		}
	}
	if s.Results == nil {
		return nil
	}
	return s.Results.StoreResult(ctx, req, out)
}

// countedID is what a request is counted once under: its id, and for a replay of a
// dead-lettered request the replay's count too.
func countedID(ctx context.Context, requestID string) string {
	if n := judging.Replay(ctx); n > 0 {
		return requestID + "#replay-" + strconv.Itoa(n)
	}
	return requestID
}
