package anchor

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func newMatcher(t testing.TB, docs ...Document) *Matcher {
	t.Helper()
	m, err := New(docs, Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// checkSpan asserts what every returned span must satisfy: its text is the
// document's text at its offsets, both byte and code point, and its page is
// the one holding its start.
func checkSpan(t testing.TB, docs []Document, s Span) {
	t.Helper()
	var doc *Document
	for i := range docs {
		if docs[i].Name == s.Document {
			doc = &docs[i]
			break
		}
	}
	if doc == nil {
		t.Fatalf("span names document %q, which was not supplied", s.Document)
	}
	text := strings.Join(doc.Pages, "\f")
	if s.ByteStart < 0 || s.ByteStart > s.ByteEnd || s.ByteEnd > len(text) {
		t.Fatalf("byte range [%d, %d) outside document of %d bytes", s.ByteStart, s.ByteEnd, len(text))
	}
	if got := text[s.ByteStart:s.ByteEnd]; got != s.Text {
		t.Fatalf("text at bytes [%d, %d) is %q, span says %q", s.ByteStart, s.ByteEnd, got, s.Text)
	}
	runes := []rune(text)
	if s.Start < 0 || s.Start > s.End || s.End > len(runes) {
		t.Fatalf("code point range [%d, %d) outside document of %d code points", s.Start, s.End, len(runes))
	}
	if got := string(runes[s.Start:s.End]); got != string([]rune(s.Text)) {
		t.Fatalf("text at code points [%d, %d) is %q, span says %q", s.Start, s.End, got, s.Text)
	}
	if s.Start != utf8.RuneCountInString(text[:s.ByteStart]) {
		t.Fatalf("code point start %d disagrees with byte start %d", s.Start, s.ByteStart)
	}
	pageStart := 0
	for p, page := range doc.Pages {
		pageEnd := pageStart + len(page) + 1 // the form feed after a page belongs to it
		if s.ByteStart >= pageStart && (s.ByteStart < pageEnd || p == len(doc.Pages)-1) {
			if s.Page != p+1 {
				t.Fatalf("span starting at byte %d is on page %d, says page %d", s.ByteStart, p+1, s.Page)
			}
			return
		}
		pageStart = pageEnd
	}
	if len(doc.Pages) == 0 && s.Page == 1 {
		return
	}
	t.Fatalf("span starting at byte %d is on no page", s.ByteStart)
}

// want is what a test expects of Find.
type want struct {
	found  bool
	doc    string
	text   string // the span's verbatim text
	page   int
	method Method
}

// findCase is one Find call and what it should return.
type findCase struct {
	name  string
	quote Quote
	want  want
}

func runCases(t *testing.T, docs []Document, cases []findCase) {
	t.Helper()
	m := newMatcher(t, docs...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := m.Find(tc.quote)
			if ok != tc.want.found {
				t.Fatalf("Find(%q) found = %v (span %+v), want %v", tc.quote.Text, ok, s, tc.want.found)
			}
			if !ok {
				return
			}
			checkSpan(t, docs, s)
			if s.Text != tc.want.text {
				t.Errorf("span text = %q, want %q", s.Text, tc.want.text)
			}
			if s.Method != tc.want.method {
				t.Errorf("method = %s, want %s", s.Method, tc.want.method)
			}
			if tc.want.doc != "" && s.Document != tc.want.doc {
				t.Errorf("document = %q, want %q", s.Document, tc.want.doc)
			}
			if tc.want.page != 0 && s.Page != tc.want.page {
				t.Errorf("page = %d, want %d", s.Page, tc.want.page)
			}
			if (s.Method == Exact || s.Method == Normalized) && (s.Similarity != 1 || s.Differences != nil) {
				t.Errorf("%s match: similarity %v, differences %v; want 1 and none", s.Method, s.Similarity, s.Differences)
			}
		})
	}
}

