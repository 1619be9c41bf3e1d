package engine

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Passage bounds.
const (
	// maxPassageRunes splits a longer sentence at a clause boundary (";",
	// ":" or ", ") so that a citation stays focused.
	maxPassageRunes = 400
	// minPassageRunes joins a shorter piece (a heading, a clause number) to
	// the passage after it on the same page.
	minPassageRunes = 24
)

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
