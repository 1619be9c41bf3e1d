// Package anchor finds the verbatim span of the documents that a quoted
// piece of evidence came from, and says where the span and the quote
// disagree.
//
// A model cites evidence as a quote, the name of a document and a page. The
// quote is often not byte-identical to the document: typographic quotes
// and dashes get straightened, line breaks become spaces, case changes, a
// word is dropped, a passage is elided. Find looks for the quote in these
// ways, strictest first, and reports which one matched:
//
//   - Exact: the quote is a substring of the document text.
//   - Normalized: equal after both sides are normalised (white space runs,
//     typographic quotes, dashes, ellipses, invisible characters, case),
//     possibly after trimming quotation marks and punctuation the model put
//     around the quote.
//   - Elided: the quote leaves words out ("first words … last words",
//     "[...]", ". . ."). Its parts are found in order in one document, each
//     verbatim (normalised) or, if at least Options.MinFuzzyRunes long,
//     fuzzily, each starting within Options.MaxElisionGap code points of
//     the end of the one before. The span runs from the first part's start
//     to the last part's end; its similarity is that of the parts, weighed
//     by their length.
//   - Fuzzy: the most similar region, when its similarity (1 - edit
//     distance / length, in code points of normalised text) reaches
//     Options.FuzzyThreshold. A quote shorter than Options.MinFuzzyRunes
//     matches fuzzily only where exactly one region of all the documents
//     reaches the threshold, and where that region is whole words, all of
//     them the quote's but one (a few letters spread over a short quote
//     make a different phrase).
//
// Verbatim matches are looked for in the cited document, then in every
// other document; elided ones likewise. A fuzzy match is looked for in the
// cited document and, only where it has none, in the others, the most
// similar of them winning. A match in another document is attributed to
// it. A quote whose origin names no document is looked for in all alike.
//
// Whatever matched, the span reported is the document's own text, located
// by code point offsets into the document's pages joined by form feeds.
// Where a quote occurs several times, an occurrence that does not start or
// end inside a word goes first, then the one on the cited page or nearest
// to it, then the earliest.
//
// A fuzzy or elided span may say something other than the quote: "five
// (5) years" for "three (3) years", "California" for "New York", "may not"
// for "may". Such a span carries the quote's claims it contradicts in
// Differences (see Compare): numbers, amounts, dates, negations and names.
// Exact and normalised spans say what the quote says and have none.
//
// Cost: an exact quote on its cited page costs a search of that page. Other
// verbatim searches scan the document once, except where its fuzzy-search
// index, once built, rules the quote out. The first quote that needs the
// normalised text or the fuzzy index of a document builds it, in time
// linear in the document; after that a fuzzy search costs about the same in
// a 100 KB document as in a 4 MB one, per document searched. An elided
// quote costs a search for its longest part and bounded searches near it
// for the others. A short quote not found verbatim costs about as much
// again as its verbatim searches did: a search for each of its words' look-
// alikes, each place found aligned (at most a few thousand per document).
package anchor

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Document is one supplied document, split into pages. Its text, as offsets
// count it, is the pages joined by "\f".
type Document struct {
	Name  string
	Pages []string
}

// Options tune matching. The zero value gives the defaults.
type Options struct {
	// FuzzyThreshold is the least similarity a fuzzy match needs, in
	// [0.5, 1]. Default 0.85: a 100-character quote may differ in 15.
	FuzzyThreshold float64
	// MinFuzzyRunes is the least length, in code points of normalised
	// text, of a quote that may be matched fuzzily wherever it resembles
	// the text most; shorter quotes are likely to resemble unrelated text,
	// so they match fuzzily only where exactly one region of all the
	// documents resembles them. Default 20.
	MinFuzzyRunes int
	// MaxFuzzyRunes is the greatest length of a quote that may be matched
	// fuzzily; alignment costs grow with its square. Default 2000.
	MaxFuzzyRunes int
	// MaxElisionGap is the most text, in code points of normalised text,
	// that one ellipsis of an elided quote may stand for: the gap allowed
	// between two of its parts. Default 2000.
	MaxElisionGap int
}

const (
	defaultFuzzyThreshold = 0.85
	defaultMinFuzzyRunes  = 20
	defaultMaxFuzzyRunes  = 2000
	defaultMaxElisionGap  = 2000
)

func (o *Options) setDefaults() {
	if o.FuzzyThreshold == 0 {
		o.FuzzyThreshold = defaultFuzzyThreshold
	}
	if o.MinFuzzyRunes == 0 {
		o.MinFuzzyRunes = defaultMinFuzzyRunes
	}
	if o.MaxFuzzyRunes == 0 {
		o.MaxFuzzyRunes = defaultMaxFuzzyRunes
	}
	if o.MaxElisionGap == 0 {
		o.MaxElisionGap = defaultMaxElisionGap
	}
}

