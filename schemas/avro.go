// Package schemas holds the contracts rulevalidator shares with other
// systems. For the streaming service: the Avro schemas of its events
// (*.avsc, embedded), the Go event types and their conversions, the codecs,
// and the two wire formats, plain (schema fingerprint in headers) and
// Confluent (schema registry id in the value).
package schemas

import (
	"embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/linkedin/goavro/v2"
)

// Namespace is the Avro namespace of every event schema. A breaking change
// gets a new namespace (v2); compatible changes (new fields with defaults)
// stay in this one.
const Namespace = "com.rulevalidator.v1"

// Full names of the event schemas.
const (
	RequestSchema    = Namespace + ".ValidationRequest"
	VerdictSchema    = Namespace + ".RuleVerdict"
	SummarySchema    = Namespace + ".ValidationSummary"
	DeadLetterSchema = Namespace + ".DeadLetter"
)

//go:embed validation_request.avsc rule_verdict.avsc validation_summary.avsc dead_letter.avsc
var avroFiles embed.FS

// avroFileNames lists the embedded schema files, in the order Codecs lists them.
func avroFileNames() []string {
	return []string{"validation_request.avsc", "rule_verdict.avsc", "validation_summary.avsc", "dead_letter.avsc"}
}

// Schema is one Avro schema with its codec. It is safe for concurrent use.
type Schema struct {
	name        string
	text        string
	canonical   string
	fingerprint uint64
	codec       *goavro.Codec
	shape       *shape
}

// newSchema parses an Avro schema whose top level is a named record.
func newSchema(text string) (*Schema, error) {
	codec, err := goavro.NewCodec(text)
	if err != nil {
		return nil, err
	}
	sh, err := compileShape(text)
	if err != nil {
		return nil, err
	}
	if sh.kind != kindRecord {
		return nil, errors.New("the schema is not a record")
	}
	canonical := canonicalForm(codec)
	return &Schema{name: sh.name, text: text, canonical: canonical, fingerprint: rabin([]byte(canonical)), codec: codec, shape: sh}, nil
}

// primitiveObject matches a primitive written as an object in goavro's
// canonical form. In Parsing Canonical Form nothing else is an object whose
// only member is "type", and no name or symbol can hold braces or quotes.
var primitiveObject = regexp.MustCompile(`\{"type":"(null|boolean|int|long|float|double|bytes|string)"\}`)

// canonicalForm is the schema's Parsing Canonical Form as the Avro spec
// defines it. goavro's CanonicalSchema keeps {"type":"long"} where a field
// had a logical type (linkedin/goavro#174), which the spec (and Java, and
// fastavro) reduce to "long"; its fingerprints then match no other
// implementation's.
func canonicalForm(codec *goavro.Codec) string {
	return primitiveObject.ReplaceAllString(codec.CanonicalSchema(), `"$1"`)
}

// rabin is the CRC-64-AVRO fingerprint the Avro spec defines.
func rabin(data []byte) uint64 {
	const empty = 0xc15d213aa4d7a795
	var table [256]uint64
	for i := range table {
		fp := uint64(i)
		for range 8 {
			fp = (fp >> 1) ^ (empty & -(fp & 1))
		}
		table[i] = fp
	}
	fp := uint64(empty)
	for _, b := range data {
		fp = (fp >> 8) ^ table[byte(fp)^b]
	}
	return fp
}

// Name is the schema's full name, such as com.rulevalidator.v1.RuleVerdict.
func (s *Schema) Name() string { return s.name }

// Text is the schema as written, docs included.
func (s *Schema) Text() string { return s.text }

// Canonical is the schema's Parsing Canonical Form.
func (s *Schema) Canonical() string { return s.canonical }

// Fingerprint is the CRC-64-AVRO (Rabin) fingerprint of the canonical form.
func (s *Schema) Fingerprint() uint64 { return s.fingerprint }

// FingerprintHex is the fingerprint as the rv-schema-fingerprint header
// carries it: its 8 bytes in little-endian order, in hex, which is what
// Java's SchemaNormalization.parsingFingerprint and fastavro's
// schema.fingerprint give.
func (s *Schema) FingerprintHex() string {
	return hex.EncodeToString(binary.LittleEndian.AppendUint64(nil, s.fingerprint))
}

