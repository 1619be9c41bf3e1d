package schemas

import (
	"encoding/json"
	"fmt"
	"time"

	"rulevalidator/internal/clone"
	"rulevalidator/verdict"
)

// The events' JSON form is what the HTTP API answers and what the tail CLI
// prints: the Avro record as a JSON object whose names are the Avro field
// names, optional fields as null when absent, arrays as [] when empty and
// timestamps in RFC 3339, UTC, with milliseconds. Bytes (dead letters only)
// are base64, as encoding/json writes them.
//
// Reading is lenient about fields it does not know, as an Avro reader on an
// older schema is, and strict about the values it does: a timestamp that is
// not RFC 3339 or an unknown rule type or status is an error naming the field.

// TimeLayout is how the JSON form writes timestamps.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// timeJSON is t in TimeLayout, in UTC, as a JSON string.
func timeJSON(t time.Time) json.RawMessage {
	return json.RawMessage(`"` + t.UTC().Format(TimeLayout) + `"`)
}

// parseTime reads an RFC 3339 timestamp (any precision, any offset) as UTC.
// what names the event and field for the error.
func parseTime(what string, raw json.RawMessage) (time.Time, error) {
	if len(raw) == 0 {
		return time.Time{}, fmt.Errorf("schemas: %s is missing", what)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return time.Time{}, fmt.Errorf("schemas: %s: want an RFC 3339 timestamp string, got %s", what, raw)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("schemas: %s: want an RFC 3339 timestamp, got %q", what, s)
	}
	return t.UTC(), nil
}

// parseTimes fills each destination from its raw value, stopping at the first error.
func parseTimes(owner string, fields ...timeField) error {
	for _, f := range fields {
		t, err := parseTime(owner+": "+f.name, f.raw)
		if err != nil {
			return err
		}
		*f.dst = t
	}
	return nil
}

type timeField struct {
	name string
	raw  json.RawMessage
	dst  *time.Time
}

type verdictJSON struct {
	EventID         string          `json:"event_id"`
	RequestID       string          `json:"request_id"`
	TenantID        string          `json:"tenant_id"`
	RulesetID       string          `json:"ruleset_id"`
	RulesetVersion  *string         `json:"ruleset_version"`
	Model           string          `json:"model"`
	RuleID          string          `json:"rule_id"`
	RuleName        *string         `json:"rule_name"`
	RuleType        string          `json:"rule_type"`
	DataSufficiency bool            `json:"data_sufficiency"`
	Rationale       string          `json:"rationale"`
	BooleanOutput   *bool           `json:"boolean_output"`
	NumericalOutput *int            `json:"numerical_output"`
	AllowedScores   []int           `json:"allowed_scores"`
	NotApplicable   bool            `json:"not_applicable"`
	SufficiencyNote *string         `json:"sufficiency_note"`
	Problems        []string        `json:"problems"`
	PagesConsidered []pagesJSON     `json:"pages_considered"`
	Evidences       []evidenceJSON  `json:"evidences"`
	StartedAt       json.RawMessage `json:"started_at"`
	CompletedAt     json.RawMessage `json:"completed_at"`
	RuleIndex       int             `json:"rule_index"`
	RuleCount       int             `json:"rule_count"`
	Cached          *cachedJSON     `json:"cached"`
	Confidence      *float64        `json:"confidence"`
	NeedsReview     bool            `json:"needs_review"`
	ReviewReasons   []string        `json:"review_reasons"`
	RuleWeight      *float64        `json:"rule_weight"`
}

type cachedJSON struct {
	JudgedAt  json.RawMessage `json:"judged_at"`
	RequestID string          `json:"request_id"`
}

type pagesJSON struct {
	Document string `json:"document"`
	Pages    []int  `json:"pages"`
}

type evidenceJSON struct {
	Text             string           `json:"text"`
	SourceOrigin     string           `json:"source_origin"`
	SourcePageNumber int              `json:"source_page_number"`
	Anchored         bool             `json:"anchored"`
	Match            string           `json:"match"`
	StartOffset      *int             `json:"start_offset"`
	EndOffset        *int             `json:"end_offset"`
	QuotedText       *string          `json:"quoted_text"`
	Similarity       *float64         `json:"similarity"`
	Altered          bool             `json:"altered"`
	Differences      []differenceJSON `json:"differences"`
	PassageID        *string          `json:"passage_id"`
	CitedPageNumber  *int             `json:"cited_page_number"`
	CitedPassageID   *string          `json:"cited_passage_id"`
}

