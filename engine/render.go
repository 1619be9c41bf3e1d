package engine

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"rulevalidator/engine/plan"
)

// Rendering the material: the user message of one call, the documents (whole
// or excerpts), the named inputs, the text input and the message, each
// wrapped in neutralised markers. In cite mode every passage is shown behind
// its id ("[d1p2s3] The supplier shall ..."), and the ids a call shows are the
// only ones its answer may cite.

// material is the user message of one call and the passage ids it shows (cite
// mode; nil in quote mode).
type material struct {
	user string
	ids  []string
	// rules is the RulesPrompt already written at the end of user, when
	// the material was rendered for one call's rules; "" when each call
	// adds its own.
	rules string
	// whole says it holds every document whole, not excerpts.
	whole bool
}

// renderer renders one request's material for its calls.
type renderer struct {
	in *Inputs
	// ps is the request's passages in cite mode; nil in quote mode.
	ps *passageSet
}

// UserPrompt renders a request's inputs as data for the model, as a call
// holding all of them shows them in mode. Every piece of untrusted text is
// neutralised so it cannot forge a marker.
func UserPrompt(in *Inputs, mode EvidenceMode) string {
	r := renderer{in: in}
	if mode == EvidenceCite {
		r.ps = segmentInputs(in)
	}
	return r.whole("").user
}

// whole renders every document whole, followed by rules when they are
// given (the rules of the one call it is for: written into the same
// builder, so a long document is not copied again to add them).
func (r renderer) whole(rules string) material {
	var b strings.Builder
	// Sized up front: a document can be megabytes, and a builder grown by
	// doubling keeps up to twice the text for as long as the prompt lives.
	b.Grow(r.size() + len(rules))
	b.WriteString("Judge the following material against the rules.\n")
	// The named inputs, the text input and the message come first, the
	// documents after them: a small model cites what it read last, and the
	// passages a rule rests on are mostly the documents'.
	others, ids := r.others()
	b.WriteString(others)
	if r.ps != nil { // every passage's id, sized once like the builder
		ids = slices.Grow(ids, len(r.ps.list)-len(ids))
	}
	d := 0
	writeDocs := func(docs []Document, role string) {
		for _, doc := range docs {
			name := markerName(doc.Name)
			b.WriteString("\n" + startMarker("Document", name) + "\n")
			fmt.Fprintf(&b, "(%s document, %d page%s)\n", role, len(doc.Pages), plural(len(doc.Pages)))
			for i, p := range doc.Pages {
				if len(doc.Pages) > 1 {
					b.WriteString(pageMarker(i+1) + "\n")
				}
				if r.ps != nil {
					ids = r.writePassages(&b, r.ps.pages[d][i], ids)
					continue
				}
				b.WriteString(neutralize(p))
				if !strings.HasSuffix(p, "\n") {
					b.WriteString("\n")
				}
			}
			b.WriteString(endMarker("Document", name) + "\n")
			d++
		}
	}
	writeDocs(r.in.PrimaryDocs, "primary")
	writeDocs(r.in.AuxiliaryDocs, "auxiliary")
	b.WriteString(rules)
	return material{user: b.String(), ids: ids, rules: rules, whole: true}
}

// writePassages writes passages (indexes into r.ps.list), one a line behind
// its id, and returns ids with theirs added. A passage's line breaks are
// shown as spaces: the id before it is what matters, and the engine copies
// the verbatim text.
func (r renderer) writePassages(b *strings.Builder, passages []int, ids []string) []string {
	for _, i := range passages {
		p := r.ps.list[i]
		b.WriteByte('[')
		b.WriteString(p.id)
		b.WriteString("] ")
		switch shownAs(p.text) {
		case shownVerbatim:
			b.WriteString(p.text)
		case shownOneLine:
			writeOneLine(b, p.text)
		default:
			b.WriteString(neutralizeIDs(neutralize(oneLine(p.text))))
		}
		b.WriteByte('\n')
		ids = append(ids, p.id)
	}
	return ids
}

// How a passage's text is shown.
const (
	shownVerbatim    = iota // as it is: one line, single spaces
	shownOneLine            // its white space made single spaces
	shownNeutralised        // it may hold a marker or an id
)

// passageByte classifies the bytes of a passage's text for shownAs: 1 for
// white space other than a space, 2 for the first byte of a marker or an id.
var passageByte = func() (t [256]uint8) {
	for _, c := range "\n\t\r\v\f" {
		t[c] = 1
	}
	t['<'], t['['] = 2, 2
	return t
}()

