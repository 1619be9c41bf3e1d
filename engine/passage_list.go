package engine

// Passage is one citable unit of a request's material, as the model sees
// it numbered: a sentence or clause of a document page, or a named input,
// the text input or the message.
type Passage struct {
	ID string `json:"id"`
	// Origin is the document's or the named input's name.
	Origin string `json:"origin"`
	// Page is 1-based; 0 outside documents.
	Page int `json:"page"`
	// Start and End are code points into the document's text (its pages
	// joined by form feeds), End exclusive; 0 outside documents.
	Start int    `json:"start"`
	End   int    `json:"end"`
	Text  string `json:"text"`
}

// Passages lists the passages of in, in document order, with the ids a
// citation names: what a reviewer may cite, and what a page shows.
func Passages(in *Inputs) []Passage {
	set := segmentInputs(in)
	out := make([]Passage, len(set.list))
	for i, p := range set.list {
		out[i] = Passage{ID: p.id, Origin: p.origin, Page: p.page, Start: p.start, End: p.end, Text: p.text}
	}
	return out
}
