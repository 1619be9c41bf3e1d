package request_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/request"
)

func TestParseInputsForms(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want engine.Inputs
	}{
		{
			name: "string documents get default names and form-feed pages",
			doc:  `{"primary_docs": ["page one\fpage two", "single"], "auxiliary_docs": ["aux"]}`,
			want: engine.Inputs{
				PrimaryDocs: []engine.Document{
					{Name: "primary_doc_1", Pages: []string{"page one", "page two"}},
					{Name: "primary_doc_2", Pages: []string{"single"}},
				},
				AuxiliaryDocs: []engine.Document{{Name: "auxiliary_doc_1", Pages: []string{"aux"}}},
			},
		},
		{
			name: "object documents: every name key and every text key",
			doc: `{"primary_docs": [
				{"file_name": "a.pdf", "content": "A"},
				{"name": "b", "text": "B1\fB2"},
				{"title": "c", "markdown": "# C"},
				{"file_name": " ", "content": "blank name"},
				{"content": "unnamed"}]}`,
			want: engine.Inputs{PrimaryDocs: []engine.Document{
				{Name: "a.pdf", Pages: []string{"A"}},
				{Name: "b", Pages: []string{"B1", "B2"}},
				{Name: "c", Pages: []string{"# C"}},
				{Name: "primary_doc_4", Pages: []string{"blank name"}},
				{Name: "primary_doc_5", Pages: []string{"unnamed"}},
			}},
		},
		{
			name: "pages keep empty pages",
			doc:  `{"auxiliary_docs": [{"name": "p", "pages": ["one", "", "three"]}]}`,
			want: engine.Inputs{AuxiliaryDocs: []engine.Document{{Name: "p", Pages: []string{"one", "", "three"}}}},
		},
		{
			name: "short ordinary keys are promoted, not taken for misspelt fields",
			doc:  `{"primary_docs": ["x"], "name": "Acme", "text": "note", "date": "2024-01-01"}`,
			want: engine.Inputs{
				PrimaryDocs: []engine.Document{{Name: "primary_doc_1", Pages: []string{"x"}}},
				NamedInputs: []engine.NamedInput{{Name: "date", Value: "2024-01-01"}, {Name: "name", Value: "Acme"}, {Name: "text", Value: "note"}},
			},
		},
		{
			name: "trailing form feed keeps its empty last page",
			doc:  `{"primary_docs": ["a\fb\f"]}`,
			want: engine.Inputs{PrimaryDocs: []engine.Document{{Name: "primary_doc_1", Pages: []string{"a", "b", ""}}}},
		},
		{
			name: "text_input as a string",
			doc:  `{"text_input": "free text"}`,
			want: engine.Inputs{TextInput: "free text"},
		},
		{
			name: "text_input as an object",
			doc:  `{"text_input": {"text": "free text"}}`,
			want: engine.Inputs{TextInput: "free text"},
		},
		{
			name: "message only",
			doc:  `{"message": "please check"}`,
			want: engine.Inputs{Message: "please check"},
		},
		{
			name: "named_inputs keep their order",
			doc: `{"named_inputs": [{"name": "z", "description": "last letter", "value": 1},
				{"name": "a", "value": {"nested": [true, null]}}, {"name": "n", "value": null}]}`,
			want: engine.Inputs{NamedInputs: []engine.NamedInput{
				{Name: "z", Description: "last letter", Value: json.Number("1")},
				{Name: "a", Value: map[string]any{"nested": []any{true, nil}}},
				{Name: "n", Value: nil},
			}},
		},
		{
			name: "other keys become named inputs, sorted",
			doc:  `{"zeta": "z", "message": "m", "alpha": [1, 2], "big": 12345678901234567890}`,
			want: engine.Inputs{Message: "m", NamedInputs: []engine.NamedInput{
				{Name: "alpha", Value: []any{json.Number("1"), json.Number("2")}},
				{Name: "big", Value: json.Number("12345678901234567890")},
				{Name: "zeta", Value: "z"},
			}},
		},
		{
			name: "YAML with every input",
			doc: `
primary_docs:
  - file_name: msa.pdf
    pages: [one, two]
auxiliary_docs:
  - "policy text"
text_input: {text: free}
message: hello
named_inputs:
  - {name: limit, value: 250000}
  - {name: map, value: {1: one}}
`,
			want: engine.Inputs{
				PrimaryDocs:   []engine.Document{{Name: "msa.pdf", Pages: []string{"one", "two"}}},
				AuxiliaryDocs: []engine.Document{{Name: "auxiliary_doc_1", Pages: []string{"policy text"}}},
				TextInput:     "free",
				Message:       "hello",
				NamedInputs: []engine.NamedInput{
					{Name: "limit", Value: 250000},
					{Name: "map", Value: map[string]any{"1": "one"}},
				},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := request.ParseInputs([]byte(tc.doc))
			if err != nil {
				t.Fatalf("ParseInputs: %v", err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("ParseInputs:\n got %#v\nwant %#v", *got, tc.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate after ParseInputs: %v", err)
			}
		})
	}
}

func TestParseInputsRejects(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{name: "empty document", doc: "", want: []string{"inputs: empty document"}},
		{name: "not an object", doc: `"just text"`, want: []string{"inputs: must be an object (got a string)"}},
		{name: "bad JSON", doc: `{"message": }`, want: []string{
			"inputs: invalid JSON at line 1, column 13 (byte offset 12): invalid character '}' looking for beginning of value"}},
		{name: "nothing given", doc: `{}`, want: []string{
			"inputs: no inputs: give at least one of primary_docs, auxiliary_docs, text_input, named_inputs or message"}},
		{name: "only empty inputs", doc: `{"primary_docs": [], "text_input": " ", "message": "", "named_inputs": []}`, want: []string{
			"inputs: no inputs: give at least one of primary_docs, auxiliary_docs, text_input, named_inputs or message"}},
		{
			name: "documents of the wrong type",
			doc:  `{"primary_docs": "text", "auxiliary_docs": [42, null, ["a"]]}`,
			want: []string{
				"inputs: primary_docs: must be an array of documents (got a string)",
				"inputs: auxiliary_docs[0]: must be a string or an object (got a number)",
				"inputs: auxiliary_docs[1]: must be a string or an object (got null)",
				"inputs: auxiliary_docs[2]: must be a string or an object (got an array)",
			},
		},
		{
			name: "document fields of the wrong type",
			doc: `{"primary_docs": [{"file_name": 1, "content": 2}, {"name": "p", "pages": "one"},
				{"name": "q", "pages": ["ok", 3, "a\fb"]}]}`,
			want: []string{
				"inputs: primary_docs[0].file_name: must be a string (got a number)",
				"inputs: primary_docs[0].content: must be a string (got a number)",
				"inputs: primary_docs[1].pages: must be an array of strings (got a string)",
				"inputs: primary_docs[2].pages[1]: must be a string (got a number)",
				`inputs: primary_docs[2].pages[2]: must not contain a form feed ("\f" separates pages)`,
			},
		},
		{
			name: "ambiguous documents: two name keys, two text keys, pages and text",
			doc: `{"primary_docs": [{"file_name": "a", "name": "b", "content": "x"}, {"name": "c", "content": "x", "text": "y"},
				{"title": "d", "pages": ["x"], "markdown": "y"}, {"file_name": "e", "title": "", "content": "x"}]}`,
			want: []string{
				"inputs: primary_docs[0]: ambiguous: the document's name is given as both file_name and name; give one of file_name, name, title",
				"inputs: primary_docs[1]: ambiguous: the document's text is given as both content and text; give one of content, text, markdown",
				"inputs: primary_docs[2]: ambiguous: the document's text is given as both pages and markdown; give one of pages, content, text, markdown",
				"inputs: primary_docs[3]: ambiguous: the document's name is given as both file_name and title; give one of file_name, name, title",
			},
		},
		{
			name: "keys that look like fields are not named inputs",
			doc:  `{"text_imput": "x", "Message": "y", "primary": ["z"], "contract_value": 1}`,
			want: []string{
				`inputs: Message: unknown field "Message": did you mean message? (a key that looks like a field is not taken as a named input; give such an input in named_inputs)`,
				`inputs: primary: unknown field "primary": did you mean primary_docs? (a key that looks like a field is not taken as a named input; give such an input in named_inputs)`,
				`inputs: text_imput: unknown field "text_imput": did you mean text_input? (a key that looks like a field is not taken as a named input; give such an input in named_inputs)`,
			},
		},
		{
			name: "unknown document field",
			doc:  `{"primary_docs": [{"name": "a", "contnet": "x"}]}`,
			want: []string{
				`inputs: primary_docs[0]: unknown field "contnet" (known: pages, file_name, name, title, content, text, markdown)`,
				`inputs: primary_docs[0]: document "a" is empty: give its text as content, text, markdown or pages`,
			},
		},
		{
			name: "empty documents",
			doc:  `{"primary_docs": ["", {"name": "blank", "content": " \n\f "}, {"name": "no pages", "pages": []}], "auxiliary_docs": [{"title": "t"}]}`,
			want: []string{
				`inputs: primary_docs[0]: document "primary_doc_1" is empty: give its text as content, text, markdown or pages`,
				`inputs: primary_docs[1]: document "blank" is empty: give its text as content, text, markdown or pages`,
				`inputs: primary_docs[2]: document "no pages" is empty: give its text as content, text, markdown or pages`,
				`inputs: auxiliary_docs[0]: document "t" is empty: give its text as content, text, markdown or pages`,
			},
		},
		{
			name: "duplicate document names across primary and auxiliary",
			doc: `{"primary_docs": [{"name": "msa", "content": "a"}, "b"],
				"auxiliary_docs": [{"title": "msa", "content": "c"}, {"name": "primary_doc_2", "content": "d"}]}`,
			want: []string{
				`inputs: auxiliary_docs[0]: duplicate document name "msa" (primary_docs[0] has it too)`,
				`inputs: auxiliary_docs[1]: duplicate document name "primary_doc_2" (primary_docs[1] has it too)`,
			},
		},
		{
			name: "text_input of the wrong shapes",
			doc:  `{"text_input": {"txt": "x"}}`,
			want: []string{
				`inputs: text_input: unknown field "txt" (known: text)`,
				"inputs: text_input.text: missing",
			},
		},
		{
			name: "text_input and message of the wrong type",
			doc:  `{"text_input": 5, "message": {"text": "x"}}`,
			want: []string{
				"inputs: message: must be a string (got an object)",
				"inputs: text_input: must be a string or an object {text: string} (got a number)",
			},
		},
		{
			name: "named_inputs problems",
			doc: `{"named_inputs": [{"value": 1}, {"name": "", "value": 1}, {"name": "a", "value": 1},
				{"name": "a", "value": 2}, {"name": "b"}, {"name": 3, "description": 4, "value": 1}, "c",
				{"name": "d", "value": 1, "unit": "kg"}]}`,
			want: []string{
				"inputs: named_inputs[0].name: missing",
				"inputs: named_inputs[1].name: must not be blank",
				`inputs: named_inputs[3].name: duplicate name "a" (named_inputs[2] has it too)`,
				"inputs: named_inputs[4].value: missing (use null for no value)",
				"inputs: named_inputs[5].description: must be a string (got a number)",
				"inputs: named_inputs[5].name: must be a string (got a number)",
				"inputs: named_inputs[6]: must be an object {name, description, value} (got a string)",
				`inputs: named_inputs[7]: unknown field "unit" (known: name, description, value)`,
			},
		},
		{
			name: "named_inputs of the wrong type",
			doc:  `{"named_inputs": {"a": 1}}`,
			want: []string{"inputs: named_inputs: must be an array of {name, description, value} (got an object)"},
		},
		{
			name: "unknown key next to named_inputs",
			doc:  `{"named_inputs": [{"name": "a", "value": 1}], "limit": 5}`,
			want: []string{"inputs: limit: unknown field: with named_inputs given, other keys are not taken as named inputs (known: primary_docs, auxiliary_docs, text_input, named_inputs, message)"},
		},
		{
			name: "blank key",
			doc:  `{" ": 1}`,
			want: []string{`inputs: " ": a blank key cannot name an input`},
		},
		{
			name: "non-finite YAML value",
			doc:  "limit: .inf\n",
			want: []string{"inputs: limit: cannot be written as JSON: json: unsupported value: +Inf"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := request.ParseInputs([]byte(tc.doc))
			if got := joinedErrorLines(err); !slices.Equal(got, tc.want) {
				t.Fatalf("ParseInputs errors:\n got %q\nwant %q", got, tc.want)
			}
			if in != nil {
				t.Errorf("inputs returned with an error: %+v", in)
			}
			if !errors.Is(err, engine.ErrInvalidInput) {
				t.Errorf("errors.Is(err, ErrInvalidInput) = false for %v", err)
			}
			if errors.Is(err, engine.ErrInvalidRuleset) {
				t.Errorf("errors.Is(err, ErrInvalidRuleset) = true for %v", err)
			}
			var ie *engine.InputError
			if !errors.As(err, &ie) {
				t.Errorf("errors.As(err, *InputError) = false for %v", err)
			}
		})
	}
}

