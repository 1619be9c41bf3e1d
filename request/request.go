// Package request owns the JSON form of a validation request: it reads it, in
// every shape the specification allows, into the Avro contract schemas.Request
// (FromJSON, FromMap) or, for the inputs alone, into the engine's Inputs
// (ParseInputs, InputsFromMap). The HTTP API, the execute-async envelope,
// produce, validate and eval all read a request here, so a payload is accepted
// alike on every path.
//
// The inputs are read by one parser (ReadInputForm, inputs.go):
// documents as strings or objects named by file_name, name or title with
// their text in content, text, markdown or pages (or a claim-check uri),
// text_input as a string or {text}, and, when named_inputs is absent, any
// other top-level key as a named input. The request's own keys are below.
// Problems are reported as one *schemas.RequestError.
package request

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"rulevalidator/engine"
	"rulevalidator/internal/jsonyaml"
	"rulevalidator/schemas"
)

// Top-level keys of a request that are not inputs.
const (
	keyRequestID     = "request_id"
	keyTenantID      = "tenant_id"
	keyRulesetRef    = "ruleset_ref"
	keyInlineRuleset = "inline_ruleset"
	keyOptions       = "options"
	keySubmittedAt   = "submitted_at"
)

// requestKeys are the top-level keys of a request's JSON form that are not
// inputs; every other key is an input (or, without named_inputs, a named
// input).
var requestKeys = []string{keyRequestID, keyTenantID, keyRulesetRef, keyInlineRuleset, keyOptions, keySubmittedAt}

// Document keys beyond the engine's: a claim check, the file itself
// (base64) and their media type.
const (
	keyURI         = "uri"
	keyData        = "data"
	keyContentType = "content_type"
)

// FromJSON reads a request from JSON (or YAML of the same structure) and
// checks it as schemas.Request.Validate does, except that submitted_at may
// be left out for the caller to stamp before encoding. Problems are
// reported as a *schemas.RequestError.
func FromJSON(data []byte) (*schemas.Request, error) {
	r, err := decode(data)
	if err != nil {
		return nil, err
	}
	if err := r.ValidateUnstamped(); err != nil {
		err.(*schemas.RequestError).Request = r
		return nil, err
	}
	return r, nil
}

// decode reads a request from JSON with FromMap. It does not validate.
func decode(data []byte) (*schemas.Request, error) {
	m, err := DecodeObject(data)
	if err != nil {
		var ie *engine.InputError
		if errors.As(err, &ie) {
			return nil, &schemas.RequestError{Problems: []string{"not a request in JSON form: " + ie.Problem}}
		}
		return nil, &schemas.RequestError{Problems: []string{"not a request in JSON form: " + err.Error()}}
	}
	return FromMap(m)
}

// FromMap maps a request's decoded JSON (or YAML) into the typed request:
// request_id and tenant_id (strings), ruleset_ref ({id, version?}),
// inline_ruleset (an object, or a string holding the ruleset), options
// ({generate_report?, model?, callback_url?, cache?}), submitted_at (RFC 3339), and
// the inputs in any shape InputsFromMap reads, documents also by uri
// ({name, uri, content_type?}) or as the file itself ({name, data (base64),
// content_type?}). Named input values become JSON text. Every
// problem is listed in one *schemas.RequestError, next to the request as far
// as it was read; Validate is not called.
func FromMap(m map[string]any) (*schemas.Request, error) {
	var p problems
	r := &schemas.Request{}
	r.RequestID = p.str(m, keyRequestID)
	r.TenantID = p.str(m, keyTenantID)
	// null stands for absent, as in the Avro record.
	if v := m[keyRulesetRef]; v != nil {
		r.RulesetRef = p.rulesetRef(v)
	}
	if v := m[keyInlineRuleset]; v != nil {
		r.InlineRuleset = p.inlineRuleset(keyInlineRuleset, v)
	}
	if v := m[keyOptions]; v != nil {
		r.Options = p.options(v)
	}
	if v, ok := m[keySubmittedAt]; ok {
		r.SubmittedAt = p.time(keySubmittedAt, v)
	}
	p.inputs(r, m, requestKeys)
	return r, p.err(r.RequestID)
}

