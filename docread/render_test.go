package docread_test

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"rulevalidator/docread"
	"rulevalidator/internal/docfixture"
)

func TestRenderPDFPageFindsPassageBoxes(t *testing.T) {
	data, err := os.ReadFile("../examples/contract-review/northwind-msa.pdf")
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, docread.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	doc, err := r.Read(ctx, docread.Source{Name: "northwind-msa.pdf", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	// A sentence of the last page, wrapped over lines as PDFium reads it.
	last := len(doc.Pages)
	lines := strings.Split(strings.TrimSpace(doc.Pages[last-1]), "\n")
	passage := strings.Join(lines[:min(2, len(lines))], "\n")
	got, err := r.RenderPDFPage(ctx, "northwind-msa.pdf", data, last, 800, []string{passage, "words that are not on the page"})
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(got.PNG))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 800 || b.Dy() != got.Height || got.Width != 800 {
		t.Errorf("image %v, reported %dx%d; want 800 wide", b, got.Width, got.Height)
	}
	if len(got.Boxes[0]) == 0 {
		t.Fatalf("no boxes for %q", passage)
	}
	if len(got.Boxes[0]) != 2 || got.Boxes[0][0].Y >= got.Boxes[0][1].Y {
		t.Errorf("boxes %+v: want two lines, the first above the second", got.Boxes[0])
	}
	for _, b := range got.Boxes[0] {
		if b.X < 0 || b.Y < 0 || b.W <= 0 || b.H <= 0 || b.X+b.W > 1.001 || b.Y+b.H > 1.001 {
			t.Errorf("box %+v is not inside the page", b)
		}
	}
	if got.Boxes[1] != nil {
		t.Errorf("boxes %v for a text not on the page", got.Boxes[1])
	}
	if _, err := r.RenderPDFPage(ctx, "northwind-msa.pdf", data, last+1, 800, nil); !errors.Is(err, docread.ErrNoSuchPage) {
		t.Errorf("page %d: err %v, want ErrNoSuchPage", last+1, err)
	}
}

// TestRenderPDFPageCapsTheImage: a page of any box, an extreme one
// included, is rendered within MaxRenderSide and MaxRenderPixels, its
// aspect ratio kept (to a pixel), the PNG as large as reported.
func TestRenderPDFPageCapsTheImage(t *testing.T) {
	r := newReader(t, docread.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name       string
		wPts, hPts float64
		width      int
		largest    bool // the image is of the largest size allowed
	}{
		// 1000 × 250,000 pixels at the width asked for: 250 MP.
		{"4 × 1000 points", 4, 1000, 1000, false},
		{"14400 × 14400 points, the largest PDF page", 14400, 14400, docread.MaxRenderWidth, false},
		// 2000 × 8100 pixels: each side within the cap, the whole over it.
		{"1000 × 4050 points", 1000, 4050, docread.MaxRenderWidth, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.largest && testing.Short() {
				t.Skip("an image of the largest size takes seconds to render and encode")
			}
			got, err := r.RenderPDFPage(ctx, "page.pdf", docfixture.PageBoxPDF(tc.wPts, tc.hPts), 1, tc.width, []string{"Page."})
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(got.PNG))
			if err != nil {
				t.Fatalf("not a PNG: %v", err)
			}
			w, h := img.Bounds().Dx(), img.Bounds().Dy()
			if w != got.Width || h != got.Height {
				t.Errorf("image %d × %d, reported %d × %d", w, h, got.Width, got.Height)
			}
			if w > docread.MaxRenderSide || h > docread.MaxRenderSide || w*h > docread.MaxRenderPixels {
				t.Errorf("image %d × %d is over the caps (%d px a side, %d px)", w, h, docread.MaxRenderSide, docread.MaxRenderPixels)
			}
			if w > tc.width {
				t.Errorf("image %d wide, over the %d asked for", w, tc.width)
			}
			// The aspect ratio kept: the width the height implies, to a pixel.
			if want := float64(h) * tc.wPts / tc.hPts; math.Abs(float64(w)-want) > 1 {
				t.Errorf("image %d × %d: %.1f wide would keep the page's aspect", w, h, want)
			}
			if len(got.Boxes[0]) == 0 {
				t.Errorf("no box for the page's text")
			}
		})
	}
}