// Codecs holds the event schemas and their codecs, built once. It is safe
// for concurrent use.
type Codecs struct {
	list          []*Schema
	byName        map[string]*Schema
	byFingerprint map[uint64]*Schema
}

// NewCodecs parses the embedded event schemas.
func NewCodecs() (*Codecs, error) {
	c := &Codecs{byName: map[string]*Schema{}, byFingerprint: map[uint64]*Schema{}}
	for _, file := range avroFileNames() {
		text, err := avroFiles.ReadFile(file)
		if err != nil {
			return nil, err
		}
		s, err := newSchema(string(text))
		if err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", file, err)
		}
		c.list = append(c.list, s)
		c.byName[s.name] = s
		c.byFingerprint[s.Fingerprint()] = s
	}
	return c, nil
}

// Schemas lists the event schemas: request, verdict, summary, dead letter.
func (c *Codecs) Schemas() []*Schema { return slices.Clone(c.list) }

// Schema returns the event schema with the given full name.
func (c *Codecs) Schema(name string) (*Schema, bool) {
	s, ok := c.byName[name]
	return s, ok
}

// ByFingerprint returns the event schema with the given fingerprint.
func (c *Codecs) ByFingerprint(fp uint64) (*Schema, bool) {
	s, ok := c.byFingerprint[fp]
	return s, ok
}

// Marshal encodes v as an Avro binary body (no framing).
func (c *Codecs) Marshal(v Event) ([]byte, error) {
	s, ok := c.byName[v.SchemaName()]
	if !ok {
		return nil, fmt.Errorf("schemas: no schema named %s", v.SchemaName())
	}
	return s.marshal(nil, v)
}

// Unmarshal decodes an Avro binary body written with the named event schema.
// Errors are *DecodeError (malformed body) or *RequestError (a request
// whose fields contradict each other).
func (c *Codecs) Unmarshal(name string, body []byte) (Event, error) {
	s, ok := c.byName[name]
	if !ok {
		return nil, &DecodeError{Offset: -1, Problem: fmt.Sprintf("no schema named %s", name)}
	}
	return s.unmarshal(body, 0)
}

// marshal appends v's Avro binary encoding to buf. The result is checked as
// a reader would check it, so nothing is published that a consumer (or this
// package) would refuse, such as a string that is not UTF-8.
func (s *Schema) marshal(buf []byte, v Event) ([]byte, error) {
	if v.SchemaName() != s.name {
		return nil, fmt.Errorf("schemas: cannot encode a %s event with schema %s", v.SchemaName(), s.name)
	}
	m, err := v.native()
	if err != nil {
		return nil, fmt.Errorf("schemas: encoding %s: %w", s.name, err)
	}
	start := len(buf)
	out, err := s.codec.BinaryFromNative(buf, m)
	if err != nil {
		return nil, fmt.Errorf("schemas: encoding %s: %w", s.name, err)
	}
	if err := checkBinary(s.shape, out[start:], 0); err != nil {
		return nil, fmt.Errorf("schemas: encoding %s: %w", s.name, err)
	}
	return out, nil
}

// unmarshal decodes body; base is where body starts in the Kafka value, so
// error offsets count from the start of the value.
func (s *Schema) unmarshal(body []byte, base int) (Event, error) {
	// Checked before goavro reads it: goavro sizes arrays by the block count
	// it reads, so a few crafted bytes could make it allocate gigabytes.
	if err := checkBinary(s.shape, body, base); err != nil {
		var be *binaryError
		if errors.As(err, &be) {
			return nil, &DecodeError{Schema: s.name, Offset: be.offset, Problem: be.Error(), Err: err}
		}
		return nil, &DecodeError{Schema: s.name, Offset: -1, Problem: err.Error(), Err: err}
	}
	native, _, err := s.codec.NativeFromBinary(body)
	if err != nil {
		return nil, &DecodeError{Schema: s.name, Offset: -1, Problem: "avro: " + err.Error(), Err: err}
	}
	rec, ok := native.(map[string]any)
	if !ok {
		return nil, &DecodeError{Schema: s.name, Offset: -1, Problem: fmt.Sprintf("decoded a %T, not a record", native)}
	}
	ev, err := eventFromNative(s.name, rec)
	if err != nil {
		var re *RequestError
		if errors.As(err, &re) {
			return nil, err
		}
		return nil, &DecodeError{Schema: s.name, Offset: -1, Problem: err.Error(), Err: err}
	}
	return ev, nil
}

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
	default:
		return nil, fmt.Errorf("%s is not a rulevalidator event", name)
	}
	if err != nil {
		return nil, err
	}
	return ev, nil
}

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

