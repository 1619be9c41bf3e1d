package pipeline

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"

	"rulevalidator/consumer"
	"rulevalidator/internal/tracing"
	"rulevalidator/schemas"
)

// tracerName is the instrumentation scope of the pipeline's spans.
const tracerName = "rulevalidator/pipeline"

// decode decodes and checks m's request in a span, "decode", that names the
// request (its id, tenant, rule and document counts), never its text.
func (p *Pipeline) decode(ctx context.Context, m *consumer.Message) (req *schemas.Request, err error) {
	ctx, span := p.tracer.Start(ctx, "decode")
	defer func() {
		if req != nil && span.IsRecording() {
			span.SetAttributes(
				attribute.String("rulevalidator.request.id", req.RequestID),
				attribute.String("rulevalidator.tenant.id", req.TenantID),
				attribute.Int("rulevalidator.documents", len(req.PrimaryDocs)+len(req.AuxiliaryDocs)),
			)
		}
		tracing.End(span, err)
	}()
	ev, err := p.cfg.Serde.Decode(ctx, m.Topic, m.Value, m.Headers)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", position(m), err) // e.g. registry unavailable: held
	}
	req, ok := ev.(*schemas.Request)
	if !ok {
		return nil, fmt.Errorf("%w: %s holds a %s, not a %s", schemas.ErrUndecodable, position(m), ev.SchemaName(), schemas.RequestSchema)
	}
	if err := req.Validate(); err != nil {
		return nil, consumer.Permanent(string(schemas.ReasonInvalidRequest), err)
	}
	return req, nil
}
