package docread_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"rulevalidator/docread"
	"rulevalidator/internal/docfixture"
	"rulevalidator/internal/pdftest"
)

// Limits the fuzz targets read under: small, so that an input that slips
// past a cap shows at once.
const (
	fuzzMaxBytes    = 1 << 20
	fuzzMaxPages    = 50
	fuzzMaxUnzipped = 4 << 20
	// fuzzReadLimit bounds one read; a small input that takes longer hangs.
	fuzzReadLimit = 20 * time.Second
)

// checkRead holds any read to the reader's promises: a document within the
// limits, or a *docread.Error that is ErrUnreadable; never a panic, never a
// read that runs on.
func checkRead(t *testing.T, r *docread.Reader, data []byte, mediaType string) {
	ctx, cancel := context.WithTimeout(context.Background(), fuzzReadLimit)
	defer cancel()
	start := time.Now()
	doc, err := r.Read(ctx, docread.Source{Name: "fuzz", Data: data, MediaType: mediaType})
	if took := time.Since(start); ctx.Err() != nil {
		t.Fatalf("reading %d bytes ran past %s (%s): %v", len(data), fuzzReadLimit, took, err)
	}
	if err != nil {
		var de *docread.Error
		if !errors.As(err, &de) || !errors.Is(err, docread.ErrUnreadable) {
			t.Fatalf("error %T %v, want a *docread.Error", err, err)
		}
		if doc != nil {
			t.Fatal("a document came with an error")
		}
		return
	}
	if len(doc.Pages) == 0 || len(doc.Pages) > fuzzMaxPages {
		t.Fatalf("%d pages (at most %d)", len(doc.Pages), fuzzMaxPages)
	}
	total := 0
	for i, p := range doc.Pages {
		if !utf8.ValidString(p) {
			t.Fatalf("page %d is not UTF-8: %q", i+1, p)
		}
		total += len(p)
	}
	if total > fuzzMaxUnzipped {
		t.Fatalf("%d bytes of text from %d bytes", total, len(data))
	}
	for _, p := range doc.ImageOnly {
		if p < 1 || p > len(doc.Pages) {
			t.Fatalf("image-only page %d of %d", p, len(doc.Pages))
		}
	}
}

// FuzzReadDOCX: any bytes given as a DOCX read within the limits or fail
// as unreadable; zip bombs, lying headers and XML of any depth included.
func FuzzReadDOCX(f *testing.F) {
	body := `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>`
	for _, files := range []map[string]string{
		{"word/document.xml": body + `<w:p><w:r><w:t>The Seller shall deliver.</w:t><w:br w:type="page"/><w:tab/><w:t xml:space="preserve"> Page two </w:t></w:r></w:p></w:body></w:document>`},
		{"word/document.xml": body + `<w:tbl><w:tr><w:tc><w:p><w:r><w:t>cell</w:t></w:r></w:p></w:tc></w:tr></w:tbl><w:p><w:r><w:rPr><w:vanish/></w:rPr><w:t>hidden</w:t></w:r></w:p></w:body></w:document>`},
		{"_rels/.rels": `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/main.xml"/></Relationships>`,
			"word/main.xml": body + `<w:p><w:r><w:t>main part</w:t></w:r></w:p></w:body></w:document>`},
	} {
		f.Add(zipOf(f, files))
	}
	f.Add(zipBomb(f, 64<<10))
	f.Add(lyingZip(f, 2<<10))
	f.Add(docfixture.ZipBomb(1 << 30))
	r := fuzzReader(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRead(t, r, data, docread.DOCX)
	})
}

// FuzzReadPDF: any bytes given as a PDF read within the limits or fail as
// unreadable, through the PDF engine every read shares, each in bounded
// time; the engine reads on after whatever came before.
func FuzzReadPDF(f *testing.F) {
	msa, err := os.ReadFile("../examples/contract-review/northwind-msa.pdf")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(msa)
	f.Add(docfixture.ImagePDF("t"))
	f.Add(docfixture.ImagePDF("iti"))
	f.Add(msa[:len(msa)/2])
	f.Add([]byte("%PDF-1.7\n" + strings.Repeat("1 0 obj << /Type /Page >> endobj\n", 20) + "%%EOF\n"))
	pdftest.Warm(f)
	r := fuzzReader(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRead(t, r, data, docread.PDF)
	})
}

// fuzzReader is one reader for every input of a fuzz target, its PDF
// engine loaded from the compiled cache.
func fuzzReader(f *testing.F) *docread.Reader {
	r, err := docread.New(docread.Config{
		MaxBytes: fuzzMaxBytes, MaxPages: fuzzMaxPages, MaxUnzipped: fuzzMaxUnzipped,
		PDFEngines: 1, CacheDir: docread.DefaultCacheDir(), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { r.Close() })
	return r
}
