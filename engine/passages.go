package engine

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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

// Passage bounds.
const (
	// maxPassageRunes splits a longer sentence at a clause boundary (";",
	// ":" or ", ") so that a citation stays focused.
	maxPassageRunes = 400
	// minPassageRunes joins a shorter piece (a heading, a clause number) to
	// the passage after it on the same page.
	minPassageRunes = 24
)

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

// piece is a passage being cut: byte offsets into its page.
type piece struct{ from, to int }

// span is a passage within one page: code points into the page, and its
// verbatim text.
type span struct {
	start, end int
	text       string
}

// segmentPage cuts one page into passages. Every passage is a verbatim
// substring of the page; white space between passages belongs to none.
func segmentPage(page string) []span {
	spans, _ := segmentPageCounted(page)
	return spans
}

// segmentPageCounted is segmentPage, and the page's length in code points,
// counted on the way.
func segmentPageCounted(page string) ([]span, int) {
	var out []span
	ascii := isASCII(page)
	// Byte offsets of the pieces, then converted to code points once.
	var pieces []piece
	// from is where the current piece begins, white space included; begin
	// is its first other character, -1 until one is seen.
	from, begin := 0, -1
	emit := func(to int) {
		if begin >= 0 {
			for to > begin {
				r, n := utf8.DecodeLastRuneInString(page[:to])
				if !unicode.IsSpace(r) {
					break
				}
				to -= n
			}
			pieces = append(pieces, piece{begin, to})
		}
		from, begin = to, -1
	}
	// Only line breaks and sentence marks can end a passage: jump from one
	// to the next.
	for i := 0; i < len(page); {
		k := strings.IndexAny(page[i:], ".?!\n")
		if k < 0 {
			break
		}
		i += k
		if begin < 0 {
			begin = firstNonSpace(page, from, i)
		}
		if begin < 0 {
			i++
			continue
		}
		if page[i] == '\n' {
			if lineEndsPassage(page, begin, i) {
				emit(i)
			}
			i++
			continue
		}
		if sentenceEndsAt(page, begin, i) {
			end := i + 1
			for end < len(page) && strings.IndexByte(`"')]`, page[end]) >= 0 {
				end++
			}
			emit(end)
			i = end
			continue
		}
		i++
	}
	if begin < 0 {
		begin = firstNonSpace(page, from, len(page))
	}
	emit(len(page))

	// Join short pieces to the next, split long ones at clause boundaries.
	var joined []piece
	for i := 0; i < len(pieces); i++ {
		p := pieces[i]
		for i+1 < len(pieces) && shorterThan(page[p.from:p.to], minPassageRunes) {
			i++
			p.to = pieces[i].to
		}
		joined = append(joined, p)
	}
	var split []piece
	for _, p := range joined {
		split = append(split, splitLong(page, p.from, p.to, ascii)...)
	}

	// Code point offsets, counted incrementally (byte offsets when the page
	// is ASCII).
	if ascii {
		out = make([]span, 0, len(split))
		for _, p := range split {
			out = append(out, span{start: p.from, end: p.to, text: page[p.from:p.to]})
		}
		return out, len(page)
	}
	runes, at := 0, 0
	for _, p := range split {
		runes += utf8.RuneCountInString(page[at:p.from])
		start := runes
		runes += utf8.RuneCountInString(page[p.from:p.to])
		at = p.to
		out = append(out, span{start: start, end: runes, text: page[p.from:p.to]})
	}
	return out, runes + utf8.RuneCountInString(page[at:])
}

// isASCII reports whether s is all ASCII, eight bytes at a time.
func isASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if (s[i]|s[i+1]|s[i+2]|s[i+3]|s[i+4]|s[i+5]|s[i+6]|s[i+7])&0x80 != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// shorterThan reports whether s has fewer than n code points, counting them
// only when its length in bytes leaves it open.
func shorterThan(s string, n int) bool {
	switch {
	case len(s) < n:
		return true
	case len(s) >= n*utf8.UTFMax:
		return false
	}
	return utf8.RuneCountInString(s) < n
}

