package api

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/internal/docfixture"
	"rulevalidator/internal/pdftest"
	"rulevalidator/jobs"
	"rulevalidator/judging"
	"rulevalidator/reviews"
	"rulevalidator/schemas"
)

// fakeRenderer renders every page as the same few bytes, each text found
// in one box, and counts its renders.
type fakeRenderer struct{ renders atomic.Int32 }

func (f *fakeRenderer) RenderPDFPage(_ context.Context, _ string, _ []byte, page, width int, texts []string) (*docread.RenderedPage, error) {
	f.renders.Add(1)
	out := &docread.RenderedPage{PNG: []byte("\x89PNG page"), Width: width, Height: 1294, Boxes: make([][]docread.Box, len(texts))}
	for i := range texts {
		out.Boxes[i] = []docread.Box{{X: 0.1, Y: 0.1 * float64(i+1), W: 0.5, H: 0.02}}
	}
	return out, nil
}

// judgedInMemory is judged's request, its result recorded in a memory job
// store, and an empty memory review store.
func judgedInMemory(t *testing.T, tenant, requestID string) (*schemas.Request, *jobs.MemoryStore, *reviews.MemoryStore) {
	t.Helper()
	jobStore := jobs.NewMemoryStore(jobs.MemoryStoreConfig{})
	req, out := judged(t, tenant, requestID, nil)
	for _, v := range out.Verdicts {
		jobStore.RecordVerdict(v)
	}
	jobStore.RecordSummary(out.Summary)
	return req, jobStore, reviews.NewMemoryStore(reviews.MemoryStoreConfig{})
}

