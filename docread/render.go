package docread

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"math"
	"strings"
	"unicode"

	"github.com/klippa-app/go-pdfium"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/klippa-app/go-pdfium/responses"
)

// ErrNoSuchPage is a page number outside the document.
var ErrNoSuchPage = errors.New("docread: no such page")

// MaxRenderWidth caps the width of a rendered page, in pixels.
const MaxRenderWidth = 2000

// Caps of a rendered page image whatever the page's box, which the PDF (a
// tenant's) decides: a page of 4 × 1000 points rendered 1000 pixels wide
// would be 250,000 pixels tall, 250 MP and a gigabyte of RGBA. A page over
// a cap is rendered smaller, its aspect ratio kept.
const (
	// MaxRenderPixels caps a rendered page's area: 16 MP, 64 MB as RGBA,
	// far more than a page shown on a screen needs.
	MaxRenderPixels = 16_000_000
	// MaxRenderSide caps each side, in pixels: what browsers and GPUs
	// draw in one piece. Within MaxRenderPixels alone a page of extreme
	// aspect would still be a strip tens of thousands of pixels long,
	// which no screen shows and some image decoders refuse.
	MaxRenderSide = 8192
)

// Box is a rectangle on a page, in fractions of the page's width and height
// from its top left corner, so that it scales with the image it is drawn on.
type Box struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
	W float64 `json:"w"`
	H float64 `json:"h"`
}

// RenderedPage is one PDF page as a reader sees it: a PNG image, and where
// on it each of the texts asked for was found.
type RenderedPage struct {
	PNG           []byte
	Width, Height int
	// Boxes[i] are the boxes of the first place texts[i] is found on the
	// page, one per line it covers; nil when it is not found.
	Boxes [][]Box
}

// RenderPDFPage renders page (1-based) of the PDF data to a PNG width pixels
// wide (smaller, its aspect kept, for a page that would be over
// MaxRenderSide or MaxRenderPixels so), and finds each of texts on it
// (ignoring white space, as the text read from a page keeps PDFium's line
// breaks) to give its boxes.
func (r *Reader) RenderPDFPage(ctx context.Context, name string, data []byte, page, width int, texts []string) (*RenderedPage, error) {
	if width < 1 || width > MaxRenderWidth {
		return nil, fmt.Errorf("docread: render width %d must be between 1 and %d", width, MaxRenderWidth)
	}
	if err := checkPDFEnd(name, data); err != nil {
		return nil, err
	}
	e, err := r.engines(ctx)
	if err != nil {
		return nil, err
	}
	inst, err := e.pool.GetInstanceWithContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("docread: no PDF engine: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = inst.Kill() })
	defer func() {
		if stop() {
			_ = inst.Close()
		}
	}()
	out, err := renderPDFPage(inst, name, data, page, width, texts)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, err
}

func renderPDFPage(inst pdfium.Pdfium, name string, data []byte, page, width int, texts []string) (*RenderedPage, error) {
	doc, err := inst.OpenDocument(&requests.OpenDocument{File: &data})
	if err != nil {
		return nil, openError(name, err)
	}
	defer inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: doc.Document})
	count, err := inst.FPDF_GetPageCount(&requests.FPDF_GetPageCount{Document: doc.Document})
	if err != nil {
		return nil, newError(name, ErrCorrupt, "its pages cannot be counted: %v", err)
	}
	if page < 1 || page > count.PageCount {
		return nil, fmt.Errorf("docread: %s has no page %d (it has %d): %w", name, page, count.PageCount, ErrNoSuchPage)
	}
	size, err := inst.FPDF_GetPageSizeByIndex(&requests.FPDF_GetPageSizeByIndex{Document: doc.Document, Index: page - 1})
	if err != nil || !(size.Width > 0 && size.Height > 0) || math.IsInf(size.Width, 0) || math.IsInf(size.Height, 0) {
		return nil, newError(name, ErrCorrupt, "page %d has no size: %v", page, err)
	}
	// Both sides are given, so PDFium's bitmap is at most that size: the
	// caps hold before it is allocated.
	w, h := renderSize(size.Width, size.Height, width)
	ref := requests.Page{ByIndex: &requests.PageByIndex{Document: doc.Document, Index: page - 1}}
	img, err := inst.RenderPageInPixels(&requests.RenderPageInPixels{Page: ref, Width: w, Height: h})
	if err != nil {
		return nil, newError(name, ErrCorrupt, "page %d cannot be rendered: %v", page, err)
	}
	var buf bytes.Buffer
	err = png.Encode(&buf, img.Result.RenderedImage)
	w, h = img.Result.Width, img.Result.Height
	img.Cleanup()
	if err != nil {
		return nil, fmt.Errorf("docread: encoding page %d of %s: %w", page, name, err)
	}
	out := &RenderedPage{PNG: buf.Bytes(), Width: w, Height: h, Boxes: make([][]Box, len(texts))}
	if len(texts) == 0 {
		return out, nil
	}
	st, err := inst.GetPageTextStructured(&requests.GetPageTextStructured{Page: ref, Mode: requests.GetPageTextStructuredModeChars})
	if err != nil {
		return nil, newError(name, ErrCorrupt, "the text of page %d cannot be placed: %v", page, err)
	}
	chars := make([]placedChar, 0, len(st.Chars))
	for _, c := range st.Chars {
		for _, r := range c.Text {
			if unicode.IsSpace(r) || unicode.IsControl(r) {
				continue
			}
			chars = append(chars, placedChar{r: r, pos: c.PointPosition})
		}
	}
	for i, t := range texts {
		out.Boxes[i] = findBoxes(chars, t, size.Width, size.Height)
	}
	return out, nil
}

