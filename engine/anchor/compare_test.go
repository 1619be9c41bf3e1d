package anchor

import (
	"reflect"
	"testing"
)

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name        string
		quote, span string
		want        []Difference
	}{
		// What the span says, in other words or letters: no difference.
		{"identical", "within thirty (30) days", "within thirty (30) days", nil},
		{"white space and line breaks", "within  thirty\n(30) days", "within thirty (30)\ndays", nil},
		{"typography", `the Buyer's "warehouse" - net`, "the Buyer’s “warehouse” — net", nil},
		{"case", "MASTER SUPPLY AGREEMENT", "Master Supply Agreement", nil},
		{"lower-case quote of names", "governed by the laws of the state of new york", "governed by the laws of the State of New York", nil},
		{"dropped filler words", "the Seller shall deliver Goods within 30 days", "the Seller shall deliver the Goods to the Buyer within 30 days", nil},
		{"reworded verb", "The Seller must deliver the Goods", "The Seller shall deliver the Goods", nil},
		{"figure in words and digits", "within 30 days", "within thirty (30) days", nil},
		{"figure in words only", "thirty days", "30 days", nil},
		{"thousands separator and decimals", "EUR 12400", "EUR 12,400.00", nil},
		{"currency given once", "a fee of 450", "a fee of $450", nil},
		{"same date written otherwise", "on 30 April 2024", "on April 30, 2024", nil},
		{"one negation for another", "no party shall assign", "neither party shall assign", nil},
		{"contraction", "the Buyer can't assign", "the Buyer cannot assign", nil},
		{"OCR noise in a name", "Confidentia1 Inforrnation of the Discloser", "Confidential Information of the Discloser", nil},
		{"dropped name", "this for material breach", "this Agreement for material breach", nil},
		{"defined term in other words", "The terms of this contract", "The terms of this Agreement", nil},
		{"OCR noise in short names", "Oaktree U5 and the 5ub-Advisor", "Oaktree US and the Sub-Advisor", nil},
		{"OCR noise in a negation", "any settlement witbout consent", "any settlement without consent", nil},
		{"day left out of a date", "with effect from July 2013", "with effect from 22 July 2013", nil},
		{"figure left out", "the Internal Revenue Code of whose assets", "the Internal Revenue Code of 1986 whose assets", nil},

		// What the span says otherwise.
		{"digits", "for a period of 3 years", "for a period of 5 years",
			[]Difference{{"number", "3", "5"}}},
		{"words and digits: one figure", "for a period of three (3) years", "for a period of five (5) years",
			[]Difference{{"number", "three", "five"}}},
		{"ordinal", "the 2nd anniversary", "the 3rd anniversary",
			[]Difference{{"number", "2nd", "3rd"}}},
		{"amount", "a monthly fee of $540", "a monthly fee of $450",
			[]Difference{{"amount", "$540", "$450"}}},
		{"currency", "a fee of $450", "a fee of €450",
			[]Difference{{"amount", "$450", "€450"}}},
		{"percentage", "interest at 2.5% per month", "interest at 1.5% per month",
			[]Difference{{"amount", "2.5%", "1.5%"}}},
		{"amount in words", "Five Hundred Dollars", "Four Hundred Dollars",
			[]Difference{{"amount", "Five Hundred Dollars", "Four Hundred Dollars"}}},
		{"date", "terminate on December 31, 2021", "terminate on December 31, 2020",
			[]Difference{{"date", "December 31, 2021", "December 31, 2020"}}},
		{"negation dropped", "Confidential Information may be retained", "Confidential Information may not be retained",
			[]Difference{{"negation", "", "not"}}},
		{"negation added", "the Provider shall not remain responsible", "the Provider shall remain responsible",
			[]Difference{{"negation", "not", ""}}},
		{"contracted negation added", "the Buyer doesn't pay", "the Buyer does pay",
			[]Difference{{"negation", "doesn't", ""}}},
		{"non- prefix", "a non-exclusive license", "an exclusive license",
			[]Difference{{"negation", "non", ""}}},
		{"state name", "the laws of the State of New York", "the laws of the State of California",
			[]Difference{{"name", "New York", "California"}}},
		{"state name, lower-case quote", "the laws of the state of new york", "the laws of the State of California",
			[]Difference{{"name", "new york", "California"}}},
		{"party swapped", "the Buyer shall pay the fees", "the Seller shall pay the fees",
			[]Difference{{"name", "Buyer", "Seller"}}},
		{"name added", "payable to Acme Holdings in full", "payable in full",
			[]Difference{{"name", "Acme Holdings", ""}}},
		{"several kinds", "the Buyer may not pay $540 within 3 days", "the Seller may pay $450 within 5 days",
			[]Difference{{"amount", "$540", "$450"}, {"number", "3", "5"}, {"negation", "not", ""}, {"name", "Buyer", "Seller"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Compare(tc.quote, tc.span); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Compare(%q, %q) = %+v, want %+v", tc.quote, tc.span, got, tc.want)
			}
		})
	}
}

func TestSpelledValue(t *testing.T) {
	for in, want := range map[string]int{
		"three": 3, "twenty-five": 25, "one hundred fifty": 150, "Four Hundred Fifty Dollars": 450,
		"two thousand five hundred": 2500, "ten million": 10_000_000, "hundred": 100,
	} {
		if got := spelledValue(in); got != want {
			t.Errorf("spelledValue(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestOneWordApart(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"seller shall delivr", "seller shall deliver", true},
		{"and restatesin", "and restates in", true},
		{"chief executve", "chief executive", true},
		{"or consequentia", ", consequential", false},
		{"due within tne days", "due within ten days", true},
		{"the buyer must pay", "the seller shall pay", false},
	} {
		if got := oneWordApart(tc.a, tc.b); got != tc.want {
			t.Errorf("oneWordApart(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestExtractFacts(t *testing.T) {
	f := extractFacts("On the 30th day of April, 2024 and 2024-05-01 and 1/2/2025, Acme paid US$ 1,000.00, EUR 5 million, 7.5% and " +
		"twenty-five dollars for 3 units, one hundred fifty items, the 2nd lot and W2 forms; it can't, won't and doesn't, non-exclusive.")
	keys := func(fs []fact) (out []string) {
		for _, x := range fs {
			out = append(out, x.key)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		got, want []string
	}{
		{"dates", keys(f.dates), []string{"2024-4-30", "2024-5-1", "1/2/2025"}},
		{"amounts", keys(f.amounts), []string{"USD 1000", "EUR 5 million", "% 7.5", "USD 25"}},
		{"numbers", keys(f.numbers), []string{"3", "150", "2"}},
		{"negations", keys(f.negations), []string{"not", "not", "not", "non"}},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

// BenchmarkCompare measures what a fuzzy match adds to Find: comparing a
// 300-byte misquote with its span.
func BenchmarkCompare(b *testing.B) {
	span := "Each Party hereto shall use the same degree of care, but no less than reasonable care, to protect the other Party's Confidential Information " +
		"as it uses to protect its own Confidential Information of like nature, for a period of five (5) years after the Effective Date of March 1, 2020."
	quote := "Each Party shall use the same degree of care, but not less than reasonable care, to protect the other Party's Confidential Information " +
		"as it uses to protect its own confidential information of like nature, for a period of three (3) years after the Effective Date of March 1, 2020."
	b.ReportAllocs()
	for b.Loop() {
		Compare(quote, span)
	}
}
