package schemas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"rulevalidator/internal/clone"
	"rulevalidator/verdict"
)

// Event is one of the messages this package encodes: *Request,
// *VerdictEvent, *SummaryEvent or *DeadLetter.
type Event interface {
	// SchemaName is the full name of the event's Avro schema.
	SchemaName() string
	// native converts the event to goavro's native form.
	native() (map[string]any, error)
}

// ErrInvalidRequest marks a request whose fields are missing or contradictory;
// see RequestError for the details.
var ErrInvalidRequest = errors.New("invalid request")

// ErrUnresolvedURI marks a document that names a uri, or carries a file
// (data), but no text yet. The consumer reads such documents
// (Request.ResolveDocuments) before asking for the engine's inputs.
var ErrUnresolvedURI = errors.New("document uri not resolved")

// RequestError lists every problem found in a request. It matches
// errors.Is(err, ErrInvalidRequest). Request is what was read, when a
// request was decoded at all, so a failure can still be addressed to it.
type RequestError struct {
	RequestID string
	Problems  []string
	Request   *Request
}

func (e *RequestError) Error() string {
	id := ""
	if e.RequestID != "" {
		id = fmt.Sprintf(" %q", e.RequestID)
	}
	return fmt.Sprintf("invalid request%s: %s", id, strings.Join(e.Problems, "; "))
}

// Is makes errors.Is(err, ErrInvalidRequest) hold.
func (e *RequestError) Is(target error) bool { return target == ErrInvalidRequest }

// Request is a validation request (Avro ValidationRequest). Nil pointers and
// slices stand for Avro nulls; see validation_request.avsc for the meaning of
// each field.
type Request struct {
	RequestID  string
	TenantID   string
	RulesetRef *RulesetRef
	// InlineRuleset is the ruleset as JSON text.
	InlineRuleset *string
	PrimaryDocs   []Document
	AuxiliaryDocs []Document
	TextInput     *string
	NamedInputs   []NamedInput
	Message       *string
	Options       Options
	SubmittedAt   time.Time
}

// RulesetRef names a stored ruleset; a nil Version means the latest.
type RulesetRef struct {
	ID      string
	Version *string
}

// Document is one document of a request: inline text (Content, whose form
// feeds separate pages, or Pages), the file itself (Data: a PDF, a DOCX or
// text) or a claim-check URI, both read into Pages before judging
// (ResolveDocuments). Pages is nil when absent; an empty non-nil Pages is an
// empty array. ContentType is the media type of Data or of the object
// behind URI; nil: sniffed.
type Document struct {
	Name        string
	Content     *string
	Pages       []string
	URI         *string
	ContentType *string
	Data        []byte
}

// NamedInput is a named value; ValueJSON is the value as JSON text.
type NamedInput struct {
	Name        string
	Description *string
	ValueJSON   string
}

// Options are per-request options; nil means the service's default.
type Options struct {
	GenerateReport *bool
	Model          *string
	CallbackURL    *string
	// Cache false has the request judged afresh (no verdict cache).
	Cache *bool
}

// SchemaName is RequestSchema.
func (r *Request) SchemaName() string { return RequestSchema }

// Validate reports every missing or contradictory field as a *RequestError.
// It checks the request's shape only; the ruleset and the inputs get the
// engine's own checks later.
func (r *Request) Validate() error {
	return r.validate(true)
}

// ValidateUnstamped is Validate for a request its caller has still to
// stamp: submitted_at may be unset.
func (r *Request) ValidateUnstamped() error {
	return r.validate(false)
}

