package anchor

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The anchoring benchmark: real contracts (testdata/contracts, see
// SOURCES.md there) and quotes made from their sentences the ways a model
// misquotes, each category from its own seed so the cases are the same on
// every run. A quote counts as anchored correctly when the span found lies
// in its source document and overlaps its source sentence; invented quotes
// come from no document and must stay unanchored.
//
// TestAnchorBenchmark asserts the targets. With ANCHORBENCH_OUT set to a
// file name it also writes the documents, the cases and this package's
// answers there as JSON, for testdata/rapidfuzz_align.py to run a second
// aligner on the same cases (ops/anchorbench.sh does both and prints the
// two side by side).

// benchCategories in the order reported.
var benchCategories = []string{
	"whitespace", "typography", "case", "ellipsis", "dropped", "changed",
	"ocr", "paraphrase", "altered", "short", "wrongdoc", "invented",
}

const casesPerCategory = 40

// anchorCase is one quote of the benchmark and, once run, what Find made
// of it.
type anchorCase struct {
	Category string `json:"category"`
	Quote    string `json:"quote"`
	Origin   string `json:"origin"`
	// Doc, Start and End are the source sentence (code points); Doc is ""
	// for an invented quote.
	Doc        string `json:"doc"`
	Start      int    `json:"start"`
	End        int    `json:"end"`
	Found      bool   `json:"found"`
	FoundDoc   string `json:"found_doc,omitempty"`
	FoundStart int    `json:"found_start,omitempty"`
	FoundEnd   int    `json:"found_end,omitempty"`
	Method     Method `json:"method,omitempty"`
	// Flagged: the span lists differences from the quote.
	Flagged bool `json:"flagged,omitempty"`
}

func (c anchorCase) correct() bool {
	return c.Found && c.Doc != "" && c.FoundDoc == c.Doc && c.FoundStart < c.End && c.Start < c.FoundEnd
}

// benchDocument is a contract with its sentences.
type benchDocument struct {
	Name      string `json:"name"`
	Text      string `json:"text"` // pages joined by "\f", as offsets count
	doc       Document
	sentences []sentence
}

type sentence struct {
	text       string
	start, end int // code points
}

func loadContracts(t testing.TB) []*benchDocument {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "contracts", "*.txt"))
	if err != nil || len(paths) < 2 {
		t.Fatalf("contracts in testdata/contracts: %v (%d found)", err, len(paths))
	}
	var docs []*benchDocument
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// Pages as the plain text marks them: runs of blank lines.
		pages := strings.Split(string(b), "\n\n\n\n\n")
		d := &benchDocument{Name: filepath.Base(p), doc: Document{Name: filepath.Base(p), Pages: pages}}
		d.Text = strings.Join(pages, "\f")
		docs = append(docs, d)
	}
	// Sentences that occur once in all the documents, so each has one
	// source span.
	count := make(map[string]int)
	for _, d := range docs {
		d.sentences = splitSentences(d.Text)
		for _, s := range d.sentences {
			n, _ := normalize(s.text, false)
			count[n]++
		}
	}
	for _, d := range docs {
		d.sentences = slices.DeleteFunc(d.sentences, func(s sentence) bool {
			n, _ := normalize(s.text, false)
			return count[n] > 1
		})
	}
	return docs
}

// splitSentences cuts text at ". ", "; " and line breaks into pieces of
// prose from 60 to 350 bytes long.
func splitSentences(text string) []sentence {
	var out []sentence
	begin := 0
	emit := func(end int) {
		s := strings.TrimSpace(text[begin:end])
		lo := begin + strings.Index(text[begin:end], s)
		begin = end
		if len(s) < 60 || len(s) > 350 || strings.ContainsAny(s, "*_[]|") {
			return
		}
		letters := 0
		for _, r := range s {
			if unicode.IsLetter(r) || r == ' ' {
				letters++
			}
		}
		if letters*10 < utf8.RuneCountInString(s)*8 {
			return
		}
		start := utf8.RuneCountInString(text[:lo])
		out = append(out, sentence{text: s, start: start, end: start + utf8.RuneCountInString(s)})
	}
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '\n' || c == '\f':
			emit(i)
		case (c == '.' || c == ';') && i+1 < len(text) && text[i+1] == ' ':
			emit(i + 1)
		}
	}
	emit(len(text))
	return out
}