type differenceJSON struct {
	Kind     string `json:"kind"`
	Quote    string `json:"quote"`
	Document string `json:"document"`
}

// MarshalJSON writes the verdict's JSON form. Its receiver is a value so
// that a VerdictEvent held by value (a struct field, a map value) is written
// in this form too.
func (v VerdictEvent) MarshalJSON() ([]byte, error) {
	out := verdictJSON{
		EventID:         v.EventID,
		RequestID:       v.RequestID,
		TenantID:        v.TenantID,
		RulesetID:       v.RulesetID,
		RulesetVersion:  v.RulesetVersion,
		Model:           v.Model,
		RuleID:          v.RuleID,
		RuleName:        v.RuleName,
		RuleType:        string(v.RuleType),
		DataSufficiency: v.DataSufficiency,
		Rationale:       v.Rationale,
		BooleanOutput:   v.BooleanOutput,
		NumericalOutput: v.NumericalOutput,
		AllowedScores:   emptyIfNil(v.AllowedScores),
		NotApplicable:   v.NotApplicable,
		SufficiencyNote: v.SufficiencyNote,
		Problems:        emptyIfNil(v.Problems),
		PagesConsidered: make([]pagesJSON, len(v.PagesConsidered)),
		Evidences:       make([]evidenceJSON, len(v.Evidences)),
		StartedAt:       timeJSON(v.StartedAt),
		CompletedAt:     timeJSON(v.CompletedAt),
		RuleIndex:       v.RuleIndex,
		RuleCount:       v.RuleCount,
		Confidence:      v.Confidence,
		NeedsReview:     v.NeedsReview,
		ReviewReasons:   emptyIfNil(v.ReviewReasons),
		RuleWeight:      v.RuleWeight,
	}
	if v.Cached != nil {
		out.Cached = &cachedJSON{JudgedAt: timeJSON(v.Cached.JudgedAt), RequestID: v.Cached.RequestID}
	}
	for i, dp := range v.PagesConsidered {
		out.PagesConsidered[i] = pagesJSON{Document: dp.Document, Pages: emptyIfNil(dp.Pages)}
	}
	for i, e := range v.Evidences {
		out.Evidences[i] = evidenceJSON{
			Text:             e.Text,
			SourceOrigin:     e.SourceOrigin,
			SourcePageNumber: e.SourcePageNumber,
			Anchored:         e.Anchored,
			Match:            string(e.Match),
			StartOffset:      e.StartOffset,
			EndOffset:        e.EndOffset,
			QuotedText:       nonZero(e.QuotedText),
			Similarity:       nonZero(e.Similarity),
			Altered:          e.Altered,
			Differences:      make([]differenceJSON, len(e.Differences)),
			PassageID:        nonZero(e.PassageID),
			CitedPageNumber:  nonZero(e.CitedPageNumber),
			CitedPassageID:   nonZero(e.CitedPassageID),
		}
		for j, d := range e.Differences {
			out.Evidences[i].Differences[j] = differenceJSON(d)
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads the verdict's JSON form. Empty arrays read as nil
// slices, as Avro decoding gives them.
func (v *VerdictEvent) UnmarshalJSON(data []byte) error {
	var in verdictJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("schemas: not a verdict in JSON form: %w", err)
	}
	switch verdict.RuleType(in.RuleType) {
	case verdict.Boolean, verdict.Numerical:
	default:
		return fmt.Errorf("schemas: verdict %q: rule_type %q is not %s or %s", in.EventID, in.RuleType, verdict.Boolean, verdict.Numerical)
	}
	out := VerdictEvent{
		EventID:         in.EventID,
		RequestID:       in.RequestID,
		TenantID:        in.TenantID,
		RulesetID:       in.RulesetID,
		RulesetVersion:  in.RulesetVersion,
		Model:           in.Model,
		RuleID:          in.RuleID,
		RuleName:        in.RuleName,
		RuleType:        verdict.RuleType(in.RuleType),
		DataSufficiency: in.DataSufficiency,
		Rationale:       in.Rationale,
		BooleanOutput:   in.BooleanOutput,
		NumericalOutput: in.NumericalOutput,
		AllowedScores:   clone.OrNil(in.AllowedScores),
		NotApplicable:   in.NotApplicable,
		SufficiencyNote: in.SufficiencyNote,
		Problems:        clone.OrNil(in.Problems),
		RuleIndex:       in.RuleIndex,
		RuleCount:       in.RuleCount,
		Confidence:      in.Confidence,
		NeedsReview:     in.NeedsReview,
		ReviewReasons:   clone.OrNil(in.ReviewReasons),
		RuleWeight:      in.RuleWeight,
	}
	if err := parseTimes(fmt.Sprintf("verdict %q", in.EventID),
		timeField{"started_at", in.StartedAt, &out.StartedAt},
		timeField{"completed_at", in.CompletedAt, &out.CompletedAt}); err != nil {
		return err
	}
	if in.Cached != nil {
		out.Cached = &verdict.CachedFrom{RequestID: in.Cached.RequestID}
		if err := parseTimes(fmt.Sprintf("verdict %q: cached", in.EventID), timeField{"judged_at", in.Cached.JudgedAt, &out.Cached.JudgedAt}); err != nil {
			return err
		}
	}
	for _, dp := range in.PagesConsidered {
		out.PagesConsidered = append(out.PagesConsidered, verdict.DocumentPages{Document: dp.Document, Pages: clone.OrNil(dp.Pages)})
	}
	for _, e := range in.Evidences {
		out.Evidences = append(out.Evidences, verdict.Evidence{
			Text:             e.Text,
			SourceOrigin:     e.SourceOrigin,
			SourcePageNumber: e.SourcePageNumber,
			Anchored:         e.Anchored,
			Match:            verdict.Match(e.Match),
			StartOffset:      e.StartOffset,
			EndOffset:        e.EndOffset,
			QuotedText:       deref(e.QuotedText),
			Similarity:       deref(e.Similarity),
			Altered:          e.Altered,
			PassageID:        deref(e.PassageID),
			CitedPageNumber:  deref(e.CitedPageNumber),
			CitedPassageID:   deref(e.CitedPassageID),
		})
		last := &out.Evidences[len(out.Evidences)-1]
		for _, d := range e.Differences {
			last.Differences = append(last.Differences, verdict.Difference(d))
		}
	}
	*v = out
	return nil
}

type summaryJSON struct {
	EventID          string                `json:"event_id"`
	RequestID        string                `json:"request_id"`
	TenantID         string                `json:"tenant_id"`
	RulesetID        string                `json:"ruleset_id"`
	RulesetVersion   *string               `json:"ruleset_version"`
	Model            string                `json:"model"`
	Status           string                `json:"status"`
	Counts           countsJSON            `json:"counts"`
	Aggregate        aggregateJSON         `json:"aggregate"`
	Sources          []sourceJSON          `json:"sources"`
	Usage            usageJSON             `json:"usage"`
	Error            *summaryErrorJSON     `json:"error"`
	ValidationReport *reportDescriptorJSON `json:"validation_report"`
	StartedAt        json.RawMessage       `json:"started_at"`
	CompletedAt      json.RawMessage       `json:"completed_at"`
	Groups           []groupJSON           `json:"groups"`
}

type groupJSON struct {
	ID            string        `json:"id"`
	Path          string        `json:"path"`
	Name          *string       `json:"name"`
	Required      bool          `json:"required"`
	NotApplicable bool          `json:"not_applicable"`
	Reason        *string       `json:"reason"`
	GatedBy       []string      `json:"gated_by"`
	RuleIDs       []string      `json:"rule_ids"`
	Aggregate     aggregateJSON `json:"aggregate"`
}

func aggregateToJSON(a verdict.Aggregate) aggregateJSON {
	var out aggregateJSON
	if b := a.Boolean; b != nil {
		out.Boolean = &booleanAggregateJSON{Mode: string(b.Mode), Passed: b.Passed, Applicable: b.Applicable, PassedCount: b.PassedCount}
	}
	if n := a.Numerical; n != nil {
		out.Numerical = &numericalAggregateJSON{Mode: string(n.Mode), Score: n.Score, Counted: n.Counted}
	}
	return out
}

func aggregateFromJSON(a aggregateJSON) verdict.Aggregate {
	var out verdict.Aggregate
	if b := a.Boolean; b != nil {
		out.Boolean = &verdict.BooleanAggregate{Mode: verdict.BooleanAggregation(b.Mode), Passed: b.Passed, Applicable: b.Applicable, PassedCount: b.PassedCount}
	}
	if n := a.Numerical; n != nil {
		out.Numerical = &verdict.NumericalAggregate{Mode: verdict.NumericalAggregation(n.Mode), Score: n.Score, Counted: n.Counted}
	}
	return out
}

// nonEmpty is s, nil when empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

type countsJSON struct {
	Rules            int `json:"rules"`
	Passed           int `json:"passed"`
	Failed           int `json:"failed"`
	NotApplicable    int `json:"not_applicable"`
	InsufficientData int `json:"insufficient_data"`
	Cached           int `json:"cached"`
	NeedsReview      int `json:"needs_review"`
}

type aggregateJSON struct {
	Boolean   *booleanAggregateJSON   `json:"boolean"`
	Numerical *numericalAggregateJSON `json:"numerical"`
}

type booleanAggregateJSON struct {
	Mode        string `json:"mode"`
	Passed      bool   `json:"passed"`
	Applicable  int    `json:"applicable"`
	PassedCount int    `json:"passed_count"`
}

type numericalAggregateJSON struct {
	Mode    string   `json:"mode"`
	Score   *float64 `json:"score"`
	Counted int      `json:"counted"`
}

type sourceJSON struct {
	SourceOrigin     string `json:"source_origin"`
	Text             string `json:"text"`
	SourcePageNumber int    `json:"source_page_number"`
}

type usageJSON struct {
	PromptTokens     int      `json:"prompt_tokens"`
	CompletionTokens int      `json:"completion_tokens"`
	CachedTokens     int      `json:"cached_tokens"`
	LLMCalls         int      `json:"llm_calls"`
	PlannedCalls     int      `json:"planned_calls"`
	RulesFiltered    int      `json:"rules_filtered"`
	RulesChecked     int      `json:"rules_checked"`
	Cost             *float64 `json:"cost"`
}

type summaryErrorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type reportDescriptorJSON struct {
	FileName    string `json:"file_name"`
	URI         string `json:"uri"`
	MIMEType    string `json:"mime_type"`
	ReferenceID string `json:"reference_id"`
}

// MarshalJSON writes the summary's JSON form; a value receiver, as for
// VerdictEvent.
func (s SummaryEvent) MarshalJSON() ([]byte, error) {
	out := summaryJSON{
		EventID:        s.EventID,
		RequestID:      s.RequestID,
		TenantID:       s.TenantID,
		RulesetID:      s.RulesetID,
		RulesetVersion: s.RulesetVersion,
		Model:          s.Model,
		Status:         string(s.Status),
		Counts:         countsJSON(s.Counts),
		Sources:        make([]sourceJSON, len(s.Sources)),
		Usage:          usageJSON(s.Usage),
		StartedAt:      timeJSON(s.StartedAt),
		CompletedAt:    timeJSON(s.CompletedAt),
		Aggregate:      aggregateToJSON(s.Aggregate),
		Groups:         make([]groupJSON, len(s.Groups)),
	}
	for i, g := range s.Groups {
		out.Groups[i] = groupJSON{ID: g.ID, Path: g.Path, Name: nonEmpty(g.Name), Required: g.Required, NotApplicable: g.NotApplicable,
			Reason: nonEmpty(g.Reason), GatedBy: nonNilStrings(g.GatedBy), RuleIDs: nonNilStrings(g.RuleIDs), Aggregate: aggregateToJSON(g.Aggregate)}
	}
	for i, src := range s.Sources {
		out.Sources[i] = sourceJSON(src)
	}
	if e := s.Error; e != nil {
		out.Error = &summaryErrorJSON{Code: string(e.Code), Message: e.Message}
	}
	if r := s.Report; r != nil {
		d := reportDescriptorJSON(*r)
		out.ValidationReport = &d
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads the summary's JSON form. Empty arrays read as nil
// slices, as Avro decoding gives them.
func (s *SummaryEvent) UnmarshalJSON(data []byte) error {
	var in summaryJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("schemas: not a summary in JSON form: %w", err)
	}
	switch Status(in.Status) {
	case StatusCompleted, StatusFailed:
	default:
		return fmt.Errorf("schemas: summary %q: status %q is not %s or %s", in.EventID, in.Status, StatusCompleted, StatusFailed)
	}
	out := SummaryEvent{
		EventID:        in.EventID,
		RequestID:      in.RequestID,
		TenantID:       in.TenantID,
		RulesetID:      in.RulesetID,
		RulesetVersion: in.RulesetVersion,
		Model:          in.Model,
		Status:         Status(in.Status),
		Counts:         Counts(in.Counts),
		Usage:          verdict.Usage(in.Usage),
	}
	if err := parseTimes(fmt.Sprintf("summary %q", in.EventID),
		timeField{"started_at", in.StartedAt, &out.StartedAt},
		timeField{"completed_at", in.CompletedAt, &out.CompletedAt}); err != nil {
		return err
	}
	out.Aggregate = aggregateFromJSON(in.Aggregate)
	for _, g := range in.Groups {
		out.Groups = append(out.Groups, verdict.GroupResult{ID: g.ID, Path: g.Path, Name: deref(g.Name), Required: g.Required,
			NotApplicable: g.NotApplicable, Reason: deref(g.Reason), GatedBy: nilIfEmpty(g.GatedBy), RuleIDs: nilIfEmpty(g.RuleIDs),
			Aggregate: aggregateFromJSON(g.Aggregate)})
	}
	for _, src := range in.Sources {
		out.Sources = append(out.Sources, verdict.Source(src))
	}
	if e := in.Error; e != nil {
		out.Error = &SummaryError{Code: Reason(e.Code), Message: e.Message}
	}
	if r := in.ValidationReport; r != nil {
		d := ReportDescriptor(*r)
		out.Report = &d
	}
	*s = out
	return nil
}

type deadLetterJSON struct {
	OriginalTopic     string          `json:"original_topic"`
	OriginalPartition int             `json:"original_partition"`
	OriginalOffset    int64           `json:"original_offset"`
	OriginalTimestamp json.RawMessage `json:"original_timestamp"`
	OriginalKey       []byte          `json:"original_key"`
	OriginalValue     []byte          `json:"original_value"`
	OriginalHeaders   []headerJSON    `json:"original_headers"`
	Reason            string          `json:"reason"`
	Message           string          `json:"message"`
	FailedAt          json.RawMessage `json:"failed_at"`
	Attempts          int             `json:"attempts"`
}

type headerJSON struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// MarshalJSON writes the dead letter's JSON form; the original key, value
// and header values are base64, a nil key or header value null. A value
// receiver, as for VerdictEvent.
func (d DeadLetter) MarshalJSON() ([]byte, error) {
	out := deadLetterJSON{
		OriginalTopic:     d.OriginalTopic,
		OriginalPartition: d.OriginalPartition,
		OriginalOffset:    d.OriginalOffset,
		OriginalTimestamp: timeJSON(d.OriginalTimestamp),
		OriginalKey:       d.OriginalKey,
		OriginalValue:     emptyIfNil(d.OriginalValue),
		OriginalHeaders:   make([]headerJSON, len(d.OriginalHeaders)),
		Reason:            string(d.Reason),
		Message:           d.Message,
		FailedAt:          timeJSON(d.FailedAt),
		Attempts:          d.Attempts,
	}
	for i, h := range d.OriginalHeaders {
		out.OriginalHeaders[i] = headerJSON(h)
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads the dead letter's JSON form.
func (d *DeadLetter) UnmarshalJSON(data []byte) error {
	var in deadLetterJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("schemas: not a dead letter in JSON form: %w", err)
	}
	out := DeadLetter{
		OriginalTopic:     in.OriginalTopic,
		OriginalPartition: in.OriginalPartition,
		OriginalOffset:    in.OriginalOffset,
		OriginalKey:       in.OriginalKey,
		OriginalValue:     emptyIfNil(in.OriginalValue),
		Reason:            Reason(in.Reason),
		Message:           in.Message,
		Attempts:          in.Attempts,
	}
	if err := parseTimes(fmt.Sprintf("dead letter from %s offset %d", in.OriginalTopic, in.OriginalOffset),
		timeField{"original_timestamp", in.OriginalTimestamp, &out.OriginalTimestamp},
		timeField{"failed_at", in.FailedAt, &out.FailedAt}); err != nil {
		return err
	}
	for _, h := range in.OriginalHeaders {
		out.OriginalHeaders = append(out.OriginalHeaders, Header(h))
	}
	*d = out
	return nil
}

// emptyIfNil makes a nil slice an empty one, so that it is written as [].
func emptyIfNil[S ~[]E, E any](s S) S {
	if s == nil {
		return S{}
	}
	return s
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// nilIfEmpty reads an empty array as nil, as Avro decoding gives it.
func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