func (r *Request) validate(needSubmittedAt bool) error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if r.RequestID == "" {
		add("request_id is empty")
	}
	if r.TenantID == "" {
		add("tenant_id is empty")
	}
	switch {
	case r.RulesetRef != nil && r.InlineRuleset != nil:
		add("both ruleset_ref and inline_ruleset are set; set exactly one")
	case r.RulesetRef == nil && r.InlineRuleset == nil:
		add("neither ruleset_ref nor inline_ruleset is set; set exactly one")
	case r.RulesetRef != nil && r.RulesetRef.ID == "":
		add("ruleset_ref.id is empty")
	}
	for _, group := range []struct {
		field string
		docs  []Document
	}{{"primary_docs", r.PrimaryDocs}, {"auxiliary_docs", r.AuxiliaryDocs}} {
		for i, d := range group.docs {
			where := DocField(group.field, i, d.Name)
			switch {
			case d.Name == "":
				add("%s: name is empty", where)
			case d.Content != nil && d.Pages != nil:
				add("%s: both content and pages given; give one", where)
			case d.Data != nil && (d.Content != nil || d.Pages != nil || d.URI != nil):
				add("%s: data given with content, pages or uri; give one", where)
			case d.Content == nil && d.Pages == nil && d.URI == nil && d.Data == nil:
				add("%s: no content, pages, data or uri given", where)
			}
		}
	}
	for i, in := range r.NamedInputs {
		where := DocField("named_inputs", i, in.Name)
		if in.Name == "" {
			add("%s: name is empty", where)
		}
		if !json.Valid([]byte(in.ValueJSON)) {
			add("%s: value_json is not valid JSON", where)
		}
	}
	if needSubmittedAt && r.SubmittedAt.IsZero() {
		add("submitted_at is not set")
	}
	if len(problems) == 0 {
		return nil
	}
	return &RequestError{RequestID: r.RequestID, Problems: problems}
}

// DocField names an array element for error messages: primary_docs[1] ("a.pdf").
func DocField(field string, i int, name string) string {
	if name == "" {
		return fmt.Sprintf("%s[%d]", field, i)
	}
	return fmt.Sprintf("%s[%d] (%q)", field, i, name)
}

// ClaimChecked reports whether d is read from object storage by its uri: it
// has a uri and no inline text, pages or file.
func (d Document) ClaimChecked() bool {
	return d.URI != nil && d.Data == nil && d.Content == nil && d.Pages == nil
}

// ClaimChecks yields, in order, the documents of r read by uri, each with
// its label (DocField).
func (r *Request) ClaimChecks() iter.Seq2[string, Document] {
	return func(yield func(string, Document) bool) {
		for _, group := range []struct {
			field string
			docs  []Document
		}{{"primary_docs", r.PrimaryDocs}, {"auxiliary_docs", r.AuxiliaryDocs}} {
			for i, d := range group.docs {
				if d.ClaimChecked() && !yield(DocField(group.field, i, d.Name), d) {
					return
				}
			}
		}
	}
}

// ResolveDocuments fills in the pages of every document given as a file
// (data) or by a uri, with no content or pages, using read (which reads the
// file, or the object from storage, into pages); the file's bytes are then
// dropped. Documents with inline text are left alone.
func (r *Request) ResolveDocuments(ctx context.Context, read func(ctx context.Context, doc Document) (pages []string, err error)) error {
	for _, group := range []struct {
		field string
		docs  []Document
	}{{"primary_docs", r.PrimaryDocs}, {"auxiliary_docs", r.AuxiliaryDocs}} {
		for i := range group.docs {
			d := &group.docs[i]
			if (d.URI == nil && d.Data == nil) || d.Content != nil || d.Pages != nil {
				continue
			}
			pages, err := read(ctx, *d)
			if err != nil {
				if d.Data != nil {
					return fmt.Errorf("%s: reading the file: %w", DocField(group.field, i, d.Name), err)
				}
				return fmt.Errorf("%s: resolving uri %s: %w", DocField(group.field, i, d.Name), *d.URI, err)
			}
			if pages == nil {
				pages = []string{}
			}
			d.Pages, d.Data = pages, nil
		}
	}
	return nil
}