// inventedSentences are contract sentences found in none of the documents.
var inventedSentences = []string{
	"The Licensee shall pay a royalty of seven percent (7%) of Net Sales within forty-five (45) days after the end of each calendar quarter.",
	"This Agreement shall be governed by the laws of the Province of Ontario and the federal laws of Canada applicable therein.",
	"The Distributor shall maintain an inventory of Products sufficient to meet sixty (60) days of forecast demand in the Territory.",
	"Any dispute arising under this Agreement shall be finally settled by arbitration in Geneva under the Rules of the International Chamber of Commerce.",
	"The Tenant shall not sublet the Premises or any part thereof without the prior written consent of the Landlord.",
	"The Supplier warrants that the Goods will be free from defects in materials and workmanship for a period of eighteen (18) months from delivery.",
	"Each party shall maintain commercial general liability insurance with limits of not less than five million dollars per occurrence.",
	"The Employee agrees not to solicit any customer of the Company for a period of twelve (12) months following the termination of employment.",
	"The Purchaser may inspect the Goods upon arrival and reject any shipment that fails to conform to the Specifications.",
	"All payments under this Agreement shall be made in Euros by wire transfer to the account designated by the Seller.",
	"The Borrower shall repay the outstanding principal amount of the Loan in twelve equal monthly installments commencing on March 1, 2021.",
	"Neither party shall be liable for any indirect, incidental or consequential damages arising out of the performance of the Services.",
	"The Franchisee shall operate the Restaurant in accordance with the standards set forth in the Operations Manual.",
	"The Licensor retains all right, title and interest in and to the Licensed Software and all improvements thereto.",
	"The Agent shall use commercially reasonable efforts to promote the sale of the Products throughout the Territory during the Term.",
	"Upon the occurrence of a Change of Control, the Company may terminate this Agreement by giving thirty (30) days written notice to the Executive.",
	"The Contractor shall comply with all applicable health and safety regulations while performing work at the Site.",
	"The Buyer shall pay a deposit equal to twenty percent (20%) of the Purchase Price upon execution of this Agreement.",
	"The Consultant shall submit a written report describing the progress of the Project at the end of each calendar month.",
	"This Lease shall commence on the first day of June and shall continue for a term of ten (10) years unless sooner terminated.",
}

// benchVocabulary is words to put in place of a quote's words.
var benchVocabulary = strings.Fields(`company party vendor client product period payment notice
	agreement obligation services manner person right fees information term written prior
	reasonable material breach effective date sole discretion promptly entire applicable`)

var ocrConfusions = [][2]string{
	{"m", "rn"}, {"rn", "m"}, {"l", "1"}, {"i", "l"}, {"e", "c"}, {"h", "b"},
	{"cl", "d"}, {"O", "0"}, {"S", "5"}, {"t", "f"}, {"a", "o"}, {"u", "v"},
}

var synonyms = [][2]string{
	{"shall", "will"}, {"Shall", "Will"}, {"may", "can"}, {"pursuant to", "under"},
	{"prior to", "before"}, {"terminate", "end"}, {"provide", "give"}, {"provided", "given"},
	{"receive", "get"}, {"such", "those"}, {"upon", "on"}, {"within", "in"}, {"hereby ", ""},
	{"Agreement", "contract"}, {"obligations", "duties"}, {"commence", "begin"},
	{"in accordance with", "as per"}, {"set forth", "stated"}, {"notwithstanding", "despite"},
}

