package anchor

import (
	"regexp"
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
	out = append(out, nameDifferences(q, s)...)
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
	wordSet                            map[string]bool // folded words, and folded as OCR confuses them
	mixedCase                          bool            // capitals and small letters: names can be told
}

// word is a run of letters (and digits) of the text.
type word struct {
	text, folded string
	at           int
	name         bool // a capitalised word that may be a name
}

const monthPattern = `(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?`

var (
	// Dates, longest forms first: "April 30, 2024", "30th day of April,
	// 2024", "April 2024", "April 30", "2024-04-30", "30/04/2024".
	dateRE = regexp.MustCompile(`(?i)\b(?:` +
		`(?P<m1>` + monthPattern + `)\s+(?P<d1>\d{1,2})(?:st|nd|rd|th)?(?:\s*,\s*|\s+)(?P<y1>\d{4})` +
		`|(?P<d2>\d{1,2})(?:st|nd|rd|th)?\s+(?:day\s+of\s+)?(?P<m2>` + monthPattern + `)(?:\s*,\s*|\s+)(?P<y2>\d{4})` +
		`|(?P<m3>` + monthPattern + `)\s*,?\s+(?P<y3>\d{4})` +
		`|(?P<m4>` + monthPattern + `)\s+(?P<d4>\d{1,2})(?:st|nd|rd|th)?` +
		`|(?P<y5>\d{4})-(?P<m5>\d{1,2})-(?P<d5>\d{1,2})` +
		`|(?P<a6>\d{1,2})[/.](?P<b6>\d{1,2})[/.](?P<y6>\d{2,4})` +
		`)\b`)
	figure = `\d(?:[\d,]*\d)?(?:\.\d+)?`
	// Amounts: a currency before the figure, or a unit after it.
	amountRE = regexp.MustCompile(`(?i)(?:(?P<cur>[$€£¥]|\bus\$|\b(?:usd|eur|gbp|chf|cad|aud|jpy)\b)\s?(?P<v1>` + figure + `)(?:\s?(?P<s1>million|billion|thousand)\b)?` +
		`|\b(?P<v2>` + figure + `)(?:\s?(?P<s2>million|billion|thousand)\b)?\s?(?P<unit>%|percent\b|per\s+cent\b|dollars?\b|euros?\b|pounds\b|cents?\b))`)
	numberRE = regexp.MustCompile(figure)
	// Numbers in words, such as "twenty-five" or "one hundred fifty".
	numberWords = `(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion)`
	spelledRE   = regexp.MustCompile(`(?i)\b` + numberWords + `(?:(?:\s+|-)` + numberWords + `)*\b(?:\s+(?P<unit>percent\b|per\s+cent\b|dollars?\b|euros?\b|pounds\b))?`)
	negationRE  = regexp.MustCompile(`(?i)\b(?:not|no|never|neither|nor|without|none|nothing|nobody|nowhere|cannot|non)\b|\b\p{L}+n['’]t\b`)
	wordRE      = regexp.MustCompile(`[\p{L}\p{N}][\p{L}\p{N}\p{M}'’]*`)
)

