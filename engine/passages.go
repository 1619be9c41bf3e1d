package engine

import (
	"strconv"
	"strings"
)

// Passage segmentation. In cite mode the material is shown to the model as
// passages, each behind a short id, and evidence names the id of the passage
// it rests on: the engine, not the model, then copies the passage's text, so
// evidence is verbatim by construction.
//
// A document passage is one sentence of one page (a clause, a heading, a list
// item), found in the page's text with the line breaks of its layout read as
// spaces: text extracted from PDFs breaks lines inside sentences. Its id is
// "d<document>p<page>s<sentence>", all 1-based: stable for the same document,
// whatever else the request holds besides it.
//
// A named input is one passage whose id is its name; the text input and the
// message are the passages "text_input" and "message".

// Ids of the non-document passages.
const (
	textInputID = "text_input"
	messageID   = "message"
)

// passage is one citable unit of a request's material.
type passage struct {
	id string
	// doc indexes Inputs.Documents(); -1 for a named input, the text input
	// or the message.
	doc    int
	origin string // the document's or the named input's name, "text_input", "message"
	page   int    // 1-based; 0 outside documents
	// start and end are code points into the document's text (its pages
	// joined by form feeds), end exclusive; 0 outside documents.
	start, end int
	text       string // verbatim
}

// passageSet is every passage of one request, in document order. It is
// built once per request and read concurrently.
type passageSet struct {
	list []passage
	byID map[string]int
	// pages[d][p-1] lists the indexes into list of page p of document d.
	pages [][][]int
	// others indexes the named inputs, the text input and the message.
	others []int
	// inputIDs are the ids of the named inputs, in request order; textID
	// and messageID those of the text input and the message ("" when
	// absent).
	inputIDs          []string
	textID, messageID string
}

// lookup finds a passage by the id the model gave; ids compare as written,
// after trimming white space and surrounding brackets ("[d1p2s3]").
func (s *passageSet) lookup(id string) (passage, bool) {
	id = strings.Trim(strings.TrimSpace(id), "[]")
	i, ok := s.byID[id]
	if !ok {
		return passage{}, false
	}
	return s.list[i], true
}

// passageID is the id of sentence n of page p of document d (all 1-based).
func passageID(d, p, n int) string {
	return "d" + strconv.Itoa(d) + "p" + strconv.Itoa(p) + "s" + strconv.Itoa(n)
}

// segmentInputs builds the passage set of a request's inputs.
func segmentInputs(in *Inputs) *passageSet {
	docs := in.Documents()
	// The pages are cut first and the set sized after: a long document has
	// tens of thousands of passages, and a list and map grown by doubling
	// would hold up to twice their room for as long as the request runs.
	type cut struct {
		spans []span
		runes int
	}
	cuts := make([][]cut, len(docs))
	total := len(in.NamedInputs) + 2
	for d, doc := range docs {
		cuts[d] = make([]cut, len(doc.Pages))
		for p, page := range doc.Pages {
			spans, runes := segmentPageCounted(page)
			cuts[d][p] = cut{spans, runes}
			total += len(spans)
		}
	}
	s := &passageSet{byID: make(map[string]int, total), list: make([]passage, 0, total), pages: make([][][]int, len(docs))}
	for d, doc := range docs {
		s.pages[d] = make([][]int, len(doc.Pages))
		at := 0 // code points of the document's text before this page
		for p, c := range cuts[d] {
			s.pages[d][p] = make([]int, 0, len(c.spans))
			for n, sp := range c.spans {
				id := passageID(d+1, p+1, n+1)
				s.byID[id] = len(s.list)
				s.pages[d][p] = append(s.pages[d][p], len(s.list))
				s.list = append(s.list, passage{
					id: id, doc: d, origin: doc.Name, page: p + 1,
					start: at + sp.start, end: at + sp.end, text: sp.text,
				})
			}
			cuts[d][p] = cut{}
			at += c.runes + 1 // the form feed
		}
	}
	// A name that another passage's id already has (a named input called
	// "d1p1s1", or "message") is cited as "input:NAME", then numbered.
	addOther := func(id, origin, text string) string {
		for n := 1; ; n++ {
			if _, taken := s.byID[id]; !taken {
				break
			}
			id = "input:" + strings.TrimPrefix(id, "input:")
			if n > 1 {
				id += "#" + strconv.Itoa(n)
			}
		}
		s.byID[id] = len(s.list)
		s.others = append(s.others, len(s.list))
		s.list = append(s.list, passage{id: id, doc: -1, origin: origin, text: text})
		return id
	}
	for _, n := range in.NamedInputs {
		s.inputIDs = append(s.inputIDs, addOther(markerName(n.Name), n.Name, renderValue(n.Value)))
	}
	if in.TextInput != "" {
		s.textID = addOther(textInputID, textInputID, in.TextInput)
	}
	if in.Message != "" {
		s.messageID = addOther(messageID, messageID, in.Message)
	}
	return s
}