// benchCases makes the cases: for each category, quotes from sentences
// drawn at random (seeded) from the documents.
func benchCases(docs []*benchDocument) []anchorCase {
	var cases []anchorCase
	for ci, cat := range benchCategories {
		rng := rand.New(rand.NewPCG(uint64(ci+1), 0xa11c4))
		for len(casesFor(cases, cat)) < casesPerCategory {
			d := docs[rng.IntN(len(docs))]
			s := d.sentences[rng.IntN(len(d.sentences))]
			c := anchorCase{Category: cat, Origin: d.Name, Doc: d.Name, Start: s.start, End: s.end}
			quote, ok := corrupt(rng, cat, s.text, docs)
			if !ok {
				continue
			}
			c.Quote = quote
			switch cat {
			case "short":
				// A fragment of the sentence found nowhere else, with a
				// letter left out half the time.
				n, _ := normalize(quote, false)
				if occurrencesIn(docs, n) != 1 {
					continue
				}
				if rng.IntN(2) == 0 {
					at := len(quote) - 1 - rng.IntN(3)
					c.Quote = quote[:at] + quote[at+1:]
				}
			case "wrongdoc":
				c.Origin = docs[(slices.Index(docs, d)+1+rng.IntN(len(docs)-1))%len(docs)].Name
			case "invented":
				c.Doc, c.Start, c.End = "", 0, 0
			}
			cases = append(cases, c)
		}
	}
	return cases
}

func casesFor(cases []anchorCase, cat string) []anchorCase {
	var out []anchorCase
	for _, c := range cases {
		if c.Category == cat {
			out = append(out, c)
		}
	}
	return out
}

// occurrencesIn counts where normalised text n occurs in the documents.
func occurrencesIn(docs []*benchDocument, n string) int {
	count := 0
	for _, d := range docs {
		dn, _ := normalize(d.Text, false)
		count += strings.Count(dn, n)
	}
	return count
}

