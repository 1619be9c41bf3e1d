package anchor

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Compare lists what span, a document's text, says differently from quote,
// the words a model gave for it. It looks at what changes the meaning of a
// clause when misquoted and ignores the rest (white space, typography,
// case, dropped or reworded filler):
//
//   - "date": a date the quote gives and the span does not ("30 April
//     2024" and "April 30, 2024" are the same date, "April 2024" agrees
//     with both);
//   - "amount": a sum of money or a percentage ("$540", "EUR 12,400.00",
//     "1.5%", "ten percent", "Four Hundred Dollars"); an amount matches the
//     same figure written without its currency on the other side;
//   - "number": any other figure, in digits or words ("three (3)" says 3,
//     once, however often it is written). A date, amount or number that
//     only the span gives is reported only beside the quote's own in its
//     place: a quote that leaves a figure out does not contradict it;
//   - "negation": the sides have a different number of negating words
//     ("not", "no", "never", "neither", "nor", "without", "none", "cannot",
//     "non-", contractions in "n't"); one negating word in place of another
//     keeps the sense and is no difference;
//   - "name": a capitalised word of the quote (other than at the start of a
//     sentence, and other than function words) that the span lacks, paired
//     with the span's own name in its place if it has one ("New York" for
//     "California"); a name of the span that the quote lacks counts only
//     where the quote puts a name of its own, or has no case to tell
//     names by, in its place. A word one or two letters off (a typo) or
//     differing in letters OCR confuses ("rn" and "m", "1" and "l", "5"
//     and "S") is the same word, and a negating word so garbled still
//     negates.
//
// Differences are given in the order found, a quote's item paired with the
// span's item of the same kind that it stands in place of. Text written in
// capitals only, or in small letters only, says nothing about names.
func Compare(quote, span string) []Difference {
	q, s := extractFacts(quote), extractFacts(span)
	var out []Difference
	out = append(out, pairFacts("date", unmatched(q.dates, s.dates, nil), unmatched(s.dates, q.dates, nil))...)
	out = append(out, pairFacts("amount", unmatched(q.amounts, s.amounts, s.numbers), unmatched(s.amounts, q.amounts, q.numbers))...)
	out = append(out, pairFacts("number", unmatched(q.numbers, s.numbers, s.amounts), unmatched(s.numbers, q.numbers, q.amounts))...)
	out = slices.DeleteFunc(out, func(d Difference) bool { return d.Quote == "" }) // a figure left out says nothing else
	out = append(out, negationDifferences(q.negations, s.negations)...)
	out = append(out, nameDifferences(&q, &s)...)
	if len(out) == 0 {
		return nil
	}
	return out
}

// fact is one thing a text says: its canonical key (a date as y-m-d, an
// amount as currency and value, a number as its value) and how it is
// written, with where.
type fact struct {
	key, text string
	at        int
}

// facts is what Compare extracts from one text.
type facts struct {
	dates, amounts, numbers, negations []fact
	words                              []word
	wordSet                            map[string]bool // folded words, once needed
	ocrSet                             map[string]bool // and folded as OCR confuses them
	mixedCase                          bool            // capitals and small letters: names can be told
}

// word is a word of the text (letters, digits or both).
type word struct {
	text, folded string
	at           int
	name         bool // a capitalised word that may be a name
}

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

