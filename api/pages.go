package api

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/jobs"
	"rulevalidator/judging"
	"rulevalidator/reviews"
)

// PageRenderer renders a PDF page to an image with the boxes of texts on it
// (a *docread.Reader).
type PageRenderer interface {
	RenderPDFPage(ctx context.Context, name string, data []byte, page, width int, texts []string) (*docread.RenderedPage, error)
}

// RouteDocuments lists a validation's documents, as the page routes number
// them.
const RouteDocuments = "GET " + jobs.StatusPath + "{request_id}/documents"

// RouteDocumentPage is one page of a validation's document as a reader sees
// it: its text and passages with their boxes (JSON), or, with ".png" after
// the page number, a PDF page's image.
const RouteDocumentPage = "GET " + jobs.StatusPath + "{request_id}/documents/{doc}/pages/{page}"

// pageWidth is the width pages are rendered at, in pixels: sharp on a
// laptop's screen at the size the review page shows them.
const pageWidth = 1000

// maxSpans caps the spans one page request asks boxes for.
const maxSpans = 32

// pageBody is a document page as the review page shows it. Offset is the
// code points of the document's text (its pages joined by form feeds)
// before the page: an evidence's start_offset less Offset is its place in
// Text.
type pageBody struct {
	Document  string        `json:"document"`
	Doc       int           `json:"doc"`
	Page      int           `json:"page"`
	Pages     int           `json:"pages"`
	Offset    int           `json:"offset"`
	MediaType string        `json:"media_type"`
	Image     bool          `json:"image"`
	Width     int           `json:"width,omitempty"`
	Height    int           `json:"height,omitempty"`
	Text      string        `json:"text"`
	Passages  []pagePassage `json:"passages"`
	Spans     []pageSpan    `json:"spans"`
}

// pageSpan is a span of the page asked for (an evidence's offsets): Start
// and End into Text, and its boxes on the image.
type pageSpan struct {
	Start int           `json:"start"`
	End   int           `json:"end"`
	Boxes []docread.Box `json:"boxes"`
}

// documentEntry is a document of a validation.
type documentEntry struct {
	Doc       int    `json:"doc"`
	Name      string `json:"name"`
	Pages     int    `json:"pages"`
	MediaType string `json:"media_type"`
	Image     bool   `json:"image"`
}

// keptMaterial is the caller's completed validation named in the path, and
// the material kept with it (nil when none was kept); ok is false when it
// answered the request itself.
func (s *Server) keptMaterial(w http.ResponseWriter, r *http.Request, tenant string) (jobs.Job, *reviews.Material, bool) {
	job, ok := s.completedJob(w, r, tenant, "only a completed validation has documents to show")
	if !ok {
		return jobs.Job{}, nil, false
	}
	m, found, err := s.cfg.Reviews.Material(r.Context(), tenant, job.RequestID)
	if err != nil {
		s.unavailable(w, "reading the validation's documents failed", err, tenant, job.RequestID)
		return jobs.Job{}, nil, false
	}
	if !found || m.Inputs == nil {
		return job, nil, true
	}
	return job, &m, true
}

// getDocuments lists a completed validation's documents.
func (s *Server) getDocuments(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	_, m, ok := s.keptMaterial(w, r, p.Tenant)
	if !ok {
		return
	}
	out := []documentEntry{}
	if m != nil {
		for i, d := range m.Inputs.Documents() {
			e := documentEntry{Doc: i + 1, Name: d.Name, Pages: len(d.Pages), MediaType: "text/plain"}
			if f := pdfFile(*m, d.Name); f != nil {
				e.MediaType, e.Image = f.MediaType, s.cfg.Pages != nil
			}
			out = append(out, e)
		}
	}
	w.Header().Set("Cache-Control", "private, no-store")
	writeJSON(w, http.StatusOK, map[string]any{"documents": out})
}