// corrupt makes a quote of category cat from sentence s; ok is false when
// s does not lend itself to it.
func corrupt(rng *rand.Rand, cat, s string, docs []*benchDocument) (string, bool) {
	words := strings.Fields(s)
	interior := func() int { return 1 + rng.IntN(len(words)-2) }
	switch cat {
	case "whitespace":
		var b strings.Builder
		for i, w := range words {
			if i > 0 {
				b.WriteString([]string{" ", " ", "\n", "  ", "\t", " \n"}[rng.IntN(6)])
			}
			b.WriteString(w)
		}
		return b.String(), b.String() != s
	case "typography":
		r := strings.NewReplacer(`"`, "\u201d", "'", "\u2019", " - ", " \u2014 ", "\u201c", `"`, "\u201d", `"`, "\u2019", "'")
		q := r.Replace(s)
		if q == s || rng.IntN(2) == 0 {
			q = "\u201c" + q + "\u201d"
		}
		return q, true
	case "case":
		switch rng.IntN(3) {
		case 0:
			return strings.ToUpper(s), true
		case 1:
			return strings.ToLower(s), true
		}
		for i, w := range words {
			r, n := utf8.DecodeRuneInString(w)
			words[i] = string(unicode.ToUpper(r)) + strings.ToLower(w[n:])
		}
		return strings.Join(words, " "), true
	case "ellipsis":
		if len(words) < 14 {
			return "", false
		}
		k := (len(words)*35 + 99) / 100
		mark := []string{" … ", " ... ", " [...] ", " […] ", " . . . "}[rng.IntN(5)]
		return strings.Join(words[:k], " ") + mark + strings.Join(words[len(words)-k:], " "), true
	case "dropped":
		if len(words) < 10 {
			return "", false
		}
		for range 1 + len(words)/20 {
			i := interior()
			words = append(words[:i], words[i+1:]...)
		}
		return strings.Join(words, " "), true
	case "changed":
		if len(words) < 10 {
			return "", false
		}
		for range 1 + len(words)/25 {
			i := interior()
			w := benchVocabulary[rng.IntN(len(benchVocabulary))]
			if strings.EqualFold(w, words[i]) {
				return "", false
			}
			words[i] = w
		}
		return strings.Join(words, " "), true
	case "ocr":
		q := s
		for range 1 + len(s)/50 {
			c := ocrConfusions[rng.IntN(len(ocrConfusions))]
			idx := allIndexes(q, c[0])
			if len(idx) == 0 {
				continue
			}
			at := idx[rng.IntN(len(idx))]
			q = q[:at] + c[1] + q[at+len(c[0]):]
		}
		return q, q != s
	case "paraphrase":
		q, changed := s, 0
		for _, k := range rng.Perm(len(synonyms)) {
			if changed < 2 && strings.Contains(q, synonyms[k][0]) {
				q = strings.Replace(q, synonyms[k][0], synonyms[k][1], 1)
				changed++
			}
		}
		// And two neighbouring words swapped.
		ws := strings.Fields(q)
		if len(ws) < 8 {
			return "", false
		}
		i := interior()
		if i+1 < len(ws) {
			ws[i], ws[i+1] = ws[i+1], ws[i]
		}
		return strings.Join(ws, " "), changed > 0
	case "altered":
		return alter(rng, s)
	case "short":
		// A run of two to four words under 20 code points.
		for range 10 {
			n := 2 + rng.IntN(3)
			if len(words) <= n {
				return "", false
			}
			i := rng.IntN(len(words) - n)
			q := strings.Trim(strings.Join(words[i:i+n], " "), `.,;:"()`)
			if l := utf8.RuneCountInString(q); l < 10 || l >= defaultMinFuzzyRunes || strings.ContainsFunc(q, func(r rune) bool { return !unicode.IsLetter(r) && r != ' ' }) {
				continue
			}
			return q, true
		}
		return "", false
	case "wrongdoc":
		if rng.IntN(2) == 0 || len(words) < 10 {
			return s, true
		}
		i := interior()
		return strings.Join(append(words[:i:i], words[i+1:]...), " "), true
	case "invented":
		inv := inventedSentences[rng.IntN(len(inventedSentences))]
		switch rng.IntN(3) {
		case 0:
			return inv, true
		case 1:
			// A short run of its words, with a letter left out half the
			// time, found in no document.
			iw := strings.Fields(inv)
			n := 2 + rng.IntN(3)
			i := rng.IntN(len(iw) - n)
			q := strings.Trim(strings.Join(iw[i:i+n], " "), `.,;:"()`)
			if l := utf8.RuneCountInString(q); l < 10 || l >= defaultMinFuzzyRunes {
				return "", false
			}
			if n, _ := normalize(q, false); occurrencesIn(docs, n) > 0 {
				return "", false
			}
			if rng.IntN(2) == 0 {
				at := len(q) - 1 - rng.IntN(3)
				q = q[:at] + q[at+1:]
			}
			return q, true
		}
		// Half one sentence, half another from another document.
		other := docs[rng.IntN(len(docs))]
		o := strings.Fields(other.sentences[rng.IntN(len(other.sentences))].text)
		if len(words) < 8 || len(o) < 8 {
			return "", false
		}
		return strings.Join(words[:len(words)/2], " ") + " " + strings.Join(o[len(o)/2:], " "), true
	}
	panic("unknown category " + cat)
}

// alter changes what sentence s says in a way Compare must notice: a
// figure, a negation or a name.
func alter(rng *rand.Rand, s string) (string, bool) {
	if len(s) < 80 {
		return "", false
	}
	f := extractFacts(s)
	switch rng.IntN(3) {
	case 0: // a figure
		all := append(append([]fact(nil), f.numbers...), f.amounts...)
		for _, x := range all {
			for i, r := range x.text {
				if r >= '0' && r <= '8' {
					at := x.at + i
					return s[:at] + string(r+1) + s[at+1:], true
				}
			}
		}
	case 1: // a negation added or removed
		if len(f.negations) > 0 {
			x := f.negations[0]
			if x.key == "not" && strings.EqualFold(x.text, "not") {
				return strings.TrimRight(s[:x.at], " ") + s[x.at+len(x.text):], true
			}
		}
		for _, verb := range []string{" shall ", " will ", " may ", " is ", " are "} {
			if i := strings.Index(s, verb); i >= 0 {
				return s[:i+len(verb)] + "not " + s[i+len(verb):], true
			}
		}
	case 2: // a name
		for _, w := range f.words {
			if w.name && len(w.text) > 4 {
				repl := "Delaware"
				if strings.EqualFold(w.text, repl) {
					repl = "Nevada"
				}
				return s[:w.at] + repl + s[w.at+len(w.text):], true
			}
		}
	}
	return "", false
}