// firstNonSpace is the offset of the first character of page[from:to] that
// is not white space, or -1.
func firstNonSpace(page string, from, to int) int {
	for j := from; j < to; {
		r, n := rune(page[j]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(page[j:])
		}
		if !unicode.IsSpace(r) {
			return j
		}
		j += n
	}
	return -1
}

// splitLong cuts page[from:to] into pieces of at most maxPassageRunes code
// points, after the last clause boundary that keeps a piece within the
// bound, else after the last space, else at the bound. ascii says the page
// is ASCII, where a code point is a byte.
func splitLong(page string, from, to int, ascii bool) []piece {
	var out []piece
	for {
		// limit is maxPassageRunes code points on, or the end.
		limit, n := from, 0
		if ascii {
			limit, n = min(from+maxPassageRunes, to), maxPassageRunes
		}
		for limit < to && n < maxPassageRunes {
			if page[limit] < utf8.RuneSelf {
				limit++
			} else {
				_, size := utf8.DecodeRuneInString(page[limit:])
				limit += size
			}
			n++
		}
		if limit >= to {
			break
		}
		cut := lastBreak(page, from, limit)
		end := cut
		for end > from && page[end-1] == ' ' {
			end--
		}
		out = append(out, piece{from, end})
		from = cut
		for from < to && (page[from] == ' ' || page[from] == '\n' || page[from] == '\t' || page[from] == '\r') {
			from++
		}
	}
	if to > from {
		out = append(out, piece{from, to})
	}
	return out
}

// lastBreak is where to cut page[from:limit]: after the last "; " or ": " of
// its second half, else after the last ", " there, else after its last
// space, else at limit.
func lastBreak(page string, from, limit int) int {
	half := from + (limit-from)/2
	comma, space := -1, -1
	for k := limit - 1; k > from; k-- {
		if page[k] != ' ' {
			continue
		}
		if k > half {
			switch page[k-1] {
			case ';', ':':
				return k + 1
			case ',':
				if comma < 0 {
					comma = k + 1
				}
			}
		}
		if space < 0 {
			space = k + 1
		}
		if k <= half && space > 0 {
			break
		}
	}
	switch {
	case comma > 0:
		return comma
	case space > 0:
		return space
	}
	return limit
}

// lineEndsPassage reports whether the line break at byte i ends the passage
// that began at byte from: after a blank line, after a line that ends a
// clause (".", ";", ":", "?", "!"), after a short line (a heading), or
// before a line that opens a clause ("1.", "(a)", "WHEREAS").
func lineEndsPassage(page string, from, i int) bool {
	lineStart := strings.LastIndexByte(page[:i], '\n') + 1
	line := strings.TrimSpace(page[max(lineStart, from):i])
	if line == "" {
		return false
	}
	if last, _ := utf8.DecodeLastRuneInString(line); strings.ContainsRune(".;:?!", last) {
		return true
	}
	if from >= lineStart && strings.TrimSpace(page[lineStart:from]) == "" && utf8.RuneCountInString(line) < 50 {
		return true // a line of its own: a heading, a signature line
	}
	next := page[i+1:]
	if nl := strings.IndexByte(next, '\n'); nl >= 0 {
		next = next[:nl]
	}
	next = strings.TrimSpace(next)
	return next == "" || opensClause(next)
}

// opensClause reports whether a line starts a new clause: a number or a
// letter in parentheses or followed by a full stop, or a word in capitals.
func opensClause(line string) bool {
	if strings.HasPrefix(line, "(") {
		if k := strings.IndexByte(line, ')'); k > 1 && k <= 5 {
			return true
		}
	}
	j := 0
	for j < len(line) && (line[j] >= '0' && line[j] <= '9' || line[j] == '.') {
		j++
	}
	if j > 0 && j < len(line) && (line[j] == ' ' || line[j] == ')') {
		return true
	}
	word := line
	if k := strings.IndexByte(word, ' '); k >= 0 {
		word = word[:k]
	}
	return len(word) >= 4 && strings.ToUpper(word) == word && strings.ContainsFunc(word, unicode.IsLetter)
}

