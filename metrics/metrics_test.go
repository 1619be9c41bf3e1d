package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"rulevalidator/callback"
	"rulevalidator/consumer"
	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/buildinfo"
	"rulevalidator/judging"
	"rulevalidator/pipeline"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

func newMetrics(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, reg
}

// exercise drives every hook once, so that every metric family has series.
func exercise(m *Metrics) {
	eh := m.EngineHooks()
	eh.LLMCall(context.Background(), "gemma-3-270m", engine.PurposeJudge, 1200*time.Millisecond, verdict.Usage{PromptTokens: 900, CompletionTokens: 120, CachedTokens: 512, LLMCalls: 1}, nil)
	eh.OutputRetry(engine.ReasonMissingRule)
	eh.Anchor(verdict.MatchFuzzy)

	ch := m.ConsumerHooks("rulevalidator.requests")
	ch.Fetched("rulevalidator.requests", 2, 40, 50)
	ch.InFlight(1)
	ch.Handled(context.Background(), consumer.OutcomeOK, 2*time.Second)
	ch.InFlight(-1)
	ch.Committed(2, 41)

	ph := m.PipelineHooks()
	ph.VerdictsPublished("pass", 3)
	ph.RequestDone(context.Background(), "completed", 2*time.Second)

	m.ObserveReportUpload(80*time.Millisecond, nil)
	m.ObserveCallback(callback.Delivery{Delivered: true, Attempts: 1, Status: 200})
	m.ObserveReview("boolean", "confirm", true)
	_ = m.CountDeadLetters(publisherFunc(func(context.Context, *consumer.Message, string, error) error { return nil })).
		PublishDeadLetter(context.Background(), &consumer.Message{}, string(schemas.ReasonUndecodable), errors.New("not avro"))

	h := m.InstrumentHTTP("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil))
}

type publisherFunc func(ctx context.Context, m *consumer.Message, reason string, cause error) error

func (f publisherFunc) PublishDeadLetter(ctx context.Context, m *consumer.Message, reason string, cause error) error {
	return f(ctx, m, reason, cause)
}

func TestNewRequiresARegisterer(t *testing.T) {
	if _, err := New(nil); err == nil {
		t.Fatal("New(nil) succeeded, want an error")
	}
}

func TestNewRejectsADuplicateRegistrationAndLeavesTheRegistryAsItWas(t *testing.T) {
	_, reg := newMetrics(t)
	_, err := New(reg)
	var already prometheus.AlreadyRegisteredError
	if !errors.As(err, &already) {
		t.Fatalf("second New on one registry: got %v, want an AlreadyRegisteredError", err)
	}

	// A clash on the last metric registered must take back all the others.
	reg = prometheus.NewRegistry()
	clash := prometheus.NewGauge(prometheus.GaugeOpts{Name: "rulevalidator_build_info", Help: "taken"})
	reg.MustRegister(clash)
	_, err = New(reg)
	if err == nil || !strings.Contains(err.Error(), "rulevalidator_build_info") {
		t.Fatalf("New on a registry holding rulevalidator_build_info: got %v, want an error naming it", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "rulevalidator_build_info" {
		var names []string
		for _, mf := range mfs {
			names = append(names, mf.GetName())
		}
		t.Fatalf("after a failed New the registry holds %v, want only the clashing rulevalidator_build_info", names)
	}
}

func TestMetricsPassPromlint(t *testing.T) {
	m, reg := newMetrics(t)
	exercise(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatalf("linting: %v", err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	want := []string{
		"rulevalidator_requests_consumed_total", "rulevalidator_request_duration_seconds",
		"rulevalidator_verdicts_published_total", "rulevalidator_dead_letters_total",
		"rulevalidator_llm_request_duration_seconds", "rulevalidator_llm_tokens_total",
		"rulevalidator_llm_output_retries_total", "rulevalidator_evidence_anchoring_total",
		"rulevalidator_llm_planned_calls_total",
		"rulevalidator_requests_in_flight", "rulevalidator_consumer_lag_messages",
		"rulevalidator_consumer_committed_offset", "rulevalidator_environment_fault", "rulevalidator_handler_duration_seconds",
		"rulevalidator_report_upload_duration_seconds", "rulevalidator_report_upload_failures_total",
		"rulevalidator_http_requests_total", "rulevalidator_http_request_duration_seconds",
		"rulevalidator_build_info", "go_goroutines", "process_cpu_seconds_total",
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, name := range want {
		if !got[name] {
			t.Errorf("%s is not exposed", name)
		}
	}
}

func TestKnownLabelValuesStartAtZero(t *testing.T) {
	m, _ := newMetrics(t)
	tests := []struct {
		name   string
		vec    prometheus.Collector
		series int
	}{
		{"requests_consumed_total", m.requestsConsumed, 5},
		{"request_duration_seconds", m.requestDuration, 5},
		{"verdicts_published_total", m.verdictsPublished, 5},
		{"dead_letters_total", m.deadLetters, len(schemas.Reasons)},
		{"environment_fault", m.envFault, len(judging.Causes)},
		{"llm_output_retries_total", m.llmRetries, 20},
		{"evidence_anchoring_total", m.anchoring, 7},
		{"handler_duration_seconds", m.handlerTimings, 4},
		{"rules_decided_without_model_total", m.rulesDecided, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testutil.CollectAndCount(tt.vec); got != tt.series {
				t.Errorf("%d series before any event, want %d", got, tt.series)
			}
		})
	}
	for _, reason := range []schemas.Reason{schemas.ReasonUndecodable, schemas.ReasonInternal} {
		if got := testutil.ToFloat64(m.deadLetters.WithLabelValues(string(reason))); got != 0 {
			t.Errorf("dead_letters_total{reason=%q} = %v before any event, want 0", reason, got)
		}
	}
}

func TestEngineHooks(t *testing.T) {
	usage := verdict.Usage{PromptTokens: 1000, CompletionTokens: 200, CachedTokens: 600, LLMCalls: 1}
	tests := []struct {
		name   string
		drive  func(h engine.Hooks)
		series func(m *Metrics) prometheus.Collector
		want   float64
	}{
		{"rules decided without the model count by how",
			func(h engine.Hooks) {
				h.RulesDecided(engine.DecidedFiltered, 3)
				h.RulesDecided(engine.DecidedChecked, 2)
				h.RulesDecided(engine.DecidedFiltered, 1)
			},
			func(m *Metrics) prometheus.Collector { return m.rulesDecided.WithLabelValues(engine.DecidedFiltered) }, 4},
		{"a successful call counts prompt tokens",
			func(h engine.Hooks) {
				h.LLMCall(context.Background(), "gemma", engine.PurposeJudge, time.Second, usage, nil)
			},
			func(m *Metrics) prometheus.Collector { return m.llmTokens.WithLabelValues("gemma", "prompt") }, 1000},
		{"a successful call counts completion tokens",
			func(h engine.Hooks) {
				h.LLMCall(context.Background(), "gemma", engine.PurposeJudge, time.Second, usage, nil)
			},
			func(m *Metrics) prometheus.Collector { return m.llmTokens.WithLabelValues("gemma", "completion") }, 200},
		{"a successful call counts cached tokens",
			func(h engine.Hooks) {
				h.LLMCall(context.Background(), "gemma", engine.PurposeJudge, time.Second, usage, nil)
			},
			func(m *Metrics) prometheus.Collector { return m.llmTokens.WithLabelValues("gemma", "cached") }, 600},
		{"tokens add up over calls",
			func(h engine.Hooks) {
				h.LLMCall(context.Background(), "gemma", engine.PurposeJudge, time.Second, usage, nil)
				h.LLMCall(context.Background(), "gemma", engine.PurposeJudge, time.Second, usage, nil)
			},
			func(m *Metrics) prometheus.Collector { return m.llmTokens.WithLabelValues("gemma", "prompt") }, 2000},
		{"negative token counts are ignored, not a panic",
			func(h engine.Hooks) {
				h.LLMCall(context.Background(), "gemma", engine.PurposeJudge, time.Second, verdict.Usage{PromptTokens: -5}, nil)
			},
			func(m *Metrics) prometheus.Collector { return m.llmTokens.WithLabelValues("gemma", "prompt") }, 0},
		{"a failed call is timed as an error",
			func(h engine.Hooks) {
				h.LLMCall(context.Background(), "gemma", engine.PurposeJudge, 3*time.Second, verdict.Usage{}, engine.ErrLLMUnavailable)
			},
			func(m *Metrics) prometheus.Collector {
				return histogramOf(m.llmDuration.WithLabelValues("gemma", "error", "judge"))
			}, 3},
		{"a successful call is timed as ok",
			func(h engine.Hooks) {
				h.LLMCall(context.Background(), "gemma", engine.PurposeJudge, 1500*time.Millisecond, usage, nil)
			},
			func(m *Metrics) prometheus.Collector {
				return histogramOf(m.llmDuration.WithLabelValues("gemma", "ok", "judge"))
			}, 1.5},
		{"a check is timed under its purpose",
			func(h engine.Hooks) {
				h.LLMCall(context.Background(), "gemma", engine.PurposeCheck, 5*time.Second, usage, nil)
				h.LLMCall(context.Background(), "gemma", engine.PurposeJudge, 10*time.Second, usage, nil)
			},
			func(m *Metrics) prometheus.Collector {
				return histogramOf(m.llmDuration.WithLabelValues("gemma", "ok", "check"))
			}, 5},
		{"an unknown purpose is timed as other",
			func(h engine.Hooks) {
				h.LLMCall(context.Background(), "gemma", "triage", 2*time.Second, usage, nil)
			},
			func(m *Metrics) prometheus.Collector {
				return histogramOf(m.llmDuration.WithLabelValues("gemma", "ok", "other"))
			}, 2},
		{"an output retry counts its reason",
			func(h engine.Hooks) { h.OutputRetry(engine.ReasonScoreNotAllowed) },
			func(m *Metrics) prometheus.Collector {
				return m.llmRetries.WithLabelValues(engine.ReasonScoreNotAllowed)
			}, 1},
		{"a content retry counts its reason",
			func(h engine.Hooks) { h.OutputRetry(engine.ReasonUnanchoredQuote) },
			func(m *Metrics) prometheus.Collector {
				return m.llmRetries.WithLabelValues(engine.ReasonUnanchoredQuote)
			}, 1},
		{"an unknown retry reason counts as other",
			func(h engine.Hooks) { h.OutputRetry("rule R-17 of tenant acme was odd") },
			func(m *Metrics) prometheus.Collector { return m.llmRetries.WithLabelValues("other") }, 1},
		{"an exact anchor",
			func(h engine.Hooks) { h.Anchor(verdict.MatchExact) },
			func(m *Metrics) prometheus.Collector { return m.anchoring.WithLabelValues("exact") }, 1},
		{"a normalized anchor",
			func(h engine.Hooks) { h.Anchor(verdict.MatchNormalized) },
			func(m *Metrics) prometheus.Collector { return m.anchoring.WithLabelValues("normalized") }, 1},
		{"a fuzzy anchor",
			func(h engine.Hooks) { h.Anchor(verdict.MatchFuzzy) },
			func(m *Metrics) prometheus.Collector { return m.anchoring.WithLabelValues("fuzzy") }, 1},
		{"an elided anchor",
			func(h engine.Hooks) { h.Anchor(verdict.MatchElided) },
			func(m *Metrics) prometheus.Collector { return m.anchoring.WithLabelValues("elided") }, 1},
		{"no match counts as unanchored",
			func(h engine.Hooks) { h.Anchor(verdict.MatchNone) },
			func(m *Metrics) prometheus.Collector { return m.anchoring.WithLabelValues("unanchored") }, 1},
		{"evidence that is not from a document",
			func(h engine.Hooks) { h.Anchor(verdict.MatchNotDocument) },
			func(m *Metrics) prometheus.Collector { return m.anchoring.WithLabelValues("not_document") }, 1},
		{"a request that fits is one whole call",
			func(h engine.Hooks) { h.PlannedCalls("gemma", 1) },
			func(m *Metrics) prometheus.Collector { return m.plannedCalls.WithLabelValues("gemma", "whole") }, 1},
		{"a split request counts every planned call",
			func(h engine.Hooks) { h.PlannedCalls("gemma", 7); h.PlannedCalls("gemma", 3) },
			func(m *Metrics) prometheus.Collector { return m.plannedCalls.WithLabelValues("gemma", "split") }, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newMetrics(t)
			tt.drive(m.EngineHooks())
			if got := sampleValue(t, tt.series(m)); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// sampleValue is a counter's or gauge's value, or a histogram's sum.
func sampleValue(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	h, ok := c.(prometheus.Histogram)
	if !ok {
		return testutil.ToFloat64(c)
	}
	ch := make(chan prometheus.Metric, 1)
	h.Collect(ch)
	var pb dto.Metric
	if err := (<-ch).Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram().GetSampleSum()
}

// histogramOf is the histogram behind a HistogramVec's child.
func histogramOf(o prometheus.Observer) prometheus.Collector {
	return o.(prometheus.Histogram)
}

func TestLLMCallPreinitialisesANewModel(t *testing.T) {
	m, _ := newMetrics(t)
	m.EngineHooks().LLMCall(context.Background(), "gemma", engine.PurposeJudge, time.Second, verdict.Usage{PromptTokens: 10}, nil)
	if got := testutil.CollectAndCount(m.llmTokens); got != 3 {
		t.Errorf("llm_tokens_total has %d series after one model's first call, want 3 (prompt, completion, cached)", got)
	}
	if got, want := testutil.CollectAndCount(m.llmDuration), 2*len(llmPurposes.values); got != want {
		t.Errorf("llm_request_duration_seconds has %d series after one model's first call, want %d (ok and error for each purpose)", got, want)
	}
}

func TestModelLabelsAreCapped(t *testing.T) {
	m, _ := newMetrics(t)
	h := m.EngineHooks()
	for i := range MaxModels + 5 {
		h.LLMCall(context.Background(), fmt.Sprintf("model-%d", i), engine.PurposeJudge, time.Second, verdict.Usage{PromptTokens: 1}, nil)
	}
	// MaxModels named models plus "other", 3 token kinds each.
	if got, want := testutil.CollectAndCount(m.llmTokens), (MaxModels+1)*3; got != want {
		t.Errorf("llm_tokens_total has %d series, want %d", got, want)
	}
	if got := testutil.ToFloat64(m.llmTokens.WithLabelValues("other", "prompt")); got != 5 {
		t.Errorf(`llm_tokens_total{model="other",kind="prompt"} = %v, want 5`, got)
	}
	h.LLMCall(context.Background(), "model-0", engine.PurposeJudge, time.Second, verdict.Usage{PromptTokens: 1}, nil)
	if got := testutil.ToFloat64(m.llmTokens.WithLabelValues("model-0", "prompt")); got != 2 {
		t.Errorf("a model seen before the cap keeps its own label: got %v, want 2", got)
	}
}

func TestConsumerHooks(t *testing.T) {
	m, _ := newMetrics(t)
	h := m.ConsumerHooks("requests")
	h.Fetched("requests", 0, 9, 10)   // the newest record: no lag
	h.Fetched("requests", 1, 90, 100) // 9 records behind it
	h.Fetched("requests", 1, 95, 100) // a later fetch replaces the figure
	h.Committed(0, 10)
	h.Committed(1, 96)
	want := `
# HELP rulevalidator_consumer_lag_messages Records behind the last fetched one in its partition (high-water mark - offset - 1), as of that fetch.
# TYPE rulevalidator_consumer_lag_messages gauge
rulevalidator_consumer_lag_messages{partition="0",topic="requests"} 0
rulevalidator_consumer_lag_messages{partition="1",topic="requests"} 4
# HELP rulevalidator_consumer_committed_offset The consumer group's last committed offset in the partition: the next offset it will read.
# TYPE rulevalidator_consumer_committed_offset gauge
rulevalidator_consumer_committed_offset{partition="0",topic="requests"} 10
rulevalidator_consumer_committed_offset{partition="1",topic="requests"} 96
`
	if err := testutil.CollectAndCompare(m.consumerLag, strings.NewReader(want), "rulevalidator_consumer_lag_messages"); err != nil {
		t.Error(err)
	}
	if err := testutil.CollectAndCompare(m.committedOffset, strings.NewReader(want), "rulevalidator_consumer_committed_offset"); err != nil {
		t.Error(err)
	}

	h.InFlight(1)
	h.InFlight(1)
	h.InFlight(1)
	h.InFlight(-1)
	if got := testutil.ToFloat64(m.inFlight); got != 2 {
		t.Errorf("requests_in_flight = %v after +3 -1, want 2", got)
	}

	for _, tt := range []struct {
		outcome string
		label   string
	}{
		{consumer.OutcomeOK, "ok"},
		{consumer.OutcomeFailed, "failed"},
		{consumer.OutcomeInterrupted, "interrupted"},
		{"something new", "other"},
	} {
		h.Handled(context.Background(), tt.outcome, 250*time.Millisecond)
		if got := sampleValue(t, histogramOf(m.handlerTimings.WithLabelValues(tt.label))); got != 0.25 {
			t.Errorf("handler_duration_seconds{outcome=%q} sum = %v after Handled(%q, 250ms), want 0.25", tt.label, got, tt.outcome)
		}
	}
}

func TestLag(t *testing.T) {
	tests := []struct {
		name                  string
		offset, highWaterMark int64
		want                  int64
	}{
		{"the newest record", 9, 10, 0},
		{"records behind it", 0, 10, 9},
		{"the first record of an empty-until-now partition", 0, 1, 0},
		{"a high-water mark older than the record", 10, 5, 0},
		{"an unknown high-water mark", 10, -1, 0},
		{"a large partition", 1 << 40, 1<<40 + 1001, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Lag(tt.offset, tt.highWaterMark); got != tt.want {
				t.Errorf("Lag(%d, %d) = %d, want %d", tt.offset, tt.highWaterMark, got, tt.want)
			}
		})
	}
}

func TestPipelineHooks(t *testing.T) {
	tests := []struct {
		name   string
		drive  func(h pipeline.Hooks)
		series func(m *Metrics) prometheus.Collector
		want   float64
	}{
		{"a completed request",
			func(h pipeline.Hooks) { h.RequestDone(context.Background(), "completed", 4*time.Second) },
			func(m *Metrics) prometheus.Collector { return m.requestsConsumed.WithLabelValues("completed") }, 1},
		{"a completed request is timed",
			func(h pipeline.Hooks) { h.RequestDone(context.Background(), "completed", 4*time.Second) },
			func(m *Metrics) prometheus.Collector {
				return histogramOf(m.requestDuration.WithLabelValues("completed"))
			}, 4},
		{"a failed request",
			func(h pipeline.Hooks) { h.RequestDone(context.Background(), "failed", time.Second) },
			func(m *Metrics) prometheus.Collector { return m.requestsConsumed.WithLabelValues("failed") }, 1},
		{"a cached request",
			func(h pipeline.Hooks) { h.RequestDone(context.Background(), "cached", time.Millisecond) },
			func(m *Metrics) prometheus.Collector { return m.requestsConsumed.WithLabelValues("cached") }, 1},
		{"a retried request",
			func(h pipeline.Hooks) { h.RequestDone(context.Background(), "retry", time.Second) },
			func(m *Metrics) prometheus.Collector { return m.requestsConsumed.WithLabelValues("retry") }, 1},
		{"an outcome outside the known set counts as other",
			func(h pipeline.Hooks) { h.RequestDone(context.Background(), "", time.Second) },
			func(m *Metrics) prometheus.Collector { return m.requestsConsumed.WithLabelValues("other") }, 1},
		{"passing verdicts",
			func(h pipeline.Hooks) { h.VerdictsPublished("pass", 7) },
			func(m *Metrics) prometheus.Collector { return m.verdictsPublished.WithLabelValues("pass") }, 7},
		{"failing verdicts",
			func(h pipeline.Hooks) { h.VerdictsPublished("fail", 2) },
			func(m *Metrics) prometheus.Collector { return m.verdictsPublished.WithLabelValues("fail") }, 2},
		{"scores",
			func(h pipeline.Hooks) { h.VerdictsPublished("score", 3) },
			func(m *Metrics) prometheus.Collector { return m.verdictsPublished.WithLabelValues("score") }, 3},
		{"not applicable",
			func(h pipeline.Hooks) { h.VerdictsPublished("not_applicable", 1) },
			func(m *Metrics) prometheus.Collector { return m.verdictsPublished.WithLabelValues("not_applicable") }, 1},
		{"no verdict",
			func(h pipeline.Hooks) { h.VerdictsPublished("no_verdict", 1) },
			func(m *Metrics) prometheus.Collector { return m.verdictsPublished.WithLabelValues("no_verdict") }, 1},
		{"a negative verdict count is ignored, not a panic",
			func(h pipeline.Hooks) { h.VerdictsPublished("pass", -1) },
			func(m *Metrics) prometheus.Collector { return m.verdictsPublished.WithLabelValues("pass") }, 0},
		{"a failed report",
			func(h pipeline.Hooks) { h.ReportFailed() },
			func(m *Metrics) prometheus.Collector { return m.uploadFailures }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newMetrics(t)
			tt.drive(pipeline.Hooks(m.PipelineHooks()))
			if got := sampleValue(t, tt.series(m)); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReportUploads(t *testing.T) {
	m, _ := newMetrics(t)
	m.PipelineHooks().ReportFailed()
	if got := testutil.ToFloat64(m.uploadFailures); got != 1 {
		t.Fatalf("report_upload_failures_total = %v after ReportFailed with no upload observed, want 1", got)
	}
	m.ObserveReportUpload(200*time.Millisecond, nil)
	m.ObserveReportUpload(5*time.Second, errors.New("bucket reports: access denied"))
	// The writer reported this failure itself; the pipeline's hook for the
	// same failure must not count it again.
	m.PipelineHooks().ReportFailed()
	if got := testutil.ToFloat64(m.uploadFailures); got != 2 {
		t.Errorf("report_upload_failures_total = %v, want 2", got)
	}
	if got := sampleValue(t, m.uploadDuration); got != 5.2 {
		t.Errorf("report_upload_duration_seconds sum = %v, want 5.2", got)
	}
	if got := testutil.CollectAndCount(m.uploadDuration); got != 1 {
		t.Errorf("report_upload_duration_seconds has %d series, want 1", got)
	}
}

func TestCountDeadLetters(t *testing.T) {
	m, _ := newMetrics(t)
	brokerDown := errors.New("dead-letter topic: broker unavailable")
	var published []string
	pub := m.CountDeadLetters(publisherFunc(func(_ context.Context, _ *consumer.Message, reason string, _ error) error {
		if reason == string(schemas.ReasonOversized) {
			return brokerDown
		}
		published = append(published, reason)
		return nil
	}))
	ctx := context.Background()
	msg := &consumer.Message{Topic: "requests", Partition: 0, Offset: 12}
	for _, reason := range []string{string(schemas.ReasonUndecodable), string(schemas.ReasonUndecodable), "report_failed", "tenant-acme-req-123"} {
		if err := pub.PublishDeadLetter(ctx, msg, reason, errors.New("cause")); err != nil {
			t.Fatalf("PublishDeadLetter(%q): %v", reason, err)
		}
	}
	if err := pub.PublishDeadLetter(ctx, msg, string(schemas.ReasonOversized), errors.New("cause")); !errors.Is(err, brokerDown) {
		t.Fatalf("a failing publisher's error must come back unchanged: got %v", err)
	}
	if len(published) != 4 {
		t.Fatalf("the wrapped publisher saw %d messages, want 4", len(published))
	}
	for _, tt := range []struct {
		reason string
		want   float64
	}{
		{string(schemas.ReasonUndecodable), 2},
		{"report_failed", 1},
		{"other", 1},
		{string(schemas.ReasonOversized), 0}, // not published, so not a dead letter
	} {
		if got := testutil.ToFloat64(m.deadLetters.WithLabelValues(tt.reason)); got != tt.want {
			t.Errorf("dead_letters_total{reason=%q} = %v, want %v", tt.reason, got, tt.want)
		}
	}
}

func TestHTTPRouteLabelIsThePatternNotThePath(t *testing.T) {
	m, reg := newMetrics(t)
	mux := http.NewServeMux()
	const pattern = "GET /v1/tenants/{tenant}/requests/{id}"
	mux.Handle(pattern, m.InstrumentHTTP(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "missing" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "ok")
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, path := range []string{"/v1/tenants/acme-corp/requests/req-7f3a9", "/v1/tenants/globex/requests/req-00c1", "/v1/tenants/acme-corp/requests/missing"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	if got := testutil.ToFloat64(m.httpRequests.WithLabelValues(pattern, "200")); got != 2 {
		t.Errorf("http_requests_total{route=%q,code=\"200\"} = %v, want 2", pattern, got)
	}
	if got := testutil.ToFloat64(m.httpRequests.WithLabelValues(pattern, "404")); got != 1 {
		t.Errorf("http_requests_total{route=%q,code=\"404\"} = %v, want 1", pattern, got)
	}
	if got := testutil.CollectAndCount(m.httpDuration); got != 1 {
		t.Errorf("http_request_duration_seconds has %d series for one route, want 1", got)
	}

	// No label value anywhere may carry an id from the paths.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				for _, id := range []string{"acme", "globex", "req-"} {
					if strings.Contains(l.GetValue(), id) {
						t.Errorf("%s{%s=%q} carries the id %q", mf.GetName(), l.GetName(), l.GetValue(), id)
					}
				}
			}
		}
	}
}

// TestBuildInfo: the metric's one series carries what `rulevalidator
// version` prints for the running binary.
func TestBuildInfo(t *testing.T) {
	m, _ := newMetrics(t)
	if got := testutil.CollectAndCount(m.buildInfo); got != 1 {
		t.Fatalf("build_info has %d series, want 1", got)
	}
	info, err := buildinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"version": info.Version, "go_version": runtime.Version(), "revision": info.LabelRevision()}
	ch := make(chan prometheus.Metric, 1)
	m.buildInfo.Collect(ch)
	var pb dto.Metric
	if err := (<-ch).Write(&pb); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range pb.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	if !maps.Equal(got, want) || pb.GetGauge().GetValue() != 1 {
		t.Errorf("build_info%v = %v, want build_info%v = 1", got, pb.GetGauge().GetValue(), want)
	}
}

func TestBuildLabels(t *testing.T) {
	const rev = "9e17170d3c1f4b0a8e2d5c6b7a8f9e0d1c2b3a4f"
	tests := []struct {
		name string
		info buildinfo.Info
		want [3]string // version, go_version, revision
	}{
		{"a development build", buildinfo.Info{Version: buildinfo.Devel, GoVersion: "go1.26.8"},
			[3]string{"(devel)", "go1.26.8", "unknown"}},
		{"a stamped image", buildinfo.Info{Version: "v0.1.0", Revision: rev, GoVersion: "go1.26.8"},
			[3]string{"v0.1.0", "go1.26.8", rev}},
		{"a modified tree", buildinfo.Info{Version: "v0.1.0", Revision: rev, Modified: true, GoVersion: "go1.26.8"},
			[3]string{"v0.1.0", "go1.26.8", rev + "-dirty"}},
	}
	for _, tt := range tests {
		if got := buildLabels(tt.info); got != tt.want {
			t.Errorf("%s: labels %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestHandlerServesTheTextExposition(t *testing.T) {
	m, reg := newMetrics(t)
	exercise(m)
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q, want the text format 0.0.4", ct)
	}
	for _, line := range []string{
		`rulevalidator_requests_consumed_total{outcome="completed"} 1`,
		`rulevalidator_consumer_lag_messages{partition="2",topic="rulevalidator.requests"} 9`,
		"# TYPE rulevalidator_llm_request_duration_seconds histogram",
	} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("the exposition lacks the line %q", line)
		}
	}
	// promlint parses the text as Prometheus does, then lints it.
	problems, err := promlint.New(strings.NewReader(string(body))).Lint()
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestHandlerServesOpenMetricsWhenAsked(t *testing.T) {
	_, reg := newMetrics(t)
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Errorf("Content-Type %q, want application/openmetrics-text", ct)
	}
	if !strings.HasSuffix(string(body), "# EOF\n") {
		t.Error("the OpenMetrics exposition does not end with # EOF")
	}
}

func TestHooksAreSafeForConcurrentUse(t *testing.T) {
	m, reg := newMetrics(t)
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			eh, ch, ph := m.EngineHooks(), m.ConsumerHooks("requests"), m.PipelineHooks()
			for i := range rounds {
				eh.LLMCall(context.Background(), fmt.Sprintf("model-%d", (w*rounds+i)%(2*MaxModels)), engine.PurposeJudge, time.Millisecond, verdict.Usage{PromptTokens: 1}, nil)
				ch.InFlight(1)
				ch.Fetched("requests", w, int64(i), int64(rounds))
				ch.InFlight(-1)
				ph.RequestDone(context.Background(), "completed", time.Millisecond)
			}
		})
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range rounds / 10 {
			if _, err := reg.Gather(); err != nil {
				t.Errorf("gathering while hooks run: %v", err)
				return
			}
		}
	}()
	wg.Wait()
	if got := testutil.ToFloat64(m.requestsConsumed.WithLabelValues("completed")); got != workers*rounds {
		t.Errorf("requests_consumed_total{outcome=\"completed\"} = %v, want %d", got, workers*rounds)
	}
	if got := testutil.ToFloat64(m.inFlight); got != 0 {
		t.Errorf("requests_in_flight = %v after balanced +1/-1, want 0", got)
	}
	var tokens float64
	for _, model := range modelSeries(t, reg) {
		tokens += testutil.ToFloat64(m.llmTokens.WithLabelValues(model, "prompt"))
	}
	if tokens != workers*rounds {
		t.Errorf("prompt tokens over all model series = %v, want %d", tokens, workers*rounds)
	}
}

// modelSeries lists the model label values of llm_tokens_total.
func modelSeries(t *testing.T, g prometheus.Gatherer) []string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "rulevalidator_llm_tokens_total" {
			continue
		}
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "model" && !seen[l.GetValue()] {
					seen[l.GetValue()] = true
					out = append(out, l.GetValue())
				}
			}
		}
	}
	if len(out) > MaxModels+1 {
		t.Errorf("%d model label values, want at most %d", len(out), MaxModels+1)
	}
	return out
}