// ReadInputs sets r's inputs from m, which holds inputs only (in any shape
// FromMap reads), replacing those it had. Problems are one
// *schemas.RequestError.
func ReadInputs(r *schemas.Request, m map[string]any) error {
	var p problems
	p.inputs(r, m, nil)
	return p.err(r.RequestID)
}

// JoinProblems lists the problems of several checks of one request (what
// FromMap found while reading it, what Validate finds once the caller has
// filled it in) as one *schemas.RequestError; nil when there are none.
func JoinProblems(errs ...error) error {
	var out schemas.RequestError
	for _, err := range errs {
		if err == nil {
			continue
		}
		var re *schemas.RequestError
		if errors.As(err, &re) {
			out.Problems = append(out.Problems, re.Problems...)
			if out.RequestID == "" {
				out.RequestID = re.RequestID
			}
			continue
		}
		out.Problems = append(out.Problems, err.Error())
	}
	if len(out.Problems) == 0 {
		return nil
	}
	return &out
}

// problems collects what is wrong with a request being read.
type problems []string

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, field+": "+fmt.Sprintf(format, args...))
}

func (p *problems) err(requestID string) error {
	if len(*p) == 0 {
		return nil
	}
	return &schemas.RequestError{RequestID: requestID, Problems: *p}
}

func (p *problems) typeErr(field, want string, got any) {
	p.add(field, "must be %s (got %s)", want, jsonyaml.TypeName(got))
}

// str reads an optional string field of m.
func (p *problems) str(m map[string]any, key string) string {
	s, _ := p.optStr(m, key, key)
	if s == nil {
		return ""
	}
	return *s
}

// optStr reads an optional string field of m; field names it in messages.
func (p *problems) optStr(m map[string]any, key, field string) (*string, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, ok
	}
	s, isString := v.(string)
	if !isString {
		p.typeErr(field, "a string", v)
		return nil, true
	}
	return &s, true
}

// known reports every key of obj that is not in keys.
func (p *problems) known(field string, obj map[string]any, keys ...string) {
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if !slices.Contains(keys, k) {
			p.add(field, "unknown field %q (known: %s)", k, strings.Join(keys, ", "))
		}
	}
}

func (p *problems) rulesetRef(v any) *schemas.RulesetRef {
	obj, ok := v.(map[string]any)
	if !ok {
		p.typeErr(keyRulesetRef, "an object {id, version?}", v)
		return nil
	}
	p.known(keyRulesetRef, obj, "id", "version")
	ref := &schemas.RulesetRef{ID: p.str(obj, "id")}
	ref.Version, _ = p.optStr(obj, "version", keyRulesetRef+".version")
	return ref
}

// inlineRuleset keeps a ruleset object as compact JSON text and a string as
// it is (JSON or YAML text, parsed when the request is judged).
func (p *problems) inlineRuleset(field string, v any) *string {
	switch v := v.(type) {
	case string:
		return &v
	case map[string]any:
		text, err := jsonText(v)
		if err != nil {
			p.add(field, "cannot be written as JSON: %v", err)
			return nil
		}
		return &text
	default:
		p.add(field, "must be a JSON object or a string holding one (got %s)", jsonyaml.TypeName(v))
		return nil
	}
}

func (p *problems) options(v any) schemas.Options {
	var o schemas.Options
	obj, ok := v.(map[string]any)
	if !ok {
		p.typeErr(keyOptions, "an object {generate_report?, model?, callback_url?, cache?}", v)
		return o
	}
	p.known(keyOptions, obj, "generate_report", "model", "callback_url", "cache")
	o.GenerateReport = p.optBool(obj, "generate_report")
	o.Cache = p.optBool(obj, "cache")
	o.Model, _ = p.optStr(obj, "model", keyOptions+".model")
	o.CallbackURL, _ = p.optStr(obj, "callback_url", keyOptions+".callback_url")
	return o
}