// parseSpans reads spans=START-END,... (document offsets) and keeps those
// within the page [from, to), as offsets into the page.
func parseSpans(arg string, from, to int) ([][2]int, error) {
	if arg == "" {
		return nil, nil
	}
	parts := strings.Split(arg, ",")
	if len(parts) > maxSpans {
		return nil, fmt.Errorf("spans: %d spans, over the limit of %d", len(parts), maxSpans)
	}
	var out [][2]int
	for i, part := range parts {
		a, b, ok := strings.Cut(part, "-")
		start, err1 := strconv.Atoi(a)
		end, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || start < 0 || end <= start {
			return nil, fmt.Errorf("spans[%d]: %q is not START-END, two offsets with START before END", i, part)
		}
		start, end = max(start, from), min(end, to)
		if start < end {
			out = append(out, [2]int{start - from, end - from})
		}
	}
	return out, nil
}

// pagePassage is a passage of a page: Start and End are code points into
// the page's text (End exclusive); Boxes its place on the page's image, in
// fractions of the image (empty when it is not found there, or no image).
type pagePassage struct {
	ID    string        `json:"id"`
	Text  string        `json:"text"`
	Start int           `json:"start"`
	End   int           `json:"end"`
	Boxes []docread.Box `json:"boxes"`
}

// getDocumentPage answers a page of a completed validation's document, from
// the material kept with it. The image and the boxes are rendered on the
// first ask and kept in a bounded cache.
func (s *Server) getDocumentPage(w http.ResponseWriter, r *http.Request) {
	p, ok := s.principal(w, r)
	if !ok {
		return
	}
	pageArg, wantPNG := strings.CutSuffix(r.PathValue("page"), ".png")
	docN, err1 := strconv.Atoi(r.PathValue("doc"))
	pageN, err2 := strconv.Atoi(pageArg)
	if err1 != nil || err2 != nil || docN < 1 || pageN < 1 {
		writeError(w, http.StatusNotFound, CodeNotFound, "no such document page: documents and pages are numbered from 1")
		return
	}
	job, m, ok := s.keptMaterial(w, r, p.Tenant)
	if !ok {
		return
	}
	if m == nil {
		writeError(w, http.StatusNotFound, CodeNotFound, "the documents of this validation were not kept")
		return
	}
	docs := m.Inputs.Documents()
	if docN > len(docs) || pageN > len(docs[docN-1].Pages) {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no such document page: d%dp%d", docN, pageN))
		return
	}
	body := documentPage(*m, docN, pageN)
	runes := []rune(body.Text)
	spans, err := parseSpans(r.URL.Query().Get("spans"), body.Offset, body.Offset+len(runes))
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, err.Error())
		return
	}
	for _, sp := range spans {
		body.Spans = append(body.Spans, pageSpan{Start: sp[0], End: sp[1], Boxes: []docread.Box{}})
	}
	file := pdfFile(*m, body.Document)
	var rendered *docread.RenderedPage
	if file != nil && s.cfg.Pages != nil {
		texts := make([]string, 0, len(body.Passages)+len(spans))
		for _, ps := range body.Passages {
			texts = append(texts, ps.Text)
		}
		for _, sp := range spans {
			texts = append(texts, string(runes[sp[0]:sp[1]]))
		}
		key := pageKey{tenant: p.Tenant, requestID: job.RequestID, doc: docN, page: pageN, spans: fmt.Sprint(spans)}
		rendered, err = s.pages.get(key, func() (*docread.RenderedPage, error) {
			return s.cfg.Pages.RenderPDFPage(r.Context(), body.Document, file.Data, pageN, pageWidth, texts)
		})
		if err != nil {
			if errors.Is(err, docread.ErrNoSuchPage) || errors.Is(err, docread.ErrUnreadable) {
				s.log.Warn("api: a page of a kept PDF cannot be rendered", "tenant_id", p.Tenant, "request_id", job.RequestID, "doc", docN, "page", pageN, "err", err)
				rendered = nil
			} else {
				s.unavailable(w, "rendering the page failed", err, p.Tenant, job.RequestID)
				return
			}
		}
	}
	if wantPNG {
		if rendered == nil {
			writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("document %d is not a PDF kept with the validation: its page has no image", docN))
			return
		}
		h := w.Header()
		h.Set("Content-Type", "image/png")
		h.Set("Cache-Control", "private, no-store")
		h.Set("Content-Length", strconv.Itoa(len(rendered.PNG)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(rendered.PNG)
		return
	}
	if rendered != nil {
		body.Image, body.Width, body.Height = true, rendered.Width, rendered.Height
		for i := range body.Passages {
			body.Passages[i].Boxes = rendered.Boxes[i]
		}
		for i := range body.Spans {
			if b := rendered.Boxes[len(body.Passages)+i]; b != nil {
				body.Spans[i].Boxes = b
			}
		}
	}
	for i := range body.Passages {
		if body.Passages[i].Boxes == nil {
			body.Passages[i].Boxes = []docread.Box{}
		}
	}
	w.Header().Set("Cache-Control", "private, no-store")
	writeJSON(w, http.StatusOK, body)
}

