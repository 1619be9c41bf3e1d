package anchor

import (
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// elisionRE matches what marks words left out of a quote: an ellipsis
// ("…", "...", ". . ."), bare or in brackets or parentheses ("[...]",
// "[…]", "(...)").
var elisionRE = regexp.MustCompile(`[\[(]\s*(?:…|\.(?:\s?\.){2,})\s*[\])]|…|\.(?:\s?\.){2,}`)

// splitElided splits a quote at its ellipses into the parts it quotes,
// leaving out parts with nothing to find (an ellipsis at either end). It
// returns fewer than two parts for a quote that elides nothing.
func splitElided(text string) []string {
	if !strings.Contains(text, "…") && !strings.Contains(text, "..") && !strings.Contains(text, ". .") {
		return nil // no ellipsis: spare the pattern
	}
	var parts []string
	for _, p := range elisionRE.Split(text, -1) {
		if trimQuote(strings.TrimSpace(p)) != "" {
			if n, _ := normalize(p, false); trimQuote(n) != "" {
				parts = append(parts, p)
			}
		}
	}
	return parts
}

// maxElidedCandidates bounds the places tried for the part an elided
// quote is found from.
const maxElidedCandidates = 64

// elidedPart is one part of an elided quote and where it was found, as a
// range of the normalised text.
type elidedPart struct {
	raw    string
	pq     preparedQuote
	runes  int
	lo, hi int
	sim    float64
}

// findElided finds the parts of an elided quote in order, each within
// opts.MaxElisionGap of the one before, and returns the span from the
// first part's start to the last part's end. It starts from the longest
// part, found verbatim (normalised) or, when long enough, fuzzily, and
// looks for the parts before it backwards and after it forwards. Parts
// shorter than opts.MinFuzzyRunes must be found verbatim.
func (d *document) findElided(raw []string, page int, opts Options) (Span, bool) {
	n := d.normalized()
	if n == nil {
		return Span{}, false
	}
	parts := make([]elidedPart, len(raw))
	pivot := 0
	for i, r := range raw {
		pq := prepare(r)
		parts[i] = elidedPart{raw: r, pq: pq, runes: utf8.RuneCountInString(pq.trimmed)}
		if parts[i].runes > opts.MaxFuzzyRunes {
			return Span{}, false
		}
		if parts[i].runes > parts[pivot].runes {
			pivot = i
		}
	}
	p := &parts[pivot]
	candidates := d.occurrences(n, p.pq.trimmed, page)
	if len(candidates) == 0 && p.runes >= opts.MinFuzzyRunes {
		candidates = d.fuzzyMatches(p.pq, page, opts.FuzzyThreshold)
	}
	for _, c := range candidates {
		p.lo, p.hi, p.sim = c.lo, c.hi, c.similarity
		if d.extendElided(n, parts, pivot, opts) {
			return d.elidedSpan(n, parts), true
		}
	}
	return Span{}, false
}

// occurrences lists where needle occurs in the normalised text, those
// that neither start nor end inside a word first, then those nearest to
// page, then the earliest.
func (d *document) occurrences(n *normalized, needle string, page int) []fuzzyMatch {
	type occ struct {
		at, dist int
		aligned  bool
	}
	var found []occ
	for from := 0; len(found) < maxElidedCandidates; {
		i := indexLong(n.text[from:], needle)
		if i < 0 {
			break
		}
		at := from + i
		o := occ{at: at, aligned: wordAligned(n.text, at, at+len(needle))}
		if d.validPage(page) {
			o.dist = abs(d.pageOf(n.orig.of(at)) - page)
		}
		found = append(found, o)
		from = at + 1
	}
	slices.SortStableFunc(found, func(a, b occ) int {
		if a.aligned != b.aligned {
			if a.aligned {
				return -1
			}
			return 1
		}
		return a.dist - b.dist
	})
	out := make([]fuzzyMatch, len(found))
	for i, o := range found {
		out[i] = fuzzyMatch{lo: o.at, hi: o.at + len(needle), similarity: 1}
	}
	return out
}

// extendElided finds the parts before the pivot, found already, backwards
// and the parts after it forwards.
func (d *document) extendElided(n *normalized, parts []elidedPart, pivot int, opts Options) bool {
	for i := pivot - 1; i >= 0; i-- {
		to := parts[i+1].lo
		from := runesBack(n.text, to, opts.MaxElisionGap)
		if !findPart(n.text, &parts[i], from, to, false, opts) {
			return false
		}
	}
	for i := pivot + 1; i < len(parts); i++ {
		from := parts[i-1].hi
		to := runesForward(n.text, from, opts.MaxElisionGap)
		if !findPart(n.text, &parts[i], from, to, true, opts) {
			return false
		}
	}
	return true
}

// findPart finds part p where it starts in [from, to] (forward) or ends
// in [from, to] (backwards): verbatim (normalised) first, whole words
// preferred, the occurrence nearest to the part found before; then, for a
// part long enough, fuzzily.
func findPart(text string, p *elidedPart, from, to int, forward bool, opts Options) bool {
	needle := p.pq.trimmed
	lo, hi := from, min(len(text), to+len(needle))
	if !forward {
		lo, hi = max(0, from-len(needle)), to
	}
	var found []int
	for at := lo; len(found) < maxElidedCandidates; {
		i := strings.Index(text[at:hi], needle)
		if i < 0 {
			break
		}
		found = append(found, at+i)
		at += i + 1
	}
	if !forward {
		slices.Reverse(found)
	}
	best := -1
	for _, at := range found {
		if wordAligned(text, at, at+len(needle)) {
			best = at
			break
		}
	}
	if best < 0 && len(found) > 0 {
		best = found[0]
	}
	if best >= 0 {
		p.lo, p.hi, p.sim = best, best+len(needle), 1
		return true
	}
	if p.runes < opts.MinFuzzyRunes {
		return false
	}
	q := []rune(needle)
	// Room for the insertions a fuzzy match may have.
	slack := len(needle) / 4
	if forward {
		hi = min(len(text), hi+slack)
	} else {
		lo = max(0, lo-slack)
	}
	m, ok := alignWindow(newBitPattern(q), q, text, lo, hi, opts.FuzzyThreshold)
	if !ok {
		return false
	}
	p.lo, p.hi, p.sim = m.lo, m.hi, m.similarity
	return true
}

// elidedSpan is the span covering the parts found, with the similarity of
// the parts weighed by their length and what each says differently from
// the document.
func (d *document) elidedSpan(n *normalized, parts []elidedPart) Span {
	first, last := parts[0], parts[len(parts)-1]
	nlo, nhi := surround(n.text, first.lo, last.hi, first.pq.lead, last.pq.trail)
	lo, hi := n.original(nlo, nhi)
	var sum, weight float64
	var diffs []Difference
	for _, p := range parts {
		sum += p.sim * float64(p.runes)
		weight += float64(p.runes)
		plo, phi := n.original(p.lo, p.hi)
		if p.sim < 1 {
			diffs = append(diffs, Compare(p.raw, d.text[plo:phi])...)
		}
	}
	s := d.span(lo, hi, Elided, sum/max(weight, 1))
	s.Differences = diffs
	return s
}

// runesForward is the offset n code points after from in s, or len(s).
func runesForward(s string, from, n int) int {
	for ; n > 0 && from < len(s); n-- {
		_, w := utf8.DecodeRuneInString(s[from:])
		from += w
	}
	return from
}

// runesBack is the offset n code points before to in s, or 0.
func runesBack(s string, to, n int) int {
	for ; n > 0 && to > 0; n-- {
		_, w := utf8.DecodeLastRuneInString(s[:to])
		to -= w
	}
	return to
}
