package request

import (
	"errors"
	"strings"
	"testing"
	"time"

	"rulevalidator/schemas"
)

// envelope is what every case below shares; each adds its inputs.
const envelope = `"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"rs"}`

// TestFromMapShapes maps every accepted shape of the JSON request,
// the specification's aliases included, into the typed request.
func TestFromMapShapes(t *testing.T) {
	doc := func(name, content string) schemas.Document {
		return schemas.Document{Name: name, Content: new(content)}
	}
	for _, tc := range []struct {
		name   string
		inputs string
		want   schemas.Request
	}{
		{
			name:   "the specification's input example",
			inputs: `"primary_docs":[{"file_name":"MSA-Acme.pdf","content":"Master Services Agreement..."}],"named_inputs":[{"name":"contract_value","value":250000}]`,
			want: schemas.Request{
				PrimaryDocs: []schemas.Document{doc("MSA-Acme.pdf", "Master Services Agreement...")},
				NamedInputs: []schemas.NamedInput{{Name: "contract_value", ValueJSON: "250000"}},
			},
		},
		{
			name:   "documents as strings get default names",
			inputs: `"primary_docs":["first","second"],"auxiliary_docs":["policy"]`,
			want: schemas.Request{
				PrimaryDocs:   []schemas.Document{doc("primary_doc_1", "first"), doc("primary_doc_2", "second")},
				AuxiliaryDocs: []schemas.Document{doc("auxiliary_doc_1", "policy")},
			},
		},
		{
			name:   "name aliases: file_name, name, title",
			inputs: `"primary_docs":[{"file_name":"a","text":"x"},{"name":"b","text":"x"},{"title":"c","text":"x"},{"text":"no name"}]`,
			want:   schemas.Request{PrimaryDocs: []schemas.Document{doc("a", "x"), doc("b", "x"), doc("c", "x"), doc("primary_doc_4", "no name")}},
		},
		{
			name:   "text aliases: content, text, markdown, pages",
			inputs: `"auxiliary_docs":[{"name":"a","content":"1"},{"name":"b","text":"2"},{"name":"c","markdown":"# 3"},{"name":"d","pages":["4","5"]}]`,
			want:   schemas.Request{AuxiliaryDocs: []schemas.Document{doc("a", "1"), doc("b", "2"), doc("c", "# 3"), {Name: "d", Pages: []string{"4", "5"}}}},
		},
		{
			name:   "a claim-checked document",
			inputs: `"primary_docs":[{"file_name":"scan.txt","uri":"s3://b/k","content_type":"text/plain"}]`,
			want:   schemas.Request{PrimaryDocs: []schemas.Document{{Name: "scan.txt", URI: new("s3://b/k"), ContentType: new("text/plain")}}},
		},
		{
			name:   "a document's file, inline in base64, padded or not, with a media type or without",
			inputs: `"primary_docs":[{"file_name":"MSA-Acme.pdf","data":"JVBERi0xLjcK","content_type":"application/pdf"},{"name":"nda.docx","data":"UEsDBA"}]`,
			want: schemas.Request{PrimaryDocs: []schemas.Document{
				{Name: "MSA-Acme.pdf", Data: []byte("%PDF-1.7\n"), ContentType: new("application/pdf")},
				{Name: "nda.docx", Data: []byte("PK\x03\x04")},
			}},
		},
		{
			name:   "text_input as a string",
			inputs: `"text_input":"free text"`,
			want:   schemas.Request{TextInput: new("free text")},
		},
		{
			name:   "text_input as {text}",
			inputs: `"text_input":{"text":"free text"},"message":"hello"`,
			want:   schemas.Request{TextInput: new("free text"), Message: new("hello")},
		},
		{
			name:   "named inputs of every JSON type, exact numbers, descriptions kept",
			inputs: `"named_inputs":[{"name":"n","description":"big","value":12345678901234567890},{"name":"o","value":{"b":[true,null],"a":"<&>"}},{"name":"z","value":null}]`,
			want: schemas.Request{NamedInputs: []schemas.NamedInput{
				{Name: "n", Description: new("big"), ValueJSON: "12345678901234567890"},
				{Name: "o", ValueJSON: `{"a":"<&>","b":[true,null]}`},
				{Name: "z", ValueJSON: "null"},
			}},
		},
		{
			name:   "without named_inputs other keys become named inputs, sorted",
			inputs: `"primary_docs":["x"],"contract_value":250000,"counterparty":"Acme","flags":{"rush":true}`,
			want: schemas.Request{
				PrimaryDocs: []schemas.Document{doc("primary_doc_1", "x")},
				NamedInputs: []schemas.NamedInput{
					{Name: "contract_value", ValueJSON: "250000"},
					{Name: "counterparty", ValueJSON: `"Acme"`},
					{Name: "flags", ValueJSON: `{"rush":true}`},
				},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromJSON([]byte("{" + envelope + "," + tc.inputs + "}"))
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.RequestID, want.TenantID, want.RulesetRef = "r", "t", &schemas.RulesetRef{ID: "rs"}
			assertEqual(t, got, &want)
		})
	}
}