// abbreviations end in a full stop without ending a sentence.
var abbreviations = map[string]bool{
	"inc": true, "corp": true, "co": true, "ltd": true, "llc": true, "no": true, "nos": true,
	"mr": true, "mrs": true, "ms": true, "dr": true, "st": true, "vs": true, "v": true,
	"sec": true, "art": true, "para": true, "e.g": true, "i.e": true, "etc": true, "u.s": true,
	"jr": true, "sr": true, "approx": true, "dept": true, "fig": true, "cf": true,
}

// sentenceEndsAt reports whether the mark at byte i ends a sentence that
// began at byte from: it is followed by white space (after closing quotes
// or brackets) and then a capital, a digit or an opening bracket or quote,
// and is not the full stop of an abbreviation, an initial ("A.") or a
// clause number ("1.", "2.1.").
func sentenceEndsAt(page string, from, i int) bool {
	j := i + 1
	for j < len(page) && strings.ContainsRune("\"'”’)]", rune(page[j])) {
		j++
	}
	if j >= len(page) || (page[j] != ' ' && page[j] != '\t' && page[j] != '\n' && page[j] != '\r') {
		return false
	}
	for j < len(page) && (page[j] == ' ' || page[j] == '\t' || page[j] == '\n' || page[j] == '\r') {
		j++
	}
	if j < len(page) {
		r, _ := utf8.DecodeRuneInString(page[j:])
		if !unicode.IsUpper(r) && !unicode.IsDigit(r) && !strings.ContainsRune("(\"“‘'[", r) {
			return false
		}
	}
	if page[i] != '.' {
		return true
	}
	// The word before the full stop.
	k := i
	for k > from {
		r, n := utf8.DecodeLastRuneInString(page[:k])
		if unicode.IsSpace(r) || r == '(' {
			break
		}
		k -= n
	}
	word := strings.ToLower(page[k:i])
	if abbreviations[word] {
		return false
	}
	if n := utf8.RuneCountInString(word); n == 1 && unicode.IsLetter([]rune(word)[0]) {
		return false // an initial
	}
	if strings.Contains(word, ".") && len(word) <= 6 {
		return false // "a.t", "u.s.a"
	}
	if word != "" && strings.Trim(word, "0123456789.") == "" && k == from {
		return false // a clause number opening the passage
	}
	return true
}

// minRelocatedRunes is the shortest quote that moves a citation: shorter
// words ("Delaware", "30 days") stand in too many passages to say which one
// the model meant.
const minRelocatedRunes = 16

// minRelocatedWords is the fewest words, other than filler, of a quote that
// moves a citation by the words it shares with a passage rather than as
// written; a passage must hold four in five of them.
const minRelocatedWords = 4

// holding finds the passage whose text holds words when cited's does not:
// a model copies a sentence and gives the id of a neighbour, or of a
// passage it read for another rule. Words are compared as written, then
// with case, quotes, dashes and white space folded, and last by the words
// they share, for a quote that changed a word or two ("The annual fee"
// for "an annual fee"): a passage holding four in five of its words, and
// more of them than cited. Of several passages, the nearest cited in the
// material's order is taken. It reports false when cited holds the words,
// when they are too short to tell, or when no passage holds them.
func (s *passageSet) holding(words string, cited passage) (passage, bool) {
	want := foldQuote(words)
	if strings.Contains(foldQuote(cited.text), want) {
		return passage{}, false
	}
	if utf8.RuneCountInString(want) >= minRelocatedRunes {
		if i := s.nearest(cited, func(p passage) int {
			if strings.Contains(p.text, words) || strings.Contains(foldQuote(p.text), want) {
				return 1
			}
			return 0
		}); i >= 0 {
			return s.list[i], true
		}
	}
	quoted := contentWordSet(words)
	if len(quoted) < minRelocatedWords {
		return passage{}, false
	}
	need := (4*len(quoted) + 4) / 5
	if shared := sharedWordCount(quoted, cited.text); shared >= need {
		return passage{}, false
	}
	i := s.nearest(cited, func(p passage) int {
		if n := sharedWordCount(quoted, p.text); n >= need {
			return n
		}
		return 0
	})
	if i < 0 {
		return passage{}, false
	}
	return s.list[i], true
}

