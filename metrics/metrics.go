// Package metrics measures rulevalidator for Prometheus. Everything is
// registered on a registry the caller injects, never the global one, and is
// fed through the hooks the engine, consumer and pipeline expose, so none of
// them imports Prometheus.
//
// Every label has a bounded set of values: outcomes and reasons outside the
// known set are counted as "other", model names beyond the first MaxModels as
// "other", and HTTP requests by route pattern, never by path. Tenant, request
// and rule ids are never labels.
package metrics

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"rulevalidator/consumer"
	"rulevalidator/engine"
	"rulevalidator/internal/buildinfo"
	"rulevalidator/judging"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

const namespace = "rulevalidator"

// otherLabel stands in for any label value outside a metric's known set.
const otherLabel = "other"

// MaxModels is how many distinct model names get their own label value; the
// model can be chosen per request, so later names are counted as "other".
const MaxModels = 16

// Histogram buckets, in seconds, sized to what each one times.
var (
	llmBuckets     = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}
	requestBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	uploadBuckets  = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	httpBuckets    = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// The known values of each label, pre-initialised to zero so that dashboards
// and alerts see a zero rather than no series.
var (
	requestOutcomes = newLabelSet("completed", "failed", "cached", "retry", "delayed")
	verdictOutcomes = newLabelSet(string(engine.OutcomePass), string(engine.OutcomeFail), string(engine.OutcomeScore),
		string(engine.OutcomeNotApplicable), string(engine.OutcomeNoVerdict))
	deadLetterReasons  = newLabelSet(reasonLabels()...)
	llmOutcomes        = newLabelSet("ok", "error")
	llmPurposes        = newLabelSet(purposeLabels()...)
	tokenKinds         = newLabelSet("prompt", "completion", "cached")
	outputRetryReasons = newLabelSet(
		engine.ReasonMalformedJSON, engine.ReasonCodeFence, engine.ReasonMissingRule,
		engine.ReasonDuplicateRule, engine.ReasonUnknownRule, engine.ReasonMissingRuleID,
		engine.ReasonMissingRationale, engine.ReasonMissingBoolean, engine.ReasonMissingScore,
		engine.ReasonScoreNotAllowed, engine.ReasonWrongOutputType, engine.ReasonEmptyResponse,
		engine.ReasonMalformedEvidence, engine.ReasonPlaceholderRationale, engine.ReasonPlaceholderEvidence,
		engine.ReasonUnanchoredQuote, engine.ReasonAlteredEvidence, engine.ReasonUnsupportedVerdict,
		engine.ReasonUnknownPassage, engine.ReasonUnfocusedEvidence,
	)
	anchorOutcomes   = newLabelSet("exact", "normalized", "fuzzy", "elided", "passage", "unanchored", "not_document")
	handlerOutcomes  = newLabelSet(consumer.OutcomeOK, consumer.OutcomeFailed, consumer.OutcomeInterrupted, consumer.OutcomeDeferred)
	callbackOutcomes = newLabelSet(CallbackDelivered, CallbackGivenUp, CallbackInterrupted)
	cacheOutcomes    = newLabelSet(engine.CacheHit, engine.CacheMiss, engine.CacheStale)
	ruleTypes        = newLabelSet(string(verdict.Boolean), string(verdict.Numerical))
	reviewDecisions  = newLabelSet("confirm", "override")
)

// Outcomes of rulevalidator_callbacks_total (see ObserveCallback).
const (
	CallbackDelivered   = "delivered"
	CallbackGivenUp     = "given_up"
	CallbackInterrupted = "interrupted"
)

