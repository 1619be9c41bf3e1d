// Package reviews keeps what people decided about verdicts: each review of
// a rule of a validation, who made it, when and why, and the verdicts that
// wait for one (the review queue). A review supersedes and never edits: the
// model's verdict stays as it was, every review is kept, and the latest
// review of a rule is its current one. From them come each rule's final
// outcome and the final aggregates (Finals), and the agreement of the model
// with the reviewers (Agreement).
//
// Recording a review is the use case Recorder, whatever transport brings
// it: checked against the validation's verdicts, stored conditionally, then
// published through a Publisher and counted by an Observer, ports it
// declares. Verdicts join the queue through RouteForReview alone.
//
// Two stores implement Store: MemoryStore, per process, and ObjectStore,
// one JSON document per validation in object storage, shared by every
// replica and durable. Both are keyed by (tenant, request id), so that one
// tenant can never reach another's reviews.
package reviews

import (
	"context"
	"errors"
	"slices"
	"time"

	"rulevalidator/engine"
	"rulevalidator/judging"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// Decision is what a reviewer decided about a verdict.
type Decision string

const (
	// Confirm: the model's verdict stands.
	Confirm Decision = "confirm"
	// Override: the reviewer's boolean, score or not-applicable flag
	// replaces the model's.
	Override Decision = "override"
)

// Review is one person's decision about the verdict on one rule of one
// validation.
type Review struct {
	ReviewID  string   `json:"review_id"`
	RequestID string   `json:"request_id"`
	RuleID    string   `json:"rule_id"`
	Decision  Decision `json:"decision"`
	// BooleanOutput, NumericalOutput and NotApplicable are the reviewer's
	// verdict on an override; nil and false on a confirm.
	BooleanOutput   *bool `json:"boolean_output"`
	NumericalOutput *int  `json:"numerical_output"`
	NotApplicable   bool  `json:"not_applicable"`
	// Note says why, in the reviewer's words (untrusted text).
	Note string `json:"note"`
	// PassageIDs are the passages of the validation's material the
	// reviewer relies on.
	PassageIDs []string `json:"passage_ids"`
	// Reviewer is the sub of the reviewer's verified token.
	Reviewer   string    `json:"reviewer"`
	ReviewedAt time.Time `json:"reviewed_at"`
	// RulesetID, RuleType and ModelVerdict are the verdict the review
	// answered, as the service found it, so that agreement and exports
	// need only the reviews.
	RulesetID    string           `json:"ruleset_id"`
	RuleType     verdict.RuleType `json:"rule_type"`
	ModelVerdict ModelVerdict     `json:"model_verdict"`
}

// ModelVerdict is the model's verdict on a rule, as a review found it.
type ModelVerdict struct {
	Outcome         engine.Outcome `json:"outcome"`
	BooleanOutput   *bool          `json:"boolean_output"`
	NumericalOutput *int           `json:"numerical_output"`
	NotApplicable   bool           `json:"not_applicable"`
	Confidence      *float64       `json:"confidence"`
}

// ModelVerdictOf is v's verdict as a review keeps it.
func ModelVerdictOf(v schemas.VerdictEvent) ModelVerdict {
	return ModelVerdict{
		Outcome:       engine.VerdictOutcome(v.RuleType, v.NotApplicable, v.BooleanOutput, v.NumericalOutput),
		BooleanOutput: v.BooleanOutput, NumericalOutput: v.NumericalOutput, NotApplicable: v.NotApplicable,
		Confidence: v.Confidence,
	}
}

// SameAs says whether r and o are one review posted twice: the same
// content from the same reviewer, whenever it was posted.
func (r Review) SameAs(o Review) bool {
	return r.ReviewID == o.ReviewID && r.RequestID == o.RequestID && r.RuleID == o.RuleID &&
		r.Decision == o.Decision && equalPtr(r.BooleanOutput, o.BooleanOutput) &&
		equalPtr(r.NumericalOutput, o.NumericalOutput) && r.NotApplicable == o.NotApplicable &&
		r.Note == o.Note && slices.Equal(r.PassageIDs, o.PassageIDs) && r.Reviewer == o.Reviewer
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Item is a verdict waiting for a review, with what a list of them shows.
type Item struct {
	RequestID      string `json:"request_id"`
	RuleID         string `json:"rule_id"`
	RulesetID      string `json:"ruleset_id"`
	RulesetVersion string `json:"ruleset_version,omitempty"`
	RuleName       string `json:"rule_name,omitempty"`
	// Verdict is the model's verdict in one word: pass, fail, score,
	// not_applicable or no_verdict; NumericalOutput is the score.
	Verdict         string   `json:"verdict"`
	NumericalOutput *int     `json:"numerical_output,omitempty"`
	Confidence      *float64 `json:"confidence"`
	ReviewReasons   []string `json:"review_reasons"`
	// JudgedAt is when the verdict was judged; the queue shows its age.
	JudgedAt time.Time `json:"judged_at"`
}

// ErrConflict: a review id was posted again with another review.
var ErrConflict = errors.New("reviews: the review id is taken by another review")

// Store keeps reviews and the review queue, keyed by (tenant, request id).
// It is safe for concurrent use.
type Store interface {
	// Add records r on the tenant's validation r.RequestID unless the
	// validation has a review with r.ReviewID: that one is returned with
	// created false when it is the same review (SameAs), else an error
	// wrapping ErrConflict.
	Add(ctx context.Context, tenant string, r Review) (_ Review, created bool, _ error)
	// List returns the reviews of the tenant's validation, oldest first;
	// none when it has none.
	List(ctx context.Context, tenant, requestID string) ([]Review, error)
	// Route records the verdicts of the tenant's validation that need
	// review, replacing what was routed for the same rules before.
	Route(ctx context.Context, tenant, requestID string, items []Item) error
	// Pending returns the tenant's routed verdicts that have no review yet,
	// in no particular order (Queue orders and pages them).
	Pending(ctx context.Context, tenant string) ([]Item, error)
	// Reviewed calls fn with every validation of the tenant that has a
	// review, and its reviews, oldest first, until fn returns an error.
	Reviewed(ctx context.Context, tenant string, fn func(requestID string, all []Review) error) error
	// SaveMaterial keeps what the validation judged, for reviewers'
	// passages and exports; Material reads it (found false when none was
	// kept).
	SaveMaterial(ctx context.Context, tenant, requestID string, m Material) error
	Material(ctx context.Context, tenant, requestID string) (_ Material, found bool, _ error)
}

// Material is what a validation judged: its inputs, the documents' text as
// read, and the ruleset it was judged on.
type Material struct {
	Ruleset *engine.Ruleset `json:"ruleset"`
	Inputs  *engine.Inputs  `json:"inputs"`
	// Files are the PDF files as they came, for the pages a reviewer is
	// shown; absent from material kept before them.
	Files []judging.File `json:"files,omitempty"`
}

var (
	_ Store = (*MemoryStore)(nil)
	_ Store = (*ObjectStore)(nil)
)

// validation is everything kept about one validation's reviews: the
// document ObjectStore stores and the entry MemoryStore keeps.
type validation struct {
	TenantID  string   `json:"tenant_id"`
	RequestID string   `json:"request_id"`
	Items     []Item   `json:"items"`
	Reviews   []Review `json:"reviews"`
	// material is MemoryStore's copy of what was judged (ObjectStore keeps
	// it in its own document).
	material *Material
}

// add applies Store.Add's rule to v: the review it holds under r's id, or
// r appended.
func (v *validation) add(r Review) (Review, bool, error) {
	for _, old := range v.Reviews {
		if old.ReviewID == r.ReviewID {
			if old.SameAs(r) {
				return old, false, nil
			}
			return Review{}, false, ErrConflict
		}
	}
	v.Reviews = append(v.Reviews, r)
	return r, true, nil
}

// route replaces the items of the rules items name.
func (v *validation) route(items []Item) {
	for _, it := range items {
		i := slices.IndexFunc(v.Items, func(o Item) bool { return o.RuleID == it.RuleID })
		if i >= 0 {
			v.Items[i] = it
		} else {
			v.Items = append(v.Items, it)
		}
	}
}

// pending lists the items no review has answered.
func (v *validation) pending() []Item {
	var out []Item
	for _, it := range v.Items {
		if !slices.ContainsFunc(v.Reviews, func(r Review) bool { return r.RuleID == it.RuleID }) {
			out = append(out, it)
		}
	}
	return out
}

// Current is the rule's current review, the latest; nil when none.
func Current(all []Review, ruleID string) *Review {
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].RuleID == ruleID {
			r := all[i]
			return &r
		}
	}
	return nil
}

// History is the rule's reviews, oldest first; empty when none.
func History(all []Review, ruleID string) []Review {
	out := []Review{}
	for _, r := range all {
		if r.RuleID == ruleID {
			out = append(out, r)
		}
	}
	return out
}
