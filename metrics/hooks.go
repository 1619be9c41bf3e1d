package metrics

import (
	"context"
	"strconv"
	"time"

	"rulevalidator/callback"
	"rulevalidator/consumer"
	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/pipeline"
	"rulevalidator/verdict"
)

// EngineHooks returns hooks that measure the engine's model calls, corrective
// re-asks, evidence anchoring and planned calls.
func (m *Metrics) EngineHooks() engine.Hooks {
	return engine.Hooks{
		LLMCall:      m.observeLLMCall,
		OutputRetry:  m.observeOutputRetry,
		Anchor:       m.observeAnchor,
		PlannedCalls: m.observePlannedCalls,
		CacheLookup: func(outcome string, rules int) {
			if rules > 0 {
				m.cacheLookups.WithLabelValues(cacheOutcomes.bound(outcome)).Add(float64(rules))
			}
		},
		CacheTokensSaved: func(model string, tokens int) {
			if tokens > 0 {
				m.cacheSaved.WithLabelValues(m.models.label(model)).Add(float64(tokens))
			}
		},
		CacheStoreFailed: m.cacheFailures.Inc,
		RulesDecided: func(how string, rules int) {
			if rules > 0 && (how == engine.DecidedFiltered || how == engine.DecidedChecked) {
				m.rulesDecided.WithLabelValues(how).Add(float64(rules))
			}
		},
	}
}

// observePlannedCalls counts a request's planned calls: whole when the
// request fit one call, split when it was planned as several.
func (m *Metrics) observePlannedCalls(model string, calls int) {
	if calls <= 0 {
		return
	}
	plan := "whole"
	if calls > 1 {
		plan = "split"
	}
	m.plannedCalls.WithLabelValues(m.models.label(model), plan).Add(float64(calls))
}

func (m *Metrics) observeLLMCall(ctx context.Context, model string, purpose engine.CallPurpose, took time.Duration, usage verdict.Usage, err error) {
	model = m.models.label(model)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	observe(ctx, m.llmDuration.WithLabelValues(model, outcome, llmPurposes.bound(string(purpose))), took.Seconds())
	for kind, n := range map[string]int{
		"prompt":     usage.PromptTokens,
		"completion": usage.CompletionTokens,
		"cached":     usage.CachedTokens,
	} {
		// A counter panics on a negative add; a server reporting nonsense
		// must not take the consumer down.
		if n > 0 {
			m.llmTokens.WithLabelValues(model, kind).Add(float64(n))
		}
	}
}

func (m *Metrics) observeOutputRetry(reason string) {
	m.llmRetries.WithLabelValues(outputRetryReasons.bound(reason)).Inc()
}

func (m *Metrics) observeAnchor(match verdict.Match) {
	outcome := string(match)
	if match == verdict.MatchNone {
		outcome = "unanchored"
	}
	m.anchoring.WithLabelValues(anchorOutcomes.bound(outcome)).Inc()
}

// ConsumerHooks returns hooks that measure a consumer of topic: messages in
// flight, handler time, and per partition the lag and the committed offset.
func (m *Metrics) ConsumerHooks(topic string) consumer.Hooks {
	return consumer.Hooks{
		Fetched: func(_ string, partition int, offset, highWaterMark int64) {
			// The consumer reads one topic; labelling with the configured one
			// keeps Fetched's and Committed's series alike.
			m.consumerLag.WithLabelValues(topic, strconv.Itoa(partition)).Set(float64(Lag(offset, highWaterMark)))
		},
		Handled: func(ctx context.Context, outcome string, took time.Duration) {
			observe(ctx, m.handlerTimings.WithLabelValues(handlerOutcomes.bound(outcome)), took.Seconds())
		},
		Committed: func(partition int, offset int64) {
			m.committedOffset.WithLabelValues(topic, strconv.Itoa(partition)).Set(float64(offset))
		},
		InFlight: func(delta int) {
			m.inFlight.Add(float64(delta))
		},
	}
}

