package eval

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"rulevalidator/internal/docfixture"
	"rulevalidator/internal/pdftest"
)

// pdfInputs is the directory of the shipped dataset holding its agreements
// as PDFs, with an input for each case that names its PDF.
const pdfInputs = "pdf"

// envUpdatePDFs set to 1 makes TestShippedPDFInputs write the PDFs again
// with LibreOffice (internal/docfixture's layout: one source page per page).
const envUpdatePDFs = "RULEVALIDATOR_UPDATE_PDF_INPUTS"

// The shipped dataset's PDF inputs are its agreements page for page: read
// back, each has the pages of its text input, and the loader finds every
// gold passage on its labelled page, as it does in the text.
func TestShippedPDFInputs(t *testing.T) {
	text, err := Load(shippedDataset)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(envUpdatePDFs) == "1" {
		writePDFInputs(t, text)
	}
	r := pdftest.Reader(t)
	pdf, err := LoadWith(context.Background(), shippedDataset, LoadOptions{InputsDir: pdfInputs, Documents: r})
	if err != nil {
		t.Fatalf("the dataset with its PDF inputs (%s=1 writes them again): %v", envUpdatePDFs, err)
	}
	if len(pdf.Cases) != len(text.Cases) {
		t.Fatalf("%d cases from PDFs, %d from text", len(pdf.Cases), len(text.Cases))
	}
	gold := 0
	for i, c := range pdf.Cases {
		want, got := text.Cases[i].Inputs.Documents()[0], c.Inputs.Documents()[0]
		if got.Name != want.Name || len(got.Pages) != len(want.Pages) {
			t.Errorf("case %s: document %q of %d pages, want %q of %d", c.ID, got.Name, len(got.Pages), want.Name, len(want.Pages))
		}
		for j, l := range c.Labels {
			for k, g := range l.Gold {
				gold++
				if w := text.Cases[i].Labels[j].Gold[k]; g.Page != w.Page {
					t.Errorf("case %s rule %s: gold on page %d, want %d", c.ID, l.RuleID, g.Page, w.Page)
				}
			}
		}
	}
	if gold == 0 {
		t.Fatal("no gold passage checked")
	}
}

// writePDFInputs makes each case's agreement a PDF and writes an input
// naming it.
func writePDFInputs(t *testing.T, ds *Dataset) {
	dir := filepath.Join(shippedDataset, pdfInputs)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var docs []docfixture.Doc
	for _, c := range ds.Cases {
		docs = append(docs, docfixture.Doc{Pages: c.Inputs.Documents()[0].Pages, Format: docfixture.PDF})
	}
	files := docfixture.Make(t, docs...)
	for i, c := range ds.Cases {
		doc := c.Inputs.Documents()[0]
		input := fmt.Sprintf("# The agreement of ../inputs/%s.yaml as a PDF, one source page per PDF page (see ../SOURCES.md).\n"+
			"primary_docs:\n  - name: %s\n    file: %s.pdf\n", c.ID, doc.Name, c.ID)
		for name, body := range map[string][]byte{c.ID + ".yaml": []byte(input), c.ID + ".pdf": files[i]} {
			if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("wrote %d PDF inputs to %s", len(ds.Cases), dir)
}
