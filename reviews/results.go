package reviews

import (
	"context"

	"rulevalidator/judging"
	"rulevalidator/schemas"
)

// ResultStore is the serve pipeline's judging.ResultStore when reviews are
// kept: it keeps what each validation judged and queues its verdicts that
// need review, then stores the result in Results (the job store). Every
// step is idempotent, so the pipeline's retry of a failed store repeats
// them harmlessly.
type ResultStore struct {
	Results judging.ResultStore
	Reviews Store
}

// StoreResult keeps the material and the routed verdicts of a completed
// request, then its result.
func (s ResultStore) StoreResult(ctx context.Context, req *schemas.Request, out judging.Events) error {
	if out.Summary.Status == schemas.StatusCompleted {
		if out.Material != nil {
			if err := s.Reviews.SaveMaterial(ctx, req.TenantID, req.RequestID, Material{Ruleset: out.Ruleset, Inputs: out.Material, Files: out.Files}); err != nil {
				return err
			}
		}
		if err := RouteForReview(ctx, s.Reviews, req.TenantID, req.RequestID, out.Verdicts); err != nil {
			return err
		}
	}
	return s.Results.StoreResult(ctx, req, out)
}
