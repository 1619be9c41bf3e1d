package anchor

import (
	"slices"
	"strings"
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