// Validate reports options that are out of range; zero fields stand for
// their defaults and are valid.
func (o Options) Validate() error {
	o.setDefaults()
	var errs []error
	if math.IsNaN(o.FuzzyThreshold) || o.FuzzyThreshold < 0.5 || o.FuzzyThreshold > 1 {
		errs = append(errs, fmt.Errorf("FuzzyThreshold %v is outside [0.5, 1]", o.FuzzyThreshold))
	}
	if o.MinFuzzyRunes < 1 {
		errs = append(errs, fmt.Errorf("MinFuzzyRunes %d is less than 1", o.MinFuzzyRunes))
	}
	if o.MaxFuzzyRunes < o.MinFuzzyRunes {
		errs = append(errs, fmt.Errorf("MaxFuzzyRunes %d is less than MinFuzzyRunes %d", o.MaxFuzzyRunes, o.MinFuzzyRunes))
	}
	if o.MaxElisionGap < 1 {
		errs = append(errs, fmt.Errorf("MaxElisionGap %d is less than 1", o.MaxElisionGap))
	}
	return errors.Join(errs...)
}

// Method says how a quote was matched.
type Method string

const (
	Exact      Method = "exact"
	Normalized Method = "normalized"
	Fuzzy      Method = "fuzzy"
	// Elided: the quote left parts out ("first words … last words", "[...]")
	// and the span covers its parts, found in order.
	Elided Method = "elided"
)

// Difference is one way an anchored span's text contradicts the quote it
// was found for: a number, amount, date, negation or proper name that one
// says and the other does not.
type Difference struct {
	Kind  string // "number", "amount", "date", "negation" or "name"
	Quote string // what the quote says; "" when the quote lacks it
	Span  string // what the document says; "" when the document lacks it
}

// Quote is a piece of evidence as the model cited it.
type Quote struct {
	Text string
	// Origin names the document the quote is said to come from.
	Origin string
	// Page is the cited 1-based page; 0 or an unknown page means none.
	Page int
}

// Span is where a quote was found.
type Span struct {
	Document string // name of the document holding the span
	Page     int    // 1-based page holding the span's start
	// Start and End are code point offsets into the document text (pages
	// joined by "\f"), end exclusive.
	Start, End int
	// ByteStart and ByteEnd are the same span as byte offsets.
	ByteStart, ByteEnd int
	Text               string // the document's text in the span, verbatim
	Method             Method
	// Similarity is 1 for exact and normalised matches.
	Similarity float64
	// Differences lists what the span says differently from the quote; empty
	// when the span says what the quote says.
	Differences []Difference
}

// Matcher finds quotes in one request's documents. Build one per request
// with New; it indexes a document only when a quote first needs it, and is
// safe for concurrent use.
type Matcher struct {
	opts   Options
	docs   []*document
	byName map[string]int
}

// New prepares docs for matching. Documents are searched in the order
// given; of two with the same name the first is the one cited.
func New(docs []Document, opts Options) (*Matcher, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("anchor options: %w", err)
	}
	opts.setDefaults()
	m := &Matcher{opts: opts, docs: make([]*document, len(docs)), byName: make(map[string]int, len(docs))}
	for i, d := range docs {
		m.docs[i] = newDocument(d)
		if _, dup := m.byName[d.Name]; !dup {
			m.byName[d.Name] = i
		}
	}
	return m, nil
}

// HasDocument reports whether name cites one of the documents, as Find
// resolves it: exactly, or else ignoring case and surrounding white space.
func (m *Matcher) HasDocument(name string) bool {
	_, ok := m.resolve(name)
	return ok
}

func (m *Matcher) resolve(name string) (int, bool) {
	if i, ok := m.byName[name]; ok {
		return i, true
	}
	name = strings.TrimSpace(name)
	for i, d := range m.docs {
		if strings.EqualFold(strings.TrimSpace(d.name), name) {
			return i, true
		}
	}
	return 0, false
}

// Find locates q. It tries, in order, each way strictest first:
//
//  1. verbatim (exact, then normalised) in the cited document, then in
//     every other document;
//  2. for a quote with ellipses, its parts in order, in the cited document
//     and then the others (see the package comment);
//  3. fuzzily: a quote of at least MinFuzzyRunes in the cited document,
//     else the most similar match among the other documents; a shorter
//     quote only where exactly one region of all the documents matches.
//
// ok is false when the quote is blank, is not valid UTF-8, or is not
// found. A quote whose origin names no document (see HasDocument) is
// searched in every document alike. A fuzzy or elided span lists what it
// says differently from the quote in Differences (see Compare).
func (m *Matcher) Find(q Quote) (span Span, ok bool) {
	if strings.TrimSpace(q.Text) == "" || !utf8.ValidString(q.Text) {
		return Span{}, false
	}
	pq := prepare(q.Text)
	cited, hasCited := m.resolve(q.Origin)
	// The documents in the order searched, and the page cited in each.
	order := make([]*document, 0, len(m.docs))
	pages := make([]int, 0, len(m.docs))
	if hasCited {
		order, pages = append(order, m.docs[cited]), append(pages, q.Page)
	}
	for i, d := range m.docs {
		if !hasCited || i != cited {
			order, pages = append(order, d), append(pages, 0)
		}
	}
	for _, d := range order {
		if s, ok := d.findVerbatim(q.Text, pq, q.Page); ok {
			return s, true
		}
	}
	if parts := splitElided(q.Text); len(parts) > 1 {
		for k, d := range order {
			if s, ok := d.findElided(parts, pages[k], m.opts); ok {
				return s, true
			}
		}
	}
	return m.findFuzzy(q.Text, pq, order, pages, hasCited)
}

