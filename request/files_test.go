package request

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulevalidator/schemas"
)

// Documents that name a local file are read into data, named by the file
// unless they have a name; --document files are added as primary documents.
func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"msa.pdf": "%PDF-1.7 msa", "policy.docx": "PK\x03\x04 policy"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m, err := DecodeObject([]byte(`{"request_id":"r","tenant_id":"t","ruleset_ref":{"id":"rs"},
		"primary_docs":[{"file":"msa.pdf","content_type":"application/pdf"},"inline text"],
		"auxiliary_docs":[{"title":"Contracting policy","file":"policy.docx"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	// A --document file is relative to the working directory, not to the input's.
	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "extra.pdf"), []byte("%PDF-1.7 extra"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	if err := ReadFiles(m, dir, []string{"extra.pdf"}, 1<<20); err != nil {
		t.Fatal(err)
	}
	got, err := FromMap(m)
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, got.PrimaryDocs, []schemas.Document{
		{Name: "msa.pdf", Data: []byte("%PDF-1.7 msa"), ContentType: new("application/pdf")},
		{Name: "primary_doc_2", Content: new("inline text")},
		{Name: "extra.pdf", Data: []byte("%PDF-1.7 extra")},
	})
	assertEqual(t, got.AuxiliaryDocs, []schemas.Document{{Name: "Contracting policy", Data: []byte("PK\x03\x04 policy")}})
}

func TestReadFilesRejects(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big.pdf"), make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, doc string
		files     []string
		want      string
	}{
		{"missing file", `{"file":"nope.pdf"}`, nil, "primary_docs[0].file: stat " + filepath.Join(dir, "nope.pdf") + ": no such file or directory"},
		{"over the limit", `{"file":"big.pdf"}`, nil, "primary_docs[0].file: " + filepath.Join(dir, "big.pdf") + " is 100 bytes, over the limit of 10 bytes"},
		{"a directory", `{"file":"."}`, nil, "is not a regular file"},
		{"not a path", `{"file":3}`, nil, "primary_docs[0].file: must be a file's path (got a number)"},
		{"file and data", `{"file":"big.pdf","data":"AAAA"}`, nil, "primary_docs[0].file: a document is given once"},
		{"a --document beside a bad list", `{"file":"big.pdf"}`, []string{"x.pdf"}, "primary_docs[0].file: " + filepath.Join(dir, "big.pdf") + " is 100 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeObject([]byte(`{"primary_docs":[` + tc.doc + `]}`))
			if err != nil {
				t.Fatal(err)
			}
			err = ReadFiles(m, dir, tc.files, 10)
			if !errors.Is(err, schemas.ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
