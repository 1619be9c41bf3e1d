// Package docfixture makes real PDF and DOCX files for tests: text given
// page by page is laid out as an OpenDocument text, one source page per
// page (a hard page break before each), and LibreOffice converts it. Files
// are cached by content outside the repository (under RULEVALIDATOR_CACHE,
// default ~/.cache/rulevalidator, in docfixtures/), so that a test run
// after the first does not start LibreOffice.
package docfixture

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rulevalidator/internal/opsscript"
)

// Formats LibreOffice writes.
const (
	PDF  = "pdf"
	DOCX = "docx"
	// EncryptedPDF is a PDF that needs the password "secret" to open.
	EncryptedPDF = "encrypted.pdf"
)

// filters are LibreOffice's --convert-to arguments per format.
var filters = map[string]string{
	PDF:          "pdf:writer_pdf_Export",
	DOCX:         `docx:MS Word 2007 XML`,
	EncryptedPDF: `pdf:writer_pdf_Export:{"EncryptFile":{"type":"boolean","value":"true"},"DocumentOpenPassword":{"type":"string","value":"secret"}}`,
}

// version is part of every cache key: change it when the layout changes.
const version = "v1"

// Doc is a document to make: its pages, and the format.
type Doc struct {
	Pages  []string
	Format string
}

// Make returns the files of docs, in order, converting those not cached
// in one LibreOffice run. Without LibreOffice it skips the test (fails it
// when integration tests are required).
func Make(t testing.TB, docs ...Doc) [][]byte {
	t.Helper()
	dir := cacheDir(t)
	out := make([][]byte, len(docs))
	byFormat := map[string][]int{}
	for i, d := range docs {
		if _, ok := filters[d.Format]; !ok {
			t.Fatalf("docfixture: unknown format %q", d.Format)
		}
		if data, err := os.ReadFile(cachePath(dir, d)); err == nil {
			out[i] = data
			continue
		}
		byFormat[d.Format] = append(byFormat[d.Format], i)
	}
	for format, idx := range byFormat {
		convert(t, dir, format, docs, idx)
		for _, i := range idx {
			data, err := os.ReadFile(cachePath(dir, docs[i]))
			if err != nil {
				t.Fatalf("docfixture: LibreOffice made no %s: %v", format, err)
			}
			out[i] = data
		}
	}
	return out
}

// One is Make for one document.
func One(t testing.TB, format string, pages ...string) []byte {
	t.Helper()
	return Make(t, Doc{Pages: pages, Format: format})[0]
}

// LibreOffice finds soffice, or skips the test with the reason (fails it
// when integration tests are required).
func LibreOffice(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"soffice", "libreoffice"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	opsscript.Unavailable(t, "LibreOffice", "no soffice or libreoffice on PATH (install it with ops/tools.sh install libreoffice)")
	return ""
}

func cacheDir(t testing.TB) string {
	root := os.Getenv("RULEVALIDATOR_CACHE")
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("docfixture: no cache directory: %v", err)
		}
		root = filepath.Join(home, ".cache", "rulevalidator")
	}
	dir := filepath.Join(root, "docfixtures")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("docfixture: %v", err)
	}
	return dir
}

func key(d Doc) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00", version, d.Format, len(d.Pages))
	for _, p := range d.Pages {
		fmt.Fprintf(h, "%d\x00%s", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func cachePath(dir string, d Doc) string {
	ext := filepath.Ext(d.Format)
	if ext == "" {
		ext = "." + d.Format
	}
	return filepath.Join(dir, key(d)+ext)
}

// convert runs LibreOffice once for the docs idx of one format and moves
// what it wrote into the cache.
func convert(t testing.TB, dir, format string, docs []Doc, idx []int) {
	t.Helper()
	soffice := LibreOffice(t)
	work := t.TempDir()
	var inputs []string
	for _, i := range idx {
		in := filepath.Join(work, key(docs[i])+".fodt")
		if err := os.WriteFile(in, FODT(docs[i].Pages), 0o600); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, in)
	}
	outDir := filepath.Join(work, "out")
	profile := (&url.URL{Scheme: "file", Path: filepath.Join(work, "profile")}).String()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"-env:UserInstallation=" + profile, "--headless", "--norestore", "--nolockcheck",
		"--convert-to", filters[format], "--outdir", outDir}, inputs...)
	cmd := exec.CommandContext(ctx, soffice, args...)
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docfixture: %s: %v\n%s", soffice, err, out)
	}
	t.Logf("docfixture: LibreOffice made %d %s files in %v", len(idx), format, time.Since(start).Round(time.Millisecond))
	ext := "." + strings.SplitN(filters[format], ":", 2)[0]
	for _, i := range idx {
		made := filepath.Join(outDir, key(docs[i])+ext)
		data, err := os.ReadFile(made)
		if err != nil {
			t.Fatalf("docfixture: LibreOffice made no %s: %v", made, err)
		}
		final := cachePath(dir, docs[i])
		tmp := final + ".tmp" + fmt.Sprint(os.Getpid())
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, final); err != nil {
			t.Fatal(err)
		}
	}
}

