package request

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"rulevalidator/engine"
	"rulevalidator/engine/anchor"
	"rulevalidator/internal/jsonyaml"
)

// This file is the JSON form of a request's inputs: every shape the specification allows,
// read by one parser for every way into the service (the HTTP API, produce, validate, eval,
// and the mapping to the Avro contract in request.go).

const (
	fieldPrimaryDocs   = "primary_docs"
	fieldAuxiliaryDocs = "auxiliary_docs"
	fieldTextInput     = "text_input"
	fieldNamedInputs   = "named_inputs"
	fieldMessage       = "message"
)

var (
	// Keys that name a document, and keys that hold its text, in order of preference.
	documentNameKeys    = []string{"file_name", "name", "title"}
	documentContentKeys = []string{"content", "text", "markdown"}
)

// ParseInputs reads a request's inputs from JSON (a document starting with
// '{') or YAML; see InputsFromMap for what is accepted.
func ParseInputs(data []byte) (*engine.Inputs, error) {
	m, err := DecodeObject(data)
	if err != nil {
		return nil, err
	}
	return InputsFromMap(m)
}

// DecodeObject reads a JSON (a document starting with '{') or YAML document
// that must be an object, keeping JSON numbers exact (json.Number). A problem
// is an *InputError naming the line and column where it can be told.
func DecodeObject(data []byte) (map[string]any, error) {
	doc, err := jsonyaml.Decode(data)
	if err != nil {
		return nil, &engine.InputError{Problem: err.Error()}
	}
	m, ok := objectValue(doc)
	if !ok {
		return nil, &engine.InputError{Problem: fmt.Sprintf("must be an object (got %s)", jsonyaml.TypeName(doc))}
	}
	return m, nil
}

// InputsFromMap reads a request's inputs from decoded JSON-like values.
//
//   - primary_docs, auxiliary_docs: arrays of documents. A document is a
//     string (named primary_doc_N / auxiliary_doc_N) or an object with at
//     most one name key (file_name, name or title; a blank one takes the
//     default) and exactly one text key: pages (an array, one string per
//     page) or content, text or markdown (form feeds separate its pages).
//     Two name keys or two text keys are an error naming both, not a guess.
//     Names must be unique across both arrays.
//   - text_input: a string, or {text: string}.
//   - message: a string.
//   - named_inputs: an array of {name, description?, value}.
//
// Without named_inputs, any other top-level key becomes a named input (sorted
// by key); with it, another key is an error. At least one input must be given
// and non-empty. Every problem is reported; each matches
// errors.Is(err, engine.ErrInvalidInput) and errors.As(err, **engine.InputError).
func InputsFromMap(m map[string]any) (*engine.Inputs, error) {
	p := &inputsParser{docNames: map[string]string{}, checkContent: true}
	form := p.read(m)
	if len(p.problems) > 0 {
		return nil, errors.Join(p.problems...)
	}
	return form.inputs(), nil
}

// InputForm is a request's inputs as given, in the shapes InputsFromMap
// reads, with the aliases resolved and nothing split or judged yet: what a
// transport that carries inputs on (the Avro request) maps from, so that
// every way into the service reads the same shapes with the same parser.
// Absent and empty are told apart (nil pointers and slices are absent).
type InputForm struct {
	PrimaryDocs   []DocumentForm
	AuxiliaryDocs []DocumentForm
	TextInput     *string
	NamedInputs   []NamedInputForm
	Message       *string
}

// DocumentForm is one document as given. Content is the text of content,
// text or markdown; Pages the pages array; at most one of them is set.
// Fields holds the string fields the caller allowed (FormOptions.DocumentFields)
// that the document has.
type DocumentForm struct {
	Name    string
	Content *string
	Pages   []string
	Fields  map[string]string
}

// NamedInputForm is one named input as given; Value is its decoded JSON value.
type NamedInputForm struct {
	Name        string
	Description *string
	Value       any
}

// FormOptions widens what ReadInputForm accepts for a caller that carries
// more than the inputs.
type FormOptions struct {
	// Reserved are top-level keys the caller reads itself: they are neither
	// inputs nor taken as named inputs.
	Reserved []string
	// DocumentFields are further string fields a document may have (a
	// claim-check uri, a content type). A document with one of them needs
	// no text.
	DocumentFields []string
}

// ReadInputForm reads the inputs of m with the rules of InputsFromMap, but
// checks shapes only (types, aliases, unknown and ambiguous keys, duplicate
// names): whether the documents hold any text, and whether any input is
// given at all, is left to InputsFromMap when the request is judged.
func ReadInputForm(m map[string]any, opt FormOptions) (*InputForm, error) {
	p := &inputsParser{docNames: map[string]string{}, opt: opt}
	form := p.read(m)
	if len(p.problems) > 0 {
		return nil, errors.Join(p.problems...)
	}
	return form, nil
}

