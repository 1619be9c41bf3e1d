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
// New puts it outermost when Config.TracerProvider is set.
func Trace(tp trace.TracerProvider, group string) Middleware {
	tracer := tp.Tracer(tracerName)
	return func(h Handler) Handler {
		return traced(tracer, group, h)
	}
}

func traced(tracer trace.Tracer, group string, h Handler) Handler {
	return func(ctx context.Context, m *Message) error {
		ctx = tracing.Propagator().Extract(ctx, headerCarrier(m.Headers))
		ctx, span := tracer.Start(ctx, "process "+m.Topic,
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
		err := h(ctx, m)
		tracing.End(span, err)
		return err
	}
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