// Metrics holds rulevalidator's metrics. It is safe for concurrent use.
type Metrics struct {
	requestsConsumed  *prometheus.CounterVec
	requestDuration   *prometheus.HistogramVec
	verdictsPublished *prometheus.CounterVec
	deadLetters       *prometheus.CounterVec

	llmDuration    *prometheus.HistogramVec
	llmTokens      *prometheus.CounterVec
	llmRetries     *prometheus.CounterVec
	anchoring      *prometheus.CounterVec
	plannedCalls   *prometheus.CounterVec
	rulesDecided   *prometheus.CounterVec
	cacheLookups   *prometheus.CounterVec
	cacheSaved     *prometheus.CounterVec
	cacheFailures  prometheus.Counter
	models         *modelLabels
	handlerTimings *prometheus.HistogramVec

	inFlight        prometheus.Gauge
	consumerLag     *prometheus.GaugeVec
	committedOffset *prometheus.GaugeVec
	envFault        *prometheus.GaugeVec
	// modelConcurrency is the adaptive limit on calls to each model
	// endpoint, the calls in flight under it and those waiting for it.
	modelConcurrency *prometheus.GaugeVec

	uploadDuration prometheus.Histogram
	uploadFailures prometheus.Counter
	callbacks      *prometheus.CounterVec
	// uploadsObserved: ObserveReportUpload has been called.
	uploadsObserved atomic.Bool

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec

	reviews          *prometheus.CounterVec
	reviewAgreements *prometheus.CounterVec

	buildInfo *prometheus.GaugeVec
}

