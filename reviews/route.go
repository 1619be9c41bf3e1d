package reviews

import (
	"context"

	"rulevalidator/schemas"
)

// RouteForReview queues for review those of verdicts, all of the tenant's
// validation requestID, that need one (NeedsReview), replacing what was
// queued for their rules before: the one way verdicts join the review
// queue, whether they come with a validation's stored result (ResultStore)
// or one by one as the job feed reads them. Routing a verdict again is
// harmless.
func RouteForReview(ctx context.Context, store Store, tenant, requestID string, verdicts []schemas.VerdictEvent) error {
	var items []Item
	for _, v := range verdicts {
		if v.NeedsReview {
			items = append(items, ItemOf(v))
		}
	}
	return store.Route(ctx, tenant, requestID, items)
}