var contract = Document{Name: "contract.pdf", Pages: []string{
	"MASTER SUPPLY AGREEMENT\n\nThe Seller shall deliver the Goods to the Buyer’s warehouse\nwithin thirty (30) days of the Purchase Order date.",
	"Payment terms — net sixty (60) days from receipt of a valid invoice. Late payments\nbear interest at 1.5% per month… as set out in Schedule B.",
	"Either party may terminate this Agreement for material breach that is not cured within fifteen (15) days of written notice.",
}}

func TestFindExact(t *testing.T) {
	runCases(t, []Document{contract}, []findCase{
		{"one line", Quote{Text: "The Seller shall deliver the Goods", Origin: "contract.pdf", Page: 1},
			want{found: true, text: "The Seller shall deliver the Goods", page: 1, method: Exact}},
		{"across a line break", Quote{Text: "warehouse\nwithin thirty (30) days", Origin: "contract.pdf"},
			want{found: true, text: "warehouse\nwithin thirty (30) days", page: 1, method: Exact}},
		{"typographic characters as in the document", Quote{Text: "Payment terms — net sixty (60) days", Origin: "contract.pdf", Page: 2},
			want{found: true, text: "Payment terms — net sixty (60) days", page: 2, method: Exact}},
		{"wrong page cited", Quote{Text: "material breach", Origin: "contract.pdf", Page: 1},
			want{found: true, text: "material breach", page: 3, method: Exact}},
		{"origin differs in case and spacing", Quote{Text: "Schedule B", Origin: "  Contract.PDF "},
			want{found: true, doc: "contract.pdf", text: "Schedule B", page: 2, method: Exact}},
		{"short quote", Quote{Text: "B", Origin: "contract.pdf"},
			want{found: true, text: "B", page: 2, method: Exact}},
	})
}

func TestFindNormalized(t *testing.T) {
	runCases(t, []Document{contract}, []findCase{
		{"straight apostrophe", Quote{Text: "the Buyer's warehouse", Origin: "contract.pdf"},
			want{found: true, text: "the Buyer’s warehouse", page: 1, method: Normalized}},
		{"hyphen for em dash", Quote{Text: "Payment terms - net sixty", Origin: "contract.pdf"},
			want{found: true, text: "Payment terms — net sixty", page: 2, method: Normalized}},
		{"en dash for em dash", Quote{Text: "terms – net", Origin: "contract.pdf"},
			want{found: true, text: "terms — net", page: 2, method: Normalized}},
		{"three dots for ellipsis", Quote{Text: "1.5% per month... as set out", Origin: "contract.pdf"},
			want{found: true, text: "1.5% per month… as set out", page: 2, method: Normalized}},
		{"case", Quote{Text: "master supply agreement", Origin: "contract.pdf"},
			want{found: true, text: "MASTER SUPPLY AGREEMENT", page: 1, method: Normalized}},
		{"line break as space", Quote{Text: "warehouse within thirty (30) days", Origin: "contract.pdf"},
			want{found: true, text: "warehouse\nwithin thirty (30) days", page: 1, method: Normalized}},
		{"white space runs", Quote{Text: "Late   payments \t bear interest", Origin: "contract.pdf"},
			want{found: true, text: "Late payments\nbear interest", page: 2, method: Normalized}},
		{"non-breaking and zero-width spaces", Quote{Text: "net\u00a0sixty\u200b (60)", Origin: "contract.pdf"},
			want{found: true, text: "net sixty (60)", page: 2, method: Normalized}},
		{"surrounding quotation marks", Quote{Text: "“either party may terminate this agreement”", Origin: "contract.pdf"},
			want{found: true, text: "Either party may terminate this Agreement", page: 3, method: Normalized}},
		{"added ellipses and full stop", Quote{Text: "...not cured within fifteen (15) days of written notice...", Origin: "contract.pdf"},
			want{found: true, text: "not cured within fifteen (15) days of written notice", page: 3, method: Normalized}},
		{"markdown emphasis", Quote{Text: "**Purchase Order date**", Origin: "contract.pdf"},
			want{found: true, text: "Purchase Order date", page: 1, method: Normalized}},
		{"ends inside a word", Quote{Text: "payments bear interest at 1.5% per mon", Origin: "contract.pdf"},
			want{found: true, text: "payments\nbear interest at 1.5% per mon", page: 2, method: Normalized}},
		{"full stop kept when the document has it", Quote{Text: "purchase order date.", Origin: "contract.pdf"},
			want{found: true, text: "Purchase Order date.", page: 1, method: Normalized}},
	})
}