func differencesNative(ds []Difference) []any {
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
	}, nil
}

func (s *SummaryEvent) native() (map[string]any, error) {
	var boolAgg, numAgg, failure, report map[string]any
	if b := s.Aggregate.Boolean; b != nil {
		boolAgg = map[string]any{"mode": string(b.Mode), "passed": b.Passed, "applicable": b.Applicable, "passed_count": b.PassedCount}
	}
	if n := s.Aggregate.Numerical; n != nil {
		numAgg = map[string]any{"mode": string(n.Mode), "score": opt("double", n.Score), "counted": n.Counted}
	}
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
		},
		"aggregate": map[string]any{
			"boolean":   optRecord("BooleanAggregate", boolAgg),
			"numerical": optRecord("NumericalAggregate", numAgg),
		},
		"sources": sources,
		"usage": map[string]any{
			"prompt_tokens":     int64(s.Usage.PromptTokens),
			"completion_tokens": int64(s.Usage.CompletionTokens),
			"cached_tokens":     int64(s.Usage.CachedTokens),
			"llm_calls":         int64(s.Usage.LLMCalls),
			"planned_calls":     int64(s.Usage.PlannedCalls),
		},
		"error":             optRecord("SummaryError", failure),
		"validation_report": optRecord("ReportDescriptor", report),
		"started_at":        millis(s.StartedAt),
		"completed_at":      millis(s.CompletedAt),
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

// Native to Go.

// nativeReader reads a decoded record. The first problem sticks in *err,
// naming the field's path; later reads return zero values.
type nativeReader struct {
	path string
	rec  map[string]any
	err  *error
}

func (r nativeReader) at(field string) string {
	if r.path == "" {
		return field
	}
	return r.path + "." + field
}

func (r nativeReader) fail(field, format string, args ...any) {
	if *r.err == nil {
		*r.err = fmt.Errorf("field %s: %s", r.at(field), fmt.Sprintf(format, args...))
	}
}

// presence says how a field may be absent.
type presence uint8

const (
	// required: present and not null.
	required presence = iota
	// nullable: a ["null", T] union; null, or missing from an older writer's
	// schema, reads as absent.
	nullable
	// defaulted: a plain field with a default (arrays, options); missing from
	// an older writer's schema reads as absent.
	defaulted
)

// value returns a field's value, with a nullable field's union unwrapped.
func (r nativeReader) value(field string, p presence) (v any, present bool) {
	v, ok := r.rec[field]
	switch {
	case !ok && p == required:
		r.fail(field, "missing")
		return nil, false
	case !ok:
		return nil, false
	case v == nil && p == nullable:
		return nil, false
	case v == nil:
		r.fail(field, "null")
		return nil, false
	}
	if p == nullable {
		u, ok := v.(map[string]any)
		if !ok || len(u) != 1 {
			r.fail(field, "is a %T, want a union value", v)
			return nil, false
		}
		for _, inner := range u {
			return inner, true
		}
	}
	return v, true
}

func get[T any](r nativeReader, field string, p presence) (T, bool) {
	var zero T
	v, ok := r.value(field, p)
	if !ok {
		return zero, false
	}
	t, ok := v.(T)
	if !ok {
		r.fail(field, "is a %T, want %T", v, zero)
		return zero, false
	}
	return t, true
}

func (r nativeReader) str(field string) string {
	s, _ := get[string](r, field, required)
	return s
}

func (r nativeReader) optStr(field string) *string {
	if s, ok := get[string](r, field, nullable); ok {
		return &s
	}
	return nil
}

func (r nativeReader) boolean(field string) bool {
	b, _ := get[bool](r, field, required)
	return b
}