func allIndexes(s, sub string) []int {
	var out []int
	for i := 0; ; {
		j := strings.Index(s[i:], sub)
		if j < 0 {
			return out
		}
		out = append(out, i+j)
		i += j + 1
	}
}

// benchScore is recall and precision of a set of cases.
type benchScore struct{ cases, sourced, found, correct, flagged int }

func (s *benchScore) add(c anchorCase) {
	s.cases++
	if c.Doc != "" {
		s.sourced++
	}
	if c.Found {
		s.found++
	}
	if c.correct() {
		s.correct++
	}
	if c.Flagged {
		s.flagged++
	}
}

func (s benchScore) recall() float64 {
	if s.sourced == 0 {
		return 1 // nothing to find
	}
	return float64(s.correct) / float64(s.sourced)
}

func (s benchScore) precision() float64 {
	if s.found == 0 {
		return 1
	}
	return float64(s.correct) / float64(s.found)
}

func TestAnchorBenchmark(t *testing.T) {
	docs := loadContracts(t)
	cases := benchCases(docs)
	var all []Document
	for _, d := range docs {
		all = append(all, d.doc)
	}
	m := newMatcher(t, all...)
	scores := make(map[string]*benchScore)
	total := &benchScore{}
	for i := range cases {
		c := &cases[i]
		if s, ok := m.Find(Quote{Text: c.Quote, Origin: c.Origin}); ok {
			checkSpan(t, all, s)
			c.Found, c.FoundDoc, c.FoundStart, c.FoundEnd, c.Method = true, s.Document, s.Start, s.End, s.Method
			c.Flagged = len(s.Differences) > 0
		}
		if scores[c.Category] == nil {
			scores[c.Category] = &benchScore{}
		}
		scores[c.Category].add(*c)
		total.add(*c)
		if c.Found && !c.correct() {
			t.Logf("%s: %q anchored to %s [%d, %d), not its source %q [%d, %d)", c.Category, c.Quote, c.FoundDoc, c.FoundStart, c.FoundEnd, c.Doc, c.Start, c.End)
		}
	}
	t.Logf("%-11s %5s %8s %7s %9s %7s", "category", "cases", "anchored", "recall", "precision", "flagged")
	for _, cat := range append(benchCategories, "all") {
		s := total
		if cat != "all" {
			s = scores[cat]
		}
		t.Logf("%-11s %5d %8d %7.3f %9.3f %7d", cat, s.cases, s.found, s.recall(), s.precision(), s.flagged)
	}

	if out := os.Getenv("ANCHORBENCH_OUT"); out != "" {
		b, err := json.MarshalIndent(map[string]any{
			"threshold": defaultFuzzyThreshold, "documents": docs, "cases": cases,
		}, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	if r := total.recall(); r < 0.95 {
		t.Errorf("recall %.3f, want at least 0.95", r)
	}
	if p := total.precision(); p < 0.99 {
		t.Errorf("precision %.3f, want at least 0.99", p)
	}
	if n := scores["invented"].found; n > 0 {
		t.Errorf("%d invented quotes anchored, want none", n)
	}
	// Quotes that say what their sentence says are never flagged; quotes
	// that change a figure, negation or name are, wherever they anchor.
	for _, cat := range []string{"whitespace", "typography", "case"} {
		if n := scores[cat].flagged; n > 0 {
			t.Errorf("%s: %d spans flagged as saying something else, want none", cat, n)
		}
	}
	if s := scores["altered"]; s.flagged < s.found {
		t.Errorf("altered: %d of %d anchored quotes flagged, want all", s.flagged, s.found)
	}
}