func TestFindFuzzy(t *testing.T) {
	runCases(t, []Document{contract}, []findCase{
		{"word substituted", Quote{Text: "The Seller must deliver the Goods to the Buyer's warehouse within thirty (30) days", Origin: "contract.pdf", Page: 1},
			want{found: true, text: "The Seller shall deliver the Goods to the Buyer’s warehouse\nwithin thirty (30) days", page: 1, method: Fuzzy}},
		{"word dropped", Quote{Text: "Either party may terminate this Agreement for breach that is not cured within fifteen (15) days", Origin: "contract.pdf"},
			want{found: true, text: "Either party may terminate this Agreement for material breach that is not cured within fifteen (15) days", page: 3, method: Fuzzy}},
		{"typo and changed punctuation", Quote{Text: "net sixty (60) days from reciept of a valid invoice; late payments bear interest", Origin: "contract.pdf"},
			want{found: true, text: "net sixty (60) days from receipt of a valid invoice. Late payments\nbear interest", page: 2, method: Fuzzy}},
		{"ends inside a word", Quote{Text: "payments bear interst at 1.5% per mon", Origin: "contract.pdf"},
			want{found: true, text: "payments\nbear interest at 1.5% per month", page: 2, method: Fuzzy}},
	})
}

func TestFindFuzzyReportsSimilarity(t *testing.T) {
	m := newMatcher(t, contract)
	s, ok := m.Find(Quote{Text: "The Seller must deliver the Goods to the Buyer's warehouse", Origin: "contract.pdf"})
	if !ok || s.Method != Fuzzy {
		t.Fatalf("Find = %+v, %v; want a fuzzy match", s, ok)
	}
	// "must" for "shall": 5 edits in 59 code points.
	if want := 1 - 5.0/59; s.Similarity < want-1e-9 || s.Similarity > want+1e-9 {
		t.Errorf("similarity = %v, want %v", s.Similarity, want)
	}
}

func TestFindNeverAnchorsUnrelatedText(t *testing.T) {
	c := newCorpus(7)
	big := Document{Name: "big.txt", Pages: c.document(60_000, 3000)}
	// Same vocabulary and word frequencies, different text.
	other := strings.Fields(c.text(600))
	cases := []struct {
		name  string
		quote Quote
	}{
		{"shares common words with the document", Quote{Text: "The Buyer shall pay the Seller within thirty days of the delivery of the Goods", Origin: "contract.pdf"}},
		{"rearranged words of the document", Quote{Text: "the Goods shall deliver the Seller to the warehouse of the Buyer", Origin: "contract.pdf"}},
		{"from a document not supplied", Quote{Text: strings.Join(other[:50], " "), Origin: "big.txt"}},
		{"short, from a document not supplied", Quote{Text: strings.Join(other[60:66], " "), Origin: "big.txt"}},
		{"short quote not in the document", Quote{Text: "thee", Origin: "contract.pdf"}},
		{"quote much longer than its match", Quote{Text: "Either party may terminate this Agreement at any time and for any reason whatsoever by giving notice", Origin: "contract.pdf"}},
		{"unknown origin, text found nowhere", Quote{Text: "The applicant is a registered charity", Origin: "application form"}},
	}
	docs := []Document{contract, big}
	m := newMatcher(t, docs...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if s, ok := m.Find(tc.quote); ok {
				t.Fatalf("Find(%q) anchored to %q (%s, similarity %.3f, %s page %d); want unanchored",
					tc.quote.Text, s.Text, s.Method, s.Similarity, s.Document, s.Page)
			}
		})
	}
	// Many stretches of text in the document's vocabulary, none from it.
	for i := range 300 {
		words := strings.Fields(c.text(400))
		quote := Quote{Text: strings.Join(words[:8+i%40], " "), Origin: "big.txt", Page: 1 + i%10}
		if s, ok := m.Find(quote); ok {
			t.Errorf("Find(%q) anchored to %q (%s, similarity %.3f); want unanchored", quote.Text, s.Text, s.Method, s.Similarity)
		}
	}
}

