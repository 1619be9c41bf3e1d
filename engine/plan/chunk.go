package plan

import "unicode/utf8"

// Document is one document to plan over. Its text, as offsets count it, is
// its pages joined by form feeds.
type Document struct {
	Name  string
	Pages []string
}

// Chunk is a passage of one document: a whole page, or a part of a page too
// long to be one chunk.
type Chunk struct {
	Doc  int // index of the document
	Page int // 1-based page number
	// Whole is true when the chunk is its entire page.
	Whole bool
	// Start and End are Unicode code point offsets into the document's text
	// (end exclusive).
	Start, End int
	// Text is the passage, a substring of the page.
	Text string
	// Tokens is the estimated size of Text.
	Tokens int
}

// splitter finds where a too-long page may be cut, most natural first.
type splitter func(s string) []string

// Chunks splits docs into chunks of at most maxTokens, as Count estimates
// them scaled by ratio: one chunk per page where the page fits, otherwise
// pieces cut at paragraph breaks, then at sentence ends, then at spaces,
// packed greedily so that the pieces of a page stay as few as possible.
func Chunks(docs []Document, maxTokens int, ratio float64) []Chunk {
	return chunk(docs, maxTokens, ratio, newIndex(nil))
}

// chunk is Chunks adding each chunk to ix as it is cut, in the same pass over
// the text that measures it.
func chunk(docs []Document, maxTokens int, ratio float64, ix *index) []Chunk {
	count := func(s string) int { return Scale(Count(s), ratio) }
	var out []Chunk
	for d, doc := range docs {
		offset := 0 // code points before the current page
		for p, page := range doc.Pages {
			if p > 0 {
				offset++ // the form feed joining pages
			}
			t := ix.measure(page)
			if tokens := Scale(t.count.total(), ratio); tokens <= maxTokens {
				ix.commit(t)
				out = append(out, Chunk{Doc: d, Page: p + 1, Whole: true, Start: offset, End: offset + t.runes, Text: page, Tokens: tokens})
			} else {
				ix.discard()
				at := offset
				for _, piece := range splitPage(page, maxTokens, count) {
					pt := ix.measure(piece)
					ix.commit(pt)
					out = append(out, Chunk{Doc: d, Page: p + 1, Start: at, End: at + pt.runes, Text: piece, Tokens: Scale(pt.count.total(), ratio)})
					at += pt.runes
				}
			}
			offset += t.runes
		}
	}
	ix.finish()
	return out
}

// splitPage cuts page into consecutive pieces that together are page and
// each fit maxTokens (a single word longer than that is cut at a rune
// boundary).
func splitPage(page string, maxTokens int, count func(string) int) []string {
	return pack(page, maxTokens, count, []splitter{paragraphs, sentences, words, runeHalves})
}

// pack splits s with the first splitter, splits further any piece that is
// still too long with the next ones, and packs neighbours back together while
// they fit.
func pack(s string, maxTokens int, count func(string) int, splitters []splitter) []string {
	if count(s) <= maxTokens || len(splitters) == 0 {
		return []string{s}
	}
	var out []string
	// Pieces are consecutive substrings of s, so packing neighbours together
	// is re-slicing s: s[start:end] is the piece being packed.
	pieces := splitters[0](s)
	if len(pieces) == 1 { // no cut of this kind: try the next kind
		return pack(s, maxTokens, count, splitters[1:])
	}
	next := splitters[1:]
	if len(next) == 0 {
		next = splitters // the last resort halves until pieces fit
	}
	start, end, tokens := 0, 0, 0
	for _, piece := range pieces {
		t := count(piece)
		if t > maxTokens {
			if end > start {
				out = append(out, s[start:end])
			}
			out = append(out, pack(piece, maxTokens, count, next)...)
			end += len(piece)
			start, tokens = end, 0
			continue
		}
		if end > start && tokens+t > maxTokens {
			out = append(out, s[start:end])
			start, tokens = end, 0
		}
		end += len(piece)
		tokens += t
	}
	if end > start {
		out = append(out, s[start:end])
	}
	return out
}

// paragraphs splits after each run of blank lines.
func paragraphs(s string) []string {
	return cutAfter(s, func(s string, i int) int {
		if s[i] != '\n' {
			return 0
		}
		j := i + 1
		for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r') {
			j++
		}
		if j < len(s) && s[j] == '\n' {
			for j < len(s) && (s[j] == '\n' || s[j] == ' ' || s[j] == '\t' || s[j] == '\r') {
				j++
			}
			return j - i
		}
		return 0
	})
}

// sentences splits after a full stop, question or exclamation mark followed
// by white space, and after every line break.
func sentences(s string) []string {
	return cutAfter(s, func(s string, i int) int {
		switch s[i] {
		case '\n':
			return 1
		case '.', '?', '!':
			j := i + 1
			for j < len(s) && (s[j] == '"' || s[j] == '\'' || s[j] == ')') {
				j++
			}
			if j < len(s) && (s[j] == ' ' || s[j] == '\n' || s[j] == '\t') {
				return j + 1 - i
			}
		}
		return 0
	})
}

// words splits after each space.
func words(s string) []string {
	return cutAfter(s, func(s string, i int) int {
		if s[i] == ' ' || s[i] == '\t' {
			return 1
		}
		return 0
	})
}

// runeHalves is the last resort for a run without spaces: it halves it at a
// rune boundary, and pack halves again as needed.
func runeHalves(s string) []string {
	mid := len(s) / 2
	for mid > 0 && !utf8.RuneStart(s[mid]) {
		mid--
	}
	if mid == 0 {
		return []string{s}
	}
	return []string{s[:mid], s[mid:]}
}

// cutAfter splits s into consecutive pieces, ending a piece after the
// separator that sep reports at byte i (its length; 0 for none).
func cutAfter(s string, sep func(s string, i int) int) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		if n := sep(s, i); n > 0 {
			i += n
			out = append(out, s[start:i])
			start = i
			continue
		}
		i++
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