// inputs is the form as the engine judges it: text split into pages.
func (f *InputForm) inputs() *engine.Inputs {
	in := &engine.Inputs{PrimaryDocs: documentsOf(f.PrimaryDocs), AuxiliaryDocs: documentsOf(f.AuxiliaryDocs)}
	if f.TextInput != nil {
		in.TextInput = *f.TextInput
	}
	if f.Message != nil {
		in.Message = *f.Message
	}
	for _, n := range f.NamedInputs {
		ni := engine.NamedInput{Name: n.Name, Value: n.Value}
		if n.Description != nil {
			ni.Description = *n.Description
		}
		in.NamedInputs = append(in.NamedInputs, ni)
	}
	return in
}

func documentsOf(forms []DocumentForm) []engine.Document {
	var docs []engine.Document
	for _, f := range forms {
		docs = append(docs, f.document())
	}
	return docs
}

func (f DocumentForm) document() engine.Document {
	d := engine.Document{Name: f.Name, Pages: f.Pages}
	if f.Content != nil {
		d.Pages = strings.Split(*f.Content, "\f")
	}
	return d
}

// read reads every input of m into a form, collecting problems.
func (p *inputsParser) read(m map[string]any) *InputForm {
	form := &InputForm{}
	// Primary documents first, so a duplicate name is reported on the auxiliary one.
	if v, ok := m[fieldPrimaryDocs]; ok {
		form.PrimaryDocs = p.documents(fieldPrimaryDocs, "primary_doc", v)
	}
	if v, ok := m[fieldAuxiliaryDocs]; ok {
		form.AuxiliaryDocs = p.documents(fieldAuxiliaryDocs, "auxiliary_doc", v)
	}
	_, haveNamedInputs := m[fieldNamedInputs]
	for _, key := range jsonyaml.SortedKeys(m) {
		v := m[key]
		switch {
		case slices.Contains(p.opt.Reserved, key):
			// The caller's.
		case key == fieldPrimaryDocs, key == fieldAuxiliaryDocs:
			// Read above.
		case key == fieldTextInput:
			form.TextInput = p.textInput(v)
		case key == fieldMessage:
			s, ok := v.(string)
			if !ok {
				p.typeErr(key, "a string", v)
			}
			form.Message = &s
		case key == fieldNamedInputs:
			form.NamedInputs = p.namedInputs(v)
		case haveNamedInputs:
			p.add(key, "unknown field: with named_inputs given, other keys are not taken as named inputs (known: %s)",
				strings.Join(append([]string{fieldPrimaryDocs, fieldAuxiliaryDocs, fieldTextInput, fieldNamedInputs, fieldMessage}, p.opt.Reserved...), ", "))
		case strings.TrimSpace(key) == "":
			p.add(fmt.Sprintf("%q", key), "a blank key cannot name an input")
		default:
			if like := p.lookalike(key); like != "" {
				p.add(key, "unknown field %q: did you mean %s? (a key that looks like a field is not taken as a named input; give such an input in named_inputs)", key, like)
				continue
			}
			if p.jsonValue(key, v) {
				form.NamedInputs = append(form.NamedInputs, NamedInputForm{Name: key, Value: v})
			}
		}
	}
	if p.checkContent && len(p.problems) == 0 && form.inputs().Empty() {
		p.add("", engine.NoInputsProblem)
	}
	return form
}

// inputsParser reads the inputs of a request, collecting every problem.
type inputsParser struct {
	problems []error
	// docNames maps each document name read so far to where it was given.
	docNames map[string]string
	// checkContent asks for the checks of what the inputs hold (documents
	// with text, at least one input) besides their shapes.
	checkContent bool
	opt          FormOptions
}