// renderSize is the size in pixels of the image of a page of wPts × hPts
// points rendered width pixels wide: that width and the height of the
// page's aspect (as PDFium computes it from a width alone), or, for a page
// over MaxRenderSide or MaxRenderPixels so, the largest size of the same
// aspect within both (each side at least a pixel).
func renderSize(wPts, hPts float64, width int) (w, h int) {
	height := math.Ceil(float64(width) * hPts / wPts)
	if float64(width) <= MaxRenderSide && height <= MaxRenderSide && float64(width)*height <= MaxRenderPixels {
		return width, int(height)
	}
	// Pixels per point: the largest that keeps the image within every cap.
	scale := min(float64(width)/wPts, MaxRenderSide/wPts, MaxRenderSide/hPts, math.Sqrt(MaxRenderPixels/(wPts*hPts)))
	// Rounded down, so that the caps hold.
	return max(1, int(wPts*scale)), max(1, int(hPts*scale))
}

// placedChar is a character of a page other than white space, with its
// place in points from the page's bottom left corner, as PDF places it.
type placedChar struct {
	r   rune
	pos responses.CharPosition
}

// findBoxes finds text among chars (white space ignored, as cleanText and
// PDFium's line breaks differ in it) and gives its boxes, one per line, in
// fractions of the page.
func findBoxes(chars []placedChar, text string, w, h float64) []Box {
	want := []rune(strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '\u00ad' {
			return -1
		}
		if r == '\ufffe' {
			return '-'
		}
		return r
	}, text))
	if len(want) == 0 {
		return nil
	}
	at := -1
search:
	for i := 0; i+len(want) <= len(chars); i++ {
		for j, r := range want {
			c := chars[i+j].r
			if c == '\ufffe' {
				c = '-'
			}
			if c != r {
				continue search
			}
		}
		at = i
		break
	}
	if at < 0 {
		return nil
	}
	var boxes []Box
	var cur *Box
	for _, c := range chars[at : at+len(want)] {
		// PDF's y grows upwards; a box's grows downwards.
		x0, x1 := min(c.pos.Left, c.pos.Right)/w, max(c.pos.Left, c.pos.Right)/w
		y0, y1 := 1-max(c.pos.Top, c.pos.Bottom)/h, 1-min(c.pos.Top, c.pos.Bottom)/h
		if cur != nil && y0 < cur.Y+cur.H && y1 > cur.Y && x0 >= cur.X {
			// The same line: widen the box.
			right, bottom := max(cur.X+cur.W, x1), max(cur.Y+cur.H, y1)
			cur.Y = min(cur.Y, y0)
			cur.W, cur.H = right-cur.X, bottom-cur.Y
			continue
		}
		boxes = append(boxes, Box{X: x0, Y: y0, W: x1 - x0, H: y1 - y0})
		cur = &boxes[len(boxes)-1]
	}
	return boxes
}
