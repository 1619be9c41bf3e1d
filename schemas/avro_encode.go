package schemas

import (
	"time"

	"github.com/linkedin/goavro/v2"

	"rulevalidator/verdict"
)

// Go to native: unions are goavro.Union values, nil for null.

// opt is an optional value of the named Avro type: null or the value.
func opt[T any](avroType string, p *T) any {
	if p == nil {
		return nil
	}
	return goavro.Union(avroType, *p)
}

// nonZero points at v, or is nil when v is its type's zero value.
func nonZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// nativeList is an Avro array of primitives (ints, strings) as goavro takes it.
func nativeList[T any](items []T) []any {
	out := make([]any, len(items))
	for i, item := range items {
		out[i] = item
	}
	return out
}

func differencesNative(ds []verdict.Difference) []any {
	out := make([]any, len(ds))
	for i, d := range ds {
		out[i] = map[string]any{"kind": d.Kind, "quote": d.Quote, "document": d.Document}
	}
	return out
}

func optBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return goavro.Union("bytes", b)
}

func optRecord(name string, m map[string]any) any {
	if m == nil {
		return nil
	}
	return goavro.Union(Namespace+"."+name, m)
}

func millis(t time.Time) int64 { return t.UnixMilli() }

func (r *Request) native() (map[string]any, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	var ref map[string]any
	if r.RulesetRef != nil {
		ref = map[string]any{"id": r.RulesetRef.ID, "version": opt("string", r.RulesetRef.Version)}
	}
	namedInputs := make([]any, len(r.NamedInputs))
	for i, in := range r.NamedInputs {
		namedInputs[i] = map[string]any{"name": in.Name, "description": opt("string", in.Description), "value_json": in.ValueJSON}
	}
	return map[string]any{
		"request_id":     r.RequestID,
		"tenant_id":      r.TenantID,
		"ruleset_ref":    optRecord("RulesetRef", ref),
		"inline_ruleset": opt("string", r.InlineRuleset),
		"primary_docs":   documentsNative(r.PrimaryDocs),
		"auxiliary_docs": documentsNative(r.AuxiliaryDocs),
		"text_input":     opt("string", r.TextInput),
		"named_inputs":   namedInputs,
		"message":        opt("string", r.Message),
		"options": map[string]any{
			"generate_report": opt("boolean", r.Options.GenerateReport),
			"model":           opt("string", r.Options.Model),
			"callback_url":    opt("string", r.Options.CallbackURL),
			"cache":           opt("boolean", r.Options.Cache),
		},
		"submitted_at": millis(r.SubmittedAt),
	}, nil
}

func documentsNative(docs []Document) []any {
	out := make([]any, len(docs))
	for i, d := range docs {
		var pages any
		if d.Pages != nil {
			list := make([]any, len(d.Pages))
			for j, p := range d.Pages {
				list[j] = p
			}
			pages = goavro.Union("array", list)
		}
		out[i] = map[string]any{
			"name":         d.Name,
			"content":      opt("string", d.Content),
			"pages":        pages,
			"uri":          opt("string", d.URI),
			"content_type": opt("string", d.ContentType),
			"data":         optBytes(d.Data),
		}
	}
	return out
}

func (v *VerdictEvent) native() (map[string]any, error) {
	evidences := make([]any, len(v.Evidences))
	for i, e := range v.Evidences {
		evidences[i] = map[string]any{
			"text":               e.Text,
			"source_origin":      e.SourceOrigin,
			"source_page_number": e.SourcePageNumber,
			"anchored":           e.Anchored,
			"match":              string(e.Match),
			"start_offset":       opt("int", e.StartOffset),
			"end_offset":         opt("int", e.EndOffset),
			"quoted_text":        opt("string", nonZero(e.QuotedText)),
			"similarity":         opt("double", nonZero(e.Similarity)),
			"altered":            e.Altered,
			"differences":        differencesNative(e.Differences),
			"passage_id":         opt("string", nonZero(e.PassageID)),
			"cited_page_number":  opt("int", nonZero(e.CitedPageNumber)),
			"cited_passage_id":   opt("string", nonZero(e.CitedPassageID)),
		}
	}
	return map[string]any{
		"event_id":         v.EventID,
		"request_id":       v.RequestID,
		"tenant_id":        v.TenantID,
		"ruleset_id":       v.RulesetID,
		"ruleset_version":  opt("string", v.RulesetVersion),
		"model":            v.Model,
		"rule_id":          v.RuleID,
		"rule_name":        opt("string", v.RuleName),
		"rule_type":        string(v.RuleType),
		"data_sufficiency": v.DataSufficiency,
		"rationale":        v.Rationale,
		"boolean_output":   opt("boolean", v.BooleanOutput),
		"numerical_output": opt("int", v.NumericalOutput),
		"allowed_scores":   nativeList(v.AllowedScores),
		"not_applicable":   v.NotApplicable,
		"sufficiency_note": opt("string", v.SufficiencyNote),
		"problems":         nativeList(v.Problems),
		"pages_considered": pagesNative(v.PagesConsidered),
		"evidences":        evidences,
		"started_at":       millis(v.StartedAt),
		"completed_at":     millis(v.CompletedAt),
		"rule_index":       v.RuleIndex,
		"rule_count":       v.RuleCount,
		"cached":           cachedNative(v.Cached),
		"confidence":       opt("double", v.Confidence),
		"needs_review":     v.NeedsReview,
		"review_reasons":   nativeList(v.ReviewReasons),
		"rule_weight":      opt("double", v.RuleWeight),
	}, nil
}

