package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/internal/docfixture"
	"rulevalidator/internal/llmfake"
	"rulevalidator/internal/pdftest"
)

// exampleDocuments writes the example's agreement as a PDF and its policy as
// a DOCX, made by LibreOffice from their text, and an input naming them as
// files, beside the example's named inputs and message.
func exampleDocuments(t *testing.T) (dir, input string) {
	t.Helper()
	data, err := os.ReadFile(exampleInput)
	if err != nil {
		t.Fatal(err)
	}
	var in map[string]any
	if err := json.Unmarshal(data, &in); err != nil {
		t.Fatal(err)
	}
	msa := in["primary_docs"].([]any)[0].(map[string]any)
	var pages []string
	for _, p := range msa["pages"].([]any) {
		pages = append(pages, p.(string))
	}
	policy := in["auxiliary_docs"].([]any)[0].(map[string]any)
	files := docfixture.Make(t,
		docfixture.Doc{Pages: pages, Format: docfixture.PDF},
		docfixture.Doc{Pages: []string{policy["content"].(string)}, Format: docfixture.DOCX})
	dir = t.TempDir()
	for name, body := range map[string][]byte{"northwind-msa.pdf": files[0], "policy.docx": files[1]} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	delete(in, "primary_docs")
	in["auxiliary_docs"] = []any{map[string]any{"title": policy["title"], "file": "policy.docx"}}
	out, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	input = filepath.Join(dir, "input.json")
	if err := os.WriteFile(input, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, input
}

// validate judges a PDF given with --document and a DOCX named in the
// input: the evidence lands on the PDF's pages, as a viewer numbers them.
func TestValidateDocumentFiles(t *testing.T) {
	t.Parallel()
	pdftest.Warm(t)
	dir, input := exampleDocuments(t)
	fake := llmfake.New()
	defer fake.Close()
	fake.Enqueue(llmfake.Reply{Content: exampleAnswer(t, nil)})

	code, stdout, stderr := runCLI(t, fake, "validate", "--ruleset", exampleRuleset, "--input", input,
		"--document", filepath.Join(dir, "northwind-msa.pdf"), "--evidence-mode", "quote", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var res engine.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout: %v\n%s", err, stdout)
	}
	for _, w := range []struct {
		rule, page int
	}{{0, 3}, {1, 3}, {2, 2}, {4, 2}, {5, 3}} {
		ev := res.Rules[w.rule].Evidences[0]
		if !ev.Anchored || ev.SourceOrigin != "northwind-msa.pdf" || ev.SourcePageNumber != w.page {
			t.Errorf("rule %s evidence = %+v, want anchored on page %d of northwind-msa.pdf", res.Rules[w.rule].RuleID, ev, w.page)
		}
	}
	sent := fake.Requests()[0]
	prompt := ""
	for _, m := range sent.Messages {
		prompt += m.Content
	}
	for _, want := range []string{"Invoices are payable within thirty (30) days of receipt.", "Contracting policy"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the model was not shown %q", want)
		}
	}
}

// A document that cannot be read is refused before the model is asked,
// naming the document and what is wrong with it.
func TestValidateUnreadableDocuments(t *testing.T) {
	t.Parallel()
	pdftest.Warm(t)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	encrypted := write("locked.pdf", docfixture.One(t, docfixture.EncryptedPDF, "secret terms"))
	scan := write("scan.pdf", docfixture.ImagePDF("iit"))
	notDOCX := write("sheet.docx", []byte("PK\x03\x04 not really a zip"))
	pdf := docfixture.One(t, docfixture.PDF, "one page", "two pages")
	truncated := write("cut.pdf", pdf[:len(pdf)/2])
	bomb := write("bomb.docx", docfixture.ZipBomb(1<<50))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"encrypted", []string{"--document", encrypted}, `primary_docs[0] ("locked.pdf"): reading the file: document "locked.pdf" cannot be read (encrypted): it is encrypted with a password`},
		{"scanned", []string{"--document", scan}, `document "scan.pdf" cannot be read (no text layer): 2 of its 3 pages are images without text (a scan?): page 1-2; OCR is not done`},
		{"not a DOCX", []string{"--document", notDOCX}, `document "sheet.docx" cannot be read (not a DOCX)`},
		{"truncated", []string{"--document", truncated}, `document "cut.pdf" cannot be read (corrupt or truncated): it is truncated`},
		{"zip bomb", []string{"--document", bomb}, `document "bomb.docx" cannot be read (zip bomb): its archive would expand to 1125899906842624 bytes, over the limit of 268435456`},
		{"over the page limit", []string{"--document", scan, "--document-max-pages", "2"}, `(over the page limit): it has 3 pages, over the limit of 2`},
		{"over the byte limit", []string{"--document", scan, "--document-max-bytes", "100"}, `primary_docs[0].file: ` + scan + ` is `},
		{"missing", []string{"--document", filepath.Join(dir, "nope.pdf")}, `primary_docs[0].file: stat ` + filepath.Join(dir, "nope.pdf")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := llmfake.New()
			defer fake.Close()
			code, _, stderr := runCLI(t, fake, append([]string{"validate", "--ruleset", exampleRuleset}, tc.args...)...)
			if code != exitInvalid || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d (want %d), stderr:\n%s\nwant it to contain %q", code, exitInvalid, stderr, tc.want)
			}
			if len(fake.Requests()) != 0 {
				t.Error("the model was called")
			}
		})
	}
}

