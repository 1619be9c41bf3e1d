package producer

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"rulevalidator/internal/tracing"
	"rulevalidator/stream"
)

// tracerName is the instrumentation scope of the producer's spans.
const tracerName = "rulevalidator/producer"

// tracerOf is tp's tracer for the producer, nil when tracing is off (tp nil
// or the no-op provider): see send.
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if !tracing.Enabled(tp) {
		return nil
	}
	return tp.Tracer(tracerName)
}

// send writes recs in one call within a PRODUCER span per topic, "send
// <topic>" (messaging.system kafka, the topic, how many records), and
// returns once all are acknowledged. Each record carries the trace context
// of its topic's span in its traceparent and tracestate headers, in place of
// any it had: a consumer of the events continues the trace of the request.
// Without a valid span context (no trace in ctx), or without a tracer
// (tracing off: the records already carry the trace that came in, which a
// span that records nothing would only copy), the records keep the headers
// they have. recs are not modified: a copy is written.
func send(ctx context.Context, tracer trace.Tracer, w *stream.Writer, recs []stream.Record) error {
	if tracer == nil {
		return w.Write(ctx, recs...)
	}
	var topics []string
	spans := map[string]trace.Span{}
	count := map[string]int{}
	for _, r := range recs {
		if count[r.Topic]++; count[r.Topic] == 1 {
			topics = append(topics, r.Topic)
		}
	}
	carriers := map[string]propagation.MapCarrier{}
	for _, topic := range topics {
		sctx, span := tracer.Start(ctx, "send "+topic, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
			semconv.MessagingSystemKafka,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"),
			semconv.MessagingDestinationName(topic),
			semconv.MessagingBatchMessageCount(count[topic]),
		))
		spans[topic] = span
		if span.SpanContext().IsValid() {
			c := propagation.MapCarrier{}
			tracing.Propagator().Inject(sctx, c)
			carriers[topic] = c
		}
	}
	if len(carriers) > 0 {
		out := make([]stream.Record, len(recs))
		for i, r := range recs {
			out[i] = r
			if c, ok := carriers[r.Topic]; ok {
				out[i].Headers = withTrace(r.Headers, c)
			}
		}
		recs = out
	}
	err := w.Write(ctx, recs...)
	for _, topic := range topics {
		if span := spans[topic]; span.IsRecording() {
			size := 0
			for _, r := range recs {
				if r.Topic == topic {
					size += len(r.Value)
				}
			}
			span.SetAttributes(attribute.Int("rulevalidator.messages.body_size", size))
		}
		tracing.End(spans[topic], err)
	}
	return err
}

// withTrace is hs without its trace context headers, then those of c.
func withTrace(hs []stream.Header, c propagation.MapCarrier) []stream.Header {
	out := make([]stream.Header, 0, len(hs)+2)
	for _, h := range hs {
		if h.Key != HeaderTraceparent && h.Key != HeaderTracestate {
			out = append(out, h)
		}
	}
	for _, k := range []string{HeaderTraceparent, HeaderTracestate} {
		if v := c.Get(k); v != "" {
			out = append(out, stream.Header{Key: k, Value: []byte(v)})
		}
	}
	return out
}
