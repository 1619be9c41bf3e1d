package schemas

import (
	"fmt"

	"rulevalidator/verdict"
)

// eventFromNative converts a decoded record to its event. Fields an older
// writer's schema lacks read as their defaults; fields a newer one added are
// ignored.
func eventFromNative(name string, rec map[string]any) (Event, error) {
	var err error
	r := nativeReader{rec: rec, err: &err}
	var ev Event
	switch name {
	case RequestSchema:
		req := requestFromNative(r)
		if err == nil {
			if verr := req.Validate(); verr != nil {
				verr.(*RequestError).Request = req
				return nil, verr
			}
		}
		ev = req
	case VerdictSchema:
		ev = verdictFromNative(r)
	case SummarySchema:
		ev = summaryFromNative(r)
	case DeadLetterSchema:
		ev = deadLetterFromNative(r)
	case ReviewSchema:
		ev = reviewFromNative(r)
	default:
		return nil, fmt.Errorf("%s is not a rulevalidator event", name)
	}
	if err != nil {
		return nil, err
	}
	return ev, nil
}

func requestFromNative(r nativeReader) *Request {
	req := &Request{
		RequestID:     r.str("request_id"),
		TenantID:      r.str("tenant_id"),
		InlineRuleset: r.optStr("inline_ruleset"),
		PrimaryDocs:   documentsFromNative(r, "primary_docs"),
		AuxiliaryDocs: documentsFromNative(r, "auxiliary_docs"),
		TextInput:     r.optStr("text_input"),
		Message:       r.optStr("message"),
		SubmittedAt:   r.time("submitted_at"),
	}
	if ref, ok := r.record("ruleset_ref", nullable); ok {
		req.RulesetRef = &RulesetRef{ID: ref.str("id"), Version: ref.optStr("version")}
	}
	for i, v := range r.array("named_inputs") {
		in := r.item("named_inputs", i, v)
		req.NamedInputs = append(req.NamedInputs, NamedInput{Name: in.str("name"), Description: in.optStr("description"), ValueJSON: in.str("value_json")})
	}
	if opts, ok := r.record("options", defaulted); ok {
		req.Options = Options{GenerateReport: opts.optBoolean("generate_report"), Model: opts.optStr("model"), CallbackURL: opts.optStr("callback_url"),
			Cache: opts.optBoolean("cache")}
	}
	return req
}

func documentsFromNative(r nativeReader, field string) []Document {
	var docs []Document
	for i, v := range r.array(field) {
		d := r.item(field, i, v)
		doc := Document{Name: d.str("name"), Content: d.optStr("content"), URI: d.optStr("uri"), ContentType: d.optStr("content_type"), Data: d.optBytes("data")}
		if pages, ok := get[[]any](d, "pages", nullable); ok {
			doc.Pages = make([]string, len(pages))
			for j, p := range pages {
				s, ok := p.(string)
				if !ok {
					d.fail(fmt.Sprintf("pages[%d]", j), "is a %T, want a string", p)
				}
				doc.Pages[j] = s
			}
		}
		docs = append(docs, doc)
	}
	return docs
}

func verdictFromNative(r nativeReader) *VerdictEvent {
	v := &VerdictEvent{
		EventID:         r.str("event_id"),
		RequestID:       r.str("request_id"),
		TenantID:        r.str("tenant_id"),
		RulesetID:       r.str("ruleset_id"),
		RulesetVersion:  r.optStr("ruleset_version"),
		Model:           r.str("model"),
		RuleID:          r.str("rule_id"),
		RuleName:        r.optStr("rule_name"),
		RuleType:        verdict.RuleType(r.str("rule_type")),
		DataSufficiency: r.boolean("data_sufficiency"),
		Rationale:       r.str("rationale"),
		BooleanOutput:   r.optBoolean("boolean_output"),
		NumericalOutput: r.optInt("numerical_output"),
		NotApplicable:   r.boolean("not_applicable"),
		SufficiencyNote: r.optStr("sufficiency_note"),
		StartedAt:       r.time("started_at"),
		CompletedAt:     r.time("completed_at"),
		RuleIndex:       r.int("rule_index"),
		RuleCount:       r.int("rule_count"),
	}
	for i, s := range r.array("allowed_scores") {
		n, ok := s.(int32)
		if !ok {
			r.fail(fmt.Sprintf("allowed_scores[%d]", i), "is a %T, want an int", s)
		}
		v.AllowedScores = append(v.AllowedScores, int(n))
	}
	v.Problems = r.strs("problems")
	v.Confidence = r.optDouble("confidence")
	v.NeedsReview = r.defaultedBool("needs_review")
	v.ReviewReasons = r.strs("review_reasons")
	v.RuleWeight = r.optDouble("rule_weight")
	v.PagesConsidered = pagesFromNative(r)
	if c, ok := r.record("cached", nullable); ok {
		v.Cached = &verdict.CachedFrom{JudgedAt: c.time("judged_at"), RequestID: c.str("request_id")}
	}
	for i, item := range r.array("evidences") {
		e := r.item("evidences", i, item)
		v.Evidences = append(v.Evidences, verdict.Evidence{
			Text:             e.str("text"),
			SourceOrigin:     e.str("source_origin"),
			SourcePageNumber: e.int("source_page_number"),
			Anchored:         e.boolean("anchored"),
			Match:            verdict.Match(e.str("match")),
			StartOffset:      e.optInt("start_offset"),
			EndOffset:        e.optInt("end_offset"),
			QuotedText:       deref(e.optStr("quoted_text")),
			Similarity:       deref(e.optDouble("similarity")),
			Altered:          e.defaultedBool("altered"),
			Differences:      differencesFromNative(e),
			PassageID:        deref(e.optStr("passage_id")),
			CitedPageNumber:  deref(e.optInt("cited_page_number")),
			CitedPassageID:   deref(e.optStr("cited_passage_id")),
		})
	}
	return v
}