// exampleRequestPDF is the demo's request with its agreement as a PDF.
const exampleRequestPDF = "../../examples/contract-review/request-pdf.json"

// The demo's PDF request is the example request with its agreement as a PDF
// (made by LibreOffice from the request's pages; RULEVALIDATOR_UPDATE_PDF_INPUTS=1
// makes it again): produce reads the file into the request, and the PDF
// reads back page for page as the request's text.
func TestExampleRequestPDF(t *testing.T) {
	t.Parallel()
	text, err := readRequestFile(exampleRequestFile, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("RULEVALIDATOR_UPDATE_PDF_INPUTS") == "1" {
		pdf := docfixture.One(t, docfixture.PDF, text.PrimaryDocs[0].Pages...)
		if err := os.WriteFile(filepath.Join(filepath.Dir(exampleRequestPDF), "northwind-msa.pdf"), pdf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	req, err := readRequestFile(exampleRequestPDF, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	doc := req.PrimaryDocs[0]
	if len(req.PrimaryDocs) != 1 || doc.Name != text.PrimaryDocs[0].Name || doc.Data == nil || doc.ContentType == nil || *doc.ContentType != "application/pdf" {
		t.Fatalf("primary documents %+v", req.PrimaryDocs)
	}
	docs := documentConfig{maxBytes: docread.DefaultMaxBytes, maxPages: docread.DefaultMaxPages, pdfEngines: 1}
	r, err := docs.reader(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := readDocumentFiles(context.Background(), r, req, nil); err != nil {
		t.Fatal(err)
	}
	got, want := req.PrimaryDocs[0].Pages, text.PrimaryDocs[0].Pages
	if len(got) != len(want) {
		t.Fatalf("%d pages, want %d", len(got), len(want))
	}
	for i := range want {
		if strings.Join(strings.Fields(got[i]), " ") != strings.Join(strings.Fields(want[i]), " ") {
			t.Errorf("page %d reads\n%q\nwant\n%q", i+1, got[i], want[i])
		}
	}
	req.RequestID, req.PrimaryDocs, text.PrimaryDocs = text.RequestID, nil, nil
	if jsonText(t, req) != jsonText(t, text) {
		t.Errorf("the PDF request differs from the text one beyond its agreement:\n%s\n%s", jsonText(t, req), jsonText(t, text))
	}
}

// TestPDFCacheDirSetting: the default cache directory is optional (the
// engine compiles without it where it cannot be written); one set is not,
// and none means none.
func TestPDFCacheDirSetting(t *testing.T) {
	for _, tc := range []struct {
		setting      string
		want         string
		wantOptional bool
	}{
		{"", docread.DefaultCacheDir(), true},
		{pdfCacheOff, "", false},
		{"/var/cache/rulevalidator/pdfium", "/var/cache/rulevalidator/pdfium", false},
	} {
		c := documentConfig{cacheDir: tc.setting}
		if dir, optional := c.cacheDirectory(); dir != tc.want || optional != tc.wantOptional {
			t.Errorf("--pdf-cache-dir %q: %q, optional %v; want %q, %v", tc.setting, dir, optional, tc.want, tc.wantOptional)
		}
	}
}

// TestUnwritablePDFCacheDirIsTheEnvironmentsFault: a --pdf-cache-dir that
// cannot be written fails validate and eval with exit 1 (not 2, the input's
// fault), naming the directory and what to set, before any model call or
// compile.
func TestUnwritablePDFCacheDirIsTheEnvironmentsFault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pdf := filepath.Join(dir, "contract.pdf")
	file := filepath.Join(dir, "a-file")
	for path, data := range map[string][]byte{pdf: docfixture.ImagePDF("t"), file: nil} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Under a regular file: it can never be made, even by root.
	cache := filepath.Join(file, "cache")
	for _, args := range [][]string{
		{"validate", "--ruleset", exampleRuleset, "--document", pdf, "--pdf-cache-dir", cache},
		{"eval", "--dataset", "../../examples/eval/edgar-nda", "--pdf-cache-dir", cache},
	} {
		t.Run(args[0], func(t *testing.T) {
			fake := llmfake.New()
			defer fake.Close()
			code, _, stderr := runCLI(t, fake, args...)
			if code != exitFailure || !strings.Contains(stderr, cache) || !strings.Contains(stderr, "--pdf-cache-dir (RULEVALIDATOR_PDF_CACHE_DIR) to a writable directory") {
				t.Errorf("exit %d (want %d), stderr:\n%s\nwant it to name %s and the setting", code, exitFailure, stderr, cache)
			}
			if len(fake.Requests()) != 0 {
				t.Error("the model was called")
			}
		})
	}
	// serve says so at start, as a setting to fix, before it connects to anything.
	t.Run("serve", func(t *testing.T) {
		fake := llmfake.New()
		defer fake.Close()
		code, _, stderr := runCLI(t, fake, "serve", "--kafka-brokers", "127.0.0.1:1", "--pdf-cache-dir", cache)
		if code != exitInvalid || !strings.Contains(stderr, cache) || !strings.Contains(stderr, "--pdf-cache-dir (RULEVALIDATOR_PDF_CACHE_DIR) to a writable directory") {
			t.Errorf("exit %d (want %d), stderr:\n%s\nwant it to name %s and the setting", code, exitInvalid, stderr, cache)
		}
	})
}