// extractFacts finds the dates, amounts, numbers, negations and words of
// text, in one pass over its tokens. Each figure counts once: the digits
// of a date are not also a number, nor the figure of an amount.
func extractFacts(text string) facts {
	var f facts
	toks := tokenizeFacts(text)
	used := make([]bool, len(toks))
	at := func(i int) token {
		if i < 0 || i >= len(toks) || used[i] {
			return token{}
		}
		return toks[i]
	}
	add := func(list *[]fact, key string, lo, hi int) {
		*list = append(*list, fact{key: key, text: text[toks[lo].start:toks[hi].end], at: toks[lo].start})
		for k := lo; k <= hi; k++ {
			used[k] = true
		}
	}
	// Dates.
	for i, t := range toks {
		if used[i] {
			continue
		}
		if month := int(t.lex.month); month > 0 {
			j := i + 1
			if at(j).text == "." && t.lower != "may" {
				j++
			}
			day, year := at(j), token{}
			yearAt := j
			if day.plainDigits(1, 2) || (day.kind == figureToken && day.ordinal && len(day.figure()) <= 2) {
				yearAt = j + 1
				if at(yearAt).text == "," {
					yearAt++
				}
				if y := at(yearAt); y.plainDigits(4, 4) {
					year = y
				}
				end := j
				if year.text != "" {
					end = yearAt
				}
				if key, ok := dateKey(year.text, month, day.figure()); ok {
					add(&f.dates, key, i, end)
				}
				continue
			}
			if at(j).text == "," {
				j++
			}
			if y := at(j); y.plainDigits(4, 4) {
				// "30 April 2024", "30th day of April, 2024" or "April 2024".
				lo, d := i, ""
				p := i - 1
				if at(p).lower == "of" && at(p-1).lower == "day" {
					p -= 2
				}
				if pd := at(p); pd.kind == figureToken && len(pd.figure()) <= 2 && strings.Trim(pd.figure(), "0123456789") == "" {
					lo, d = p, pd.figure()
				}
				if key, ok := dateKey(y.text, month, d); ok {
					add(&f.dates, key, lo, j)
				}
			}
			continue
		}
		// 2024-04-30 and 30/04/2024, written without spaces.
		if t.kind == figureToken && i+4 < len(toks) {
			a, s1, b, s2, c := t, toks[i+1], toks[i+2], toks[i+3], toks[i+4]
			tight := s1.start == a.end && b.start == s1.end && s2.start == b.end && c.start == s2.end
			if tight && s1.text == s2.text && (s1.text == "-" || s1.text == "/") && b.plainDigits(1, 2) {
				if s1.text == "-" && a.plainDigits(4, 4) && c.plainDigits(1, 2) {
					if m, ok := strconv.Atoi(b.text); ok == nil {
						if key, ok := dateKey(a.text, m, c.text); ok {
							add(&f.dates, key, i, i+4)
						}
					}
				} else if s1.text == "/" && a.plainDigits(1, 2) && c.plainDigits(2, 4) {
					// Day and month in an order the text does not say: keep both.
					add(&f.dates, canonicalFigure(a.text)+"/"+canonicalFigure(b.text)+"/"+canonicalFigure(c.text), i, i+4)
				}
			}
		}
	}
	// Amounts in figures: a currency before, or a unit after.
	for i, t := range toks {
		if used[i] || t.kind != figureToken || t.ordinal {
			continue
		}
		lo, hi, cur := i, i, ""
		if p := at(i - 1); p.lex.flags&lexCurrency != 0 {
			lo, cur = i-1, p.text
			if p.text == "$" && at(i-2).lower == "us" && at(i-2).end == p.start {
				lo = i - 2
			}
		}
		value := canonicalFigure(t.text)
		if s := at(hi + 1); s.lex.flags&lexScale != 0 {
			hi++
			value += " " + s.lower
		}
		if cur == "" {
			switch u := at(hi + 1); {
			case u.text == "%" || u.lex.flags&lexUnit != 0:
				hi++
				cur = u.lower
			case u.lower == "per" && at(hi+2).lower == "cent":
				hi += 2
				cur = "%"
			}
		}
		if cur != "" {
			add(&f.amounts, currencyOf(cur)+" "+value, lo, hi)
		}
	}
	// Numbers in words, and amounts in words ("Four Hundred Dollars").
	for i := 0; i < len(toks); i++ {
		if used[i] || toks[i].lex.flags&lexNumber == 0 {
			continue
		}
		j := i
		for j+2 < len(toks) && toks[j+1].text == "-" && at(j+2).lex.flags&lexNumber != 0 {
			j += 2
		}
		for j+1 < len(toks) && at(j+1).lex.flags&lexNumber != 0 {
			j++
			for j+2 < len(toks) && toks[j+1].text == "-" && at(j+2).lex.flags&lexNumber != 0 {
				j += 2
			}
		}
		v := strconv.Itoa(spelledValue(text[toks[i].start:toks[j].end]))
		switch u := at(j + 1); {
		case u.lex.flags&lexUnit != 0:
			add(&f.amounts, currencyOf(u.lower)+" "+v, i, j+1)
		case u.lower == "per" && at(j+2).lower == "cent":
			add(&f.amounts, "% "+v, i, j+2)
		default:
			add(&f.numbers, v, i, j)
		}
		i = j
	}
	// Other figures. Digits inside a word ("Confidentia1", "5ub") are none.
	for i, t := range toks {
		if !used[i] && t.kind == figureToken {
			add(&f.numbers, canonicalFigure(t.figure()), i, i)
		}
	}
	slices.SortStableFunc(f.numbers, func(a, b fact) int { return a.at - b.at })
	slices.SortStableFunc(f.amounts, func(a, b fact) int { return a.at - b.at })

	f.mixedCase = strings.ContainsFunc(text, unicode.IsUpper) && strings.ContainsFunc(text, unicode.IsLower)
	f.words = make([]word, 0, len(toks))
	for _, t := range toks {
		if t.kind == symbolToken {
			continue
		}
		folded, lex := strings.TrimRight(strings.TrimSuffix(strings.TrimSuffix(t.lower, "'s"), "’s"), "'’"), t.lex
		if folded != t.lower {
			lex = lexicon[folded]
		}
		// Negations, and negating words OCR garbled ("witbout", "n0t").
		switch {
		case lex.flags&lexNegation != 0:
			f.negations = append(f.negations, fact{key: folded, text: t.text, at: t.start})
		case folded == "cannot" || strings.HasSuffix(folded, "n't") || strings.HasSuffix(folded, "n’t"):
			f.negations = append(f.negations, fact{key: "not", text: t.text, at: t.start})
		default:
			if neg, ok := garbledNegation(folded); ok {
				f.negations = append(f.negations, fact{key: neg, text: t.text, at: t.start})
			}
		}
		first, _ := utf8.DecodeRuneInString(t.text)
		name := f.mixedCase && t.kind == wordToken && unicode.IsUpper(first) && lex.flags&lexNotName == 0 &&
			!strings.ContainsFunc(t.text, unicode.IsDigit) && !startsSentence(text, t.start)
		f.words = append(f.words, word{text: t.text, folded: folded, at: t.start, name: name})
	}
	return f
}