// VerdictEvent is the verdict on one rule (Avro RuleVerdict).
type VerdictEvent struct {
	EventID         string
	RequestID       string
	TenantID        string
	RulesetID       string
	RulesetVersion  *string
	Model           string
	RuleID          string
	RuleName        *string
	RuleType        verdict.RuleType
	DataSufficiency bool
	Rationale       string
	BooleanOutput   *bool
	NumericalOutput *int
	AllowedScores   []int
	NotApplicable   bool
	// SufficiencyNote says why DataSufficiency was set to false by the
	// engine; nil when it was not.
	SufficiencyNote *string
	// Problems lists, in a reader's terms, what was still wrong with the
	// answer the engine kept; nil for a clean answer.
	Problems []string
	// PagesConsidered names the pages the verdict was judged on when the
	// request was split; nil when it was judged on every page.
	PagesConsidered []verdict.DocumentPages
	Evidences       []verdict.Evidence
	StartedAt       time.Time
	CompletedAt     time.Time
	RuleIndex       int
	RuleCount       int
	// Cached says where a verdict taken from the verdict cache was judged;
	// nil when it was judged for this request.
	Cached *verdict.CachedFrom
	// Confidence is how sure the model was of the verdict's value (0..1);
	// nil when nothing measured it.
	Confidence *float64
	// NeedsReview says the verdict is routed to a person; ReviewReasons
	// say why.
	NeedsReview   bool
	ReviewReasons []string
	// RuleWeight is the rule's weight in a weighted_mean aggregate; nil
	// from writers before it (read as 1).
	RuleWeight *float64
}

// SchemaName is VerdictSchema.
func (v *VerdictEvent) SchemaName() string { return VerdictSchema }

// SummaryEventID is the deterministic id of a request's summary, tenant/request_id: a
// request_id is unique within its tenant only, so two tenants using one never share an id.
func SummaryEventID(tenantID, requestID string) string { return tenantID + "/" + requestID }

// VerdictEventID is the deterministic id of the verdict on ruleID, tenant/request_id/rule_id.
func VerdictEventID(tenantID, requestID, ruleID string) string {
	return SummaryEventID(tenantID, requestID) + "/" + ruleID
}

// Status says whether a request was judged.
type Status string

const (
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
)

// SummaryEvent is the outcome of one request (Avro ValidationSummary).
type SummaryEvent struct {
	EventID        string
	RequestID      string
	TenantID       string
	RulesetID      string
	RulesetVersion *string
	Model          string
	Status         Status
	Counts         Counts
	Aggregate      verdict.Aggregate
	Sources        []verdict.Source
	Usage          verdict.Usage
	Error          *SummaryError
	Report         *ReportDescriptor
	StartedAt      time.Time
	CompletedAt    time.Time
	// Groups are the nested rulesets' results, in ruleset order; nil when
	// the ruleset has none.
	Groups []verdict.GroupResult
}

// Counts counts verdicts by outcome. Passed and Failed count the applicable
// boolean rules, as the boolean aggregate does; InsufficientData overlaps them.
type Counts struct {
	Rules            int
	Passed           int
	Failed           int
	NotApplicable    int
	InsufficientData int
	// Cached counts the verdicts taken from the verdict cache; they count
	// in the others too.
	Cached int
	// NeedsReview counts the verdicts routed to a person.
	NeedsReview int
}

// SummaryError says why a request failed.
type SummaryError struct {
	Code    Reason
	Message string
}

// ReportDescriptor says where a request's report was stored.
type ReportDescriptor struct {
	FileName    string
	URI         string
	MIMEType    string
	ReferenceID string
}

// SchemaName is SummarySchema.
func (s *SummaryEvent) SchemaName() string { return SummarySchema }