func TestFindEmptyQuote(t *testing.T) {
	m := newMatcher(t, contract)
	for _, text := range []string{"", " ", "\n\t", "\f", "\u00a0\u2003"} {
		if s, ok := m.Find(Quote{Text: text, Origin: "contract.pdf", Page: 1}); ok {
			t.Errorf("Find(%q) = %+v; want unanchored", text, s)
		}
	}
}

func TestFindInvalidUTF8Quote(t *testing.T) {
	doc := Document{Name: "d", Pages: []string{"price \xff\xfe list"}}
	m := newMatcher(t, doc)
	if s, ok := m.Find(Quote{Text: "\xff\xfe", Origin: "d"}); ok {
		t.Errorf("Find of invalid UTF-8 = %+v; want unanchored", s)
	}
	s, ok := m.Find(Quote{Text: "list", Origin: "d"})
	if !ok {
		t.Fatal("Find(list) in a document with invalid UTF-8: not found")
	}
	checkSpan(t, []Document{doc}, s)
}

func TestFindUnicode(t *testing.T) {
	doc := Document{Name: "multilingual", Pages: []string{
		"Überblick: Die Straße „Am Markt“ gehört zur Gemeinde Zürich – Stand 2024. 🚚 Lieferung frei Haus.",
		"契約の解除は、書面による通知の後三十日以内に行うものとする。Ελληνικά: ΣΥΜΒΑΣΗ ΠΩΛΗΣΗΣ.",
	}}
	runCases(t, []Document{doc}, []findCase{
		{"exact after multi-byte runes", Quote{Text: "Lieferung frei Haus", Origin: "multilingual"},
			want{found: true, text: "Lieferung frei Haus", page: 1, method: Exact}},
		{"exact CJK on page two", Quote{Text: "書面による通知", Origin: "multilingual"},
			want{found: true, text: "書面による通知", page: 2, method: Exact}},
		{"German quotes and case", Quote{Text: `die straße "am markt" gehört`, Origin: "multilingual"},
			want{found: true, text: "Die Straße „Am Markt“ gehört", page: 1, method: Normalized}},
		{"accents are not folded, and a short quote two words off is another phrase", Quote{Text: "σύμβαση πώλησης", Origin: "multilingual"},
			want{found: false}},
		{"a short quote one word off, unique", Quote{Text: "ΣΥΜΒΑΣΗ πώλησης", Origin: "multilingual"},
			want{found: true, text: "ΣΥΜΒΑΣΗ ΠΩΛΗΣΗΣ", page: 2, method: Fuzzy}},
		{"quotation marks the document has too", Quote{Text: `"am markt"`, Origin: "multilingual"},
			want{found: true, text: "„Am Markt“", page: 1, method: Normalized}},
		{"fuzzy, quotation mark the document has too", Quote{Text: "“Am Markt” gehört zur Gemeinde Zurich", Origin: "multilingual"},
			want{found: true, text: "„Am Markt“ gehört zur Gemeinde Zürich", page: 1, method: Fuzzy}},
		{"Greek case folding with final sigma", Quote{Text: "συμβαση πωλησης", Origin: "multilingual"},
			want{found: true, text: "ΣΥΜΒΑΣΗ ΠΩΛΗΣΗΣ", page: 2, method: Normalized}},
		{"fuzzy CJK", Quote{Text: "契約の解除は、書面での通知の後三十日以内に行うものとする", Origin: "multilingual"},
			want{found: true, text: "契約の解除は、書面による通知の後三十日以内に行うものとする", page: 2, method: Fuzzy}},
		{"fuzzy after an emoji", Quote{Text: "Stand 2024. Lieferung frei Hause", Origin: "multilingual"},
			want{found: true, text: "Stand 2024. 🚚 Lieferung frei Haus", page: 1, method: Fuzzy}},
	})
}

