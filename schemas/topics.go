package schemas

// The default names of the service's topics, declared once: every setting,
// writer and reader defaults to these.
const (
	TopicRequests   = "rulevalidator.requests"
	TopicVerdicts   = "rulevalidator.verdicts"
	TopicSummaries  = "rulevalidator.summaries"
	TopicDeadLetter = "rulevalidator.deadletter"
	TopicCallbacks  = "rulevalidator.callbacks"
	TopicReviews    = "rulevalidator.reviews"
	TopicRulesets   = "rulevalidator.rulesets"
	// TopicReplays is compacted: one record per dead letter replayed.
	TopicReplays = "rulevalidator.replays"
)