// NewFailedSummary builds the summary of a request that could not be judged.
// The ruleset is the one the request refers to, if any; callers that know
// more (the ruleset resolved, the model, the tokens spent before failing) set
// RulesetID, RulesetVersion, Model and Usage on the result.
func NewFailedSummary(req *Request, code Reason, message string, started, completed time.Time) SummaryEvent {
	s := SummaryEvent{
		EventID:     SummaryEventID(req.TenantID, req.RequestID),
		RequestID:   req.RequestID,
		TenantID:    req.TenantID,
		Status:      StatusFailed,
		Error:       &SummaryError{Code: code, Message: message},
		StartedAt:   EventTime(started),
		CompletedAt: EventTime(completed),
	}
	if ref := req.RulesetRef; ref != nil {
		s.RulesetID = ref.ID
		s.RulesetVersion = clone.Ptr(ref.Version)
	}
	return s
}

// Reason says why a message was dead-lettered, or why a request failed.
type Reason string

const (
	ReasonUndecodable    Reason = "undecodable"
	ReasonInvalidRequest Reason = "invalid_request"
	ReasonInvalidRuleset Reason = "invalid_ruleset"
	ReasonInvalidInput   Reason = "invalid_input"
	ReasonUnknownRuleset Reason = "unknown_ruleset"
	ReasonOversized      Reason = "oversized"
	ReasonModelRejected  Reason = "model_rejected"
	ReasonInvalidOutput  Reason = "invalid_output"
	ReasonInternal       Reason = "internal"
	ReasonReportFailed   Reason = "report_failed"
	ReasonTimeout        Reason = "timeout"
	// ReasonUnreadableDocument: a document's file cannot be read (encrypted,
	// corrupt, a scan without text, a zip bomb, over the page or byte limit).
	ReasonUnreadableDocument Reason = "unreadable_document"
	// ReasonClaimRefused: a document's claim check names an object the
	// request's tenant may not read (outside its claims prefix).
	ReasonClaimRefused Reason = "claim_refused"
	// ReasonQuotaExceeded: the request's tenant had used up a token budget of
	// the tenants file (tokens_per_hour, tokens_per_day) when the request came
	// to be judged; the model was not asked. Replay it once the window allows.
	ReasonQuotaExceeded Reason = "quota_exceeded"
)

// Reasons are the symbols of the DeadLetterReason enum, in its order.
var Reasons = []Reason{
	ReasonUndecodable, ReasonInvalidRequest, ReasonInvalidRuleset, ReasonInvalidInput, ReasonUnknownRuleset,
	ReasonOversized, ReasonModelRejected, ReasonInvalidOutput, ReasonInternal, ReasonReportFailed, ReasonTimeout,
	ReasonUnreadableDocument, ReasonClaimRefused, ReasonQuotaExceeded,
}

// Known reports whether r is a symbol of the DeadLetterReason enum; others
// cannot be encoded.
func (r Reason) Known() bool { return slices.Contains(Reasons, r) }

// DeadLetter is a message that could not be processed, kept byte for byte
// (Avro DeadLetter). OriginalKey is nil when the record had no key; an empty
// non-nil key is an empty key.
type DeadLetter struct {
	OriginalTopic     string
	OriginalPartition int
	OriginalOffset    int64
	OriginalTimestamp time.Time
	OriginalKey       []byte
	OriginalValue     []byte
	OriginalHeaders   []Header
	Reason            Reason
	Message           string
	FailedAt          time.Time
	Attempts          int
}

// SchemaName is DeadLetterSchema.
func (d *DeadLetter) SchemaName() string { return DeadLetterSchema }

// EventTime is t as events carry it: UTC, whole milliseconds, no monotonic reading.
func EventTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// The request's JSON form is what MarshalJSON writes: the Avro request as a
// natural object, with inline_ruleset as an object (or a string holding one),
// named input values as real JSON values and submitted_at in RFC 3339. What
// is read is wider, the specification's input shapes too, and is read by
// package rulevalidator/request with the engine's input parser.

