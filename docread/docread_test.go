package docread_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rulevalidator/docread"
	"rulevalidator/eval"
	"rulevalidator/internal/docfixture"
	"rulevalidator/internal/pdftest"
	"rulevalidator/internal/synthdoc"
)

func newReader(t testing.TB, cfg docread.Config) *docread.Reader {
	t.Helper()
	if cfg.CacheDir == "" {
		// The compiled engine is kept where a service keeps it by default,
		// compiled once for the package's tests.
		pdftest.Warm(t)
		cfg.CacheDir = docread.DefaultCacheDir()
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	r, err := docread.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("closing the reader: %v", err)
		}
	})
	return r
}

// words compares text as a reader does: runs of whitespace as one space.
func words(s string) string { return strings.Join(strings.Fields(s), " ") }

// Every gold passage of the shipped EDGAR dataset is on its labelled page
// when each agreement is rendered by LibreOffice one source page per page,
// as a PDF and as a DOCX, and read back.
func TestEDGARGoldPassagesOnTheirPages(t *testing.T) {
	ds, err := eval.Load(filepath.Join("..", "examples", "eval", "edgar-nda"))
	if err != nil {
		t.Fatal(err)
	}
	var docs []docfixture.Doc
	for _, format := range []string{docfixture.PDF, docfixture.DOCX} {
		for _, c := range ds.Cases {
			docs = append(docs, docfixture.Doc{Pages: c.Inputs.Documents()[0].Pages, Format: format})
		}
	}
	files := docfixture.Make(t, docs...)
	r := newReader(t, docread.Config{})
	gold := 0
	for i, d := range docs {
		c := ds.Cases[i%len(ds.Cases)]
		src := c.Inputs.Documents()[0]
		t.Run(d.Format+"/"+c.ID, func(t *testing.T) {
			got, err := r.Read(context.Background(), docread.Source{Name: src.Name, Data: files[i]})
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]string{docfixture.PDF: docread.PDF, docfixture.DOCX: docread.DOCX}[d.Format]; got.MediaType != want {
				t.Errorf("sniffed as %s, want %s", got.MediaType, want)
			}
			if len(got.Pages) != len(src.Pages) {
				t.Fatalf("%d pages, want %d (one per source page)", len(got.Pages), len(src.Pages))
			}
			for _, l := range c.Labels {
				for _, g := range l.Gold {
					gold++
					if !strings.Contains(words(got.Pages[g.Page-1]), words(g.Text)) {
						t.Errorf("rule %s: gold passage not on page %d: %q", l.RuleID, g.Page, g.Text)
					}
				}
			}
		})
	}
	if gold == 0 {
		t.Fatal("no gold passage was checked")
	}
}