// garbledNegations maps the negating words garbledNegation recognises,
// folded as OCR confuses them, to themselves.
var garbledNegations = func() map[string]string {
	m := make(map[string]string)
	for _, n := range strings.Fields("not never neither nothing nobody nowhere without cannot none") {
		m[ocrFold(n)] = n
	}
	return m
}()

// garbledNegation reports the negating word that w, a folded word other
// than one, stands for when OCR garbled it: equal after folding letters
// OCR confuses ("witbout", "n0t").
func garbledNegation(w string) (string, bool) {
	if len(w) < 3 || len(w) > 8 || !strings.ContainsRune("nwcv", rune(w[0])) {
		return "", false // no negating word folds to it
	}
	n, ok := garbledNegations[ocrFold(w)]
	return n, ok && n != w
}

// ocrSingles maps letters and digits OCR confuses to one of them; ocrFold
// also makes "rn" "m", "cl" "d" and "vv" "w".
var ocrSingles = func() (t [utf8.RuneSelf]byte) {
	for c := range t {
		t[c] = byte(c)
	}
	for _, p := range []string{"0o", "1l", "il", "|l", "5s", "8b", "hb", "uv", "ec", "tf"} {
		t[p[0]] = p[1]
	}
	return t
}()

// ocrFold is w, folded, with letters OCR confuses made one.
func ocrFold(w string) string {
	b := make([]byte, 0, len(w))
	for i := 0; i < len(w); i++ {
		c := w[i]
		if i+1 < len(w) {
			switch w[i : i+2] {
			case "rn":
				b, i = append(b, 'm'), i+1
				continue
			case "cl":
				b, i = append(b, 'd'), i+1
				continue
			case "vv":
				b, i = append(b, 'w'), i+1
				continue
			}
		}
		if c < utf8.RuneSelf {
			c = ocrSingles[c]
		}
		b = append(b, c)
	}
	return string(b)
}

