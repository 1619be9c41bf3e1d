package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// Exemplar labels: the trace and span an observation was made in.
const (
	ExemplarTraceID = "trace_id"
	ExemplarSpanID  = "span_id"
)

// exemplar is the exemplar of an observation made in ctx: the ids of its
// span when that span is recording and sampled (so that its trace is
// exported and can be opened), nil otherwise. With tracing off there is
// never one: a trace id passed through from a caller may lead nowhere.
// Exemplars add no labels, so no series: cardinality is unchanged.
func exemplar(ctx context.Context) prometheus.Labels {
	if ctx == nil {
		return nil
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return nil
	}
	sc := span.SpanContext()
	if !sc.IsSampled() {
		return nil
	}
	return prometheus.Labels{ExemplarTraceID: sc.TraceID().String(), ExemplarSpanID: sc.SpanID().String()}
}

// observe records v on o, with the exemplar of ctx when it has one.
// Exemplars are served in the OpenMetrics format only (Handler offers it).
func observe(ctx context.Context, o prometheus.Observer, v float64) {
	if ex := exemplar(ctx); ex != nil {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, ex)
			return
		}
	}
	o.Observe(v)
}
