package reviews

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"rulevalidator/engine"
	"rulevalidator/jobs"
	"rulevalidator/schemas"
)

// Publisher publishes recorded reviews, each as the reviews topic's event
// (a *producer.ReviewWriter), returning once the event is acknowledged.
type Publisher interface {
	PublishReview(ctx context.Context, ev *schemas.ReviewEvent) error
}

// Observer is told of each review recorded for the first time (a
// *metrics.Metrics counts them).
type Observer interface {
	ObserveReview(ruleType, decision string, agreed bool)
}

// ErrNotCompleted: the validation is not completed, so none of its verdicts
// can be reviewed yet.
var ErrNotCompleted = errors.New("reviews: only a completed validation's verdicts can be reviewed")

// Recorder records people's reviews of verdicts: the use case behind
// posting a review, whatever transport it comes by. It is safe for
// concurrent use.
type Recorder struct {
	// Store keeps the reviews. Its conditional Add decides between a new
	// review, the same one posted again and another one under a taken id.
	// Required.
	Store Store
	// Publisher publishes each review once it is stored; nil publishes
	// none.
	Publisher Publisher
	// Observer is told of each review recorded for the first time;
	// optional.
	Observer Observer
	// Now is the clock that dates reviews (default time.Now).
	Now func() time.Time
}

// Record records r, a person's review of one verdict of job, the tenant's
// validation (job.TenantID), and returns the review stored under r's id,
// with created false when that id was posted before with the same review
// (SameAs). r holds what the reviewer gave (ReviewID, RuleID, Decision,
// BooleanOutput, NumericalOutput, NotApplicable, Note, PassageIDs) and who
// the reviewer is (Reviewer); Record sets the rest from the verdict reviewed
// and the clock.
//
// In order:
//   - the validation must be completed (else ErrNotCompleted);
//   - r is checked against the verdict of its rule and the passages of the
//     validation's material (else a *FieldError saying what is wrong);
//   - the store adds it conditionally (an error wrapping ErrConflict when
//     the id holds another review);
//   - a review new to the store is told to the Observer;
//   - the stored review, not the posted one, is published.
//
// So a refused review is never published, and nothing is published before
// it is stored. A failed publish is an error, with the review left stored:
// the same review posted again finds it stored and publishes it then, as
// the same event (its event id and reviewed_at are the first post's), which
// consumers de-duplicate on. Nothing stored goes unpublished, though it may
// be published more than once. Any other error is the store's or the
// publisher's, not the review's.
func (rc *Recorder) Record(ctx context.Context, job jobs.Job, r Review) (_ Review, created bool, _ error) {
	if job.Status != jobs.Completed || job.Summary == nil {
		return Review{}, false, ErrNotCompleted
	}
	i := slices.IndexFunc(job.Verdicts, func(v schemas.VerdictEvent) bool { return v.RuleID == r.RuleID })
	if i < 0 {
		if r.RuleID == "" {
			return Review{}, false, fieldErr("rule_id", "missing")
		}
		return Review{}, false, fieldErr("rule_id", "validation %q has no rule %q", job.RequestID, r.RuleID)
	}
	v := job.Verdicts[i]
	now := time.Now
	if rc.Now != nil {
		now = rc.Now
	}
	r.RequestID, r.ReviewedAt = job.RequestID, now().UTC()
	r.RulesetID, r.RuleType, r.ModelVerdict = v.RulesetID, v.RuleType, ModelVerdictOf(v)
	known, err := rc.passages(ctx, job)
	if err != nil {
		return Review{}, false, err
	}
	if err := Check(r, v, known); err != nil {
		return Review{}, false, err
	}
	stored, created, err := rc.Store.Add(ctx, job.TenantID, r)
	if err != nil {
		return Review{}, false, err
	}
	if created && rc.Observer != nil {
		rc.Observer.ObserveReview(string(v.RuleType), string(stored.Decision), Agrees(stored))
	}
	if rc.Publisher != nil {
		if err := rc.Publisher.PublishReview(ctx, eventOf(job.TenantID, stored, v)); err != nil {
			return Review{}, false, fmt.Errorf("reviews: publishing stored review %q of validation %q (a retry of the post publishes it): %w", stored.ReviewID, job.RequestID, err)
		}
	}
	return stored, created, nil
}

// passages says which passage ids a reviewer may cite: those of the
// material kept with the validation, or, where none was kept (job status in
// memory), those its verdicts cite.
func (rc *Recorder) passages(ctx context.Context, job jobs.Job) (func(string) bool, error) {
	ids := map[string]bool{}
	m, found, err := rc.Store.Material(ctx, job.TenantID, job.RequestID)
	if err != nil {
		return nil, err
	}
	if found {
		for _, p := range engine.Passages(m.Inputs) {
			ids[p.ID] = true
		}
	} else {
		for _, v := range job.Verdicts {
			for _, e := range v.Evidences {
				if e.PassageID != "" {
					ids[e.PassageID] = true
				}
			}
		}
	}
	return func(id string) bool { return ids[id] }, nil
}

// eventOf is the reviews topic's event for rev, the tenant's review of
// verdict v.
func eventOf(tenant string, rev Review, v schemas.VerdictEvent) *schemas.ReviewEvent {
	final := FinalOf(v, &rev)
	return &schemas.ReviewEvent{
		EventID: schemas.ReviewEventID(tenant, rev.RequestID, rev.RuleID, rev.ReviewID), ReviewID: rev.ReviewID,
		RequestID: rev.RequestID, TenantID: tenant, RulesetID: v.RulesetID, RuleID: rev.RuleID, RuleType: v.RuleType,
		Decision: string(rev.Decision), BooleanOutput: rev.BooleanOutput, NumericalOutput: rev.NumericalOutput,
		NotApplicable: rev.NotApplicable, Note: rev.Note, PassageIDs: rev.PassageIDs, Reviewer: rev.Reviewer,
		ReviewedAt: rev.ReviewedAt, ModelOutcome: string(rev.ModelVerdict.Outcome),
		ModelBooleanOutput: v.BooleanOutput, ModelNumericalOutput: v.NumericalOutput, ModelConfidence: v.Confidence,
		FinalOutcome: string(final.Outcome),
	}
}