func TestFindPrefersCitedPage(t *testing.T) {
	clause := "Payment is due within thirty days of the invoice date."
	doc := Document{Name: "terms", Pages: []string{
		"Section 1. " + clause,
		"Section 2 covers delivery.",
		"Section 3. " + strings.ToUpper(clause),
		"Section 4. " + clause,
	}}
	runCases(t, []Document{doc}, []findCase{
		{"exact, no page cited: first", Quote{Text: clause, Origin: "terms"},
			want{found: true, text: clause, page: 1, method: Exact}},
		{"exact, cited page", Quote{Text: clause, Origin: "terms", Page: 4},
			want{found: true, text: clause, page: 4, method: Exact}},
		{"exact, nearest to the cited page", Quote{Text: clause, Origin: "terms", Page: 2},
			want{found: true, text: clause, page: 1, method: Exact}},
		{"exact over normalised on the cited page", Quote{Text: clause, Origin: "terms", Page: 3},
			want{found: true, text: clause, page: 4, method: Exact}},
		{"normalised, cited page", Quote{Text: "payment is due within thirty days", Origin: "terms", Page: 3},
			want{found: true, text: "PAYMENT IS DUE WITHIN THIRTY DAYS", page: 3, method: Normalized}},
		{"normalised, nearest page", Quote{Text: "payment is due within thirty days", Origin: "terms", Page: 2},
			want{found: true, text: "Payment is due within thirty days", page: 1, method: Normalized}},
		{"fuzzy, cited page", Quote{Text: "Payment is due within 30 days of the invoice date", Origin: "terms", Page: 4},
			want{found: true, text: "Payment is due within thirty days of the invoice date", page: 4, method: Fuzzy}},
		{"fuzzy, cited page among equals", Quote{Text: "payment is due within 30 days of the invoice date", Origin: "terms", Page: 3},
			want{found: true, text: "PAYMENT IS DUE WITHIN THIRTY DAYS OF THE INVOICE DATE", page: 3, method: Fuzzy}},
	})
}

func TestFindFuzzyPrefersCitedPageOfMany(t *testing.T) {
	footer := "Confidential: this page is subject to the terms of the non-disclosure agreement."
	var pages []string
	for p := range 12 {
		pages = append(pages, fmt.Sprintf("Page %d body text about topic %d.\n%s", p+1, p*7, footer))
	}
	doc := Document{Name: "deck", Pages: pages}
	m := newMatcher(t, doc)
	for _, page := range []int{1, 7, 12} {
		s, ok := m.Find(Quote{Text: "Confidential - this page is subject to the terms of the non disclosure agreement", Origin: "deck", Page: page})
		if !ok || s.Method != Fuzzy {
			t.Fatalf("cited page %d: Find = %+v, %v; want a fuzzy match", page, s, ok)
		}
		checkSpan(t, []Document{doc}, s)
		if s.Page != page {
			t.Errorf("cited page %d: matched on page %d", page, s.Page)
		}
	}
}

func TestFindPrefersWholeWords(t *testing.T) {
	doc := Document{Name: "d", Pages: []string{"Another theme: other thesis.", "See the annex."}}
	runCases(t, []Document{doc}, []findCase{
		{"whole word on a later page", Quote{Text: "the", Origin: "d"},
			want{found: true, text: "the", page: 2, method: Exact}},
		{"whole word in other case", Quote{Text: "ANOTHER", Origin: "d"},
			want{found: true, text: "Another", page: 1, method: Normalized}},
		{"whole word in other case after partial ones", Quote{Text: "THE", Origin: "d"},
			want{found: true, text: "the", page: 2, method: Normalized}},
		{"inside a word when nothing else matches", Quote{Text: "hes", Origin: "d"},
			want{found: true, text: "hes", page: 1, method: Exact}},
		{"exact inside a word beats normalised whole word", Quote{Text: "nother", Origin: "d"},
			want{found: true, text: "nother", page: 1, method: Exact}},
	})
}