// The documents that cannot be read are refused with their kind, naming
// the document (and, for a scan, the pages), and the reader goes on reading.
func TestUnreadableDocuments(t *testing.T) {
	page := "NON-DISCLOSURE AGREEMENT\nThe Recipient shall keep the Confidential Information secret."
	files := docfixture.Make(t,
		docfixture.Doc{Pages: []string{page, page, page}, Format: docfixture.PDF},
		docfixture.Doc{Pages: []string{page}, Format: docfixture.EncryptedPDF},
		docfixture.Doc{Pages: []string{page}, Format: docfixture.DOCX},
	)
	pdf, encrypted, docx := files[0], files[1], files[2]
	r := newReader(t, docread.Config{MaxPages: 3, MaxBytes: 1 << 20, MaxUnzipped: 1 << 20})
	cases := []struct {
		name      string
		data      []byte
		mediaType string
		kind      error
		detail    string
		pages     []int
	}{
		{"encrypted", encrypted, "", docread.ErrEncrypted, "encrypted with a password", nil},
		{"truncated", pdf[:len(pdf)/2], docread.PDF, docread.ErrCorrupt, "truncated", nil},
		{"corrupt", append([]byte("%PDF-1.7\n"+strings.Repeat("garbage ", 500)), "\n%%EOF\n"...), "", docread.ErrCorrupt, "not a well-formed PDF", nil},
		{"not a PDF", []byte("plain words"), "application/pdf", docread.ErrCorrupt, "no %PDF- header", nil},
		{"scanned", docfixture.ImagePDF("iti"), "", docread.ErrNoText, "2 of its 3 pages are images without text (a scan?): page 1, 3; OCR is not done", []int{1, 3}},
		{"over the page limit", docfixture.ImagePDF("tttt"), "", docread.ErrTooManyPages, "4 pages, over the limit of 3", nil},
		{"DOCX over the page limit", docxOf(t, "<w:p><w:r><w:t>1</w:t><w:br w:type=\"page\"/><w:t>2</w:t><w:br w:type=\"page\"/><w:t>3</w:t><w:br w:type=\"page\"/><w:t>4</w:t></w:r></w:p>"), "", docread.ErrTooManyPages, "more than 3 pages", nil},
		{"over the byte limit", append(bytes.Repeat([]byte(" "), 1<<20), pdf...), docread.PDF, docread.ErrTooLarge, "over the limit of 1048576 bytes", nil},
		{"zip bomb", zipBomb(t, 2<<20), docread.DOCX, docread.ErrZipBomb, "would expand to", nil},
		{"zip lying about its size", lyingZip(t, 2<<10), docread.DOCX, docread.ErrCorrupt, "archive is damaged", nil},
		{"a zip that is not a DOCX", zipOf(t, map[string]string{"xl/workbook.xml": "<workbook/>"}), docread.DOCX, docread.ErrNotDOCX, "no Word document part", nil},
		{"a DOCX that is not a zip", []byte("not a zip"), docread.DOCX, docread.ErrNotDOCX, "not a zip", nil},
		{"a DOCX with broken XML", zipOf(t, map[string]string{"word/document.xml": "<w:document"}), docread.DOCX, docread.ErrCorrupt, "not well-formed XML", nil},
		{"unsupported", []byte{0x89, 'P', 'N', 'G', 0, 0}, "", docread.ErrUnsupported, "none of PDF, DOCX or UTF-8 text", nil},
		{"unsupported, given", docx, "image/png", docread.ErrUnsupported, `"image/png" is not read`, nil},
		{"text that is not UTF-8", []byte{0xff, 0xfe, 'a'}, "text/plain", docread.ErrCorrupt, "not UTF-8", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := r.Read(context.Background(), docread.Source{Name: "contract.bin", Data: tc.data, MediaType: tc.mediaType})
			var de *docread.Error
			if !errors.As(err, &de) {
				t.Fatalf("got %v, %v; want a *docread.Error", doc, err)
			}
			if !errors.Is(err, docread.ErrUnreadable) || !errors.Is(err, tc.kind) {
				t.Errorf("error %v is not ErrUnreadable and %v", err, tc.kind)
			}
			if de.Document != "contract.bin" || !strings.Contains(err.Error(), `"contract.bin"`) {
				t.Errorf("error %q does not name the document", err)
			}
			if !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("error %q does not say %q", err, tc.detail)
			}
			if fmt.Sprint(de.Pages) != fmt.Sprint(tc.pages) {
				t.Errorf("pages %v, want %v", de.Pages, tc.pages)
			}
		})
	}
	// After all that, a good document reads.
	for _, good := range [][]byte{docx, docfixture.ImagePDF("t")} {
		doc, err := r.Read(context.Background(), docread.Source{Name: "good", Data: good})
		if err != nil || len(doc.Pages) != 1 || strings.TrimSpace(doc.Pages[0]) == "" {
			t.Fatalf("a good document after the bad ones: %v, %v", doc, err)
		}
	}
}

// A few pages that show only an image (a cover, a scanned signature page)
// are pages without text, named in ImageOnly; the document is read.
func TestSomeImageOnlyPages(t *testing.T) {
	r := newReader(t, docread.Config{})
	doc, err := r.Read(context.Background(), docread.Source{Name: "book.pdf", Data: docfixture.ImagePDF("ittt")})
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Pages) != 4 || doc.Pages[0] != "" || !strings.Contains(doc.Pages[1], "secret") || fmt.Sprint(doc.ImageOnly) != "[1]" {
		t.Fatalf("pages %q, image-only %v", doc.Pages, doc.ImageOnly)
	}
}

// A blank page (no text, no image) is a page with no text, not a scan.
func TestBlankPageIsNotAScan(t *testing.T) {
	r := newReader(t, docread.Config{})
	doc, err := r.Read(context.Background(), docread.Source{Name: "blank.pdf", Data: docfixture.ImagePDF("bb")})
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Pages) != 2 || strings.TrimSpace(doc.Pages[0]+doc.Pages[1]) != "" {
		t.Fatalf("pages %q, want two empty pages", doc.Pages)
	}
}

// Text is read as before documents were read: pages at form feeds.
func TestText(t *testing.T) {
	r := newReader(t, docread.Config{})
	for _, mt := range []string{"", "text/plain", "text/plain; charset=utf-8", "text/markdown", "application/octet-stream"} {
		doc, err := r.Read(context.Background(), docread.Source{Name: "a.txt", Data: []byte("one\ftwo\f"), MediaType: mt})
		if err != nil {
			t.Fatalf("%q: %v", mt, err)
		}
		if doc.MediaType != docread.Text || fmt.Sprintf("%q", doc.Pages) != `["one" "two" ""]` {
			t.Errorf("%q: %s %q", mt, doc.MediaType, doc.Pages)
		}
	}
}