// optBool reads the optional boolean option key; null or absent is nil.
func (p *problems) optBool(obj map[string]any, key string) *bool {
	raw, ok := obj[key]
	if !ok || raw == nil {
		return nil
	}
	b, isBool := raw.(bool)
	if !isBool {
		p.typeErr(keyOptions+"."+key, "true or false", raw)
		return nil
	}
	return &b
}

func (p *problems) time(field string, v any) time.Time {
	switch v := v.(type) {
	case time.Time: // YAML
		return v.UTC()
	case string:
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			p.add(field, "want an RFC 3339 timestamp, got %q", v)
			return time.Time{}
		}
		return t.UTC()
	case nil:
		return time.Time{}
	default:
		p.typeErr(field, "an RFC 3339 timestamp string", v)
		return time.Time{}
	}
}

// inputs reads the inputs of m (every key but reserved) into r with the
// engine's parser.
func (p *problems) inputs(r *schemas.Request, m map[string]any, reserved []string) {
	form, err := ReadInputForm(m, FormOptions{Reserved: reserved, DocumentFields: []string{keyURI, keyData, keyContentType}})
	if err != nil {
		for _, e := range unjoin(err) {
			var ie *engine.InputError
			switch {
			case errors.As(e, &ie) && ie.Field != "":
				p.add(ie.Field, "%s", ie.Problem)
			case errors.As(e, &ie):
				*p = append(*p, ie.Problem)
			default:
				*p = append(*p, e.Error())
			}
		}
		return
	}
	r.PrimaryDocs = p.documentsFromForm("primary_docs", form.PrimaryDocs)
	r.AuxiliaryDocs = p.documentsFromForm("auxiliary_docs", form.AuxiliaryDocs)
	r.TextInput = form.TextInput
	r.Message = form.Message
	r.NamedInputs = nil
	for i, n := range form.NamedInputs {
		text, err := jsonText(n.Value)
		if err != nil {
			p.add(fmt.Sprintf("named_inputs[%d]", i), "value cannot be written as JSON: %v", err)
			continue
		}
		r.NamedInputs = append(r.NamedInputs, schemas.NamedInput{Name: n.Name, Description: n.Description, ValueJSON: text})
	}
}

func (p *problems) documentsFromForm(field string, forms []DocumentForm) []schemas.Document {
	var docs []schemas.Document
	for i, f := range forms {
		d := schemas.Document{Name: f.Name, Content: f.Content, Pages: f.Pages}
		if uri, ok := f.Fields[keyURI]; ok {
			d.URI = &uri
		}
		if ct, ok := f.Fields[keyContentType]; ok {
			d.ContentType = &ct
		}
		if data, ok := f.Fields[keyData]; ok {
			where := fmt.Sprintf("%s[%d].%s", field, i, keyData)
			b, err := decodeBase64(data)
			switch {
			case err != nil:
				p.add(where, "the file must be base64 (RFC 4648, standard alphabet): %v", err)
			case len(b) == 0:
				p.add(where, "the file is empty")
			case d.Content != nil || d.Pages != nil || d.URI != nil:
				p.add(where, "a document is given once: its file (data), its text (content or pages) or a uri")
			default:
				d.Data = b
			}
		}
		docs = append(docs, d)
	}
	return docs
}

// decodeBase64 reads standard base64, padded or not, ignoring line breaks
// (what base64 tools write).
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
	return base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
}

// jsonText is v as compact JSON, with <, > and & as they are.
func jsonText(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// unjoin lists the errors of an errors.Join, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// InlineRuleset parses the request's inline_ruleset; nil and no error when it has none.
// Problems wrap engine.ErrInvalidRuleset and name inline_ruleset.
func InlineRuleset(req *schemas.Request) (*engine.Ruleset, error) {
	if req.InlineRuleset == nil {
		return nil, nil
	}
	rs, err := engine.ParseRuleset([]byte(*req.InlineRuleset))
	if err != nil {
		return nil, fmt.Errorf("inline_ruleset: %w", err)
	}
	return rs, nil
}
