package judging

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"rulevalidator/engine"
	"rulevalidator/internal/tracing"
	"rulevalidator/schemas"
)

// tracerName is the instrumentation scope of the stages' spans.
const tracerName = "rulevalidator/judging"

// The attributes of the stages' spans: ids, counts and sizes only.
const (
	attrRequestID   = "rulevalidator.request.id"
	attrTenantID    = "rulevalidator.tenant.id"
	attrRulesetID   = "rulevalidator.ruleset.id"
	attrRulesetVer  = "rulevalidator.ruleset.version"
	attrInline      = "rulevalidator.ruleset.inline"
	attrRules       = "rulevalidator.rules"
	attrDocuments   = "rulevalidator.documents"
	attrClaimChecks = "rulevalidator.documents.claim_checks"
	attrFiles       = "rulevalidator.documents.files"
	attrPages       = "rulevalidator.documents.pages"
	attrReport      = "rulevalidator.report.written"
)

// rulesetTraced is ruleset in a span, "ruleset".
func (j *Judge) rulesetTraced(ctx context.Context, req *schemas.Request) (rs *engine.Ruleset, err error) {
	ctx, span := j.tracer.Start(ctx, "ruleset", trace.WithAttributes(
		attribute.String(attrRequestID, req.RequestID), attribute.String(attrTenantID, req.TenantID),
		attribute.Bool(attrInline, req.InlineRuleset != nil)))
	defer func() {
		if rs != nil {
			span.SetAttributes(attribute.String(attrRulesetID, rs.ID), attribute.String(attrRulesetVer, rs.Version), attribute.Int(attrRules, len(rs.Rules)))
		}
		tracing.End(span, err)
	}()
	return j.ruleset(ctx, req)
}

// readDocumentsTraced is readDocuments in a span, "documents": how many
// documents, of which claim checks (each read from object storage in its
// own client span) and files, and the pages read.
func (j *Judge) readDocumentsTraced(ctx context.Context, req *schemas.Request, held *holds) (out read, err error) {
	ctx, span := j.tracer.Start(ctx, "documents")
	if !span.IsRecording() {
		defer span.End()
		return j.readDocuments(ctx, req, held)
	}
	docs, claims, files := 0, 0, 0
	for _, group := range [][]schemas.Document{req.PrimaryDocs, req.AuxiliaryDocs} {
		for _, d := range group {
			docs++
			switch {
			case d.URI != nil:
				claims++
			case d.Data != nil:
				files++
			}
		}
	}
	span.SetAttributes(attribute.Int(attrDocuments, docs), attribute.Int(attrClaimChecks, claims), attribute.Int(attrFiles, files))
	defer func() {
		pages := 0
		for _, group := range [][]schemas.Document{req.PrimaryDocs, req.AuxiliaryDocs} {
			for _, d := range group {
				pages += len(d.Pages)
			}
		}
		span.SetAttributes(attribute.Int(attrPages, pages))
		tracing.End(span, err)
	}()
	return j.readDocuments(ctx, req, held)
}

// reportTraced is report in a span, "report".
func (j *Judge) reportTraced(ctx context.Context, req *schemas.Request, rs *engine.Ruleset, res *engine.Result) (d *schemas.ReportDescriptor, err error) {
	if !wantsReport(req, rs) {
		return j.report(ctx, req, rs, res)
	}
	ctx, span := j.tracer.Start(ctx, "report")
	defer func() {
		span.SetAttributes(attribute.Bool(attrReport, d != nil))
		tracing.End(span, err)
	}()
	return j.report(ctx, req, rs, res)
}
