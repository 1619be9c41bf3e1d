package objstore

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"rulevalidator/internal/tracing"
)

// tracerName is the instrumentation scope of the object store's spans.
const tracerName = "rulevalidator/objstore"

// s3Methods names the S3 call behind each operation, as rpc.method.
var s3Methods = map[string]string{
	"put": "PutObject", "put-new": "PutObject", "put-if-match": "PutObject",
	"get": "GetObject", "stat": "HeadObject", "delete": "DeleteObject",
	"list": "ListObjectsV2", "ping": "HeadBucket",
}

// startSpan starts the CLIENT span of one operation, retries included,
// "S3.<method>": the operation, the bucket and the key's length (a key can
// name a tenant's document; a listing's prefix, a ping's none), never the
// content.
func (s *Store) startSpan(ctx context.Context, op, bucket, key string) (context.Context, trace.Span) {
	method := s3Methods[op]
	return s.tracer.Start(ctx, "S3."+method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("rpc.system", "aws-api"),
		attribute.String("rpc.service", "S3"),
		attribute.String("rpc.method", method),
		attribute.String("rulevalidator.object.op", op),
		semconv.AWSS3Bucket(bucket),
		attribute.Int("rulevalidator.object.key_length", len(key)),
	))
}

// attrListed is how many keys a listing passed on.
const attrListed = "rulevalidator.object.listed"

// endSpan ends an operation's span with the object's size, when known
// (size >= 0), and its error.
func endSpan(span trace.Span, size int64, err error) {
	if size >= 0 && err == nil {
		span.SetAttributes(attribute.Int64("rulevalidator.object.size", size))
	}
	tracing.End(span, err)
}