// wordsOf is the words and figures of s, as written.
func wordsOf(s string) []string {
	var out []string
	for _, t := range tokenizeFacts(s) {
		if t.kind != symbolToken {
			out = append(out, t.text)
		}
	}
	return out
}

// startsSentence reports whether the word at i is the first of text or of
// a sentence, line or list item, where any word is capitalised.
func startsSentence(text string, i int) bool {
	s := strings.TrimRightFunc(text[:i], func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune(`"'“”‘’([*`, r)
	})
	if s == "" || strings.Contains(text[len(s):i], "\n") {
		return true
	}
	last, _ := utf8.DecodeLastRuneInString(s)
	return strings.ContainsRune(".!?:;)•", last)
}

// dateKey is a date as "y-m-d", "?" for a part not given; ok is false
// where the parts make no date (a 13th month, a 32nd day).
func dateKey(year string, month int, day string) (string, bool) {
	if month < 1 || month > 12 {
		return "", false
	}
	if day == "" {
		day = "?"
	} else if n, err := strconv.Atoi(day); err != nil || n < 1 || n > 31 {
		return "", false
	} else {
		day = strconv.Itoa(n)
	}
	if year == "" {
		year = "?"
	}
	return year + "-" + strconv.Itoa(month) + "-" + day, true
}

// currencyOf names the currency or unit a symbol, code or word stands for.
func currencyOf(s string) string {
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	switch {
	case s == "$" || s == "us$" || s == "usd" || strings.HasPrefix(s, "dollar"):
		return "USD"
	case s == "€" || s == "eur" || strings.HasPrefix(s, "euro"):
		return "EUR"
	case s == "£" || s == "gbp" || s == "pounds":
		return "GBP"
	case s == "¥" || s == "jpy":
		return "JPY"
	case s == "%" || s == "percent" || s == "per cent":
		return "%"
	case strings.HasPrefix(s, "cent"):
		return "cent"
	}
	return strings.ToUpper(s)
}

// canonicalFigure writes a figure without thousands separators, leading
// zeros or trailing decimal zeros, so "1,000.00" and "1000" agree.
func canonicalFigure(s string) string {
	s = strings.ReplaceAll(s, ",", "")
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if t := strings.TrimLeft(s, "0"); t != "" && !strings.HasPrefix(t, ".") {
		s = t
	} else if t == "" {
		s = "0"
	}
	return s
}

// spelledValue is the value of a number in words ("one hundred
// twenty-five"), -1 where the words make no number.
func spelledValue(s string) int {
	total, current, any := 0, 0, false
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r == ' ' || r == '-' || unicode.IsSpace(r) }) {
		if v, ok := smallNumbers[w]; ok {
			current += v
			any = true
			continue
		}
		scale, ok := scaleNumbers[w]
		if !ok {
			break // the unit after the number
		}
		if current == 0 {
			current = 1
		}
		if scale == 100 {
			current *= 100
		} else {
			total += current * scale
			current = 0
		}
		any = true
	}
	if !any {
		return -1
	}
	return total + current
}