func TestDocumentPage(t *testing.T) {
	req, jobStore, reviewStore := judgedInMemory(t, "acme", "req-p")
	in := &engine.Inputs{
		PrimaryDocs:   []engine.Document{{Name: "contract.txt", Pages: []string{"Signed on 1 March 2025. The supplier holds liability insurance.", "The term is <b>two</b> years."}}},
		AuxiliaryDocs: []engine.Document{{Name: "msa.pdf", Pages: []string{"Liability is capped. Fees are due monthly."}}},
	}
	files := []judging.File{{Name: "msa.pdf", MediaType: docread.PDF, Data: []byte("%PDF-1.7 ... %%EOF")}}
	if err := reviewStore.SaveMaterial(context.Background(), "acme", req.RequestID, reviews.Material{Inputs: in, Files: files}); err != nil {
		t.Fatal(err)
	}
	renderer := &fakeRenderer{}
	id := newIdentity(t)
	_, ts := serve(t, Config{Verifier: id.verifier, Jobs: jobStore, Reviews: reviewStore, Pages: renderer})
	acme, globex := id.token(t, "acme"), id.token(t, "globex")
	base := ts.URL + "/v1/validations/" + req.RequestID + "/documents/"

	r := call(t, http.MethodGet, base+"1/pages/2", acme, nil)
	var text pageBody
	if r.status != http.StatusOK || json.Unmarshal(r.body, &text) != nil {
		t.Fatalf("text page: %s", r)
	}
	if text.Image || text.Text != "The term is <b>two</b> years." || text.Pages != 2 || len(text.Passages) != 1 ||
		text.Passages[0].ID != "d1p2s1" || text.Passages[0].Start != 0 || text.Passages[0].End != 29 {
		t.Errorf("text page: %+v", text)
	}

	var pdf pageBody
	for range 2 {
		r = call(t, http.MethodGet, base+"2/pages/1", acme, nil)
		if r.status != http.StatusOK || json.Unmarshal(r.body, &pdf) != nil {
			t.Fatalf("PDF page: %s", r)
		}
	}
	if !pdf.Image || pdf.MediaType != docread.PDF || pdf.Width != 1000 || len(pdf.Passages) != 1 || pdf.Passages[0].ID != "d2p1s1" ||
		len(pdf.Passages[0].Boxes) != 1 || pdf.Passages[0].Boxes[0].Y != 0.1 {
		t.Errorf("PDF page: %+v", pdf)
	}
	r = call(t, http.MethodGet, base+"2/pages/1.png", acme, nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "image/png" || string(r.body) != "\x89PNG page" {
		t.Errorf("PDF page image: %s", r)
	}
	if n := renderer.renders.Load(); n != 1 {
		t.Errorf("rendered %d times, want once (cached)", n)
	}
	if r = call(t, http.MethodGet, base+"1/pages/1.png", acme, nil); r.status != http.StatusNotFound {
		t.Errorf("image of a text page: %s", r)
	}

	// Spans (evidence offsets in the document's text) get their boxes; the
	// second page of contract.txt starts at code point 64.
	r = call(t, http.MethodGet, base+"1/pages/2?spans=76-79,0-5", acme, nil)
	if r.status != http.StatusOK || json.Unmarshal(r.body, &text) != nil || text.Offset != 64 || len(text.Spans) != 1 ||
		text.Spans[0].Start != 12 || text.Spans[0].End != 15 || string([]rune(text.Text)[12:15]) != "<b>" {
		t.Errorf("spans on a text page: %s", r)
	}
	r = call(t, http.MethodGet, base+"2/pages/1?spans=0-9", acme, nil)
	if r.status != http.StatusOK || json.Unmarshal(r.body, &pdf) != nil || len(pdf.Spans) != 1 || len(pdf.Spans[0].Boxes) != 1 {
		t.Errorf("spans on a PDF page: %s", r)
	}
	for _, bad := range []string{"9-1", "x", "1-2,a-b", strings.Repeat("1-2,", maxSpans) + "1-2"} {
		if r := call(t, http.MethodGet, base+"1/pages/1?spans="+bad, acme, nil); r.status != http.StatusBadRequest || !strings.Contains(r.errorMessage(), "spans") {
			t.Errorf("spans=%s: %s", bad, r)
		}
	}
	r = call(t, http.MethodGet, ts.URL+"/v1/validations/"+req.RequestID+"/documents", acme, nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `{"doc":1,"name":"contract.txt","pages":2,"media_type":"text/plain","image":false}`) ||
		!strings.Contains(string(r.body), `{"doc":2,"name":"msa.pdf","pages":1,"media_type":"application/pdf","image":true}`) {
		t.Errorf("documents: %s", r)
	}

	for name, url := range map[string]string{
		"another tenant's documents": ts.URL + "/v1/validations/" + req.RequestID + "/documents",
		"another tenant's page":      base + "2/pages/1",
		"another tenant's image":     base + "2/pages/1.png",
	} {
		if r := call(t, http.MethodGet, url, globex, nil); r.status != http.StatusNotFound || r.errorMessage() != msgValidationNotFound {
			t.Errorf("%s: %s", name, r)
		}
	}
	for _, path := range []string{"3/pages/1", "1/pages/3", "0/pages/1", "1/pages/x.png", "1/pages/-1"} {
		if r := call(t, http.MethodGet, base+path, acme, nil); r.status != http.StatusNotFound {
			t.Errorf("%s: %s", path, r)
		}
	}
	if r := call(t, http.MethodGet, base+"1/pages/1", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("without a token: %s", r)
	}
}

func TestPageCacheIsBounded(t *testing.T) {
	c := newPageCache(2)
	renders := 0
	get := func(page int) {
		_, _ = c.get(pageKey{tenant: "t", requestID: "r", doc: 1, page: page}, func() (*docread.RenderedPage, error) {
			renders++
			return &docread.RenderedPage{}, nil
		})
	}
	for _, page := range []int{1, 2, 1, 3, 1, 2} {
		get(page)
	}
	// 1, 2 rendered; 1 kept; 3 rendered, 2 dropped; 1 kept; 2 rendered again.
	if renders != 4 || c.order.Len() != 2 {
		t.Errorf("%d renders, %d kept; want 4 and 2", renders, c.order.Len())
	}
}

// TestDocumentPageImageIsCapped: the image of a PDF page of an extreme box
// (4 × 1000 points: 250 MP at the width pages are shown at) comes back
// within docread's caps, its aspect ratio kept, rendered by the real PDF
// engine.
func TestDocumentPageImageIsCapped(t *testing.T) {
	req, jobStore, reviewStore := judgedInMemory(t, "acme", "req-tall")
	const wPts, hPts = 4, 1000
	in := &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "tall.pdf", Pages: []string{"Page."}}}}
	files := []judging.File{{Name: "tall.pdf", MediaType: docread.PDF, Data: docfixture.PageBoxPDF(wPts, hPts)}}
	if err := reviewStore.SaveMaterial(context.Background(), "acme", req.RequestID, reviews.Material{Inputs: in, Files: files}); err != nil {
		t.Fatal(err)
	}
	id := newIdentity(t)
	_, ts := serve(t, Config{Verifier: id.verifier, Jobs: jobStore, Reviews: reviewStore, Pages: pdftest.Reader(t)})
	r := call(t, http.MethodGet, ts.URL+"/v1/validations/"+req.RequestID+"/documents/1/pages/1.png", id.token(t, "acme"), nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "image/png" {
		t.Fatalf("page image: %s", r)
	}
	img, err := png.Decode(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	if w > docread.MaxRenderSide || h > docread.MaxRenderSide || w*h > docread.MaxRenderPixels {
		t.Errorf("page image %d × %d is over the caps (%d px a side, %d px)", w, h, docread.MaxRenderSide, docread.MaxRenderPixels)
	}
	if want := float64(h) * wPts / hPts; math.Abs(float64(w)-want) > 1 {
		t.Errorf("page image %d × %d: %.1f wide would keep the page's aspect", w, h, want)
	}
}