// maxUnrelatedWords is the most words, other than filler, a cited passage
// may share with the rule and the rationale together and still be taken for
// one the verdict is not about: a citation by id alone that shares at most
// this many is resolved by the rationale (spokenOf).
const maxUnrelatedWords = 1

// spokenOf finds the passage a rationale speaks of when a citation by id
// alone names one the verdict is not about: a small model writes "the
// agreement is governed by the laws of the State of Delaware" and cites a
// late-fee sentence, its ids being opaque to it. cited must share at most
// maxUnrelatedWords words with about (the rule's words and the
// rationale's); the passage taken shares at least minRelocatedWords of the
// rationale's, more than any other passage does, and is not in taken (the
// passages the verdict cites already). It reports false when no passage
// stands out, leaving the model's citation as it is.
func (s *passageSet) spokenOf(rationale, about map[string]bool, cited passage, taken map[string]bool) (passage, bool) {
	if len(rationale) < minRelocatedWords || sharedWordCount(about, cited.text) > maxUnrelatedWords {
		return passage{}, false
	}
	best, top, runnerUp := -1, 0, 0
	for i, p := range s.list {
		if taken[p.id] {
			continue
		}
		switch n := sharedWordCount(rationale, p.text); {
		case n > top:
			best, top, runnerUp = i, n, top
		case n > runnerUp:
			runnerUp = n
		}
	}
	if best < 0 || top < minRelocatedWords || top == runnerUp {
		return passage{}, false
	}
	return s.list[best], true
}

// nearest is the index of the passage with the highest positive score, of
// equals the one nearest cited in the material's order; -1 when none
// scores.
func (s *passageSet) nearest(cited passage, score func(passage) int) int {
	from := s.byID[cited.id]
	best, bestScore, bestDist := -1, 0, 0
	for i, p := range s.list {
		dist := i - from
		if dist < 0 {
			dist = -dist
		}
		n := score(p)
		if n > bestScore || n == bestScore && n > 0 && dist < bestDist {
			best, bestScore, bestDist = i, n, dist
		}
	}
	return best
}

// contentWordSet is the distinct words of s other than filler.
func contentWordSet(s string) map[string]bool {
	set := make(map[string]bool)
	for _, w := range words(s) {
		if !fillerWords[w] {
			set[w] = true
		}
	}
	return set
}

// sharedWordCount counts the distinct words of text in set.
func sharedWordCount(set map[string]bool, text string) int {
	seen := make(map[string]bool)
	for _, w := range words(text) {
		if set[w] && !seen[w] {
			seen[w] = true
		}
	}
	return len(seen)
}

// foldQuote is how a quote is compared with a passage when it is not found
// as written: lower case, typographic quotes and dashes as plain ones, and
// every run of white space (a PDF's line breaks) as one space, trimmed.
func foldQuote(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range strings.TrimSpace(s) {
		switch {
		case unicode.IsSpace(r):
			space = true
			continue
		case r == '‘' || r == '’' || r == '′':
			r = '\''
		case r == '“' || r == '”' || r == '″':
			r = '"'
		case r == '–' || r == '—' || r == '‐' || r == '‑':
			r = '-'
		default:
			r = unicode.ToLower(r)
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