// unmatched is the facts of a, each key once, that neither b has nor, as
// a bare figure, also: the other kind of figure on the other side
// ("$450" and "450" agree on the figure, "$450" and "€450" do not).
func unmatched(a, b, also []fact) []fact {
	keys := make(map[string]bool, len(b)+len(also))
	for _, f := range b {
		keys[f.key] = true
	}
	for _, f := range also {
		keys[figureOf(f.key)] = true
	}
	var out []fact
	seen := make(map[string]bool)
	for _, f := range a {
		if keys[f.key] || keys[figureOf(f.key)] || seen[f.key] || slices.ContainsFunc(b, func(g fact) bool { return datesAgree(f.key, g.key) }) {
			continue
		}
		seen[f.key] = true
		out = append(out, f)
	}
	return out
}

// datesAgree reports whether date keys a and b ("y-m-d", "?" for a part
// not given) agree on every part both give.
func datesAgree(a, b string) bool {
	pa, pb := strings.Split(a, "-"), strings.Split(b, "-")
	if len(pa) != 3 || len(pb) != 3 {
		return false
	}
	for i := range pa {
		if pa[i] != pb[i] && pa[i] != "?" && pb[i] != "?" {
			return false
		}
	}
	return true
}

// figureOf is the figure of an amount's key ("USD 450" gives "450"), the
// key itself for a number.
func figureOf(key string) string {
	if _, v, ok := strings.Cut(key, " "); ok {
		return v
	}
	return key
}

// pairFacts pairs what only the quote says with what only the span says,
// in order, and lists the rest on their own.
func pairFacts(kind string, quoteOnly, spanOnly []fact) []Difference {
	var out []Difference
	for i := range max(len(quoteOnly), len(spanOnly)) {
		d := Difference{Kind: kind}
		if i < len(quoteOnly) {
			d.Quote = quoteOnly[i].text
		}
		if i < len(spanOnly) {
			d.Span = spanOnly[i].text
		}
		out = append(out, d)
	}
	return out
}

// negationDifferences reports negating words one side has more of.
func negationDifferences(q, s []fact) []Difference {
	// Cancel the words both have, then one negating word in place of
	// another; what is left changes the sense.
	count := make(map[string]int)
	for _, f := range s {
		count[f.key]++
	}
	var qOnly []fact
	for _, f := range q {
		if count[f.key] > 0 {
			count[f.key]--
			continue
		}
		qOnly = append(qOnly, f)
	}
	var sOnly []fact
	for _, f := range slices.Backward(s) {
		if count[f.key] > 0 {
			count[f.key]--
			sOnly = append(sOnly, f)
		}
	}
	slices.Reverse(sOnly)
	n := min(len(qOnly), len(sOnly))
	return pairFacts("negation", qOnly[n:], sOnly[n:])
}

// nameDifferences aligns the words of quote and span and, where they
// differ, reports names of the quote that the span lacks anywhere (paired
// with the span's names in the same place), and names of the span that
// the quote replaced with words of its own.
func nameDifferences(q, s *facts) []Difference {
	var out []Difference
	for _, h := range wordHunks(q.words, s.words) {
		qw, sw := q.words[h.q0:h.q1], s.words[h.s0:h.s1]
		qn := runsOf(qw, func(w word) bool { return w.name && !hasWord(s, w.folded) })
		sn := runsOf(sw, func(w word) bool { return w.name && !hasWord(q, w.folded) })
		for i := range max(len(qn), len(sn)) {
			d := Difference{Kind: "name"}
			if i < len(qn) {
				d.Quote = qn[i]
			}
			if i < len(sn) {
				d.Span = sn[i]
			}
			if d.Quote == "" {
				// The span's name counts only where the quote, having no
				// case to tell its names by, says something else instead.
				if q.mixedCase {
					break
				}
				if d.Quote = strings.Join(runsOf(qw, func(w word) bool {
					return !notNames[w.folded] && !hasWord(s, w.folded)
				}), " "); d.Quote == "" {
					break
				}
			}
			out = append(out, d)
		}
	}
	return out
}