// A cancelled read stops, and says so.
func TestReadCancelled(t *testing.T) {
	pdf := docfixture.One(t, docfixture.PDF, "one", "two")
	r := newReader(t, docread.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Read(ctx, docread.Source{Name: "a.pdf", Data: pdf}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if doc, err := r.Read(context.Background(), docread.Source{Name: "a.pdf", Data: pdf}); err != nil || len(doc.Pages) != 2 {
		t.Fatalf("after a cancelled read: %v, %v", doc, err)
	}
}

func TestSniff(t *testing.T) {
	docx := zipOf(t, map[string]string{"word/document.xml": "<w:document/>"})
	for _, tc := range []struct {
		data []byte
		want string
	}{
		{[]byte("%PDF-1.4\n..."), docread.PDF},
		{append(bytes.Repeat([]byte{0}, 100), "%PDF-1.4"...), docread.PDF},
		{docx, docread.DOCX},
		{zipOf(t, map[string]string{"content.xml": ""}), ""},
		{[]byte("Straße\fpage two"), docread.Text},
		{[]byte{0, 1, 2, 3}, ""},
		{[]byte{0xff, 0xd8, 0xff}, ""},
	} {
		if got := docread.Sniff(tc.data); got != tc.want {
			t.Errorf("Sniff(%.20q) = %q, want %q", tc.data, got, tc.want)
		}
	}
}

// docxOf is a DOCX whose body is body.
func docxOf(t testing.TB, body string) []byte {
	return zipOf(t, map[string]string{"word/document.xml": `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` + body + `</w:body></w:document>`})
}

// zipOf is a zip archive of the named files.
func zipOf(t testing.TB, files map[string]string) []byte {
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for name, body := range files {
		f, err := w.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(body))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// zipBomb is a DOCX whose document part expands to n bytes of one
// paragraph, compressed a thousandfold.
func zipBomb(t testing.TB, n int) []byte {
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	f, err := w.Create("word/document.xml")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte(`<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>`))
	f.Write(bytes.Repeat([]byte("a"), n))
	f.Write([]byte(`</w:t></w:r></w:p></w:body></w:document>`))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// lyingZip is zipBomb with headers that declare a tiny uncompressed size,
// so that only counting what is inflated catches it.
func lyingZip(t testing.TB, n int) []byte {
	data := zipBomb(t, n)
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	f := zr.File[0]
	real := uint32(f.UncompressedSize64)
	out := bytes.Clone(data)
	// The local header's and the central directory's uncompressed sizes.
	var le [4]byte
	le[0], le[1], le[2], le[3] = byte(real), byte(real>>8), byte(real>>16), byte(real>>24)
	for i := 0; i+4 <= len(out); i++ {
		if bytes.Equal(out[i:i+4], le[:]) {
			copy(out[i:i+4], []byte{100, 0, 0, 0})
		}
	}
	return out
}

// A read that runs past its context stops in the middle of the document
// (PDFium is interrupted), and the next read gets a fresh engine.
func TestReadStopsWhenTheContextEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a 300-page PDF")
	}
	pdf := docfixture.One(t, docfixture.PDF, synthdoc.Pages(300, 2500, 1)...)
	r := newReader(t, docread.Config{PDFEngines: 1})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := r.Read(ctx, docread.Source{Name: "long.pdf", Data: pdf})
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > 2*time.Second {
		t.Fatalf("got %v after %v, want the deadline within a moment of it", err, took)
	}
	doc, err := r.Read(context.Background(), docread.Source{Name: "short.pdf", Data: docfixture.ImagePDF("t")})
	if err != nil || len(doc.Pages) != 1 {
		t.Fatalf("after an interrupted read: %v, %v", doc, err)
	}
}

// CheckSize refuses from a size alone what Read refuses for its bytes.
func TestCheckSize(t *testing.T) {
	r, err := docread.New(docread.Config{MaxBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CheckSize("a.pdf", 100); err != nil {
		t.Errorf("CheckSize at the limit = %v, want nil", err)
	}
	err = r.CheckSize("a.pdf", 101)
	var de *docread.Error
	if !errors.As(err, &de) || !errors.Is(err, docread.ErrTooLarge) || !errors.Is(err, docread.ErrUnreadable) || de.Document != "a.pdf" {
		t.Fatalf("CheckSize over the limit = %v, want a *docread.Error for a.pdf wrapping ErrTooLarge", err)
	}
	_, readErr := r.Read(context.Background(), docread.Source{Name: "a.pdf", Data: make([]byte, 101)})
	if readErr == nil || readErr.Error() != err.Error() {
		t.Errorf("Read of 101 bytes = %v, want CheckSize's %v", readErr, err)
	}
}
