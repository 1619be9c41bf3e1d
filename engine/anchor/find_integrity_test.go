package anchor

import (
	"reflect"
	"strings"
	"testing"
)

var nda = Document{Name: "nda.pdf", Pages: []string{
	"MUTUAL NON-DISCLOSURE AGREEMENT\n\nThe obligations of confidentiality shall survive for a period of five (5) years after the termination of this Agreement. " +
		"Upon termination, Confidential Information may not be retained by the Receiving Party and shall be returned or destroyed within thirty (30) days.",
	"The Consultant shall receive a monthly fee of $450, payable in advance on the first business day of each month, and reimbursement of reasonable expenses. " +
		"This Agreement shall be governed by and construed in accordance with the laws of the State of California, without regard to its conflict of laws principles. " +
		"Any notice under this Agreement shall be given in writing and delivered by hand, by courier or by registered mail to the address of the other party set out above, " +
		"and shall be deemed received on the date of delivery. Either party may terminate this Agreement on ninety (90) days' prior written notice.",
}}

// TestFindReportsDifferences: a misquote that anchors fuzzily keeps the
// document's words in the span and says where they contradict the quote.
func TestFindReportsDifferences(t *testing.T) {
	m := newMatcher(t, nda)
	for _, tc := range []struct {
		name, quote, text string
		want              []Difference
	}{
		{"digits and words",
			"The obligations of confidentiality shall survive for a period of three (3) years after the termination of this Agreement",
			"The obligations of confidentiality shall survive for a period of five (5) years after the termination of this Agreement",
			[]Difference{{"number", "three", "five"}}},
		{"amount",
			"The Consultant shall receive a monthly fee of $540, payable in advance on the first business day of each month",
			"The Consultant shall receive a monthly fee of $450, payable in advance on the first business day of each month",
			[]Difference{{"amount", "$540", "$450"}}},
		{"negation",
			"Upon termination, Confidential Information may be retained by the Receiving Party",
			"Upon termination, Confidential Information may not be retained by the Receiving Party",
			[]Difference{{"negation", "", "not"}}},
		{"state name",
			"This Agreement shall be governed by and construed in accordance with the laws of the State of New York, without regard to its conflict of laws principles",
			"This Agreement shall be governed by and construed in accordance with the laws of the State of California, without regard to its conflict of laws principles",
			[]Difference{{"name", "New York", "California"}}},
		{"a typo says nothing else",
			"This Agreement shall be governed by and construed in acordance with the laws of the State of California",
			"This Agreement shall be governed by and construed in accordance with the laws of the State of California",
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := m.Find(Quote{Text: tc.quote, Origin: "nda.pdf"})
			if !ok {
				t.Fatalf("Find(%q): not found", tc.quote)
			}
			checkSpan(t, []Document{nda}, s)
			if s.Method != Fuzzy || s.Text != tc.text {
				t.Errorf("span %s %q, want fuzzy %q", s.Method, s.Text, tc.text)
			}
			if s.Similarity >= 1 || s.Similarity < 0.85 {
				t.Errorf("similarity %v, want in [0.85, 1)", s.Similarity)
			}
			if !reflect.DeepEqual(s.Differences, tc.want) {
				t.Errorf("differences %+v, want %+v", s.Differences, tc.want)
			}
		})
	}
}