// hunk is a stretch where the words of quote and span differ: quote words
// [q0, q1) stand where the span has words [s0, s1).
type hunk struct{ q0, q1, s0, s1 int }

// maxAlignedWords bounds the word alignment's table; longer texts are
// compared as one stretch.
const maxAlignedWords = 1 << 20

// wordHunks aligns a and b by their longest common subsequence of folded
// words and returns the stretches between the words they share.
func wordHunks(a, b []word) []hunk {
	// The words both start and end with need no table.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre].folded == b[pre].folded {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf].folded == b[len(b)-1-suf].folded {
		suf++
	}
	am, bm := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if len(am) == 0 && len(bm) == 0 {
		return nil
	}
	if len(am) == 0 || len(bm) == 0 || len(am)*len(bm) > maxAlignedWords {
		return []hunk{{pre, pre + len(am), pre, pre + len(bm)}}
	}
	x, y := am, bm
	// lcs[i*w+j] is the length of the longest common subsequence of x[i:]
	// and y[j:].
	w := len(y) + 1
	lcs := make([]int32, (len(x)+1)*w)
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i].folded == y[j].folded {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	var out []hunk
	h := hunk{pre, pre, pre, pre}
	flush := func() {
		if h.q1 > h.q0 || h.s1 > h.s0 {
			out = append(out, h)
		}
	}
	for i, j := 0, 0; i < len(x) || j < len(y); {
		switch {
		case i < len(x) && j < len(y) && x[i].folded == y[j].folded:
			flush()
			i, j = i+1, j+1
			h = hunk{pre + i, pre + i, pre + j, pre + j}
		case j < len(y) && (i == len(x) || lcs[i*w+j+1] >= lcs[(i+1)*w+j]):
			j++
			h.s1 = pre + j
		default:
			i++
			h.q1 = pre + i
		}
	}
	flush()
	return out
}

// runsOf is the runs of consecutive words chosen by pick, each written as
// in its text.
func runsOf(ws []word, pick func(word) bool) []string {
	var runs, run []string
	for _, w := range ws {
		if pick(w) {
			run = append(run, w.text)
			continue
		}
		if len(run) > 0 {
			runs = append(runs, strings.Join(run, " "))
			run = nil
		}
	}
	if len(run) > 0 {
		runs = append(runs, strings.Join(run, " "))
	}
	return runs
}

// hasWord reports whether f has the word w, or one that differs from it
// by OCR noise or a typo: an edit or two in a word long enough to carry
// them.
func hasWord(f *facts, w string) bool {
	if f.wordSet == nil {
		f.wordSet = make(map[string]bool, len(f.words))
		for _, x := range f.words {
			f.wordSet[x.folded] = true
		}
	}
	if f.wordSet[w] {
		return true
	}
	if f.ocrSet == nil {
		f.ocrSet = make(map[string]bool, len(f.wordSet))
		for o := range f.wordSet {
			f.ocrSet[ocrFold(o)] = true
		}
	}
	if f.ocrSet[ocrFold(w)] {
		return true
	}
	n := utf8.RuneCountInString(w)
	if n < 5 {
		return false
	}
	limit := 1
	if n >= 9 {
		limit = 2
	}
	wr := []rune(w)
	for o := range f.wordSet {
		if abs(utf8.RuneCountInString(o)-n) <= limit && levenshteinWithin(wr, []rune(o), limit) {
			return true
		}
	}
	return false
}

// levenshteinWithin reports whether a and b are within k edits.
func levenshteinWithin(a, b []rune, k int) bool {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		best := cur[0]
		for j := 1; j <= len(b); j++ {
			v := prev[j-1]
			if a[i-1] != b[j-1] {
				v = 1 + min(prev[j-1], prev[j], cur[j-1])
			}
			cur[j] = v
			best = min(best, v)
		}
		if best > k {
			return false
		}
		prev, cur = cur, prev
	}
	return prev[len(b)] <= k
}
