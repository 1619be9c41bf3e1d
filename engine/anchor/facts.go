package anchor

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

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

// extractFacts finds the dates, amounts, numbers, negations and words of
// text, in one pass over its tokens. Each figure counts once: the digits
// of a date are not also a number, nor the figure of an amount.
func extractFacts(text string) facts {
	toks := tokenizeFacts(text)
	s := &factScanner{text: text, toks: toks, used: make([]bool, len(toks))}
	// The order matters: a kind of fact takes its tokens before the next
	// looks, so dates come before amounts, and amounts before numbers.
	s.dates()
	s.figureAmounts()
	s.spelledNumbers()
	s.otherFigures()
	slices.SortStableFunc(s.f.numbers, func(a, b fact) int { return a.at - b.at })
	slices.SortStableFunc(s.f.amounts, func(a, b fact) int { return a.at - b.at })

	s.f.mixedCase = strings.ContainsFunc(text, unicode.IsUpper) && strings.ContainsFunc(text, unicode.IsLower)
	s.words()
	return s.f
}

// factScanner is extractFacts at work on one text: used marks the tokens a
// fact has taken, so that no later fact takes them again.
type factScanner struct {
	text string
	toks []token
	used []bool
	f    facts
}

// at is token i, or none where i is out of range or taken.
func (s *factScanner) at(i int) token {
	if i < 0 || i >= len(s.toks) || s.used[i] {
		return token{}
	}
	return s.toks[i]
}

// add records a fact written by tokens lo to hi and takes them.
func (s *factScanner) add(list *[]fact, key string, lo, hi int) {
	*list = append(*list, fact{key: key, text: s.text[s.toks[lo].start:s.toks[hi].end], at: s.toks[lo].start})
	for k := lo; k <= hi; k++ {
		s.used[k] = true
	}
}

// dates finds dates with a month's name, and dates written in figures.
func (s *factScanner) dates() {
	for i, t := range s.toks {
		if s.used[i] {
			continue
		}
		if month := int(t.lex.month); month > 0 {
			s.namedMonthDate(i, t, month)
			continue
		}
		s.figureDate(i, t)
	}
}

// namedMonthDate finds a date around the month's name at token i: "April
// 30, 2024", "April 30th", "30 April 2024", "30th day of April, 2024" or
// "April 2024".
func (s *factScanner) namedMonthDate(i int, t token, month int) {
	j := i + 1
	if s.at(j).text == "." && t.lower != "may" {
		j++
	}
	day, year := s.at(j), token{}
	yearAt := j
	if day.plainDigits(1, 2) || (day.kind == figureToken && day.ordinal && len(day.figure()) <= 2) {
		yearAt = j + 1
		if s.at(yearAt).text == "," {
			yearAt++
		}
		if y := s.at(yearAt); y.plainDigits(4, 4) {
			year = y
		}
		end := j
		if year.text != "" {
			end = yearAt
		}
		if key, ok := dateKey(year.text, month, day.figure()); ok {
			s.add(&s.f.dates, key, i, end)
		}
		return
	}
	if s.at(j).text == "," {
		j++
	}
	if y := s.at(j); y.plainDigits(4, 4) {
		// "30 April 2024", "30th day of April, 2024" or "April 2024".
		lo, d := i, ""
		p := i - 1
		if s.at(p).lower == "of" && s.at(p-1).lower == "day" {
			p -= 2
		}
		if pd := s.at(p); pd.kind == figureToken && len(pd.figure()) <= 2 && strings.Trim(pd.figure(), "0123456789") == "" {
			lo, d = p, pd.figure()
		}
		if key, ok := dateKey(y.text, month, d); ok {
			s.add(&s.f.dates, key, lo, j)
		}
	}
}

