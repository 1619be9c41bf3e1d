package anchor

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// token is a word, a figure or a symbol of a text. Words and figures are
// runs of letters, digits and marks, with apostrophes before a letter
// ("don't") and "," or "." between digits ("12,400.00") inside; any other
// rune but white space is a symbol of its own.
type token struct {
	start, end int
	text       string
	lower      string
	kind       tokenKind
	ordinal    bool // a figure with an ordinal suffix ("1st")
	lex        lexEntry
}

// lexEntry is what the words Compare knows mean: one look-up per word.
type lexEntry struct {
	flags lexFlags
	month uint8 // of a month's name
}

type lexFlags uint8

const (
	lexNumber   lexFlags = 1 << iota // a number in words ("twenty") or a scale ("hundred")
	lexScale                         // thousand, million, billion
	lexUnit                          // percent, dollars... after a figure
	lexCurrency                      // $, USD... before a figure
	lexNegation
	lexNotName
)

var lexicon = func() map[string]lexEntry {
	m := make(map[string]lexEntry)
	set := func(w string, f lexFlags) {
		e := m[w]
		e.flags |= f
		m[w] = e
	}
	for w, n := range monthNumbers {
		e := m[w]
		e.month = uint8(n)
		m[w] = e
	}
	for w := range smallNumbers {
		set(w, lexNumber)
	}
	for w, v := range scaleNumbers {
		set(w, lexNumber)
		if v > 100 {
			set(w, lexScale)
		}
	}
	for w := range unitWords {
		set(w, lexUnit)
	}
	for w := range currencyWords {
		set(w, lexCurrency)
	}
	for w := range currencySymbols {
		set(w, lexCurrency)
	}
	for w := range negations {
		set(w, lexNegation)
	}
	for w := range notNames {
		set(w, lexNotName)
	}
	return m
}()

type tokenKind uint8

const (
	symbolToken tokenKind = iota
	wordToken             // starts with a letter, or mixes digits and letters ("5ub")
	figureToken           // digits, perhaps with an ordinal suffix
)

func tokenizeFacts(text string) []token {
	out := make([]token, 0, len(text)/4+1)
	for i := 0; i < len(text); {
		r, w := utf8.DecodeRuneInString(text[i:])
		if unicode.IsSpace(r) {
			i += w
			continue
		}
		if !isWordRune(r) {
			out = append(out, token{start: i, end: i + w, text: text[i : i+w], lower: text[i : i+w], lex: lexicon[text[i:i+w]]})
			i += w
			continue
		}
		start, digits, letters := i, 0, 0
		for i < len(text) {
			r, w := utf8.DecodeRuneInString(text[i:])
			switch {
			case unicode.IsDigit(r):
				digits++
			case isWordRune(r):
				letters++
			case (r == '\'' || r == '’') && nextIsLetter(text[i+w:]):
			case (r == ',' || r == '.') && digits > 0 && letters == 0 && nextIsDigit(text[i+w:]):
			default:
				goto done
			}
			i += w
		}
	done:
		t := token{start: start, end: i, text: text[start:i], kind: wordToken}
		t.lower = strings.ToLower(t.text)
		if digits == 0 {
			t.lex = lexicon[t.lower]
		}
		if first, _ := utf8.DecodeRuneInString(t.text); unicode.IsDigit(first) {
			n := len(t.lower)
			switch {
			case letters == 0:
				t.kind = figureToken
			case n > 2 && strings.Trim(t.lower[:n-2], "0123456789,.") == "" && ordinalSuffix[t.lower[n-2:]]:
				t.kind, t.ordinal = figureToken, true
			}
		}
		out = append(out, t)
	}
	return out
}

var ordinalSuffix = map[string]bool{"st": true, "nd": true, "rd": true, "th": true}

func nextIsLetter(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLetter(r)
}

func nextIsDigit(s string) bool {
	return s != "" && s[0] >= '0' && s[0] <= '9'
}

// figure is the digits of a figure token, without its ordinal suffix.
func (t token) figure() string {
	if t.ordinal {
		return t.text[:len(t.text)-2]
	}
	return t.text
}

// plainDigits reports whether t is a figure of digits alone, of between lo
// and hi of them.
func (t token) plainDigits(lo, hi int) bool {
	d := t.figure()
	return t.kind == figureToken && len(d) >= lo && len(d) <= hi && strings.Trim(d, "0123456789") == ""
}

var monthNumbers = map[string]int{
	"january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
	"august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
	"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
	"sept": 9, "oct": 10, "nov": 11, "dec": 12,
}

var smallNumbers = func() map[string]int {
	m := make(map[string]int)
	for i, w := range strings.Fields("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen") {
		m[w] = i
	}
	for i, w := range strings.Fields("twenty thirty forty fifty sixty seventy eighty ninety") {
		m[w] = 20 + 10*i
	}
	return m
}()

var scaleNumbers = map[string]int{"hundred": 100, "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}

// currencyWords come before a figure ("USD 450"); unitWords after it.
var (
	currencySymbols = map[string]bool{"$": true, "€": true, "£": true, "¥": true}
	currencyWords   = map[string]bool{"usd": true, "eur": true, "gbp": true, "chf": true, "cad": true, "aud": true, "jpy": true}
	unitWords       = map[string]bool{"percent": true, "dollar": true, "dollars": true, "euro": true, "euros": true, "pounds": true, "cent": true, "cents": true}
)

var negations = map[string]bool{"not": true, "no": true, "never": true, "neither": true, "nor": true, "without": true,
	"none": true, "nothing": true, "nobody": true, "nowhere": true, "cannot": true, "non": true}

// notNames are capitalised words that name nothing: function words, which
// start headings and sentences, and the names of months and days, which
// dates cover.
var notNames = func() map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(`a an the this that these those each every any all either both
		such other in on at of for from to by with within without into upon under over
		and or but nor not no if unless until when where while which who whom whose
		as is are was were be been being shall will may must can could should would
		it its he she they their his her we our you your i
		january february march april may june july august september october november december
		monday tuesday wednesday thursday friday saturday sunday`) {
		m[w] = true
	}
	return m
}()
