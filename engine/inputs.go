package engine

import (
	"encoding/json"
	"errors"
	"fmt"
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

// Validate checks inputs built in Go (the request package's parser makes the
// same checks as it reads): at least one input is given and non-empty; every
// document has a name unique across primary and auxiliary documents, some
// text, and no form feed inside a page; named inputs have unique non-blank
// names and values that can be written as JSON. Every problem is reported;
// each matches errors.Is(err, ErrInvalidInput).
func (in *Inputs) Validate() error {
	if in == nil {
		return &InputError{Problem: NoInputsProblem}
	}
	var problems []error
	add := func(field, format string, args ...any) {
		problems = append(problems, &InputError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	docNames := map[string]string{}
	for _, list := range []struct {
		field string
		docs  []Document
	}{{"primary_docs", in.PrimaryDocs}, {"auxiliary_docs", in.AuxiliaryDocs}} {
		for i, d := range list.docs {
			field := fmt.Sprintf("%s[%d]", list.field, i)
			if strings.TrimSpace(d.Name) == "" {
				add(field+".name", "missing or blank")
			} else if first, dup := docNames[d.Name]; dup {
				add(field, "duplicate document name %q (%s has it too)", d.Name, first)
			} else {
				docNames[d.Name] = field
			}
			for k, page := range d.Pages {
				if strings.Contains(page, "\f") {
					add(fmt.Sprintf("%s.pages[%d]", field, k), FormFeedProblem)
				}
			}
			if !d.HasText() {
				add(field, EmptyDocumentProblem, d.Name)
			}
		}
	}
	seen := map[string]int{}
	for i, n := range in.NamedInputs {
		field := fmt.Sprintf("named_inputs[%d]", i)
		if first, dup := seen[n.Name]; dup {
			add(field+".name", "duplicate name %q (named_inputs[%d] has it too)", n.Name, first)
		} else if strings.TrimSpace(n.Name) == "" {
			add(field+".name", "missing or blank")
		} else {
			seen[n.Name] = i
		}
		if _, err := json.Marshal(n.Value); err != nil {
			add(field+".value", "cannot be written as JSON: %v", err)
		}
	}
	if len(problems) == 0 && in.Empty() {
		add("", NoInputsProblem)
	}
	return errors.Join(problems...)
}

// HasText says whether some page of the document holds more than white space.
func (d Document) HasText() bool {
	for _, page := range d.Pages {
		if strings.TrimSpace(page) != "" {
			return true
		}
	}
	return false
}

// Empty says whether no input carries anything to judge.
func (in *Inputs) Empty() bool {
	return len(in.PrimaryDocs) == 0 && len(in.AuxiliaryDocs) == 0 && len(in.NamedInputs) == 0 &&
		strings.TrimSpace(in.TextInput) == "" && strings.TrimSpace(in.Message) == ""
}

// The problems every reader of inputs reports in the same words.
const (
	NoInputsProblem      = "no inputs: give at least one of primary_docs, auxiliary_docs, text_input, named_inputs or message"
	FormFeedProblem      = `must not contain a form feed ("\f" separates pages)`
	EmptyDocumentProblem = "document %q is empty: give its text as content, text, markdown or pages"
)