// New creates the metrics and registers them, with the Go runtime and process
// collectors, on reg. It fails, leaving reg as it was, when any of them is
// already registered there.
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("metrics: a prometheus.Registerer is required")
	}
	var b builder
	b.add("the Go runtime collector", collectors.NewGoCollector())
	b.add("the process collector", collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		requestsConsumed: b.counterVec("requests_consumed_total",
			"Validation requests handled, by outcome: completed, failed (a failed summary was published), cached (a redelivery answered from the cache) or retry (a transient error).",
			"outcome"),
		requestDuration: b.histogramVec("request_duration_seconds",
			"Time spent handling one validation request, by outcome.",
			requestBuckets, "outcome"),
		verdictsPublished: b.counterVec("verdicts_published_total",
			"Rule verdicts published, by outcome: pass, fail, score, not_applicable or no_verdict.",
			"outcome"),
		deadLetters: b.counterVec("dead_letters_total",
			"Messages published to the dead-letter topic, by reason.",
			"reason"),
		llmDuration: b.histogramVec("llm_request_duration_seconds",
			"Time taken by one model call, the adapter's own retries included, by model, outcome (ok or error) and purpose ("+strings.Join(llmPurposes.values, ", ")+").",
			llmBuckets, "model", "outcome", "purpose"),
		llmTokens: b.counterVec("llm_tokens_total",
			"Tokens reported by the model server, by model and kind: prompt, completion, or cached (the part of prompt served from the server's cache).",
			"model", "kind"),
		llmRetries: b.counterVec("llm_output_retries_total",
			"Problems in model answers that caused a corrective re-ask, by reason.",
			"reason"),
		anchoring: b.counterVec("evidence_anchoring_total",
			"Evidence by how it was anchored to the document: exact, normalized, fuzzy, elided, passage (a whole passage cited by id), unanchored or not_document.",
			"outcome"),
		plannedCalls: b.counterVec("llm_planned_calls_total",
			"Model calls planned for requests, corrective re-asks not included, by model and plan: whole (the request fit one call) or split (it was judged in several calls on excerpts or batches of rules).",
			"model", "plan"),
		rulesDecided: b.counterVec("rules_decided_without_model_total",
			"Rules no model was asked about, by how they were decided: filtered (a filter_criteria left the rule out as not applicable) or checked (the rule's check judged it).",
			"how"),
		cacheLookups: b.counterVec("verdict_cache_lookups_total",
			"Rules looked up in the verdict cache, by outcome: hit (the verdict was taken from the cache), miss (the model was asked) or stale (a cached verdict whose evidence is no longer where it pointed; the model was asked).",
			"outcome"),
		cacheSaved: b.counterVec("verdict_cache_tokens_saved_total",
			"Model tokens (prompt and completion) the verdicts taken from the verdict cache cost when they were judged, by model: what the hits saved.",
			"model"),
		cacheFailures: b.counter("verdict_cache_store_failures_total",
			"Requests whose judged verdicts could not be stored in the verdict cache (they are asked again next time)."),
		handlerTimings: b.histogramVec("handler_duration_seconds",
			"Time the consumer's handler took for one message, middleware included, by outcome: ok, failed, interrupted or deferred (its tenant over a budget with on_exceed: delay).",
			requestBuckets, "outcome"),
		inFlight: b.gauge("requests_in_flight",
			"Messages taken on by the consumer and not yet let go."),
		consumerLag: b.gaugeVec("consumer_lag_messages",
			"Records behind the last fetched one in its partition (high-water mark - offset - 1), as of that fetch.",
			"topic", "partition"),
		committedOffset: b.gaugeVec("consumer_committed_offset",
			"The consumer group's last committed offset in the partition: the next offset it will read.",
			"topic", "partition"),
		envFault: b.gaugeVec("environment_fault",
			"1 while a fault outside the messages (model key or model name, storage credentials or bucket, TLS, broker, network) holds consumption, by cause; 0 otherwise.",
			"cause"),
		modelConcurrency: b.gaugeVec("llm_concurrency",
			"The limit on calls in flight to a model endpoint (state=limit; it adapts to the endpoint's answers unless fixed), the calls in flight under it (state=in_flight) and the calls waiting for a slot (state=waiting), by endpoint host.",
			"endpoint", "state"),
		uploadDuration: b.histogram("report_upload_duration_seconds",
			"Time taken to store one report in object storage, failed attempts included.",
			uploadBuckets),
		uploadFailures: b.counter("report_upload_failures_total",
			"Reports that could not be stored."),
		callbacks: b.counterVec("callbacks_total",
			"Callback notifications that ended, by outcome: delivered (2xx), given_up (URL refused, an answer retrying does not change, or out of attempts; never tried again) or interrupted (the process stopped first; one from the callback topic is delivered after the restart).",
			"outcome"),
		httpRequests: b.counterVec("http_requests_total",
			"HTTP API requests, by route pattern and status code.",
			"route", "code"),
		httpDuration: b.histogramVec("http_request_duration_seconds",
			"Time taken to serve one HTTP API request, by route pattern.",
			httpBuckets, "route"),
		reviews: b.counterVec("reviews_total",
			"Reviews of verdicts recorded, by rule type (boolean or numerical) and decision (confirm or override).",
			"rule_type", "decision"),
		reviewAgreements: b.counterVec("review_agreements_total",
			"Reviews whose final verdict is the model's (a confirm, or an override giving the model's verdict again), by rule type; divided by reviews_total, the model's accuracy against the reviewers. Per-rule accuracy and Cohen's kappa are served by GET /v1/reviews/agreement.",
			"rule_type"),
		buildInfo: b.gaugeVec("build_info",
			"Always 1; its labels say which build is running.",
			"version", "go_version", "revision"),
	}
	m.models = newModelLabels(MaxModels, m.initModel)

	// A stamp that does not parse is for `rulevalidator version` to report;
	// the metric shows what could be read.
	info, _ := buildinfo.Read()
	labels := buildLabels(info)
	m.buildInfo.WithLabelValues(labels[:]...).Set(1)
	m.preinitialise()

	if err := b.register(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// preinitialise creates the series whose label values are known up front.
func (m *Metrics) preinitialise() {
	for _, o := range requestOutcomes.values {
		m.requestsConsumed.WithLabelValues(o)
		m.requestDuration.WithLabelValues(o)
	}
	for _, o := range verdictOutcomes.values {
		m.verdictsPublished.WithLabelValues(o)
	}
	for _, r := range deadLetterReasons.values {
		m.deadLetters.WithLabelValues(r)
	}
	for _, r := range outputRetryReasons.values {
		m.llmRetries.WithLabelValues(r)
	}
	for _, o := range anchorOutcomes.values {
		m.anchoring.WithLabelValues(o)
	}
	for _, o := range handlerOutcomes.values {
		m.handlerTimings.WithLabelValues(o)
	}
	for _, o := range callbackOutcomes.values {
		m.callbacks.WithLabelValues(o)
	}
	for _, o := range cacheOutcomes.values {
		m.cacheLookups.WithLabelValues(o)
	}
	for _, how := range []string{engine.DecidedFiltered, engine.DecidedChecked} {
		m.rulesDecided.WithLabelValues(how)
	}
	for _, t := range ruleTypes.values {
		for _, d := range reviewDecisions.values {
			m.reviews.WithLabelValues(t, d)
		}
		m.reviewAgreements.WithLabelValues(t)
	}
	for _, c := range judging.Causes {
		m.envFault.WithLabelValues(string(c)).Set(0)
	}
}

// purposeLabels is the label value of every engine.CallPurpose.
func purposeLabels() []string {
	var out []string
	for _, p := range engine.CallPurposes() {
		out = append(out, string(p))
	}
	return out
}

// initModel creates a newly seen model's series.
func (m *Metrics) initModel(model string) {
	for _, o := range llmOutcomes.values {
		for _, p := range llmPurposes.values {
			m.llmDuration.WithLabelValues(model, o, p)
		}
	}
	for _, k := range tokenKinds.values {
		m.llmTokens.WithLabelValues(model, k)
	}
	for _, p := range []string{"whole", "split"} {
		m.plannedCalls.WithLabelValues(model, p)
	}
	m.cacheSaved.WithLabelValues(model)
}

// builder makes the metrics and remembers them, with their names, for
// registration.
type builder struct {
	collectors []namedCollector
}

type namedCollector struct {
	name string
	prometheus.Collector
}

func (b *builder) add(name string, c prometheus.Collector) {
	b.collectors = append(b.collectors, namedCollector{name: name, Collector: c})
}

func (b *builder) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
	b.add(prometheus.BuildFQName(namespace, "", name), c)
	return c
}