// TestInputsFromMapGoValues covers callers that build the map in Go rather
// than decoding JSON: typed slices and maps are accepted like []any and
// map[string]any.
func TestInputsFromMapGoValues(t *testing.T) {
	in, err := request.InputsFromMap(map[string]any{
		"primary_docs":   []string{"a\fb"},
		"auxiliary_docs": []map[string]any{{"name": "policy", "pages": []string{"p1", "p2"}}},
		"text_input":     map[string]string{"text": "t"},
		"named_inputs":   []map[string]any{{"name": "n", "value": 3.5}},
	})
	if err != nil {
		t.Fatalf("InputsFromMap: %v", err)
	}
	want := &engine.Inputs{
		PrimaryDocs:   []engine.Document{{Name: "primary_doc_1", Pages: []string{"a", "b"}}},
		AuxiliaryDocs: []engine.Document{{Name: "policy", Pages: []string{"p1", "p2"}}},
		TextInput:     "t",
		NamedInputs:   []engine.NamedInput{{Name: "n", Value: 3.5}},
	}
	if !reflect.DeepEqual(in, want) {
		t.Errorf("InputsFromMap:\n got %#v\nwant %#v", in, want)
	}

	_, err = request.InputsFromMap(map[string]any{"named_inputs": []any{map[string]any{"name": "nan", "value": math.NaN()}}})
	if got, want := joinedErrorLines(err), []string{"inputs: named_inputs[0].value: cannot be written as JSON: json: unsupported value: NaN"}; !slices.Equal(got, want) {
		t.Errorf("NaN value: got %q, want %q", got, want)
	}

	_, err = request.InputsFromMap(nil)
	if !errors.Is(err, engine.ErrInvalidInput) {
		t.Errorf("InputsFromMap(nil) = %v, want an ErrInvalidInput", err)
	}
}