func TestFindCorrectsOrigin(t *testing.T) {
	invoice := Document{Name: "invoice.pdf", Pages: []string{"Invoice 2024-117\nTotal due: EUR 12,400.00\nDue date: 30 April 2024"}}
	docs := []Document{contract, invoice}
	runCases(t, docs, []findCase{
		{"exact in another document", Quote{Text: "Total due: EUR 12,400.00", Origin: "contract.pdf", Page: 2},
			want{found: true, doc: "invoice.pdf", text: "Total due: EUR 12,400.00", page: 1, method: Exact}},
		{"normalised in another document", Quote{Text: "total due: eur 12,400.00", Origin: "contract.pdf"},
			want{found: true, doc: "invoice.pdf", text: "Total due: EUR 12,400.00", page: 1, method: Normalized}},
		{"unknown origin, found in a document", Quote{Text: "Due date: 30 April 2024", Origin: "the invoice"},
			want{found: true, doc: "invoice.pdf", text: "Due date: 30 April 2024", page: 1, method: Exact}},
		{"no origin, found in a document", Quote{Text: "net sixty (60) days"},
			want{found: true, doc: "contract.pdf", text: "net sixty (60) days", page: 2, method: Exact}},
		{"normalised in the cited document wins over exact in another", Quote{Text: "invoice", Origin: "invoice.pdf"},
			want{found: true, doc: "invoice.pdf", text: "Invoice", page: 1, method: Normalized}},
		{"fuzzy in another document when the cited one lacks it", Quote{Text: "Total due: EUR 12,400.00, Due date: 30 April 2024", Origin: "contract.pdf"},
			want{found: true, doc: "invoice.pdf", text: "Total due: EUR 12,400.00\nDue date: 30 April 2024", page: 1, method: Fuzzy}},
		{"fuzzy in the cited document", Quote{Text: "Total due: EUR 12,400.00, Due date: 30 April 2024", Origin: "invoice.pdf"},
			want{found: true, doc: "invoice.pdf", text: "Total due: EUR 12,400.00\nDue date: 30 April 2024", page: 1, method: Fuzzy}},
	})
}