func (p *inputsParser) add(field, format string, args ...any) {
	p.problems = append(p.problems, &engine.InputError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

func (p *inputsParser) typeErr(field, want string, got any) {
	p.add(field, "must be %s (got %s)", want, jsonyaml.TypeName(got))
}

// jsonValue checks that v can be given to the model as JSON.
func (p *inputsParser) jsonValue(field string, v any) bool {
	if _, err := json.Marshal(v); err != nil {
		p.add(field, "cannot be written as JSON: %v", err)
		return false
	}
	return true
}

func (p *inputsParser) documents(field, defaultName string, v any) []DocumentForm {
	items, ok := listValue(v)
	if !ok {
		p.typeErr(field, "an array of documents", v)
		return nil
	}
	docs := make([]DocumentForm, 0, len(items))
	for i, item := range items {
		docField := fmt.Sprintf("%s[%d]", field, i)
		doc, ok := p.document(docField, fmt.Sprintf("%s_%d", defaultName, i+1), item)
		if !ok {
			continue
		}
		if first, dup := p.docNames[doc.Name]; dup {
			p.add(docField, "duplicate document name %q (%s has it too)", doc.Name, first)
			continue
		}
		p.docNames[doc.Name] = docField
		docs = append(docs, doc)
	}
	return docs
}

func (p *inputsParser) document(field, defaultName string, v any) (DocumentForm, bool) {
	if s, ok := v.(string); ok {
		doc := DocumentForm{Name: defaultName, Content: &s}
		return doc, p.nonEmpty(field, doc)
	}
	obj, ok := objectValue(v)
	if !ok {
		p.typeErr(field, "a string or an object", v)
		return DocumentForm{}, false
	}
	known := append(append(append([]string{"pages"}, documentNameKeys...), documentContentKeys...), p.opt.DocumentFields...)
	for _, key := range jsonyaml.SortedKeys(obj) {
		if !slices.Contains(known, key) {
			p.add(field, "unknown field %q (known: %s)", key, strings.Join(known, ", "))
		}
	}
	before := len(p.problems)

	var doc DocumentForm
	if name := p.oneString(field, obj, documentNameKeys, "the document's name"); name != nil && strings.TrimSpace(*name) != "" {
		doc.Name = *name
	} else {
		doc.Name = defaultName
	}
	textKeys := append([]string{"pages"}, documentContentKeys...)
	if _, ok := obj["pages"]; ok {
		if p.onlyOne(field, obj, textKeys, "the document's text") {
			doc.Pages = p.pages(field+".pages", obj["pages"])
		}
	} else {
		doc.Content = p.oneString(field, obj, documentContentKeys, "the document's text")
	}
	for _, key := range p.opt.DocumentFields {
		raw, ok := obj[key]
		if !ok {
			continue
		}
		s, ok := raw.(string)
		if !ok {
			p.typeErr(field+"."+key, "a string", raw)
			continue
		}
		if doc.Fields == nil {
			doc.Fields = map[string]string{}
		}
		doc.Fields[key] = s
	}
	if len(p.problems) > before {
		return DocumentForm{}, false
	}
	return doc, p.nonEmpty(field, doc)
}

// onlyOne reports when obj has more than one of keys, which are aliases of
// what: which one was meant cannot be told.
func (p *inputsParser) onlyOne(field string, obj map[string]any, keys []string, what string) bool {
	var given []string
	for _, key := range keys {
		if _, ok := obj[key]; ok {
			given = append(given, key)
		}
	}
	if len(given) > 1 {
		p.add(field, "ambiguous: %s is given as both %s; give one of %s", what, strings.Join(given, " and "), strings.Join(keys, ", "))
		return false
	}
	return true
}

// oneString returns the string under the one of keys that obj has, nil when
// it has none, reporting a value that is not a string or more than one key.
func (p *inputsParser) oneString(field string, obj map[string]any, keys []string, what string) *string {
	if !p.onlyOne(field, obj, keys, what) {
		return nil
	}
	for _, key := range keys {
		v, ok := obj[key]
		if !ok {
			continue
		}
		s, ok := v.(string)
		if !ok {
			p.typeErr(field+"."+key, "a string", v)
			return nil
		}
		return &s
	}
	return nil
}

func (p *inputsParser) pages(field string, v any) []string {
	items, ok := listValue(v)
	if !ok {
		p.typeErr(field, "an array of strings", v)
		return nil
	}
	pages := make([]string, len(items))
	for i, item := range items {
		s, ok := item.(string)
		switch {
		case !ok:
			p.typeErr(fmt.Sprintf("%s[%d]", field, i), "a string", item)
		case strings.Contains(s, "\f"):
			p.add(fmt.Sprintf("%s[%d]", field, i), engine.FormFeedProblem)
		default:
			pages[i] = s
		}
	}
	return pages
}

// nonEmpty reports a document with nothing to read in it. Checking shapes
// only, a document needs its text (or one of the caller's fields) to be
// given, not to hold anything.
func (p *inputsParser) nonEmpty(field string, doc DocumentForm) bool {
	if !p.checkContent {
		if doc.Content == nil && doc.Pages == nil && len(doc.Fields) == 0 {
			ways := strings.Join(append([]string{"content", "text", "markdown", "pages"}, p.opt.DocumentFields...), ", ")
			p.add(field, "document %q has no text: give one of %s", doc.Name, ways)
			return false
		}
		return true
	}
	if doc.document().HasText() {
		return true
	}
	p.add(field, engine.EmptyDocumentProblem, doc.Name)
	return false
}

func (p *inputsParser) textInput(v any) *string {
	if s, ok := v.(string); ok {
		return &s
	}
	obj, ok := objectValue(v)
	if !ok {
		p.typeErr(fieldTextInput, "a string or an object {text: string}", v)
		return nil
	}
	for _, key := range jsonyaml.SortedKeys(obj) {
		if key != "text" {
			p.add(fieldTextInput, "unknown field %q (known: text)", key)
		}
	}
	raw, ok := obj["text"]
	if !ok {
		p.add(fieldTextInput+".text", "missing")
		return nil
	}
	s, ok := raw.(string)
	if !ok {
		p.typeErr(fieldTextInput+".text", "a string", raw)
	}
	return &s
}

func (p *inputsParser) namedInputs(v any) []NamedInputForm {
	items, ok := listValue(v)
	if !ok {
		p.typeErr(fieldNamedInputs, "an array of {name, description, value}", v)
		return nil
	}
	var out []NamedInputForm
	seen := map[string]int{}
	for i, item := range items {
		field := fmt.Sprintf("%s[%d]", fieldNamedInputs, i)
		obj, ok := objectValue(item)
		if !ok {
			p.typeErr(field, "an object {name, description, value}", item)
			continue
		}
		before := len(p.problems)
		var in NamedInputForm
		for _, key := range jsonyaml.SortedKeys(obj) {
			switch v := obj[key]; key {
			case "name":
				s, ok := v.(string)
				if !ok {
					p.typeErr(field+".name", "a string", v)
				}
				in.Name = s
			case "description":
				s, ok := v.(string)
				if !ok {
					p.typeErr(field+".description", "a string", v)
				}
				in.Description = &s
			case "value":
				if p.jsonValue(field+".value", v) {
					in.Value = v
				}
			default:
				p.add(field, "unknown field %q (known: name, description, value)", key)
			}
		}
		if raw, ok := obj["name"]; !ok {
			p.add(field+".name", "missing")
		} else if _, isString := raw.(string); isString {
			if first, dup := seen[in.Name]; dup {
				p.add(field+".name", "duplicate name %q (named_inputs[%d] has it too)", in.Name, first)
			} else if strings.TrimSpace(in.Name) == "" {
				p.add(field+".name", "must not be blank")
			} else {
				seen[in.Name] = i
			}
		}
		if _, ok := obj["value"]; !ok {
			p.add(field+".value", "missing (use null for no value)")
		}
		if len(p.problems) == before {
			out = append(out, in)
		}
	}
	return out
}

// listValue accepts any slice, so Go callers need not build []any.
func listValue(v any) ([]any, bool) {
	if l, ok := v.([]any); ok {
		return l, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice || rv.Type().Elem().Kind() == reflect.Uint8 {
		return nil, false
	}
	l := make([]any, rv.Len())
	for i := range l {
		l[i] = rv.Index(i).Interface()
	}
	return l, true
}

// objectValue accepts any map with string keys, so Go callers need not build map[string]any.
func objectValue(v any) (map[string]any, bool) {
	if m, ok := v.(map[string]any); ok {
		return m, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Map || rv.Type().Key().Kind() != reflect.String {
		return nil, false
	}
	m := make(map[string]any, rv.Len())
	for it := rv.MapRange(); it.Next(); {
		m[it.Key().String()] = it.Value().Interface()
	}
	return m, true
}

// lookalike returns the known top-level key that key is probably a
// misspelling of, "" when none: such a key is a mistake, not a named input.
// A look-alike is the same but for case, a few edits away (one for a key of
// five bytes or more, two from eight), or a prefix holding at least half of
// it. Shorter keys are left alone, so ordinary input names such as "name",
// "text" or "date" are still promoted.
func (p *inputsParser) lookalike(key string) string {
	k := strings.ToLower(key)
	for _, known := range append([]string{fieldPrimaryDocs, fieldAuxiliaryDocs, fieldTextInput, fieldNamedInputs, fieldMessage}, p.opt.Reserved...) {
		edits := 0
		switch {
		case len(known) >= 8:
			edits = 2
		case len(known) >= 5:
			edits = 1
		}
		if k == known || anchor.WithinEdits(k, known, edits) || (len(k) >= 5 && 2*len(k) >= len(known) && strings.HasPrefix(known, k)) {
			return known
		}
	}
	return ""
}