var monthNumbers = map[string]int{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}

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
// text. Each figure counts once: digits inside a date are not also a
// number, nor the figure of an amount.
func extractFacts(text string) facts {
	var f facts
	taken := make([]bool, len(text))
	take := func(lo, hi int) bool {
		if slices.Contains(taken[lo:hi], true) {
			return false
		}
		for i := lo; i < hi; i++ {
			taken[i] = true
		}
		return true
	}
	for _, m := range dateRE.FindAllStringSubmatchIndex(text, -1) {
		if key, ok := dateKey(text, m); ok && take(m[0], m[1]) {
			f.dates = append(f.dates, fact{key: key, text: text[m[0]:m[1]], at: m[0]})
		}
	}
	for _, m := range amountRE.FindAllStringSubmatchIndex(text, -1) {
		if take(m[0], m[1]) {
			f.amounts = append(f.amounts, fact{key: amountKey(text, m), text: strings.TrimSpace(text[m[0]:m[1]]), at: m[0]})
		}
	}
	for _, m := range spelledRE.FindAllStringSubmatchIndex(text, -1) {
		v := spelledValue(text[m[0]:m[1]])
		unit := group(text, m, spelledRE, "unit")
		if v < 0 || !take(m[0], m[1]) {
			continue
		}
		if unit != "" {
			f.amounts = append(f.amounts, fact{key: currencyOf(unit) + " " + strconv.Itoa(v), text: text[m[0]:m[1]], at: m[0]})
		} else {
			f.numbers = append(f.numbers, fact{key: strconv.Itoa(v), text: text[m[0]:m[1]], at: m[0]})
		}
	}
	for _, m := range numberRE.FindAllStringIndex(text, -1) {
		// Digits inside a word ("Confidentia1", "W2") are no figure; an
		// ordinal ("2nd") is.
		before, _ := utf8.DecodeLastRuneInString(text[:m[0]])
		suffix := strings.ToLower(text[m[1]:min(len(text), m[1]+2)])
		after, _ := utf8.DecodeRuneInString(text[m[1]:])
		ordinal := (suffix == "st" || suffix == "nd" || suffix == "rd" || suffix == "th") &&
			!startsWord(text[min(len(text), m[1]+2):])
		if unicode.IsLetter(before) || (unicode.IsLetter(after) && !ordinal) {
			continue
		}
		end := m[1]
		if ordinal {
			end += 2
		}
		if take(m[0], end) {
			f.numbers = append(f.numbers, fact{key: canonicalFigure(text[m[0]:m[1]]), text: text[m[0]:end], at: m[0]})
		}
	}
	for _, m := range negationRE.FindAllStringIndex(text, -1) {
		w := strings.ToLower(text[m[0]:m[1]])
		if strings.HasSuffix(w, "n't") || strings.HasSuffix(w, "n’t") || w == "cannot" {
			w = "not"
		}
		f.negations = append(f.negations, fact{key: w, text: text[m[0]:m[1]], at: m[0]})
		taken[m[0]] = true
	}
	f.words, f.wordSet, f.mixedCase = words(text)
	// Negating words OCR or a typo garbled ("witbout", "n0t").
	for _, w := range f.words {
		if taken[w.at] && negationRE.MatchString(w.text) {
			continue
		}
		if neg, ok := garbledNegation(w.folded); ok {
			f.negations = append(f.negations, fact{key: neg, text: w.text, at: w.at})
		}
	}
	slices.SortStableFunc(f.negations, func(a, b fact) int { return a.at - b.at })
	return f
}

// negatingWords are the negations garbledNegation recognises misspelt.
var negatingWords = strings.Fields("not never neither nothing nobody nowhere without cannot none")

// garbledNegation reports the negating word that w, a folded word other
// than one, stands for when OCR garbled it: equal after folding letters
// OCR confuses ("witbout", "n0t").
func garbledNegation(w string) (string, bool) {
	f := ocrFold(w)
	for _, n := range negatingWords {
		if f == ocrFold(n) && w != n {
			return n, true
		}
	}
	return "", false
}

// ocrFolder maps letters and digits OCR confuses to one of them.
var ocrFolder = strings.NewReplacer("rn", "m", "cl", "d", "vv", "w", "0", "o", "1", "l", "i", "l", "|", "l",
	"5", "s", "8", "b", "h", "b", "u", "v", "e", "c", "t", "f")

// ocrFold is w, folded, with letters OCR confuses made one.
func ocrFold(w string) string { return ocrFolder.Replace(w) }