func TestHasDocument(t *testing.T) {
	m := newMatcher(t, contract, Document{Name: "Annex A"})
	for name, want := range map[string]bool{
		"contract.pdf": true, "CONTRACT.PDF": true, " annex a ": true,
		"contract": false, "": false, "Annex B": false,
	} {
		if got := m.HasDocument(name); got != want {
			t.Errorf("HasDocument(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestFindAcrossPageBreak(t *testing.T) {
	doc := Document{Name: "lease", Pages: []string{
		"Rent is payable monthly in advance and the Tenant shall",
		"keep the premises in good repair throughout the term.",
		"",
		"Signed.",
	}}
	runCases(t, []Document{doc}, []findCase{
		{"normalised, page break as space", Quote{Text: "the Tenant shall keep the premises in good repair", Origin: "lease", Page: 2},
			want{found: true, text: "the Tenant shall\fkeep the premises in good repair", page: 1, method: Normalized}},
		{"exact with the form feed", Quote{Text: "shall\fkeep", Origin: "lease"},
			want{found: true, text: "shall\fkeep", page: 1, method: Exact}},
		{"fuzzy across the break", Quote{Text: "the Tenant must keep the premises in good repair", Origin: "lease"},
			want{found: true, text: "the Tenant shall\fkeep the premises in good repair", page: 1, method: Fuzzy}},
		{"over an empty page", Quote{Text: "term. Signed", Origin: "lease"},
			want{found: true, text: "term.\f\fSigned", page: 2, method: Normalized}},
		{"last page", Quote{Text: "Signed.", Origin: "lease", Page: 4},
			want{found: true, text: "Signed.", page: 4, method: Exact}},
	})
}

func TestFindEmptyDocuments(t *testing.T) {
	docs := []Document{{Name: "none"}, {Name: "blank", Pages: []string{""}}, {Name: "spaces", Pages: []string{" \n ", "\t"}}}
	m := newMatcher(t, docs...)
	for _, d := range docs {
		if s, ok := m.Find(Quote{Text: "Either party may terminate this Agreement", Origin: d.Name, Page: 1}); ok {
			t.Errorf("Find in %q = %+v; want unanchored", d.Name, s)
		}
	}
}

func TestFindGeneratedQuotes(t *testing.T) {
	c := newCorpus(42)
	doc := Document{Name: "gen", Pages: c.document(200_000, 3000)}
	docs := []Document{doc}
	m := newMatcher(t, docs...)
	for i := range 30 {
		quote, page := c.excerpt(doc.Pages, 300)
		var exact Span
		for _, tc := range []struct {
			method Method
			text   string
		}{
			{Exact, quote},
			{Normalized, c.restyle(quote)},
			{Fuzzy, c.paraphrase(quote, 2, 1)},
		} {
			s, ok := m.Find(Quote{Text: tc.text, Origin: "gen", Page: page})
			if tc.method == Exact {
				exact = s
			}
			if !ok {
				t.Fatalf("quote %d (%s) not found: %q", i, tc.method, tc.text)
			}
			checkSpan(t, docs, s)
			if s.Method != tc.method {
				t.Errorf("quote %d: method %s, want %s; quote %q span %q", i, s.Method, tc.method, tc.text, s.Text)
			}
			if tc.method != Fuzzy && s.Page != page {
				t.Errorf("quote %d (%s): page %d, want %d", i, tc.method, s.Page, page)
			}
			// Edit distance may leave out an edited word at either end, no more.
			overlap := min(s.ByteEnd, exact.ByteEnd) - max(s.ByteStart, exact.ByteStart)
			if tc.method == Fuzzy && overlap < len(exact.Text)*9/10 {
				t.Errorf("quote %d: fuzzy span %q covers too little of the excerpt %q", i, s.Text, exact.Text)
			}
		}
	}
}

func TestFindConcurrent(t *testing.T) {
	c := newCorpus(3)
	docs := []Document{{Name: "a", Pages: c.document(30_000, 2000)}, {Name: "b", Pages: c.document(30_000, 2000)}}
	var quotes []Quote
	for i := range 24 {
		d := docs[i%2]
		q, p := c.excerpt(d.Pages, 120)
		switch i % 3 {
		case 1:
			q = c.restyle(q)
		case 2:
			q = c.paraphrase(q, 1, 1)
		}
		quotes = append(quotes, Quote{Text: q, Origin: d.Name, Page: p})
	}
	ref := newMatcher(t, docs...)
	want := make([]Span, len(quotes))
	for i, q := range quotes {
		want[i], _ = ref.Find(q)
	}
	m := newMatcher(t, docs...) // fresh, so goroutines race to build its indexes
	var wg sync.WaitGroup
	errs := make(chan string, len(quotes)*4)
	for g := range 4 {
		wg.Go(func() {
			for k := range quotes {
				i := (k + g*5) % len(quotes)
				if got, _ := m.Find(quotes[i]); !reflect.DeepEqual(got, want[i]) {
					errs <- fmt.Sprintf("quote %d: got %+v, want %+v", i, got, want[i])
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts    Options
		wantErr string
	}{
		{Options{}, ""},
		{Options{FuzzyThreshold: 0.9, MinFuzzyRunes: 10, MaxFuzzyRunes: 500}, ""},
		{Options{FuzzyThreshold: 1}, ""},
		{Options{FuzzyThreshold: 0.4}, "FuzzyThreshold 0.4 is outside [0.5, 1]"},
		{Options{FuzzyThreshold: 1.2}, "FuzzyThreshold 1.2 is outside [0.5, 1]"},
		{Options{MinFuzzyRunes: -1}, "MinFuzzyRunes -1 is less than 1"},
		{Options{MinFuzzyRunes: 50, MaxFuzzyRunes: 40}, "MaxFuzzyRunes 40 is less than MinFuzzyRunes 50"},
		{Options{MaxElisionGap: -5}, "MaxElisionGap -5 is less than 1"},
	} {
		err := tc.opts.Validate()
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%+v: Validate = %v, want nil", tc.opts, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%+v: Validate = %v, want %q", tc.opts, err, tc.wantErr)
		}
		if _, err := New(nil, tc.opts); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%+v: New error = %v, want %q", tc.opts, err, tc.wantErr)
		}
	}
}

func TestOptionsTuneFuzzy(t *testing.T) {
	quote := Quote{Text: "The Seller must deliver the Goods to the Buyer's warehouse", Origin: "contract.pdf"}
	for _, tc := range []struct {
		opts  Options
		found bool
	}{
		{Options{}, true},
		{Options{FuzzyThreshold: 0.95}, false},
		{Options{MinFuzzyRunes: 100}, true}, // short, but its match is unique
		{Options{MinFuzzyRunes: 100, FuzzyThreshold: 0.95}, false},
		{Options{MaxFuzzyRunes: 40, MinFuzzyRunes: 10}, false},
	} {
		m, err := New([]Document{contract}, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := m.Find(quote); ok != tc.found {
			t.Errorf("%+v: found = %v, want %v", tc.opts, ok, tc.found)
		}
	}
}

func FuzzFind(f *testing.F) {
	f.Add("The Seller shall deliver", "the Goods\nwithin 30 days.", "Seller shall", uint16(4), uint16(12))
	f.Add("Straße „Am Markt“", "契約の解除", "STRASSE", uint16(0), uint16(30))
	f.Add("a", "", "", uint16(0), uint16(1))
	f.Add("x\u00a0y", "…", "x y...", uint16(1), uint16(3))
	f.Fuzz(func(t *testing.T, page1, page2, quote string, from, length uint16) {
		docs := []Document{{Name: "doc", Pages: []string{page1, page2}}}
		m := newMatcher(t, docs...)
		text := page1 + "\f" + page2

		// The fast paths agree with the plain algorithms they replace.
		checkAgainstReference(t, page1, page2, quote, int(from))

		// A text says what it says; any two texts compare without failing.
		if d := Compare(quote, quote); d != nil {
			t.Fatalf("Compare(%q, itself) = %+v, want no differences", quote, d)
		}
		Compare(quote, page1)

		// Any quote: a span returned must be what it says it is.
		for _, q := range []Quote{{Text: quote, Origin: "doc"}, {Text: quote, Origin: "doc", Page: 2}, {Text: quote}} {
			if s, ok := m.Find(q); ok {
				checkSpan(t, docs, s)
			}
		}

		// A matcher whose fuzzy index is built answers alike.
		indexed := newMatcher(t, docs...)
		indexed.docs[0].shingleIndex()
		for _, q := range []Quote{{Text: quote, Origin: "doc"}, {Text: strings.ToUpper(quote), Origin: "doc", Page: 2}} {
			a, aok := m.Find(q)
			b, bok := indexed.Find(q)
			if !reflect.DeepEqual(a, b) || aok != bok {
				t.Fatalf("quote %q: %+v %v without the index, %+v %v with it", q.Text, a, aok, b, bok)
			}
		}

		// A substring of the document is always found exactly.
		if !utf8.ValidString(text) {
			return
		}
		lo := boundaryAtOrBefore(text, min(int(from), len(text)))
		hi := boundaryAtOrBefore(text, min(lo+int(length), len(text)))
		sub := text[lo:hi]
		if strings.TrimSpace(sub) == "" {
			return
		}
		for _, q := range []Quote{{Text: sub, Origin: "doc"}, {Text: sub, Origin: "doc", Page: 2}} {
			s, ok := m.Find(q)
			if !ok {
				t.Fatalf("substring %q of %q not found", sub, text)
			}
			checkSpan(t, docs, s)
			if s.Method != Exact || s.Text != sub {
				t.Fatalf("substring %q found as %q by %s, want an exact match", sub, s.Text, s.Method)
			}
		}
	})
}
