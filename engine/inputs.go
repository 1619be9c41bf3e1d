package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// InputError is one problem with a request's inputs. Field is a path such as
// primary_docs[1].content; empty when the problem is the inputs as a whole.
type InputError struct {
	Field   string
	Problem string
}

func (e *InputError) Error() string {
	if e.Field == "" {
		return "inputs: " + e.Problem
	}
	return "inputs: " + e.Field + ": " + e.Problem
}

// Is makes errors.Is(err, ErrInvalidInput) hold for every InputError.
func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

// Text is the document as evidence offsets count it: its pages joined by form feeds.
func (d Document) Text() string { return strings.Join(d.Pages, "\f") }

// Documents lists the primary documents, then the auxiliary ones.
func (in *Inputs) Documents() []Document {
	docs := make([]Document, 0, len(in.PrimaryDocs)+len(in.AuxiliaryDocs))
	docs = append(docs, in.PrimaryDocs...)
	return append(docs, in.AuxiliaryDocs...)
}

// Validate checks inputs built in Go (ParseInputs and InputsFromMap make the
// same checks as they read): at least one input is given and non-empty; every
// document has a name unique across primary and auxiliary documents, some
// text, and no form feed inside a page; named inputs have unique non-blank
// names and values that can be written as JSON. Every problem is reported;
// each matches errors.Is(err, ErrInvalidInput).
func (in *Inputs) Validate() error {
	if in == nil {
		return &InputError{Problem: noInputsProblem}
	}
	p := &inputsParser{docNames: map[string]string{}}
	for _, list := range []struct {
		field string
		docs  []Document
	}{{fieldPrimaryDocs, in.PrimaryDocs}, {fieldAuxiliaryDocs, in.AuxiliaryDocs}} {
		for i, d := range list.docs {
			field := fmt.Sprintf("%s[%d]", list.field, i)
			if strings.TrimSpace(d.Name) == "" {
				p.add(field+".name", "missing or blank")
			} else if first, dup := p.docNames[d.Name]; dup {
				p.add(field, "duplicate document name %q (%s has it too)", d.Name, first)
			} else {
				p.docNames[d.Name] = field
			}
			for k, page := range d.Pages {
				if strings.Contains(page, "\f") {
					p.add(fmt.Sprintf("%s.pages[%d]", field, k), formFeedProblem)
				}
			}
			p.nonEmpty(field, d)
		}
	}
	seen := map[string]int{}
	for i, n := range in.NamedInputs {
		field := fmt.Sprintf("%s[%d]", fieldNamedInputs, i)
		if first, dup := seen[n.Name]; dup {
			p.add(field+".name", "duplicate name %q (named_inputs[%d] has it too)", n.Name, first)
		} else if strings.TrimSpace(n.Name) == "" {
			p.add(field+".name", "missing or blank")
		} else {
			seen[n.Name] = i
		}
		p.jsonValue(field+".value", n.Value)
	}
	if len(p.problems) == 0 && in.empty() {
		p.add("", noInputsProblem)
	}
	return errors.Join(p.problems...)
}

// empty says whether no input carries anything to judge.
func (in *Inputs) empty() bool {
	return len(in.PrimaryDocs) == 0 && len(in.AuxiliaryDocs) == 0 && len(in.NamedInputs) == 0 &&
		strings.TrimSpace(in.TextInput) == "" && strings.TrimSpace(in.Message) == ""
}

const (
	noInputsProblem = "no inputs: give at least one of primary_docs, auxiliary_docs, text_input, named_inputs or message"
	formFeedProblem = `must not contain a form feed ("\f" separates pages)`
)

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
func ParseInputs(data []byte) (*Inputs, error) {
	doc, err := decodeDocument(data)
	if err != nil {
		return nil, &InputError{Problem: err.Error()}
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, &InputError{Problem: fmt.Sprintf("must be an object (got %s)", describeJSONType(doc))}
	}
	return InputsFromMap(m)
}

// InputsFromMap reads a request's inputs from decoded JSON-like values.
//
//   - primary_docs, auxiliary_docs: arrays of documents. A document is a
//     string (named primary_doc_N / auxiliary_doc_N) or an object with a name
//     (file_name, name or title: the first that is not blank, else the
//     default) and its text: pages (an array, one string per page) or
//     content, text or markdown (the first that is not blank; form feeds
//     separate its pages). pages wins when both are given. Names must be
//     unique across both arrays.
//   - text_input: a string, or {text: string}.
//   - message: a string.
//   - named_inputs: an array of {name, description?, value}.
//
// Without named_inputs, any other top-level key becomes a named input (sorted
// by key); with it, another key is an error. At least one input must be given
// and non-empty. Every problem is reported; each matches
// errors.Is(err, ErrInvalidInput) and errors.As(err, **InputError).
func InputsFromMap(m map[string]any) (*Inputs, error) {
	p := &inputsParser{docNames: map[string]string{}}
	in := &Inputs{}
	// Primary documents first, so a duplicate name is reported on the auxiliary one.
	if v, ok := m[fieldPrimaryDocs]; ok {
		in.PrimaryDocs = p.documents(fieldPrimaryDocs, "primary_doc", v)
	}
	if v, ok := m[fieldAuxiliaryDocs]; ok {
		in.AuxiliaryDocs = p.documents(fieldAuxiliaryDocs, "auxiliary_doc", v)
	}
	_, haveNamedInputs := m[fieldNamedInputs]
	for _, key := range sortedMapKeys(m) {
		v := m[key]
		switch key {
		case fieldPrimaryDocs, fieldAuxiliaryDocs:
			// Read above.
		case fieldTextInput:
			in.TextInput = p.textInput(v)
		case fieldMessage:
			s, ok := v.(string)
			if !ok {
				p.typeErr(key, "a string", v)
			}
			in.Message = s
		case fieldNamedInputs:
			in.NamedInputs = p.namedInputs(v)
		default:
			if haveNamedInputs {
				p.add(key, "unknown field: with named_inputs given, other keys are not taken as named inputs (known: %s, %s, %s, %s, %s)",
					fieldPrimaryDocs, fieldAuxiliaryDocs, fieldTextInput, fieldNamedInputs, fieldMessage)
				continue
			}
			if strings.TrimSpace(key) == "" {
				p.add(fmt.Sprintf("%q", key), "a blank key cannot name an input")
				continue
			}
			if p.jsonValue(key, v) {
				in.NamedInputs = append(in.NamedInputs, NamedInput{Name: key, Value: v})
			}
		}
	}
	if len(p.problems) == 0 && in.empty() {
		p.add("", noInputsProblem)
	}
	if len(p.problems) > 0 {
		return nil, errors.Join(p.problems...)
	}
	return in, nil
}