// findFuzzy matches a quote fuzzily (step 3 of Find). order holds the
// documents to search, the cited one first where citedFirst.
func (m *Matcher) findFuzzy(text string, pq preparedQuote, order []*document, pages []int, citedFirst bool) (Span, bool) {
	n := utf8.RuneCountInString(pq.trimmed)
	if n > m.opts.MaxFuzzyRunes {
		return Span{}, false
	}
	short := n < m.opts.MinFuzzyRunes
	var best fuzzyMatch
	var bestDoc *document
	regions := 0 // distinct matching regions, for a short quote
	for k, d := range order {
		var ms []fuzzyMatch
		if short {
			if ms = d.shortMatches(pq, m.opts.FuzzyThreshold, maxShortRegions); len(ms)+regions > 1 {
				return Span{}, false // resembles several places: which is meant?
			}
			regions += len(ms)
		} else {
			ms = d.fuzzyMatches(pq, pages[k], m.opts.FuzzyThreshold)
		}
		if len(ms) == 0 {
			continue
		}
		if bestDoc == nil || ms[0].similarity > best.similarity {
			best, bestDoc = ms[0], d
		}
		if k == 0 && citedFirst && !short {
			break // the cited document has it
		}
	}
	if bestDoc == nil {
		return Span{}, false
	}
	lo, hi := bestDoc.normalized().original(best.lo, best.hi)
	s := bestDoc.span(lo, hi, Fuzzy, best.similarity)
	s.Differences = Compare(text, s.Text)
	return s, true
}

// oneWordApart reports whether normalised texts a, a quote, and b, its
// match, have the same words in the same order but for one word of the
// quote, which b may have split in two.
func oneWordApart(a, b string) bool {
	wa, wb := wordsOf(a), wordsOf(b)
	// The longest common subsequence of the two lists of words.
	lcs := make([]int, len(wb)+1)
	for i := range wa {
		prev := 0 // lcs of wa[:i], wb[:j-1]
		for j := 1; j <= len(wb); j++ {
			cur := lcs[j]
			if wa[i] == wb[j-1] {
				lcs[j] = prev + 1
			} else {
				lcs[j] = max(lcs[j], lcs[j-1])
			}
			prev = cur
		}
	}
	common := lcs[len(wb)]
	return len(wa)-common <= 1 && len(wb)-common <= 2
}

// preparedQuote is a quote's normalised forms, computed once per Find.
type preparedQuote struct {
	normalized string // the whole quote normalised
	trimmed    string // and without the punctuation a model adds around quotes
	// lead and trail are what trimming removed from either end.
	lead, trail string
}

func prepare(text string) preparedQuote {
	n, _ := normalize(text, false)
	t := trimQuote(n)
	lead := len(n) - len(strings.TrimLeftFunc(n, trimmable))
	return preparedQuote{normalized: n, trimmed: t, lead: n[:lead], trail: n[lead+len(t):]}
}

// findVerbatim finds the quote exactly or, failing that, normalised. Each
// method prefers an occurrence that neither starts nor ends inside a word,
// so "the" anchors to the word rather than the middle of "other" wherever
// the word occurs. The normalised search looks for the trimmed quote and
// takes in what was trimmed only where the document has it too.
func (d *document) findVerbatim(text string, pq preparedQuote, page int) (Span, bool) {
	if d.ruledOut(pq) {
		return Span{}, false
	}
	if at, _, ok := d.exactSpace().locate(text, page); ok {
		return d.span(at, at+len(text), Exact, 1), true
	}
	n := d.normalized()
	if n == nil {
		return Span{}, false
	}
	needle, lead, trail := pq.trimmed, pq.lead, pq.trail
	if needle == "" { // nothing but punctuation: search it as it is
		needle, lead, trail = pq.normalized, "", ""
	}
	at, _, ok := d.normalSpace(n).locate(needle, page)
	if !ok {
		return Span{}, false
	}
	lo, hi := n.original(surround(n.text, at, at+len(needle), lead, trail))
	return d.span(lo, hi, Normalized, 1), true
}

// surround widens text[lo:hi] by lead before it and by trail after it,
// each only where text has it in full.
func surround(text string, lo, hi int, lead, trail string) (int, int) {
	if strings.HasSuffix(text[:lo], lead) {
		lo -= len(lead)
	}
	if strings.HasPrefix(text[hi:], trail) {
		hi += len(trail)
	}
	return lo, hi
}
