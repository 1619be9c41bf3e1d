package anchor

import (
	"encoding/binary"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// normalize folds s into the form quotes and documents are compared in:
//
//   - every run of Unicode white space (form feeds and newlines included)
//     becomes one ' ', and leading and trailing white space is dropped;
//   - typographic single quotes, primes and single guillemets become the
//     apostrophe ('), double ones and guillemets the double quote (");
//   - hyphen and dash variants and the minus sign become '-';
//   - the ellipsis '…' becomes "...";
//   - invisible formatting characters (soft hyphen, zero-width space and
//     joiners, word joiner, byte order mark) are dropped;
//   - letters are case folded: runes equal under unicode.SimpleFold (the
//     relation strings.EqualFold uses) fold to the same rune.
//
// When withOrigin is set it also returns a map giving, for every byte of the
// result, the byte offset in s of the rune that produced it, so a match found in
// normalised text can be mapped back to the verbatim span. Invalid UTF-8
// bytes become U+FFFD, one per byte, as Go's decoding counts them.
func normalize(s string, withOrigin bool) (string, originMap) {
	out := make([]byte, 0, len(s))
	var orig originMap
	// emitted records that out[at:] came from the rune at offset from.
	emitted := func(at, from int) {
		if withOrigin {
			orig.add(at, len(out), from)
		}
	}
	pendingSpace := -1 // offset of the first rune of a pending white-space run
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			m := asciiFold[c]
			if m == ' ' {
				if pendingSpace < 0 {
					pendingSpace = i
				}
				i++
				continue
			}
			if pendingSpace >= 0 {
				if len(out) > 0 {
					out = append(out, ' ')
					emitted(len(out)-1, pendingSpace)
				}
				pendingSpace = -1
			}
			// The run of ASCII from here up to two white space bytes in a row
			// or a non-ASCII rune folds byte by byte, a single white space
			// byte to ' ' where it is: most text is made of such runs.
			n := len(out)
			j := i
			// Eight bytes at a time while they are ASCII without two white
			// space bytes in a row, the last of them followed by more.
			for ; j+8 < len(s); j += 8 {
				w := binary.LittleEndian.Uint64([]byte(s[j : j+8]))
				if w&highBits != 0 {
					break
				}
				sp := spaceBytes(w)
				if sp&(sp>>8) != 0 || (sp>>63 != 0 && asciiClass[s[j+8]] != plainASCII) {
					break
				}
				out = binary.LittleEndian.AppendUint64(out, foldWord(w))
			}
			j = max(j, i+1)
			for j+1 < len(s) && asciiRunContinues[asciiClass[s[j]]][asciiClass[s[j+1]]] {
				j++
			}
			if j+1 == len(s) && asciiClass[s[j]] == plainASCII {
				j++
			}
			tail := len(out)
			out = append(out, s[i+tail-n:j]...)
			run := out[tail:]
			for k, b := range run {
				run[k] = asciiFold[b&0x7F]
			}
			if withOrigin {
				orig.addRun(n, i, j-i)
			}
			i = j
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			if pendingSpace < 0 {
				pendingSpace = i
			}
			i += w
			continue
		}
		repl, keep := mapRune(r)
		if !keep {
			i += w
			continue
		}
		if pendingSpace >= 0 {
			if len(out) > 0 {
				out = append(out, ' ')
				emitted(len(out)-1, pendingSpace)
			}
			pendingSpace = -1
		}
		n := len(out)
		if repl != "" {
			out = append(out, repl...)
		} else {
			out = utf8.AppendRune(out, foldRune(r))
		}
		emitted(n, i)
		i += w
	}
	return string(out), orig
}

// originMap maps each byte of a normalised text to the byte offset in the
// source text of the rune that produced it. The offset mostly advances by
// one byte with each byte of normalised text (ASCII maps byte for byte), so
// only the bytes where it does not are stored, a small part of the text.
type originMap struct {
	at   []int32 // offsets in the normalised text, increasing, at[0] == 0
	from []int32 // source offset of the byte at at[k]
	next int     // the source offset that would continue the last segment
}

// add records that the normalised bytes [lo, hi) all came from the rune at
// source offset from.
func (m *originMap) add(lo, hi, from int) {
	for i := lo; i < hi; i++ {
		m.addRun(i, from, 1)
	}
}

// addRun records that the n normalised bytes from at came from as many
// source bytes from from.
func (m *originMap) addRun(at, from, n int) {
	if len(m.at) == 0 || from != m.next {
		m.at = append(m.at, int32(at))
		m.from = append(m.from, int32(from))
	}
	m.next = from + n
}

// of is the source offset of normalised byte i.
func (m *originMap) of(i int) int {
	k, found := slices.BinarySearch(m.at, int32(i))
	if !found {
		k--
	}
	return int(m.from[k]) + i - int(m.at[k])
}

// firstAtOrAfter is the first of the n normalised bytes whose source
// offset is off or more, n when there is none.
func (m *originMap) firstAtOrAfter(off, n int) int {
	// Source offsets never decrease, so neither do the last ones of the
	// segments.
	lastOf := func(k int) int {
		end := n
		if k+1 < len(m.at) {
			end = int(m.at[k+1])
		}
		return int(m.from[k]) + end - 1 - int(m.at[k])
	}
	k := sort.Search(len(m.at), func(k int) bool { return lastOf(k) >= off })
	if k == len(m.at) {
		return n
	}
	return int(m.at[k]) + max(0, off-int(m.from[k]))
}