type requestJSON struct {
	RequestID     string           `json:"request_id"`
	TenantID      string           `json:"tenant_id"`
	RulesetRef    *rulesetRefJSON  `json:"ruleset_ref,omitempty"`
	InlineRuleset json.RawMessage  `json:"inline_ruleset,omitempty"`
	PrimaryDocs   []documentJSON   `json:"primary_docs,omitempty"`
	AuxiliaryDocs []documentJSON   `json:"auxiliary_docs,omitempty"`
	TextInput     *string          `json:"text_input,omitempty"`
	NamedInputs   []namedInputJSON `json:"named_inputs,omitempty"`
	Message       *string          `json:"message,omitempty"`
	Options       optionsJSON      `json:"options,omitzero"`
	SubmittedAt   time.Time        `json:"submitted_at,omitzero"`
}

type rulesetRefJSON struct {
	ID      string  `json:"id"`
	Version *string `json:"version,omitempty"`
}

type documentJSON struct {
	Name        string   `json:"name"`
	Content     *string  `json:"content,omitempty"`
	Pages       []string `json:"pages,omitzero"`
	URI         *string  `json:"uri,omitempty"`
	ContentType *string  `json:"content_type,omitempty"`
	// Data is base64 in JSON, as encoding/json writes []byte.
	Data []byte `json:"data,omitempty"`
}

type namedInputJSON struct {
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Value       json.RawMessage `json:"value"`
}

type optionsJSON struct {
	GenerateReport *bool   `json:"generate_report,omitempty"`
	Model          *string `json:"model,omitempty"`
	CallbackURL    *string `json:"callback_url,omitempty"`
	Cache          *bool   `json:"cache,omitempty"`
}

// JSON is the request in its JSON form.
func (r *Request) JSON() ([]byte, error) { return r.MarshalJSON() }

// MarshalJSON writes the request's JSON form. An inline ruleset holding a
// JSON object is written as that object, anything else as a string.
func (r *Request) MarshalJSON() ([]byte, error) {
	out := requestJSON{
		RequestID:     r.RequestID,
		TenantID:      r.TenantID,
		PrimaryDocs:   documentsJSON(r.PrimaryDocs),
		AuxiliaryDocs: documentsJSON(r.AuxiliaryDocs),
		TextInput:     r.TextInput,
		Message:       r.Message,
		Options:       optionsJSON(r.Options),
		SubmittedAt:   r.SubmittedAt,
	}
	if ref := r.RulesetRef; ref != nil {
		out.RulesetRef = &rulesetRefJSON{ID: ref.ID, Version: ref.Version}
	}
	if r.InlineRuleset != nil {
		text := *r.InlineRuleset
		if isJSONObject(text) {
			out.InlineRuleset = json.RawMessage(text)
		} else {
			quoted, err := json.Marshal(text)
			if err != nil {
				return nil, err
			}
			out.InlineRuleset = quoted
		}
	}
	for i, in := range r.NamedInputs {
		if !json.Valid([]byte(in.ValueJSON)) {
			return nil, fmt.Errorf("request %q: %s: value_json is not valid JSON", r.RequestID, DocField("named_inputs", i, in.Name))
		}
		out.NamedInputs = append(out.NamedInputs, namedInputJSON{Name: in.Name, Description: in.Description, Value: json.RawMessage(in.ValueJSON)})
	}
	return json.Marshal(out)
}

// UnmarshalJSON refuses: the JSON form of a request is read by package
// rulevalidator/request (request.FromJSON, request.FromMap), which knows
// every input shape. Without this, encoding/json would match no field and
// return an empty request without an error.
func (r *Request) UnmarshalJSON([]byte) error {
	return errors.New("schemas: a request's JSON form is read with package rulevalidator/request (request.FromJSON), not encoding/json")
}

func isJSONObject(text string) bool {
	trimmed := strings.TrimSpace(text)
	return strings.HasPrefix(trimmed, "{") && json.Valid([]byte(trimmed))
}

func documentsJSON(docs []Document) []documentJSON {
	var out []documentJSON
	for _, d := range docs {
		out = append(out, documentJSON(d))
	}
	return out
}