// TestFromMapEnvelope reads the request's own keys.
func TestFromMapEnvelope(t *testing.T) {
	got, err := FromJSON([]byte(`{"request_id":"r","tenant_id":"t",
		"inline_ruleset":{"rules":[{"rule_id":"r1","rule_text":"<b> & co"}]},
		"options":{"generate_report":false,"model":"m","callback_url":"https://h.example/x"},
		"submitted_at":"2025-03-01T10:30:00.250+01:00","message":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, got, &schemas.Request{
		RequestID: "r", TenantID: "t",
		InlineRuleset: new(`{"rules":[{"rule_id":"r1","rule_text":"<b> & co"}]}`),
		Message:       new("m"),
		Options:       schemas.Options{GenerateReport: new(false), Model: new("m"), CallbackURL: new("https://h.example/x")},
		SubmittedAt:   time.Date(2025, 3, 1, 9, 30, 0, 250_000_000, time.UTC),
	})

	nulls, err := FromJSON([]byte(`{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"rs","version":null},"inline_ruleset":null,"options":null,"submitted_at":null,"message":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, nulls, &schemas.Request{RequestID: "r", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs"}, Message: new("m")})

	yaml, err := FromJSON([]byte("request_id: r\ntenant_id: t\nruleset_ref: {id: rs, version: \"2\"}\nprimary_docs:\n  - {title: a, markdown: x}\namount: 12\n"))
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, yaml, &schemas.Request{RequestID: "r", TenantID: "t", RulesetRef: &schemas.RulesetRef{ID: "rs", Version: new("2")},
		PrimaryDocs: []schemas.Document{{Name: "a", Content: new("x")}}, NamedInputs: []schemas.NamedInput{{Name: "amount", ValueJSON: "12"}}})
}

// TestFromMapRejects: every problem is named by its field, ambiguous
// shapes included, and all of them are reported together.
func TestFromMapRejects(t *testing.T) {
	for _, tc := range []struct {
		name, inputs string
		want         []string
	}{
		{"content and text", `"primary_docs":[{"name":"a","content":"x","text":"y"}]`,
			[]string{"primary_docs[0]: ambiguous: the document's text is given as both content and text; give one of content, text, markdown"}},
		{"file_name and title", `"auxiliary_docs":[{"file_name":"a","title":"b","content":"x"}]`,
			[]string{"auxiliary_docs[0]: ambiguous: the document's name is given as both file_name and title; give one of file_name, name, title"}},
		{"pages and markdown", `"primary_docs":[{"name":"a","pages":["x"],"markdown":"y"}]`,
			[]string{"primary_docs[0]: ambiguous: the document's text is given as both pages and markdown"}},
		{"document without text", `"primary_docs":[{"name":"a"}]`,
			[]string{`primary_docs[0]: document "a" has no text: give one of content, text, markdown, pages, uri, data, content_type`}},
		{"unknown document field", `"primary_docs":[{"name":"a","contnet":"x"}]`,
			[]string{`primary_docs[0]: unknown field "contnet" (known: pages, file_name, name, title, content, text, markdown, uri, data, content_type)`,
				`primary_docs[0]: document "a" has no text`}},
		{"text_input of the wrong shape", `"text_input":{"txt":"x"}`,
			[]string{`text_input: unknown field "txt" (known: text)`, "text_input.text: missing"}},
		{"named input without a value", `"named_inputs":[{"name":"n"}]`,
			[]string{"named_inputs[0].value: missing (use null for no value)"}},
		{"unknown key next to named_inputs", `"named_inputs":[],"contract_value":1`,
			[]string{"contract_value: unknown field: with named_inputs given, other keys are not taken as named inputs (known: primary_docs, auxiliary_docs, text_input, named_inputs, message, request_id, tenant_id, ruleset_ref, inline_ruleset, options, submitted_at)"}},
		{"duplicate names across document lists", `"primary_docs":[{"name":"a","content":"x"}],"auxiliary_docs":[{"title":"a","text":"y"}]`,
			[]string{`auxiliary_docs[0]: duplicate document name "a" (primary_docs[0] has it too)`}},
		{"uri of the wrong type", `"primary_docs":[{"name":"a","uri":5}]`,
			[]string{"primary_docs[0].uri: must be a string (got a number)"}},
		{"a file that is not base64", `"primary_docs":[{"name":"a.pdf","data":"%PDF-1.7"}]`,
			[]string{"primary_docs[0].data: the file must be base64 (RFC 4648, standard alphabet): illegal base64 data at input byte 0"}},
		{"an empty file", `"primary_docs":[{"name":"a.pdf","data":""}]`,
			[]string{"primary_docs[0].data: the file is empty"}},
		{"a file and its text", `"auxiliary_docs":[{"name":"a.pdf","data":"JVBERi0=","content":"x"}]`,
			[]string{"auxiliary_docs[0].data: a document is given once: its file (data), its text (content or pages) or a uri"}},
		{"a local file, which the service does not read", `"primary_docs":[{"name":"a.pdf","file":"/etc/passwd"}]`,
			[]string{`primary_docs[0]: unknown field "file"`, `primary_docs[0]: document "a.pdf" has no text`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromJSON([]byte("{" + envelope + "," + tc.inputs + "}"))
			var re *schemas.RequestError
			if !errors.As(err, &re) || !errors.Is(err, schemas.ErrInvalidRequest) {
				t.Fatalf("got %v, want a *schemas.RequestError", err)
			}
			if len(re.Problems) != len(tc.want) {
				t.Fatalf("problems %q, want %q", re.Problems, tc.want)
			}
			for i, want := range tc.want {
				if !strings.HasPrefix(re.Problems[i], want) {
					t.Errorf("problem %d: %q, want it to start with %q", i, re.Problems[i], want)
				}
			}
		})
	}
}

// TestReadInputs reads inputs alone: keys such as request_id are inputs
// there, not the request's.
func TestReadInputs(t *testing.T) {
	r := &schemas.Request{RequestID: "r"}
	if err := ReadInputs(r, map[string]any{"primary_docs": []any{map[string]any{"title": "a", "text": "x"}}, "request_id": "upstream-7"}); err != nil {
		t.Fatal(err)
	}
	assertEqual(t, r, &schemas.Request{RequestID: "r", PrimaryDocs: []schemas.Document{{Name: "a", Content: new("x")}},
		NamedInputs: []schemas.NamedInput{{Name: "request_id", ValueJSON: `"upstream-7"`}}})
	err := ReadInputs(r, map[string]any{"text_input": 3})
	if !errors.Is(err, schemas.ErrInvalidRequest) || !strings.Contains(err.Error(), "text_input: must be a string or an object {text: string} (got a number)") {
		t.Fatalf("got %v", err)
	}
}
