package docread_test

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"os"
	"strings"
	"testing"
	"time"

	"rulevalidator/docread"
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