func TestInputsDocumentTextAndDocuments(t *testing.T) {
	in, err := request.ParseInputs([]byte(`{"primary_docs": ["p\fq", "r"], "auxiliary_docs": [{"name": "x", "pages": ["s", "t"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	docs := in.Documents()
	var names, texts []string
	for _, d := range docs {
		names = append(names, d.Name)
		texts = append(texts, d.Text())
	}
	if want := []string{"primary_doc_1", "primary_doc_2", "x"}; !slices.Equal(names, want) {
		t.Errorf("Documents names = %q, want %q", names, want)
	}
	if want := []string{"p\fq", "r", "s\ft"}; !slices.Equal(texts, want) {
		t.Errorf("Documents texts = %q, want %q", texts, want)
	}
	// Documents returns a new slice: appending to it leaves the inputs alone.
	_ = append(docs[:1], engine.Document{Name: "other"})
	if in.PrimaryDocs[1].Name != "primary_doc_2" || in.AuxiliaryDocs[0].Name != "x" {
		t.Errorf("Documents aliases the inputs: %+v", in)
	}
}

func TestParseInputsExample(t *testing.T) {
	data, err := os.ReadFile("../examples/contract-review/input.json")
	if err != nil {
		t.Fatal(err)
	}
	in, err := request.ParseInputs(data)
	if err != nil {
		t.Fatalf("ParseInputs(example): %v", err)
	}
	if len(in.PrimaryDocs) != 1 || len(in.PrimaryDocs[0].Pages) < 2 || len(in.AuxiliaryDocs) != 1 || len(in.NamedInputs) < 2 {
		t.Fatalf("unexpected example inputs: %+v", in)
	}
	total := 0
	for _, d := range in.Documents() {
		total += len(d.Text())
	}
	// Small enough for a tiny local model with an 8k-token context.
	if total >= 6<<10 {
		t.Errorf("example documents hold %d bytes, want under 6 KiB", total)
	}
	if !strings.Contains(in.PrimaryDocs[0].Text(), "\f") {
		t.Error("example primary document should have several pages")
	}
}

// TestReadInputForm: the shapes as given, for a caller that carries the
// inputs on: absent and empty told apart, text not split, the caller's keys
// and document fields left to it, and text checked for presence only.
func TestReadInputForm(t *testing.T) {
	m, err := request.DecodeObject([]byte(`{"request_id": "r-1", "primary_docs": ["a\fb", {"title": "t", "uri": "s3://b/k"}, {"name": "e", "content": ""}],
		"text_input": {"text": ""}, "limit": 5}`))
	if err != nil {
		t.Fatal(err)
	}
	form, err := request.ReadInputForm(m, request.FormOptions{Reserved: []string{"request_id"}, DocumentFields: []string{"uri"}})
	if err != nil {
		t.Fatal(err)
	}
	text, empty := "a\fb", ""
	want := &request.InputForm{
		PrimaryDocs: []request.DocumentForm{
			{Name: "primary_doc_1", Content: &text},
			{Name: "t", Fields: map[string]string{"uri": "s3://b/k"}},
			{Name: "e", Content: &empty},
		},
		TextInput:   &empty,
		NamedInputs: []request.NamedInputForm{{Name: "limit", Value: json.Number("5")}},
	}
	if !reflect.DeepEqual(form, want) {
		t.Errorf("form = %+v\nwant %+v", form, want)
	}
	// The same document is refused when judged: it has no text to read.
	if _, err := request.InputsFromMap(map[string]any{"primary_docs": []any{map[string]any{"name": "e", "content": ""}}}); err == nil {
		t.Error("InputsFromMap accepted an empty document")
	}
	// Shapes are still checked: a document without any text, ambiguity, reserved keys nowhere else.
	_, err = request.ReadInputForm(map[string]any{"primary_docs": []any{map[string]any{"name": "n"}, map[string]any{"text": "x", "markdown": "y"}}},
		request.FormOptions{DocumentFields: []string{"uri"}})
	for _, want := range []string{`primary_docs[0]: document "n" has no text: give one of content, text, markdown, pages, uri`,
		"primary_docs[1]: ambiguous: the document's text is given as both text and markdown"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

// joinedErrorLines splits a (joined) error into its messages.
func joinedErrorLines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}