func pagesFromNative(r nativeReader) []verdict.DocumentPages {
	var out []verdict.DocumentPages
	for i, item := range r.array("pages_considered") {
		d := r.item("pages_considered", i, item)
		dp := verdict.DocumentPages{Document: d.str("document")}
		for j, p := range d.array("pages") {
			n, ok := p.(int32)
			if !ok {
				d.fail(fmt.Sprintf("pages[%d]", j), "is a %T, want an int", p)
			}
			dp.Pages = append(dp.Pages, int(n))
		}
		out = append(out, dp)
	}
	return out
}

func differencesFromNative(r nativeReader) []verdict.Difference {
	var out []verdict.Difference
	for i, item := range r.array("differences") {
		d := r.item("differences", i, item)
		out = append(out, verdict.Difference{Kind: d.str("kind"), Quote: d.str("quote"), Document: d.str("document")})
	}
	return out
}

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func summaryFromNative(r nativeReader) *SummaryEvent {
	counts, _ := r.record("counts", required)
	usage, _ := r.record("usage", required)
	agg, _ := r.record("aggregate", required)
	s := &SummaryEvent{
		EventID:        r.str("event_id"),
		RequestID:      r.str("request_id"),
		TenantID:       r.str("tenant_id"),
		RulesetID:      r.str("ruleset_id"),
		RulesetVersion: r.optStr("ruleset_version"),
		Model:          r.str("model"),
		Status:         Status(r.str("status")),
		Counts: Counts{
			Rules:            counts.int("rules"),
			Passed:           counts.int("passed"),
			Failed:           counts.int("failed"),
			NotApplicable:    counts.int("not_applicable"),
			InsufficientData: counts.int("insufficient_data"),
			Cached:           counts.defaultedInt("cached"),
			NeedsReview:      counts.defaultedInt("needs_review"),
		},
		Usage: verdict.Usage{
			PromptTokens:     usage.int("prompt_tokens"),
			CompletionTokens: usage.int("completion_tokens"),
			CachedTokens:     usage.int("cached_tokens"),
			LLMCalls:         usage.int("llm_calls"),
			PlannedCalls:     usage.defaultedInt("planned_calls"),
			RulesFiltered:    usage.defaultedInt("rules_filtered"),
			RulesChecked:     usage.defaultedInt("rules_checked"),
			Cost:             usage.optDouble("cost"),
		},
		StartedAt:   r.time("started_at"),
		CompletedAt: r.time("completed_at"),
	}
	s.Aggregate = aggregateFromNative(agg)
	for i, item := range r.array("groups") {
		g := r.item("groups", i, item)
		a, _ := g.record("aggregate", required)
		s.Groups = append(s.Groups, verdict.GroupResult{
			ID: g.str("id"), Path: g.str("path"), Name: deref(g.optStr("name")), Required: g.boolean("required"),
			NotApplicable: g.boolean("not_applicable"), Reason: deref(g.optStr("reason")),
			GatedBy: g.strs("gated_by"), RuleIDs: g.strs("rule_ids"), Aggregate: aggregateFromNative(a),
		})
	}
	for i, item := range r.array("sources") {
		src := r.item("sources", i, item)
		s.Sources = append(s.Sources, verdict.Source{
			SourceOrigin:     src.str("source_origin"),
			Text:             src.str("text"),
			SourcePageNumber: src.int("source_page_number"),
		})
	}
	if e, ok := r.record("error", nullable); ok {
		s.Error = &SummaryError{Code: Reason(e.str("code")), Message: e.str("message")}
	}
	if d, ok := r.record("validation_report", nullable); ok {
		s.Report = &ReportDescriptor{FileName: d.str("file_name"), URI: d.str("uri"), MIMEType: d.str("mime_type"), ReferenceID: d.str("reference_id")}
	}
	return s
}

// aggregateFromNative reads an Aggregate record.
func aggregateFromNative(agg nativeReader) verdict.Aggregate {
	var out verdict.Aggregate
	if b, ok := agg.record("boolean", nullable); ok {
		out.Boolean = &verdict.BooleanAggregate{
			Mode:        verdict.BooleanAggregation(b.str("mode")),
			Passed:      b.boolean("passed"),
			Applicable:  b.int("applicable"),
			PassedCount: b.int("passed_count"),
		}
	}
	if n, ok := agg.record("numerical", nullable); ok {
		out.Numerical = &verdict.NumericalAggregate{
			Mode:    verdict.NumericalAggregation(n.str("mode")),
			Score:   n.optDouble("score"),
			Counted: n.int("counted"),
		}
	}
	return out
}

func deadLetterFromNative(r nativeReader) *DeadLetter {
	d := &DeadLetter{
		OriginalTopic:     r.str("original_topic"),
		OriginalPartition: r.int("original_partition"),
		OriginalOffset:    r.long("original_offset"),
		OriginalTimestamp: r.time("original_timestamp"),
		OriginalKey:       r.optBytes("original_key"),
		OriginalValue:     r.bytes("original_value"),
		Reason:            Reason(r.str("reason")),
		Message:           r.str("message"),
		FailedAt:          r.time("failed_at"),
		Attempts:          r.int("attempts"),
	}
	for i, item := range r.array("original_headers") {
		h := r.item("original_headers", i, item)
		d.OriginalHeaders = append(d.OriginalHeaders, Header{Key: h.str("key"), Value: h.optBytes("value")})
	}
	return d
}