// defaultedInt reads an integer field with a default; a writer that lacks
// it wrote 0.
func (r nativeReader) defaultedInt(field string) int {
	n, _ := r.integer(field, defaulted)
	return n
}

// defaultedBool reads a boolean field with a default; a writer that lacks
// it wrote false.
func (r nativeReader) defaultedBool(field string) bool {
	b, _ := get[bool](r, field, defaulted)
	return b
}

func (r nativeReader) optBoolean(field string) *bool {
	if b, ok := get[bool](r, field, nullable); ok {
		return &b
	}
	return nil
}

func (r nativeReader) integer(field string, p presence) (int, bool) {
	v, ok := r.value(field, p)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int32:
		return int(n), true
	case int64:
		return int(n), true
	}
	r.fail(field, "is a %T, want an int", v)
	return 0, false
}

func (r nativeReader) int(field string) int {
	n, _ := r.integer(field, required)
	return n
}

func (r nativeReader) optInt(field string) *int {
	if n, ok := r.integer(field, nullable); ok {
		return &n
	}
	return nil
}

func (r nativeReader) long(field string) int64 {
	n, _ := r.integer(field, required)
	return int64(n)
}

func (r nativeReader) optDouble(field string) *float64 {
	if f, ok := get[float64](r, field, nullable); ok {
		return &f
	}
	return nil
}

func (r nativeReader) time(field string) time.Time {
	t, _ := get[time.Time](r, field, required)
	return t.UTC()
}

// bytes copies, since goavro hands out slices of the buffer it decoded.
func (r nativeReader) bytes(field string) []byte {
	b, _ := get[[]byte](r, field, required)
	return append([]byte{}, b...)
}

func (r nativeReader) optBytes(field string) []byte {
	if b, ok := get[[]byte](r, field, nullable); ok {
		return append([]byte{}, b...)
	}
	return nil
}

func (r nativeReader) record(field string, p presence) (nativeReader, bool) {
	m, ok := get[map[string]any](r, field, p)
	return nativeReader{path: r.at(field), rec: m, err: r.err}, ok
}

// array returns the items of an array field; a field the writer lacks reads
// as empty, as its default says.
func (r nativeReader) array(field string) []any {
	items, _ := get[[]any](r, field, defaulted)
	return items
}

// strs reads an array of strings; a field the writer lacks reads as nil.
func (r nativeReader) strs(field string) []string {
	var out []string
	for i, item := range r.array(field) {
		s, ok := item.(string)
		if !ok {
			r.fail(fmt.Sprintf("%s[%d]", field, i), "is a %T, want a string", item)
		}
		out = append(out, s)
	}
	return out
}

// item reads the record at index i of an array field.
func (r nativeReader) item(field string, i int, v any) nativeReader {
	m, ok := v.(map[string]any)
	path := fmt.Sprintf("%s[%d]", r.at(field), i)
	if !ok {
		if *r.err == nil {
			*r.err = fmt.Errorf("field %s: is a %T, want a record", path, v)
		}
	}
	return nativeReader{path: path, rec: m, err: r.err}
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
		req.Options = Options{GenerateReport: opts.optBoolean("generate_report"), Model: opts.optStr("model"), CallbackURL: opts.optStr("callback_url")}
	}
	return req
}