// shownAs says how a passage's text (trimmed, as segmentation cuts it) is
// shown, in one pass: most are shown as they are.
func shownAs(s string) int {
	shown := shownVerbatim
	space := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch passageByte[c] {
		case 2:
			return shownNeutralised
		case 1:
			shown = shownOneLine
		}
		if c == ' ' {
			if space {
				shown = shownOneLine
			}
			space = true
		} else {
			space = false
		}
	}
	return shown
}

// writeOneLine writes s, trimmed, with every run of white space as one
// space, as oneLine does for ASCII white space, without building the words.
func writeOneLine(b *strings.Builder, s string) {
	s = strings.TrimSpace(s)
	start := 0 // of the text not written yet
	for i := 0; i < len(s); i++ {
		if !isASCIISpace(s[i]) || s[i] == ' ' && !isASCIISpace(s[i+1]) {
			continue // text, or a single space that stays as it is
		}
		b.WriteString(s[start:i])
		b.WriteByte(' ')
		j := i
		for isASCIISpace(s[j]) {
			j++ // s is trimmed: a run of white space ends before its end
		}
		start, i = j, j-1
	}
	b.WriteString(s[start:])
}

func isASCIISpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

// size is about the length of the rendered material: the inputs' text and
// the markers around it (more when neutralize has to rewrite markers).
func (r renderer) size() int {
	const perPage, perDoc = len(markerOpen+"Page 100000"+markerClose) + 2, 2*len(markerOpen+"Start of Document: "+markerClose) + 64
	n := 256 + r.in.Size() + 2*len(r.in.NamedInputs)*perDoc
	for _, d := range r.in.Documents() {
		n += perDoc + len(d.Name) + len(d.Pages)*perPage
	}
	if r.ps != nil {
		n += len(r.ps.list) * len("[d1p100s100] \n")
	}
	return n
}

// others renders the named inputs, the text input and the message: the part
// of the user message every call of a request carries whole, and their ids.
func (r renderer) others() (string, []string) {
	in := r.in
	var b strings.Builder
	var ids []string
	cite := func(id string) {
		b.WriteString("[" + id + "] ")
		ids = append(ids, id)
	}
	for i, n := range in.NamedInputs {
		name := markerName(n.Name)
		b.WriteString("\n" + startMarker("Named Input", name) + "\n")
		if r.ps != nil {
			cite(r.ps.inputIDs[i])
		}
		if n.Description != "" {
			b.WriteString("description: " + r.untrusted(oneLine(n.Description)) + "\n")
		}
		b.WriteString("value: " + r.untrusted(renderValue(n.Value)) + "\n")
		b.WriteString(endMarker("Named Input", name) + "\n")
	}
	writeText := func(kind string, id func(*passageSet) string, text string) {
		if text == "" {
			return
		}
		b.WriteString("\n" + startMarker(kind, kind) + "\n")
		if r.ps != nil {
			cite(id(r.ps))
		}
		b.WriteString(r.untrusted(text))
		if !strings.HasSuffix(text, "\n") {
			b.WriteString("\n")
		}
		b.WriteString(endMarker(kind, kind) + "\n")
	}
	writeText("Text Input", func(s *passageSet) string { return s.textID }, in.TextInput)
	writeText("Message", func(s *passageSet) string { return s.messageID }, in.Message)
	return b.String(), ids
}

// untrusted neutralises text shown outside a document's passages: markers
// always, passage ids in cite mode.
func (r renderer) untrusted(s string) string {
	s = neutralize(s)
	if r.ps != nil {
		s = neutralizeIDs(s)
	}
	return s
}

// bracketed matches a word in square brackets, as a passage id is shown.
var bracketed = regexp.MustCompile(`\[\s*[^\s\[\]]{1,200}\s*\]`)

// neutralizeIDs makes untrusted text unable to show a passage id of its
// own: the brackets of every bracketed word become "⟦" and "⟧", which read
// the same to a person but are never an id's.
func neutralizeIDs(s string) string {
	if !strings.Contains(s, "[") {
		return s
	}
	return bracketed.ReplaceAllStringFunc(s, func(m string) string {
		return "⟦" + strings.TrimSpace(m[1:len(m)-1]) + "⟧"
	})
}