func cachedNative(c *verdict.CachedFrom) any {
	if c == nil {
		return nil
	}
	return optRecord("CachedFrom", map[string]any{"judged_at": millis(c.JudgedAt), "request_id": c.RequestID})
}

// aggregateNative is an Aggregate record.
func aggregateNative(a verdict.Aggregate) map[string]any {
	var boolAgg, numAgg map[string]any
	if b := a.Boolean; b != nil {
		boolAgg = map[string]any{"mode": string(b.Mode), "passed": b.Passed, "applicable": b.Applicable, "passed_count": b.PassedCount}
	}
	if n := a.Numerical; n != nil {
		numAgg = map[string]any{"mode": string(n.Mode), "score": opt("double", n.Score), "counted": n.Counted}
	}
	return map[string]any{
		"boolean":   optRecord("BooleanAggregate", boolAgg),
		"numerical": optRecord("NumericalAggregate", numAgg),
	}
}

// optNonEmpty is an optional string that is null when empty.
func optNonEmpty(s string) any {
	if s == "" {
		return nil
	}
	return opt("string", &s)
}

func groupsNative(groups []verdict.GroupResult) []any {
	out := make([]any, len(groups))
	for i, g := range groups {
		out[i] = map[string]any{
			"id": g.ID, "path": g.Path, "name": optNonEmpty(g.Name), "required": g.Required,
			"not_applicable": g.NotApplicable, "reason": optNonEmpty(g.Reason),
			"gated_by": nativeList(g.GatedBy), "rule_ids": nativeList(g.RuleIDs),
			"aggregate": aggregateNative(g.Aggregate),
		}
	}
	return out
}

func (s *SummaryEvent) native() (map[string]any, error) {
	var failure, report map[string]any
	if e := s.Error; e != nil {
		failure = map[string]any{"code": string(e.Code), "message": e.Message}
	}
	if d := s.Report; d != nil {
		report = map[string]any{"file_name": d.FileName, "uri": d.URI, "mime_type": d.MIMEType, "reference_id": d.ReferenceID}
	}
	sources := make([]any, len(s.Sources))
	for i, src := range s.Sources {
		sources[i] = map[string]any{"source_origin": src.SourceOrigin, "text": src.Text, "source_page_number": src.SourcePageNumber}
	}
	return map[string]any{
		"event_id":        s.EventID,
		"request_id":      s.RequestID,
		"tenant_id":       s.TenantID,
		"ruleset_id":      s.RulesetID,
		"ruleset_version": opt("string", s.RulesetVersion),
		"model":           s.Model,
		"status":          string(s.Status),
		"counts": map[string]any{
			"rules":             s.Counts.Rules,
			"passed":            s.Counts.Passed,
			"failed":            s.Counts.Failed,
			"not_applicable":    s.Counts.NotApplicable,
			"insufficient_data": s.Counts.InsufficientData,
			"cached":            s.Counts.Cached,
			"needs_review":      s.Counts.NeedsReview,
		},
		"aggregate": aggregateNative(s.Aggregate),
		"sources":   sources,
		"usage": map[string]any{
			"prompt_tokens":     int64(s.Usage.PromptTokens),
			"completion_tokens": int64(s.Usage.CompletionTokens),
			"cached_tokens":     int64(s.Usage.CachedTokens),
			"llm_calls":         int64(s.Usage.LLMCalls),
			"planned_calls":     int64(s.Usage.PlannedCalls),
			"rules_filtered":    int64(s.Usage.RulesFiltered),
			"rules_checked":     int64(s.Usage.RulesChecked),
			"cost":              opt("double", s.Usage.Cost),
		},
		"error":             optRecord("SummaryError", failure),
		"validation_report": optRecord("ReportDescriptor", report),
		"started_at":        millis(s.StartedAt),
		"completed_at":      millis(s.CompletedAt),
		"groups":            groupsNative(s.Groups),
	}, nil
}

func (d *DeadLetter) native() (map[string]any, error) {
	headers := make([]any, len(d.OriginalHeaders))
	for i, h := range d.OriginalHeaders {
		headers[i] = map[string]any{"key": h.Key, "value": optBytes(h.Value)}
	}
	value := d.OriginalValue
	if value == nil {
		value = []byte{}
	}
	return map[string]any{
		"original_topic":     d.OriginalTopic,
		"original_partition": d.OriginalPartition,
		"original_offset":    d.OriginalOffset,
		"original_timestamp": millis(d.OriginalTimestamp),
		"original_key":       optBytes(d.OriginalKey),
		"original_value":     value,
		"original_headers":   headers,
		"reason":             string(d.Reason),
		"message":            d.Message,
		"failed_at":          millis(d.FailedAt),
		"attempts":           d.Attempts,
	}, nil
}

func pagesNative(dps []verdict.DocumentPages) []any {
	out := make([]any, len(dps))
	for i, dp := range dps {
		pages := make([]any, len(dp.Pages))
		for j, p := range dp.Pages {
			pages[j] = int32(p)
		}
		out[i] = map[string]any{"document": dp.Document, "pages": pages}
	}
	return out
}
