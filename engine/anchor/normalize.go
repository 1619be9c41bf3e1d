package anchor

import (
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
// When withOrigin is set it also returns, for every byte of the result, the
// byte offset in s of the rune that produced it, so a match found in
// normalised text can be mapped back to the verbatim span. Invalid UTF-8
// bytes become U+FFFD, one per byte, as Go's decoding counts them.
func normalize(s string, withOrigin bool) (string, []int32) {
	out := make([]byte, 0, len(s))
	var orig []int32
	if withOrigin {
		orig = make([]int32, 0, len(s))
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
					if withOrigin {
						orig = append(orig, int32(pendingSpace))
					}
				}
				pendingSpace = -1
			}
			out = append(out, m)
			if withOrigin {
				orig = append(orig, int32(i))
			}
			i++
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
				if withOrigin {
					orig = append(orig, int32(pendingSpace))
				}
			}
			pendingSpace = -1
		}
		n := len(out)
		if repl != "" {
			out = append(out, repl...)
		} else {
			out = utf8.AppendRune(out, foldRune(r))
		}
		if withOrigin {
			for range len(out) - n {
				orig = append(orig, int32(i))
			}
		}
		i += w
	}
	return string(out), orig
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