type inputsParser struct {
	problems []error
	// docNames maps each document name read so far to where it was given.
	docNames map[string]string
}

func (p *inputsParser) add(field, format string, args ...any) {
	p.problems = append(p.problems, &InputError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

func (p *inputsParser) typeErr(field, want string, got any) {
	p.add(field, "must be %s (got %s)", want, describeJSONType(got))
}

// jsonValue checks that v can be given to the model as JSON.
func (p *inputsParser) jsonValue(field string, v any) bool {
	if _, err := json.Marshal(v); err != nil {
		p.add(field, "cannot be written as JSON: %v", err)
		return false
	}
	return true
}

func (p *inputsParser) documents(field, defaultName string, v any) []Document {
	items, ok := listValue(v)
	if !ok {
		p.typeErr(field, "an array of documents", v)
		return nil
	}
	docs := make([]Document, 0, len(items))
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

func (p *inputsParser) document(field, defaultName string, v any) (Document, bool) {
	if s, ok := v.(string); ok {
		doc := Document{Name: defaultName, Pages: strings.Split(s, "\f")}
		return doc, p.nonEmpty(field, doc)
	}
	obj, ok := objectValue(v)
	if !ok {
		p.typeErr(field, "a string or an object", v)
		return Document{}, false
	}
	known := append(append([]string{"pages"}, documentNameKeys...), documentContentKeys...)
	for _, key := range sortedMapKeys(obj) {
		if !slices.Contains(known, key) {
			p.add(field, "unknown field %q (known: %s)", key, strings.Join(known, ", "))
		}
	}
	before := len(p.problems)

	doc := Document{Name: p.firstString(field, obj, documentNameKeys)}
	if doc.Name == "" {
		doc.Name = defaultName
	}
	content := p.firstString(field, obj, documentContentKeys)
	if raw, ok := obj["pages"]; ok {
		doc.Pages = p.pages(field+".pages", raw)
	} else if content != "" {
		doc.Pages = strings.Split(content, "\f")
	}
	if len(p.problems) > before {
		return Document{}, false
	}
	return doc, p.nonEmpty(field, doc)
}

// firstString returns the first string among keys that is not blank,
// reporting any of them that is not a string.
func (p *inputsParser) firstString(field string, obj map[string]any, keys []string) string {
	var found string
	for _, key := range keys {
		v, ok := obj[key]
		if !ok {
			continue
		}
		s, ok := v.(string)
		if !ok {
			p.typeErr(field+"."+key, "a string", v)
			continue
		}
		if found == "" && strings.TrimSpace(s) != "" {
			found = s
		}
	}
	return found
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
			p.add(fmt.Sprintf("%s[%d]", field, i), formFeedProblem)
		default:
			pages[i] = s
		}
	}
	return pages
}

// nonEmpty reports a document with nothing to read in it.
func (p *inputsParser) nonEmpty(field string, doc Document) bool {
	for _, page := range doc.Pages {
		if strings.TrimSpace(page) != "" {
			return true
		}
	}
	p.add(field, "document %q is empty: give its text as content, text, markdown or pages", doc.Name)
	return false
}

func (p *inputsParser) textInput(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	obj, ok := objectValue(v)
	if !ok {
		p.typeErr(fieldTextInput, "a string or an object {text: string}", v)
		return ""
	}
	for _, key := range sortedMapKeys(obj) {
		if key != "text" {
			p.add(fieldTextInput, "unknown field %q (known: text)", key)
		}
	}
	raw, ok := obj["text"]
	if !ok {
		p.add(fieldTextInput+".text", "missing")
		return ""
	}
	s, ok := raw.(string)
	if !ok {
		p.typeErr(fieldTextInput+".text", "a string", raw)
	}
	return s
}

func (p *inputsParser) namedInputs(v any) []NamedInput {
	items, ok := listValue(v)
	if !ok {
		p.typeErr(fieldNamedInputs, "an array of {name, description, value}", v)
		return nil
	}
	var out []NamedInput
	seen := map[string]int{}
	for i, item := range items {
		field := fmt.Sprintf("%s[%d]", fieldNamedInputs, i)
		obj, ok := objectValue(item)
		if !ok {
			p.typeErr(field, "an object {name, description, value}", item)
			continue
		}
		before := len(p.problems)
		var in NamedInput
		for _, key := range sortedMapKeys(obj) {
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
				in.Description = s
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