func (b *builder) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	b.add(prometheus.BuildFQName(namespace, "", name), c)
	return c
}

func (b *builder) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help})
	b.add(prometheus.BuildFQName(namespace, "", name), g)
	return g
}

func (b *builder) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
	b.add(prometheus.BuildFQName(namespace, "", name), g)
	return g
}

func (b *builder) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets})
	b.add(prometheus.BuildFQName(namespace, "", name), h)
	return h
}

func (b *builder) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
	b.add(prometheus.BuildFQName(namespace, "", name), h)
	return h
}

// register registers every collector on reg; on the first failure it
// unregisters those already registered, so that reg is left as it was.
func (b *builder) register(reg prometheus.Registerer) error {
	for i, c := range b.collectors {
		if err := reg.Register(c.Collector); err != nil {
			for _, done := range b.collectors[:i] {
				reg.Unregister(done.Collector)
			}
			return fmt.Errorf("metrics: registering %s: %w", c.name, err)
		}
	}
	return nil
}

// buildLabels are the build_info metric's label values for a build, in the
// order version, go_version, revision: what `rulevalidator version` prints.
func buildLabels(info buildinfo.Info) [3]string {
	return [3]string{info.Version, info.GoVersion, info.LabelRevision()}
}

// labelSet is the known values of one label.
type labelSet struct {
	values []string
	known  map[string]bool
}

func newLabelSet(values ...string) labelSet {
	known := make(map[string]bool, len(values))
	for _, v := range values {
		known[v] = true
	}
	return labelSet{values: values, known: known}
}

// bound returns v when it is known, otherwise "other".
func (s labelSet) bound(v string) string {
	if s.known[v] {
		return v
	}
	return otherLabel
}

// modelLabels hands out model label values: each model's own name for the
// first limit distinct ones, "other" for the rest.
type modelLabels struct {
	mu    sync.Mutex
	seen  map[string]bool
	limit int
	onNew func(model string)
}

func newModelLabels(limit int, onNew func(model string)) *modelLabels {
	return &modelLabels{seen: make(map[string]bool), limit: limit, onNew: onNew}
}

func (l *modelLabels) label(model string) string {
	if model == "" {
		model = "unknown"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[model] {
		return model
	}
	if len(l.seen) >= l.limit {
		model = otherLabel
		if l.seen[model] {
			return model
		}
	}
	l.seen[model] = true
	l.onNew(model)
	return model
}

// reasonLabels are the dead-letter reasons, as label values.
func reasonLabels() []string {
	out := make([]string, len(schemas.Reasons))
	for i, r := range schemas.Reasons {
		out[i] = string(r)
	}
	return out
}