// dedupe drops repeated names, keeping the first: two documents or inputs
// whose names show the same are one source to cite.
func dedupe(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := ids[:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// renderValue renders a named input's value: strings as they are, anything
// else as compact JSON.
func renderValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// The excerpt note tells the model that it sees parts of the documents and
// where they come from.
const (
	excerptHeader = "This message holds excerpts of the documents, not all of them: the passages most relevant to the rules being judged. " +
		"Page numbers are those of the whole documents. Judge only on what is shown; when it does not hold enough information to judge a rule, set data_sufficiency to false.\n"
	elision = "[…]\n"
)

// excerpt renders the user message of a partial call c of p: which pages of
// which document it holds, those pages under their own page numbers inside
// the documents' neutralised markers, and every named input, the text input
// and the message in full. bounds[d][n-1] is where page n of document d
// starts and ends in the document's text. In cite mode a chunk shows the
// passages it overlaps, each once and whole.
func (r renderer) excerpt(docs []Document, p *plan.Plan, c int, bounds [][][2]int) material {
	in := r.in
	byDoc := make([][]plan.Chunk, len(docs))
	for _, i := range p.Calls[c].Chunks {
		ch := p.Chunks[i]
		byDoc[ch.Doc] = append(byDoc[ch.Doc], ch)
	}
	pages := p.Pages(c)
	role := func(d int) string {
		if d < len(in.PrimaryDocs) {
			return "primary"
		}
		return "auxiliary"
	}
	var b strings.Builder
	b.WriteString("Judge the following material against the rules.\n")
	// As in whole: what every call of the request carries first, which
	// also keeps the prefix the calls share as long as it can be.
	others, ids := r.others()
	b.WriteString(others)
	b.WriteString(excerptHeader)
	for d, doc := range docs {
		b.WriteString(excerptDocLine(markerName(doc.Name), role(d), len(doc.Pages), pages[d]))
	}
	for d, doc := range docs {
		chunks := byDoc[d]
		if len(chunks) == 0 {
			continue
		}
		name := markerName(doc.Name)
		b.WriteString("\n" + startMarker("Document", name) + "\n")
		b.WriteString(excerptDescription(role(d), len(doc.Pages), pages[d]))
		shown := -1 // the last passage shown, an index into r.ps.list
		// An elision line stands for each part of a page left out.
		var prev *plan.Chunk
		for i := range chunks {
			ch := &chunks[i]
			if prev == nil || ch.Page != prev.Page {
				if prev != nil && prev.End != bounds[d][prev.Page-1][1] {
					b.WriteString(elision)
				}
				b.WriteString(pageMarker(ch.Page) + "\n")
				if ch.Start != bounds[d][ch.Page-1][0] {
					b.WriteString(elision)
				}
			} else if prev.End != ch.Start {
				b.WriteString(elision)
			}
			if r.ps != nil {
				var overlap []int
				for _, pi := range r.ps.pages[d][ch.Page-1] {
					ps := r.ps.list[pi]
					if pi > shown && ps.end > ch.Start && ps.start < ch.End {
						overlap = append(overlap, pi)
						shown = pi
					}
				}
				ids = r.writePassages(&b, overlap, ids)
			} else {
				b.WriteString(neutralize(ch.Text))
				if !strings.HasSuffix(ch.Text, "\n") {
					b.WriteString("\n")
				}
			}
			prev = ch
		}
		if prev.End != bounds[d][prev.Page-1][1] {
			b.WriteString(elision)
		}
		b.WriteString(endMarker("Document", name) + "\n")
	}
	return material{user: b.String(), ids: ids}
}

// pageBounds is where each page of each document starts and ends, in code
// points of the document's text (its pages joined by form feeds).
func pageBounds(docs []Document) [][][2]int {
	out := make([][][2]int, len(docs))
	for d, doc := range docs {
		out[d] = make([][2]int, len(doc.Pages))
		at := 0
		for i, page := range doc.Pages {
			n := utf8.RuneCountInString(page)
			out[d][i] = [2]int{at, at + n}
			at += n + 1
		}
	}
	return out
}

// excerptDocLine is a document's line in the excerpt note.
func excerptDocLine(name, role string, total int, pages []int) string {
	held := pagesPhrase(pages)
	if len(pages) == 0 {
		held = "not included in this message"
	}
	return fmt.Sprintf("- %s (%s document, %d page%s): %s\n", strconv.Quote(name), role, total, plural(total), held)
}

// excerptDescription is the line under a partial document's start marker.
func excerptDescription(role string, total int, pages []int) string {
	return fmt.Sprintf("(%s document, %d page%s; this excerpt holds %s)\n", role, total, plural(total), pagesPhrase(pages))
}

// pagesPhrase is "page 4" or "pages 1, 4-6, 250".
func pagesPhrase(pages []int) string {
	if len(pages) == 1 {
		return "page " + strconv.Itoa(pages[0])
	}
	return "pages " + pageList(pages)
}

// pageList writes ascending page numbers with runs as ranges: "1, 4-6, 250".
func pageList(pages []int) string {
	var b strings.Builder
	for i := 0; i < len(pages); {
		j := i
		for j+1 < len(pages) && pages[j+1] == pages[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(pages[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(pages[j]))
		}
		i = j + 1
	}
	return b.String()
}