// FODT is pages as a flat OpenDocument text: Letter pages with 1 cm
// margins, 8 pt Liberation Serif, each line a paragraph, and a page break
// before the first paragraph of every page after the first, so that a
// source page of an EDGAR exhibit fits on one page.
func FODT(pages []string) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">
<office:font-face-decls><style:font-face style:name="Liberation Serif" svg:font-family="'Liberation Serif'" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"/></office:font-face-decls>
<office:styles><style:style style:name="Standard" style:family="paragraph"><style:paragraph-properties fo:margin-top="0cm" fo:margin-bottom="0cm"/><style:text-properties style:font-name="Liberation Serif" fo:font-size="8pt" fo:hyphenate="false"/></style:style></office:styles>
<office:automatic-styles>
<style:page-layout style:name="pm1"><style:page-layout-properties fo:page-width="21.59cm" fo:page-height="27.94cm" fo:margin-top="1cm" fo:margin-bottom="1cm" fo:margin-left="1cm" fo:margin-right="1cm"/></style:page-layout>
<style:style style:name="PB" style:family="paragraph" style:parent-style-name="Standard"><style:paragraph-properties fo:break-before="page"/></style:style>
</office:automatic-styles>
<office:master-styles><style:master-page style:name="Standard" style:page-layout-name="pm1"/></office:master-styles>
<office:body><office:text>
`)
	for i, page := range pages {
		lines := strings.Split(strings.TrimRight(page, "\n"), "\n")
		for j, line := range lines {
			style := "Standard"
			if i > 0 && j == 0 {
				style = "PB"
			}
			fmt.Fprintf(&b, `<text:p text:style-name="%s">`, style)
			for k, part := range strings.Split(line, "\t") {
				if k > 0 {
					b.WriteString("<text:tab/>")
				}
				xml.EscapeText(&b, []byte(part))
			}
			b.WriteString("</text:p>\n")
		}
	}
	b.WriteString("</office:text></office:body></office:document>\n")
	return b.Bytes()
}

// ImagePDF is a PDF written here, without LibreOffice, one page per letter
// of pages: i an image and no text (a scanned page), b nothing (a blank
// page), t a line of text.
func ImagePDF(pages string) []byte {
	var objs []string
	// 1 catalog, 2 page tree, 3 image, 4 font, then a page and its content per page.
	kids := ""
	for i := range pages {
		kids += fmt.Sprintf("%d 0 R ", 5+2*i)
	}
	objs = append(objs,
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", kids, len(pages)),
		"<< /Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 8 /Length 4 >>\nstream\n\x00\xff\xff\x00\nendstream",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for i, kind := range pages {
		content := map[rune]string{
			'i': "q 400 0 0 400 100 200 cm /Im1 Do Q",
			'b': "",
			't': "BT /F1 12 Tf 72 720 Td (The Recipient shall keep it secret.) Tj ET",
		}[kind]
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im1 3 0 R >> /Font << /F1 4 0 R >> >> /Contents %d 0 R >>", 6+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	}
	return writePDF(objs)
}

// PageBoxPDF is a PDF written here, without LibreOffice, of one page
// width × height points (its MediaBox) with a line of text: a page of any
// shape, an extreme one included.
func PageBoxPDF(width, height float64) []byte {
	content := "BT /F1 2 Tf 0 0 Td (Page.) Tj ET"
	return writePDF([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %g %g] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>", width, height),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
	})
}

// writePDF writes objs as objects 1, 2, ... of a PDF whose catalog is
// object 1, with their cross-reference table.
func writePDF(objs []string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// ZipBomb is a DOCX whose document part declares that it inflates to
// declared bytes (a petabyte-class zip bomb in a few hundred bytes).
func ZipBomb(declared uint64) []byte {
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	body := []byte(`<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body/></w:document>`)
	f, err := w.CreateRaw(&zip.FileHeader{Name: "word/document.xml", Method: zip.Store,
		CompressedSize64: uint64(len(body)), UncompressedSize64: declared, CRC32: crc32.ChecksumIEEE(body)})
	if err != nil {
		panic(err)
	}
	f.Write(body)
	if err := w.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}
