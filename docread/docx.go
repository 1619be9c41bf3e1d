package docread

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// The WordprocessingML namespaces a DOCX's main part is read in.
const (
	nsW             = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
	relOfficeDoc    = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
	defaultMainPart = "word/document.xml"
)

// isDOCX says whether data is a zip holding a Word main document part.
func isDOCX(data []byte) bool {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil || len(zr.File) > defaultMaxZipEntries {
		return false
	}
	for _, f := range zr.File {
		if f.Name == defaultMainPart {
			return true
		}
	}
	return false
}

// readDOCX reads a DOCX's main document part into pages. A page ends at an
// explicit page break (a page-type w:br, a paragraph's pageBreakBefore, a
// section break that starts a new page) and at a page break Word last
// rendered (w:lastRenderedPageBreak), the same break counted once. Deleted
// text (tracked changes) and field codes are left out; headers, footers,
// footnotes and comments are not read.
func readDOCX(name string, data []byte, cfg Config) ([]string, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, newError(name, ErrNotDOCX, "it is not a readable zip archive: %v", err)
	}
	if len(zr.File) > defaultMaxZipEntries {
		return nil, newError(name, ErrZipBomb, "its archive has %d entries, over the limit of %d", len(zr.File), defaultMaxZipEntries)
	}
	var declared uint64
	files := map[string]*zip.File{}
	for _, f := range zr.File {
		declared += f.UncompressedSize64
		files[f.Name] = f
	}
	if declared > uint64(cfg.MaxUnzipped) {
		return nil, newError(name, ErrZipBomb, "its archive would expand to %d bytes, over the limit of %d", declared, cfg.MaxUnzipped)
	}
	budget := &unzipBudget{left: cfg.MaxUnzipped, name: name}
	main := defaultMainPart
	if rels, ok := files["_rels/.rels"]; ok {
		if target, err := officeDocumentTarget(rels, budget); err != nil {
			return nil, err
		} else if target != "" {
			main = target
		}
	}
	f, ok := files[main]
	if !ok {
		return nil, newError(name, ErrNotDOCX, "its archive has no Word document part (%s)", main)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, newError(name, ErrNotDOCX, "%s cannot be opened: %v", main, err)
	}
	defer rc.Close()
	pages, err := docxPages(budget.reader(rc), cfg.MaxPages)
	if err != nil {
		var de *Error
		switch {
		case errors.As(err, &de):
			de.Document = name
			return nil, de
		case errors.Is(err, errUnzipBudget):
			return nil, newError(name, ErrZipBomb, "%s expands beyond the limit of %d bytes", main, cfg.MaxUnzipped)
		case errors.Is(err, zip.ErrFormat), errors.Is(err, zip.ErrChecksum), errors.Is(err, zip.ErrAlgorithm):
			return nil, newError(name, ErrCorrupt, "its archive is damaged: %s: %v", main, err)
		}
		return nil, newError(name, ErrCorrupt, "%s is not well-formed XML: %v", main, err)
	}
	return pages, nil
}

// officeDocumentTarget is the main part the package relationships name,
// "" when they name none.
func officeDocumentTarget(f *zip.File, budget *unzipBudget) (string, error) {
	rc, err := f.Open()
	if err != nil {
		return "", newError(budget.name, ErrNotDOCX, "_rels/.rels cannot be opened: %v", err)
	}
	defer rc.Close()
	var rels struct {
		Rels []struct {
			Type   string `xml:"Type,attr"`
			Target string `xml:"Target,attr"`
		} `xml:"Relationship"`
	}
	if err := xml.NewDecoder(budget.reader(rc)).Decode(&rels); err != nil {
		if errors.Is(err, errUnzipBudget) {
			return "", newError(budget.name, ErrZipBomb, "_rels/.rels expands beyond the limit")
		}
		return "", newError(budget.name, ErrNotDOCX, "_rels/.rels is not well-formed: %v", err)
	}
	for _, r := range rels.Rels {
		if r.Type == relOfficeDoc {
			return strings.TrimPrefix(path.Clean("/"+r.Target), "/"), nil
		}
	}
	return "", nil
}

// errUnzipBudget: a part expanded beyond what was left of the budget.
var errUnzipBudget = errors.New("uncompressed size over the limit")

// unzipBudget counts what the parts read expand to, whatever their headers
// declare.
type unzipBudget struct {
	left int64
	name string
}