// expand is the source offset of each of the n normalised bytes.
func (m *originMap) expand(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(m.of(i))
	}
	return out
}

// asciiFold maps ASCII to its normalised form: white space to ' ', capital
// letters to small ones, everything else to itself.
var asciiFold = func() (t [utf8.RuneSelf]byte) {
	for c := range t {
		t[c] = byte(c)
	}
	for _, c := range "\t\n\v\f\r" {
		t[c] = ' '
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = byte(c - 'A' + 'a')
	}
	return t
}()

const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// inRange has the high bit of each byte of w set where the byte lies in
// [lo, hi]; every byte of w must be ASCII.
func inRange(w uint64, lo, hi byte) uint64 {
	return (w + lowBits*uint64(0x80-lo)) &^ (w + lowBits*uint64(0x7F-hi)) & highBits
}

// spaceBytes has the high bit set of each white space byte of w, eight
// ASCII bytes.
func spaceBytes(w uint64) uint64 { return inRange(w, '\t', '\r') | inRange(w, ' ', ' ') }

// foldWord is asciiFold of each of eight ASCII bytes.
func foldWord(w uint64) uint64 {
	w |= inRange(w, 'A', 'Z') >> 2            // capital letters: add 0x20
	ctl := inRange(w, '\t', '\r') >> 7 * 0xFF // white space other than ' '
	return w&^ctl | ctl&(lowBits*' ')
}

// Classes of bytes for the ASCII runs of normalize.
const (
	plainASCII = iota // ASCII other than white space
	spaceASCII        // ASCII white space
	notASCII
)

var asciiClass = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c >= utf8.RuneSelf:
			t[c] = notASCII
		case asciiFold[c] == ' ':
			t[c] = spaceASCII
		}
	}
	return t
}()

// asciiRunContinues[a][b] says whether a byte of class a, followed by one
// of class b, belongs to an ASCII run: plain ASCII does, and so does
// white space standing alone before plain ASCII.
var asciiRunContinues = [3][3]bool{
	plainASCII: {true, true, true},
	spaceASCII: {plainASCII: true},
}

// mapRune says what a non-ASCII, non-space rune normalises to: repl when it
// is replaced by fixed text, keep=false when it is dropped, and repl=""
// with keep=true when it is kept (case folded).
func mapRune(r rune) (repl string, keep bool) {
	switch r {
	case '\u2018', '\u2019', '\u201A', '\u201B', '\u2032', '\u02BC', '\u2039', '\u203A':
		return "'", true
	case '\u201C', '\u201D', '\u201E', '\u201F', '\u2033', '\u00AB', '\u00BB':
		return `"`, true
	case '\u2010', '\u2011', '\u2012', '\u2013', '\u2014', '\u2015', '\u2212', '\uFE58', '\uFE63', '\uFF0D':
		return "-", true
	case '\u2026':
		return "...", true
	case '\u00AD', '\u200B', '\u200C', '\u200D', '\u2060', '\uFEFF':
		return "", false
	}
	return "", true
}

// foldRune maps r to one representative of its case-folding orbit: the
// lower case of the orbit's smallest rune. For ASCII letters that is the
// small letter, as in the ASCII fast path of normalize.
func foldRune(r rune) rune {
	if caseless(r) {
		return r
	}
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return unicode.ToLower(least)
}

// caseless reports ranges known to hold no cased letters (CJK, Yi, Hangul),
// sparing the orbit walk for text written in them.
func caseless(r rune) bool {
	return (0x2E80 <= r && r <= 0xA63F) || (0xAC00 <= r && r <= 0xD7A3)
}

// trimQuote removes what a model tends to add around a quote it copied:
// quotation marks, backticks, markdown emphasis, leading and trailing
// ellipses and trailing sentence punctuation. s is already normalised.
func trimQuote(s string) string { return strings.TrimFunc(s, trimmable) }

func trimmable(r rune) bool {
	switch r {
	case ' ', '"', '\'', '`', '*', '.', ',', ';', ':':
		return true
	}
	return false
}

// isWordRune reports whether r belongs inside a word.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiWord[r]
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r)
}

var asciiWord = func() (t [utf8.RuneSelf]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	return t
}()

// asciiWordByte is asciiWord for every byte value, false for those that
// are not ASCII.
var asciiWordByte = func() (t [256]bool) {
	copy(t[:], asciiWord[:])
	return t
}()

// standalone reports runes of scripts written without spaces between words;
// each such rune is a word of its own, so CJK or Thai text still splits into
// tokens and word boundaries.
func standalone(r rune) bool {
	if r < 0x0E00 {
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana,
		unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar)
}

// joins reports whether a followed by b lies inside one word, so a boundary
// between them would cut the word.
func joins(a, b rune) bool {
	return isWordRune(a) && isWordRune(b) && !standalone(a) && !standalone(b)
}

// wordAligned reports whether s[i:j] neither starts nor ends inside a word.
func wordAligned(s string, i, j int) bool {
	if i > 0 && i < len(s) {
		a, _ := utf8.DecodeLastRuneInString(s[:i])
		b, _ := utf8.DecodeRuneInString(s[i:])
		if joins(a, b) {
			return false
		}
	}
	if j > 0 && j < len(s) {
		a, _ := utf8.DecodeLastRuneInString(s[:j])
		b, _ := utf8.DecodeRuneInString(s[j:])
		if joins(a, b) {
			return false
		}
	}
	return true
}