func TestFindElided(t *testing.T) {
	governing := "This Agreement shall be governed by and construed in accordance with the laws of the State of California, without regard to its conflict of laws principles"
	notice := "Any notice under this Agreement shall be given in writing and delivered by hand, by courier or by registered mail to the address of the other party set out above, and shall be deemed received on the date of delivery"
	docs := []Document{contract, nda}
	runCases(t, docs, []findCase{
		{"ellipsis character", Quote{Text: "The obligations of confidentiality shall survive … after the termination of this Agreement", Origin: "nda.pdf"},
			want{found: true, text: "The obligations of confidentiality shall survive for a period of five (5) years after the termination of this Agreement", page: 1, method: Elided}},
		{"three dots", Quote{Text: "Any notice under this Agreement shall be given in writing ... deemed received on the date of delivery.", Origin: "nda.pdf"},
			want{found: true, text: notice + ".", page: 2, method: Elided}},
		{"bracketed", Quote{Text: "“This Agreement shall be governed by [...] the laws of the State of California”", Origin: "nda.pdf"},
			want{found: true, text: "This Agreement shall be governed by and construed in accordance with the laws of the State of California", page: 2, method: Elided}},
		{"bracketed ellipsis character and spaced dots", Quote{Text: "Either party may terminate […] ninety (90) days' . . . notice", Origin: "nda.pdf"},
			want{found: true, text: "Either party may terminate this Agreement on ninety (90) days' prior written notice", page: 2, method: Elided}},
		{"three parts", Quote{Text: "This Agreement shall be governed ... State of California ... conflict of laws principles", Origin: "nda.pdf"},
			want{found: true, text: governing, page: 2, method: Elided}},
		{"a long part misquoted", Quote{Text: "The Consultant shall receive a monthly fee of $450, payable in advance on the first day of each month ... reasonable expenses", Origin: "nda.pdf"},
			want{found: true, text: "The Consultant shall receive a monthly fee of $450, payable in advance on the first business day of each month, and reimbursement of reasonable expenses", page: 2, method: Elided}},
		{"wrong document cited", Quote{Text: "Late payments bear interest ... Schedule B", Origin: "nda.pdf"},
			want{found: true, doc: "contract.pdf", text: "Late payments\nbear interest at 1.5% per month… as set out in Schedule B", page: 2, method: Elided}},
		{"parts out of order", Quote{Text: "the State of California ... shall be governed", Origin: "nda.pdf"},
			want{found: false}},
		{"a part found nowhere", Quote{Text: "This Agreement shall be governed ... the laws of Delaware", Origin: "nda.pdf"},
			want{found: false}},
		{"a short part misquoted", Quote{Text: "The obligations of confidentiality shall survive ... after the ending of this Agreement", Origin: "nda.pdf"},
			want{found: false}},
	})

	m := newMatcher(t, docs...)
	s, ok := m.Find(Quote{Text: "The Consultant shall receive a monthly fee of $540, payable in advance on the first day of each month ... reasonable expenses", Origin: "nda.pdf"})
	if !ok || s.Method != Elided {
		t.Fatalf("altered elided quote: %+v %v, want an elided match", s, ok)
	}
	if want := []Difference{{"amount", "$540", "$450"}}; !reflect.DeepEqual(s.Differences, want) {
		t.Errorf("altered elided quote: differences %+v, want %+v", s.Differences, want)
	}
	if s.Similarity >= 1 || s.Similarity < 0.85 {
		t.Errorf("altered elided quote: similarity %v, want in [0.85, 1)", s.Similarity)
	}
}

func TestFindElidedGap(t *testing.T) {
	filler := strings.Repeat("lorem ipsum dolor sit amet ", 100) // 2,700 code points
	doc := Document{Name: "d", Pages: []string{"The first clause begins here. " + filler + "The last clause ends here."}}
	quote := Quote{Text: "The first clause begins here ... The last clause ends here", Origin: "d"}
	for _, tc := range []struct {
		gap   int
		found bool
	}{{0, false}, {2000, false}, {3000, true}} {
		m, err := New([]Document{doc}, Options{MaxElisionGap: tc.gap})
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := m.Find(quote); ok != tc.found {
			t.Errorf("gap %d: found = %v (%+v), want %v", tc.gap, ok, s.Method, tc.found)
		}
	}
}

func TestFindShortQuotes(t *testing.T) {
	terms := Document{Name: "terms", Pages: []string{"Rent is due within ten days of the invoice. Fees are due within two days of the invoice."}}
	runCases(t, []Document{contract, terms}, []findCase{
		{"exact", Quote{Text: "due within ten days", Origin: "terms"},
			want{found: true, text: "due within ten days", page: 1, method: Exact}},
		{"normalised", Quote{Text: "DUE WITHIN TWO DAYS", Origin: "terms"},
			want{found: true, text: "due within two days", page: 1, method: Normalized}},
		{"fuzzy and unique", Quote{Text: "Seller shall delivr", Origin: "contract.pdf"},
			want{found: true, text: "Seller shall deliver", page: 1, method: Fuzzy}},
		{"fuzzy and unique in another document", Quote{Text: "Rent is due withn", Origin: "contract.pdf"},
			want{found: true, doc: "terms", text: "Rent is due within", page: 1, method: Fuzzy}},
		{"fuzzy, resembling two places", Quote{Text: "due within tne days", Origin: "terms"},
			want{found: false}},
		{"fuzzy, resembling places in two documents", Quote{Text: "of the invoise", Origin: "terms"},
			want{found: false}},
	})
}

func TestFindFuzzyAcrossDocuments(t *testing.T) {
	near := Document{Name: "near.txt", Pages: []string{"Either party may terminate this Agreement for a material breach that is not cured within twenty (20) days of written notice."}}
	quote := "Either party may terminate this Agreement for material breach that is not cured within twenty (20) days of written notice"
	docs := []Document{contract, nda, near}
	runCases(t, docs, []findCase{
		{"the cited document first, though another is closer", Quote{Text: quote, Origin: "contract.pdf"},
			want{found: true, doc: "contract.pdf", text: "Either party may terminate this Agreement for material breach that is not cured within fifteen (15) days of written notice", page: 3, method: Fuzzy}},
		{"the most similar of the others", Quote{Text: quote, Origin: "nda.pdf"},
			want{found: true, doc: "near.txt", text: "Either party may terminate this Agreement for a material breach that is not cured within twenty (20) days of written notice", page: 1, method: Fuzzy}},
		{"origin naming no document", Quote{Text: "the laws of the State of California, without regard to conflict of law principles", Origin: "the agreement"},
			want{found: true, doc: "nda.pdf", text: "the laws of the State of California, without regard to its conflict of laws principles", page: 2, method: Fuzzy}},
	})
}