func (b *unzipBudget) reader(r io.Reader) io.Reader { return &budgetReader{r: r, b: b} }

type budgetReader struct {
	r io.Reader
	b *unzipBudget
}

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	br.b.left -= int64(n)
	if br.b.left < 0 {
		return n, errUnzipBudget
	}
	return n, err
}

// docxPages walks the main part's XML.
func docxPages(r io.Reader, maxPages int) ([]string, error) {
	dec := xml.NewDecoder(r)
	d := &docxDoc{maxPages: maxPages}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			err = d.start(t)
		case xml.EndElement:
			err = d.end(t)
		case xml.CharData:
			d.text(t)
		}
		if err != nil {
			return nil, err
		}
	}
	pages := append(d.pages, d.cur.String())
	for i := range pages {
		pages[i] = cleanText(pages[i])
	}
	return pages, nil
}

// docxDoc is docxPages at work on a document body: the pages so far, the
// page being written, and where in the markup the reader is.
type docxDoc struct {
	maxPages int
	pages    []string
	cur      strings.Builder
	// explicit: the last thing seen was an explicit page break, so a
	// rendered break right after it is the same break.
	explicit bool
	inText   bool // inside w:t
	skip     int  // depth inside deleted text or field codes
	inPPr    bool
	sectNew  bool // the paragraph ends a section that starts a new page
	sectType string
	inSect   bool
}

// breakPage ends the current page, at an explicit break (a page break, a
// section's start) or a rendered one (where Word last laid a page out).
func (d *docxDoc) breakPage(isExplicit bool) error {
	if !isExplicit && d.explicit {
		return nil
	}
	d.pages = append(d.pages, d.cur.String())
	d.cur.Reset()
	d.explicit = isExplicit
	if len(d.pages) >= d.maxPages {
		return &Error{Kind: ErrTooManyPages, Detail: fmt.Sprintf("it has more than %d pages, the limit", d.maxPages)}
	}
	return nil
}

// start reads an element's start: text, tabs, line and page breaks, and
// the paragraph and section properties that break pages.
func (d *docxDoc) start(t xml.StartElement) error {
	if t.Name.Space != nsW {
		return nil
	}
	if d.skip > 0 {
		d.skip++
		return nil
	}
	switch t.Name.Local {
	case "delText", "instrText", "del", "fldData":
		d.skip = 1
	case "t":
		d.inText = true
	case "tab":
		if !d.inPPr {
			d.cur.WriteByte('\t')
			d.explicit = false
		}
	case "br", "cr":
		if attr(t, "type") == "page" {
			return d.breakPage(true)
		}
		if !d.inPPr {
			d.cur.WriteByte('\n')
		}
	case "noBreakHyphen":
		d.cur.WriteByte('-')
	case "lastRenderedPageBreak":
		return d.breakPage(false)
	case "pPr":
		d.inPPr = true
	case "pageBreakBefore":
		if d.inPPr && !off(attr(t, "val")) && !d.inSect {
			return d.breakPage(true)
		}
	case "sectPr":
		if d.inPPr {
			d.inSect, d.sectNew, d.sectType = true, true, ""
		}
	case "type":
		if d.inSect {
			d.sectType = attr(t, "val")
		}
	}
	return nil
}

// end reads an element's end: a paragraph's ends its line, and its page
// when it ends a section that starts a new one.
func (d *docxDoc) end(t xml.EndElement) error {
	if t.Name.Space != nsW {
		return nil
	}
	if d.skip > 0 {
		d.skip--
		return nil
	}
	switch t.Name.Local {
	case "t":
		d.inText = false
	case "pPr":
		d.inPPr = false
	case "sectPr":
		d.inSect = false
	case "p":
		d.cur.WriteByte('\n')
		if d.sectNew {
			d.sectNew = false
			if d.sectType != "continuous" {
				return d.breakPage(true)
			}
		}
	}
	return nil
}

// text keeps the characters of w:t, outside deleted text and field codes.
func (d *docxDoc) text(t xml.CharData) {
	if d.inText && d.skip == 0 {
		d.cur.Write(t)
		if len(bytes.TrimSpace(t)) > 0 {
			d.explicit = false
		}
	}
}

func attr(e xml.StartElement, local string) string {
	for _, a := range e.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// off says whether an OOXML on/off value turns the property off.
func off(v string) bool { return v == "0" || v == "false" || v == "off" }