func documentsFromNative(r nativeReader, field string) []Document {
	var docs []Document
	for i, v := range r.array(field) {
		d := r.item(field, i, v)
		doc := Document{Name: d.str("name"), Content: d.optStr("content"), URI: d.optStr("uri"), ContentType: d.optStr("content_type")}
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
		RuleType:        RuleType(r.str("rule_type")),
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
	v.PagesConsidered = pagesFromNative(r)
	for i, item := range r.array("evidences") {
		e := r.item("evidences", i, item)
		v.Evidences = append(v.Evidences, Evidence{
			Text:             e.str("text"),
			SourceOrigin:     e.str("source_origin"),
			SourcePageNumber: e.int("source_page_number"),
			Anchored:         e.boolean("anchored"),
			Match:            Match(e.str("match")),
			StartOffset:      e.optInt("start_offset"),
			EndOffset:        e.optInt("end_offset"),
			QuotedText:       deref(e.optStr("quoted_text")),
			Similarity:       deref(e.optDouble("similarity")),
			Altered:          e.defaultedBool("altered"),
			Differences:      differencesFromNative(e),
			PassageID:        deref(e.optStr("passage_id")),
			CitedPageNumber:  deref(e.optInt("cited_page_number")),
		})
	}
	return v
}

func pagesNative(dps []DocumentPages) []any {
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

func pagesFromNative(r nativeReader) []DocumentPages {
	var out []DocumentPages
	for i, item := range r.array("pages_considered") {
		d := r.item("pages_considered", i, item)
		dp := DocumentPages{Document: d.str("document")}
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

func differencesFromNative(r nativeReader) []Difference {
	var out []Difference
	for i, item := range r.array("differences") {
		d := r.item("differences", i, item)
		out = append(out, Difference{Kind: d.str("kind"), Quote: d.str("quote"), Document: d.str("document")})
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
		},
		Usage: Usage{
			PromptTokens:     usage.int("prompt_tokens"),
			CompletionTokens: usage.int("completion_tokens"),
			CachedTokens:     usage.int("cached_tokens"),
			LLMCalls:         usage.int("llm_calls"),
			PlannedCalls:     usage.defaultedInt("planned_calls"),
		},
		StartedAt:   r.time("started_at"),
		CompletedAt: r.time("completed_at"),
	}
	if b, ok := agg.record("boolean", nullable); ok {
		s.Aggregate.Boolean = &BooleanAggregate{
			Mode:        BooleanAggregation(b.str("mode")),
			Passed:      b.boolean("passed"),
			Applicable:  b.int("applicable"),
			PassedCount: b.int("passed_count"),
		}
	}
	if n, ok := agg.record("numerical", nullable); ok {
		s.Aggregate.Numerical = &NumericalAggregate{
			Mode:    NumericalAggregation(n.str("mode")),
			Score:   n.optDouble("score"),
			Counted: n.int("counted"),
		}
	}
	for i, item := range r.array("sources") {
		src := r.item("sources", i, item)
		s.Sources = append(s.Sources, Source{
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

// The binary check walks an Avro body along its schema without building
// anything. It runs before goavro decodes, so that malformed input fails
// with the byte offset and field path of the problem, and so that no
// length or block count can claim more bytes than the body holds.

type kind uint8

const (
	kindNull kind = iota
	kindBoolean
	kindInt
	kindLong
	kindFloat
	kindDouble
	kindBytes
	kindString
	kindRecord
	kindEnum
	kindArray
	kindMap
	kindUnion
	kindFixed
)

// shape is a compiled schema node.
type shape struct {
	kind     kind
	name     string // full name of a record, enum or fixed
	fields   []shapeField
	symbols  int      // enum
	items    *shape   // array items, map values
	branches []*shape // union
	size     int      // fixed
}

type shapeField struct {
	name  string
	shape *shape
}

// maxNesting bounds how deep a value may nest (only recursive schemas nest
// without bound), keeping the walk's stack small.
const maxNesting = 64

func compileShape(text string) (*shape, error) {
	var node any
	if err := json.Unmarshal([]byte(text), &node); err != nil {
		return nil, err
	}
	c := shapeCompiler{named: map[string]*shape{}}
	return c.compile(node, "")
}

type shapeCompiler struct {
	named map[string]*shape
}

func primitiveKind(name string) (kind, bool) {
	switch name {
	case "null":
		return kindNull, true
	case "boolean":
		return kindBoolean, true
	case "int":
		return kindInt, true
	case "long":
		return kindLong, true
	case "float":
		return kindFloat, true
	case "double":
		return kindDouble, true
	case "bytes":
		return kindBytes, true
	case "string":
		return kindString, true
	}
	return 0, false
}

func (c *shapeCompiler) compile(node any, namespace string) (*shape, error) {
	switch n := node.(type) {
	case string:
		if k, ok := primitiveKind(n); ok {
			return &shape{kind: k}, nil
		}
		if s, ok := c.named[fullName(n, namespace)]; ok {
			return s, nil
		}
		if s, ok := c.named[n]; ok {
			return s, nil
		}
		return nil, fmt.Errorf("unknown type %q", n)
	case []any:
		u := &shape{kind: kindUnion}
		for _, b := range n {
			bs, err := c.compile(b, namespace)
			if err != nil {
				return nil, err
			}
			u.branches = append(u.branches, bs)
		}
		if len(u.branches) == 0 {
			return nil, errors.New("empty union")
		}
		return u, nil
	case map[string]any:
		return c.compileObject(n, namespace)
	}
	return nil, fmt.Errorf("not a schema: %v", node)
}

func (c *shapeCompiler) compileObject(n map[string]any, namespace string) (*shape, error) {
	typ, ok := n["type"].(string)
	if !ok {
		if inner, nested := n["type"]; nested {
			return c.compile(inner, namespace)
		}
		return nil, errors.New("schema object without a type")
	}
	switch typ {
	case "record", "error", "enum", "fixed":
		name, _ := n["name"].(string)
		if name == "" {
			return nil, fmt.Errorf("%s without a name", typ)
		}
		if ns, ok := n["namespace"].(string); ok && !strings.Contains(name, ".") {
			namespace = ns
		}
		full := fullName(name, namespace)
		s := &shape{name: full}
		c.named[full] = s
		switch typ {
		case "enum":
			symbols, _ := n["symbols"].([]any)
			s.kind, s.symbols = kindEnum, len(symbols)
		case "fixed":
			size, _ := n["size"].(float64)
			s.kind, s.size = kindFixed, int(size)
		default:
			s.kind = kindRecord
			fields, _ := n["fields"].([]any)
			ns := full[:max(strings.LastIndex(full, "."), 0)]
			for _, f := range fields {
				fm, _ := f.(map[string]any)
				fname, _ := fm["name"].(string)
				fs, err := c.compile(fm["type"], ns)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %w", full, fname, err)
				}
				s.fields = append(s.fields, shapeField{name: fname, shape: fs})
			}
		}
		return s, nil
	case "array", "map":
		key := "items"
		k := kindArray
		if typ == "map" {
			key, k = "values", kindMap
		}
		items, err := c.compile(n[key], namespace)
		if err != nil {
			return nil, err
		}
		return &shape{kind: k, items: items}, nil
	}
	return c.compile(typ, namespace)
}

func fullName(name, namespace string) string {
	if strings.Contains(name, ".") || namespace == "" {
		return name
	}
	return namespace + "." + name
}

// binaryError is a malformed body: what is wrong, where, and in which field.
type binaryError struct {
	offset int
	msg    string
	path   []string // innermost first, as the walk unwinds
}

func (e *binaryError) Error() string {
	var b strings.Builder
	for i := len(e.path) - 1; i >= 0; i-- {
		p := e.path[i]
		if b.Len() > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	msg := fmt.Sprintf("avro: %s at byte offset %d", e.msg, e.offset)
	if b.Len() > 0 {
		msg += " (" + b.String() + ")"
	}
	return msg
}

type binaryChecker struct {
	buf  []byte
	pos  int
	base int
}

// checkBinary checks that body holds exactly one value of s. Offsets in
// errors count from base.
func checkBinary(s *shape, body []byte, base int) error {
	c := &binaryChecker{buf: body, base: base}
	if err := c.check(s, 0); err != nil {
		return err
	}
	if c.pos != len(body) {
		return c.errorf(c.pos, "%d unexpected bytes after the record", len(body)-c.pos)
	}
	return nil
}

func (c *binaryChecker) errorf(pos int, format string, args ...any) *binaryError {
	return &binaryError{offset: c.base + pos, msg: fmt.Sprintf(format, args...)}
}

func (c *binaryChecker) long(what string) (int64, error) {
	start := c.pos
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if c.pos >= len(c.buf) {
			return 0, c.errorf(start, "%s cut short", what)
		}
		if shift > 63 {
			return 0, c.errorf(start, "%s is a varint longer than 10 bytes", what)
		}
		b := c.buf[c.pos]
		c.pos++
		v |= uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			break
		}
	}
	return int64(v>>1) ^ -int64(v&1), nil
}

// length reads a byte count or block count and checks that what it counts
// fits in the rest of the body (every array item and map entry takes at
// least one byte in the schemas read here).
func (c *binaryChecker) length(what string) (int, error) {
	start := c.pos
	n, err := c.long(what)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, c.errorf(start, "negative %s %d", what, n)
	}
	if rest := len(c.buf) - c.pos; n > int64(rest) {
		return 0, c.errorf(start, "%s %d exceeds the %d bytes left", what, n, rest)
	}
	return int(n), nil
}

func (c *binaryChecker) check(s *shape, depth int) error {
	if depth > maxNesting {
		return c.errorf(c.pos, "values nested deeper than %d", maxNesting)
	}
	start := c.pos
	switch s.kind {
	case kindNull:
		return nil
	case kindBoolean:
		if c.pos >= len(c.buf) {
			return c.errorf(start, "boolean cut short")
		}
		if b := c.buf[c.pos]; b > 1 {
			return c.errorf(start, "boolean byte is 0x%02x, not 0 or 1", b)
		}
		c.pos++
	case kindInt:
		n, err := c.long("int")
		if err != nil {
			return err
		}
		if n < math.MinInt32 || n > math.MaxInt32 {
			return c.errorf(start, "int %d out of range", n)
		}
	case kindLong:
		_, err := c.long("long")
		return err
	case kindFloat, kindDouble, kindFixed:
		size := s.size
		switch s.kind {
		case kindFloat:
			size = 4
		case kindDouble:
			size = 8
		}
		if len(c.buf)-c.pos < size {
			return c.errorf(start, "value of %d bytes cut short", size)
		}
		c.pos += size
	case kindBytes:
		n, err := c.length("bytes length")
		if err != nil {
			return err
		}
		c.pos += n
	case kindString:
		return c.text("string")
	case kindEnum:
		n, err := c.long("enum index")
		if err != nil {
			return err
		}
		if n < 0 || n >= int64(s.symbols) {
			return c.errorf(start, "enum index %d out of range (%d symbols)", n, s.symbols)
		}
	case kindUnion:
		n, err := c.long("union branch")
		if err != nil {
			return err
		}
		if n < 0 || n >= int64(len(s.branches)) {
			return c.errorf(start, "union branch %d out of range (%d branches)", n, len(s.branches))
		}
		return c.check(s.branches[n], depth+1)
	case kindRecord:
		for _, f := range s.fields {
			if err := c.check(f.shape, depth+1); err != nil {
				var be *binaryError
				if errors.As(err, &be) {
					be.path = append(be.path, f.name)
				}
				return err
			}
		}
	case kindArray, kindMap:
		return c.blocks(s, depth)
	}
	return nil
}

// text skips a length-prefixed UTF-8 string.
func (c *binaryChecker) text(what string) error {
	n, err := c.length(what + " length")
	if err != nil {
		return err
	}
	if data := c.buf[c.pos : c.pos+n]; !utf8.Valid(data) {
		for i := 0; i < len(data); {
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				return c.errorf(c.pos+i, "%s is not valid UTF-8", what)
			}
			i += size
		}
	}
	c.pos += n
	return nil
}

// blocks walks an array's or a map's blocks.
func (c *binaryChecker) blocks(s *shape, depth int) error {
	index := 0
	for {
		start := c.pos
		count, err := c.long("block count")
		if err != nil {
			return err
		}
		if count == 0 {
			return nil
		}
		if count < 0 {
			// A negative count is followed by the block's size in bytes.
			if count == math.MinInt64 {
				return c.errorf(start, "block count %d out of range", count)
			}
			count = -count
			if _, err := c.length("block size"); err != nil {
				return err
			}
		}
		if rest := len(c.buf) - c.pos; count > int64(rest) {
			return c.errorf(start, "block count %d exceeds the %d bytes left", count, rest)
		}
		for range count {
			if s.kind == kindMap {
				if err := c.text("map key"); err != nil {
					return err
				}
			}
			if err := c.check(s.items, depth+1); err != nil {
				var be *binaryError
				if errors.As(err, &be) {
					be.path = append(be.path, fmt.Sprintf("[%d]", index))
				}
				return err
			}
			index++
		}
	}
}