// words splits text into words, marking those that may be names: words
// starting with a capital, not starting a sentence, in text that mixes
// capitals and small letters.
func words(text string) ([]word, map[string]bool, bool) {
	mixed := strings.ContainsFunc(text, unicode.IsUpper) && strings.ContainsFunc(text, unicode.IsLower)
	var out []word
	set := make(map[string]bool)
	for _, m := range wordRE.FindAllStringIndex(text, -1) {
		w := text[m[0]:m[1]]
		folded := strings.ToLower(strings.TrimRight(strings.NewReplacer("’s", "", "'s", "").Replace(w), "'’"))
		first, _ := utf8.DecodeRuneInString(w)
		name := mixed && unicode.IsUpper(first) && !notNames[folded] && !startsSentence(text, m[0]) &&
			!strings.ContainsFunc(w, unicode.IsDigit)
		out = append(out, word{text: w, folded: folded, at: m[0], name: name})
		set[folded] = true
		set[ocrFold(folded)] = true
	}
	return out, set, mixed
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

// startsWord reports whether s starts with a letter or digit.
func startsWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// group is the text of the named group of regexp re in match m of text.
func group(text string, m []int, re *regexp.Regexp, name string) string {
	i := re.SubexpIndex(name)
	if i < 0 || m[2*i] < 0 {
		return ""
	}
	return text[m[2*i]:m[2*i+1]]
}

// dateKey is the date of match m of dateRE as "y-m-d", "?" for a part not
// given; ok is false where the parts are no date (a 13th month).
func dateKey(text string, m []int) (string, bool) {
	g := func(name string) string { return group(text, m, dateRE, name) }
	var y, mo, d string
	switch {
	case g("m1") != "":
		mo, d, y = g("m1"), g("d1"), g("y1")
	case g("m2") != "":
		mo, d, y = g("m2"), g("d2"), g("y2")
	case g("m3") != "":
		mo, y = g("m3"), g("y3")
	case g("m4") != "":
		mo, d = g("m4"), g("d4")
	case g("y5") != "":
		y, mo, d = g("y5"), g("m5"), g("d5")
	default: // day and month in an order the text does not say; keep both
		return canonicalFigure(g("a6")) + "/" + canonicalFigure(g("b6")) + "/" + canonicalFigure(g("y6")), true
	}
	month, err := strconv.Atoi(mo)
	if err != nil {
		month = monthNumbers[strings.ToLower(mo[:3])]
	}
	if month < 1 || month > 12 {
		return "", false
	}
	if d == "" {
		d = "?"
	} else if n, _ := strconv.Atoi(d); n < 1 || n > 31 {
		return "", false
	}
	if y == "" {
		y = "?"
	}
	return y + "-" + strconv.Itoa(month) + "-" + canonicalFigure(d), true
}

// amountKey is the currency and value of match m of amountRE.
func amountKey(text string, m []int) string {
	g := func(name string) string { return group(text, m, amountRE, name) }
	cur, value, scale := g("cur"), g("v1"), g("s1")
	if cur == "" {
		cur, value, scale = g("unit"), g("v2"), g("s2")
	}
	v := canonicalFigure(value)
	if scale != "" {
		v += " " + strings.ToLower(scale)
	}
	return currencyOf(cur) + " " + v
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
func nameDifferences(q, s facts) []Difference {
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
	if len(a)*len(b) > maxAlignedWords {
		return []hunk{{0, len(a), 0, len(b)}}
	}
	// lcs[i][j] is the length of the longest common subsequence of a[i:]
	// and b[j:].
	w := len(b) + 1
	lcs := make([]int32, (len(a)+1)*w)
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i].folded == b[j].folded {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	var out []hunk
	i, j, h := 0, 0, hunk{}
	flush := func() {
		if h.q1 > h.q0 || h.s1 > h.s0 {
			out = append(out, h)
		}
	}
	h = hunk{0, 0, 0, 0}
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i].folded == b[j].folded:
			flush()
			i, j = i+1, j+1
			h = hunk{i, i, j, j}
		case j < len(b) && (i == len(a) || lcs[i*w+j+1] >= lcs[(i+1)*w+j]):
			j++
			h.s1 = j
		default:
			i++
			h.q1 = i
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
func hasWord(f facts, w string) bool {
	if f.wordSet[w] || f.wordSet[ocrFold(w)] {
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