// figureDate finds a date in figures starting at token i: 2024-04-30 and
// 30/04/2024, written without spaces.
func (s *factScanner) figureDate(i int, t token) {
	toks := s.toks
	if t.kind != figureToken || i+4 >= len(toks) {
		return
	}
	a, s1, b, s2, c := t, toks[i+1], toks[i+2], toks[i+3], toks[i+4]
	tight := s1.start == a.end && b.start == s1.end && s2.start == b.end && c.start == s2.end
	if !tight || s1.text != s2.text || (s1.text != "-" && s1.text != "/") || !b.plainDigits(1, 2) {
		return
	}
	if s1.text == "-" && a.plainDigits(4, 4) && c.plainDigits(1, 2) {
		if m, ok := strconv.Atoi(b.text); ok == nil {
			if key, ok := dateKey(a.text, m, c.text); ok {
				s.add(&s.f.dates, key, i, i+4)
			}
		}
	} else if s1.text == "/" && a.plainDigits(1, 2) && c.plainDigits(2, 4) {
		// Day and month in an order the text does not say: keep both.
		s.add(&s.f.dates, canonicalFigure(a.text)+"/"+canonicalFigure(b.text)+"/"+canonicalFigure(c.text), i, i+4)
	}
}

// figureAmounts finds amounts in figures: a currency before, or a unit
// after.
func (s *factScanner) figureAmounts() {
	for i, t := range s.toks {
		if s.used[i] || t.kind != figureToken || t.ordinal {
			continue
		}
		lo, hi, cur := i, i, ""
		if p := s.at(i - 1); p.lex.flags&lexCurrency != 0 {
			lo, cur = i-1, p.text
			if p.text == "$" && s.at(i-2).lower == "us" && s.at(i-2).end == p.start {
				lo = i - 2
			}
		}
		value := canonicalFigure(t.text)
		if sc := s.at(hi + 1); sc.lex.flags&lexScale != 0 {
			hi++
			value += " " + sc.lower
		}
		if cur == "" {
			switch u := s.at(hi + 1); {
			case u.text == "%" || u.lex.flags&lexUnit != 0:
				hi++
				cur = u.lower
			case u.lower == "per" && s.at(hi+2).lower == "cent":
				hi += 2
				cur = "%"
			}
		}
		if cur != "" {
			s.add(&s.f.amounts, currencyOf(cur)+" "+value, lo, hi)
		}
	}
}

// spelledNumbers finds numbers in words, and amounts in words ("Four
// Hundred Dollars").
func (s *factScanner) spelledNumbers() {
	toks := s.toks
	for i := 0; i < len(toks); i++ {
		if s.used[i] || toks[i].lex.flags&lexNumber == 0 {
			continue
		}
		j := i
		for j+2 < len(toks) && toks[j+1].text == "-" && s.at(j+2).lex.flags&lexNumber != 0 {
			j += 2
		}
		for j+1 < len(toks) && s.at(j+1).lex.flags&lexNumber != 0 {
			j++
			for j+2 < len(toks) && toks[j+1].text == "-" && s.at(j+2).lex.flags&lexNumber != 0 {
				j += 2
			}
		}
		v := strconv.Itoa(spelledValue(s.text[toks[i].start:toks[j].end]))
		switch u := s.at(j + 1); {
		case u.lex.flags&lexUnit != 0:
			s.add(&s.f.amounts, currencyOf(u.lower)+" "+v, i, j+1)
		case u.lower == "per" && s.at(j+2).lower == "cent":
			s.add(&s.f.amounts, "% "+v, i, j+2)
		default:
			s.add(&s.f.numbers, v, i, j)
		}
		i = j
	}
}

// otherFigures takes the figures no date or amount took as numbers. Digits
// inside a word ("Confidentia1", "5ub") are none.
func (s *factScanner) otherFigures() {
	for i, t := range s.toks {
		if !s.used[i] && t.kind == figureToken {
			s.add(&s.f.numbers, canonicalFigure(t.figure()), i, i)
		}
	}
}

// words lists the words of the text, folded, marking those that may be
// names, and finds the negations among them. It reads f.mixedCase.
func (s *factScanner) words() {
	f := &s.f
	f.words = make([]word, 0, len(s.toks))
	for _, t := range s.toks {
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
			!strings.ContainsFunc(t.text, unicode.IsDigit) && !startsSentence(s.text, t.start)
		f.words = append(f.words, word{text: t.text, folded: folded, at: t.start, name: name})
	}
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