// Lag is how many records of a partition follow the one at offset, given the
// partition's high-water mark (the offset the next produced record will get)
// when that record was fetched. It is never negative: a high-water mark
// older than the record, or unknown, means no lag is known.
func Lag(offset, highWaterMark int64) int64 {
	return max(highWaterMark-offset-1, 0)
}

// PipelineHooks returns hooks that measure handled requests, published
// verdicts and report failures.
func (m *Metrics) PipelineHooks() pipeline.Hooks {
	return pipeline.Hooks{
		RequestDone: func(ctx context.Context, outcome string, took time.Duration) {
			outcome = requestOutcomes.bound(outcome)
			m.requestsConsumed.WithLabelValues(outcome).Inc()
			observe(ctx, m.requestDuration.WithLabelValues(outcome), took.Seconds())
		},
		VerdictsPublished: func(outcome string, n int) {
			if n > 0 {
				m.verdictsPublished.WithLabelValues(verdictOutcomes.bound(outcome)).Add(float64(n))
			}
		},
		EnvironmentFault: func(cause string, active bool) {
			v := 0.0
			if active {
				v = 1
			}
			m.envFault.WithLabelValues(cause).Set(v) // a judging.Cause: bounded
		},
		ReportFailed: func() {
			// Once the report writer reports its uploads itself, its count is
			// the one kept, so that a failure is not counted twice.
			if !m.uploadsObserved.Load() {
				m.uploadFailures.Inc()
			}
		},
	}
}

// ObserveReportUpload records one report upload: how long it took and
// whether it failed. Once it has been called, the pipeline hooks' ReportFailed
// stops counting failures, so both may be wired for the same uploads.
func (m *Metrics) ObserveReportUpload(took time.Duration, err error) {
	m.uploadsObserved.Store(true)
	m.uploadDuration.Observe(took.Seconds())
	if err != nil {
		m.uploadFailures.Inc()
	}
}

// ObserveReview counts a recorded review of a verdict on a rule of ruleType,
// its decision, and whether its final verdict is the model's.
func (m *Metrics) ObserveReview(ruleType, decision string, agreed bool) {
	ruleType = ruleTypes.bound(ruleType)
	m.reviews.WithLabelValues(ruleType, reviewDecisions.bound(decision)).Inc()
	if agreed {
		m.reviewAgreements.WithLabelValues(ruleType).Inc()
	}
}

// ObserveCallback counts a callback notification that ended; it fits
// callback.Config's OnDone.
func (m *Metrics) ObserveCallback(d callback.Delivery) {
	outcome := CallbackGivenUp
	switch {
	case d.Delivered:
		outcome = CallbackDelivered
	case d.Interrupted():
		outcome = CallbackInterrupted
	}
	m.callbacks.WithLabelValues(outcome).Inc()
}

// CountDeadLetters wraps p so that every message it publishes successfully
// is counted by reason; failed publications are not dead letters yet (the
// consumer retries them) and are not counted.
func (m *Metrics) CountDeadLetters(p consumer.DeadLetterPublisher) consumer.DeadLetterPublisher {
	return deadLetterCounter{next: p, m: m}
}

type deadLetterCounter struct {
	next consumer.DeadLetterPublisher
	m    *Metrics
}

func (d deadLetterCounter) PublishDeadLetter(ctx context.Context, msg *consumer.Message, reason string, cause error) error {
	if err := d.next.PublishDeadLetter(ctx, msg, reason, cause); err != nil {
		return err
	}
	d.m.deadLetters.WithLabelValues(deadLetterReasons.bound(reason)).Inc()
	return nil
}

// ObserveModelConcurrency records the state of a model endpoint's limit on
// calls in flight; fit for openai.Config.OnConcurrency (quick, no calls back).
func (m *Metrics) ObserveModelConcurrency(c openai.Concurrency) {
	m.modelConcurrency.WithLabelValues(c.Endpoint, "limit").Set(float64(c.Limit))
	m.modelConcurrency.WithLabelValues(c.Endpoint, "in_flight").Set(float64(c.InFlight))
	m.modelConcurrency.WithLabelValues(c.Endpoint, "waiting").Set(float64(c.Waiting))
}
