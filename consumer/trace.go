package consumer

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"rulevalidator/internal/tracing"
)

// tracerName is the instrumentation scope of the consumer's spans.
const tracerName = "rulevalidator/consumer"

// Trace is the middleware that wraps a handler in a CONSUMER span per message, "process <topic>", with the
// messaging attributes of a Kafka message (system, topic, group, partition,
// offset, key length, body size).
//
// The span's parent is the trace context the message carries (its
// traceparent header): the message is processed once, as one step of the
// request its producer started, so the API's request, this processing,
// the model calls and the events published share one trace. A redelivery
// is another process span of the same trace.
//
// A Consumer with Config.TracerProvider set makes the same span around its
// handler itself, and ends it after Hooks.Handled, which sees it in its
// context (an exemplar of the handler's time names its trace).
func Trace(tp trace.TracerProvider, group string) Middleware {
	tracer := tp.Tracer(tracerName)
	return func(h Handler) Handler {
		return func(ctx context.Context, m *Message) error {
			ctx, span := startProcess(ctx, tracer, group, m)
			err := h(ctx, m)
			tracing.End(span, err)
			return err
		}
	}
}

// startProcess starts m's process span, continuing the trace m carries.
func startProcess(ctx context.Context, tracer trace.Tracer, group string, m *Message) (context.Context, trace.Span) {
	ctx = tracing.Propagator().Extract(ctx, headerCarrier(m.Headers))
	return tracer.Start(ctx, "process "+m.Topic,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			semconv.MessagingSystemKafka,
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(m.Topic),
			semconv.MessagingConsumerGroupName(group),
			semconv.MessagingDestinationPartitionID(strconv.Itoa(m.Partition)),
			semconv.MessagingKafkaOffset(int(m.Offset)),
			semconv.MessagingMessageBodySize(len(m.Value)),
		))
}

// headerCarrier reads the trace context from a message's headers, the last
// one of a key winning.
func headerCarrier(hs []Header) propagation.MapCarrier {
	c := propagation.MapCarrier{}
	for _, h := range hs {
		if h.Key == "traceparent" || h.Key == "tracestate" {
			c[h.Key] = string(h.Value)
		}
	}
	return c
}