// Callbacks are counted by how they ended, into three series only.
func TestObserveCallback(t *testing.T) {
	m, _ := newMetrics(t)
	for _, d := range []callback.Delivery{
		{Delivered: true, Attempts: 2, Status: 200},
		{Attempts: 6, Status: 503, Err: errors.New("receiver answered 503")},
		{Err: fmt.Errorf("%w: scheme \"ftp\"", callback.ErrTargetRefused)},
		{Attempts: 1, Err: fmt.Errorf("%w after 1 attempts: %w", callback.ErrInterrupted, errors.New("503"))},
	} {
		m.ObserveCallback(d)
	}
	for outcome, want := range map[string]float64{CallbackDelivered: 1, CallbackGivenUp: 2, CallbackInterrupted: 1} {
		if got := testutil.ToFloat64(m.callbacks.WithLabelValues(outcome)); got != want {
			t.Errorf("callbacks_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.callbacks); n != 3 {
		t.Errorf("%d callback series, want 3", n)
	}
}

func TestObserveReview(t *testing.T) {
	m, _ := newMetrics(t)
	m.ObserveReview("boolean", "confirm", true)
	m.ObserveReview("boolean", "override", false)
	m.ObserveReview("numerical", "override", true)
	m.ObserveReview("ternary", "approve", false) // outside the known sets
	for _, tc := range []struct {
		c    prometheus.Collector
		want float64
	}{
		{m.reviews.WithLabelValues("boolean", "confirm"), 1},
		{m.reviews.WithLabelValues("boolean", "override"), 1},
		{m.reviews.WithLabelValues("numerical", "override"), 1},
		{m.reviews.WithLabelValues("other", "other"), 1},
		{m.reviewAgreements.WithLabelValues("boolean"), 1},
		{m.reviewAgreements.WithLabelValues("numerical"), 1},
	} {
		if got := testutil.ToFloat64(tc.c); got != tc.want {
			t.Errorf("%v = %v, want %v", tc.c, got, tc.want)
		}
	}
}

// The model endpoint's concurrency limit is a gauge by endpoint host and state.
func TestObserveModelConcurrency(t *testing.T) {
	m, _ := newMetrics(t)
	m.ObserveModelConcurrency(openai.Concurrency{Endpoint: "127.0.0.1:8081", Limit: 3, InFlight: 2, Waiting: 5})
	for state, want := range map[string]float64{"limit": 3, "in_flight": 2, "waiting": 5} {
		if got := testutil.ToFloat64(m.modelConcurrency.WithLabelValues("127.0.0.1:8081", state)); got != want {
			t.Errorf("llm_concurrency{state=%q} = %v, want %v", state, got, want)
		}
	}
}