// documentPage is page pageN of document docN of m, with its passages.
func documentPage(m reviews.Material, docN, pageN int) pageBody {
	doc := m.Inputs.Documents()[docN-1]
	at := 0 // code points of the document's text before the page
	for _, pg := range doc.Pages[:pageN-1] {
		at += utf8.RuneCountInString(pg) + 1
	}
	body := pageBody{Document: doc.Name, Doc: docN, Page: pageN, Pages: len(doc.Pages), Offset: at, MediaType: "text/plain",
		Text: doc.Pages[pageN-1], Passages: []pagePassage{}, Spans: []pageSpan{}}
	if f := pdfFile(m, doc.Name); f != nil {
		body.MediaType = f.MediaType
	}
	prefix := fmt.Sprintf("d%dp%ds", docN, pageN)
	for _, ps := range engine.Passages(m.Inputs) {
		if ps.Origin == doc.Name && ps.Page == pageN && strings.HasPrefix(ps.ID, prefix) {
			body.Passages = append(body.Passages, pagePassage{ID: ps.ID, Text: ps.Text, Start: ps.Start - at, End: ps.End - at})
		}
	}
	return body
}

// pdfFile is the PDF file kept for the document named name, or nil.
func pdfFile(m reviews.Material, name string) *judging.File {
	for i := range m.Files {
		if m.Files[i].Name == name && m.Files[i].MediaType == docread.PDF {
			return &m.Files[i]
		}
	}
	return nil
}

// pageKey names a rendered page; the tenant is part of it, so a page is
// never answered from another tenant's render.
type pageKey struct {
	tenant, requestID string
	doc, page         int
	spans             string
}

// pageCache keeps the last pages rendered, up to max of them: a reviewer
// goes back and forth between the few pages a validation cites.
type pageCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *pageEntry, most recent first
	byKey map[pageKey]*list.Element
}

type pageEntry struct {
	key  pageKey
	page *docread.RenderedPage
}

func newPageCache(max int) *pageCache {
	return &pageCache{max: max, order: list.New(), byKey: map[pageKey]*list.Element{}}
}

// get returns the page kept under key, or renders it and keeps it. Two
// asks for a page not kept yet may both render it; the last one is kept.
func (c *pageCache) get(key pageKey, render func() (*docread.RenderedPage, error)) (*docread.RenderedPage, error) {
	c.mu.Lock()
	if e, ok := c.byKey[key]; ok {
		c.order.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*pageEntry).page, nil
	}
	c.mu.Unlock()
	page, err := render()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.order.Remove(e)
	}
	c.byKey[key] = c.order.PushFront(&pageEntry{key: key, page: page})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*pageEntry).key)
	}
	return page, nil
}
