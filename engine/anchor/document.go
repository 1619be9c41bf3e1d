package anchor

import (
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// document is one supplied document and the indexes built over it on demand.
// The indexes are built at most once, by whichever Find needs them first.
type document struct {
	name       string
	text       string // pages joined by '\f'
	pageStarts []int  // byte offset in text where each page begins; strictly increasing

	runesOnce sync.Once
	runes     runeIndex

	normOnce sync.Once
	norm     *normalized // nil when the text is too large to index

	shinglesOnce sync.Once
	shingles     atomic.Pointer[shingleIndex] // set once built, so others can use it without building it
}

func newDocument(d Document) *document {
	starts := make([]int, len(d.Pages))
	off := 0
	for i, p := range d.Pages {
		starts[i] = off
		off += len(p) + 1
	}
	if len(starts) == 0 {
		starts = []int{0}
	}
	return &document{name: d.Name, text: strings.Join(d.Pages, "\f"), pageStarts: starts}
}

// pageOf is the 1-based page holding byte offset off of the text. The form
// feed that ends a page belongs to that page.
func (d *document) pageOf(off int) int {
	i, found := slices.BinarySearch(d.pageStarts, off)
	if !found {
		i--
	}
	return i + 1
}

// pageBounds is the byte range [lo, hi) of offsets on 1-based page p.
func (d *document) pageBounds(p int) (lo, hi int) {
	lo = d.pageStarts[p-1]
	if p < len(d.pageStarts) {
		return lo, d.pageStarts[p]
	}
	return lo, len(d.text)
}

// validPage reports whether p names a page of the document.
func (d *document) validPage(p int) bool { return p >= 1 && p <= len(d.pageStarts) }

// span describes text[lo:hi] as a Span.
func (d *document) span(lo, hi int, method Method, similarity float64) Span {
	d.runesOnce.Do(func() { d.runes = newRuneIndex(d.text) })
	start := d.runes.offset(d.text, lo)
	return Span{
		Document:   d.name,
		Page:       d.pageOf(lo),
		Start:      start,
		End:        start + utf8.RuneCountInString(d.text[lo:hi]),
		ByteStart:  lo,
		ByteEnd:    hi,
		Text:       strings.Clone(d.text[lo:hi]), // not pinning the whole text in memory
		Method:     method,
		Similarity: similarity,
	}
}

// normalized returns the normalised text, building it on first use, or nil
// when the document is too large for 32-bit offsets.
func (d *document) normalized() *normalized {
	d.normOnce.Do(func() {
		if len(d.text) < math.MaxInt32 {
			d.norm = newNormalized(d.text)
		}
	})
	return d.norm
}

// shingleIndex returns the fuzzy-search index, building it on first use, or
// nil when there is no normalised text.
func (d *document) shingleIndex() *shingleIndex {
	d.shinglesOnce.Do(func() {
		if n := d.normalized(); n != nil {
			d.shingles.Store(newShingleIndex(n.text))
		}
	})
	return d.shingles.Load()
}

// ruledOut reports that the fuzzy-search index, where an earlier quote has
// built it, proves pq absent: neither its exact text nor its normalised
// forms occur in the document. Verbatim searches then need not scan it.
func (d *document) ruledOut(pq preparedQuote) bool {
	x := d.shingles.Load()
	if x == nil || pq.trimmed == "" {
		return false
	}
	// An exact occurrence of the quote normalises to an occurrence of the
	// normalised quote, which holds the trimmed quote.
	found, decided := x.contains(d.normalized().text, pq.trimmed)
	return decided && !found
}

// exactSpace searches the document text as it is.
func (d *document) exactSpace() searchSpace {
	return searchSpace{
		text:       d.text,
		validPage:  d.validPage,
		pageOf:     d.pageOf,
		pageBounds: d.pageBounds,
	}
}

// normalSpace searches the normalised text, with pages mapped through it.
func (d *document) normalSpace(n *normalized) searchSpace {
	return searchSpace{
		text:      n.text,
		validPage: d.validPage,
		pageOf:    func(i int) int { return d.pageOf(n.orig.of(i)) },
		pageBounds: func(p int) (int, int) {
			lo, hi := d.pageBounds(p)
			return n.firstAtOrAfter(lo), n.firstAtOrAfter(hi)
		},
	}
}

// normalized is a document's normalised text with a map back to the original.
type normalized struct {
	text string
	// orig.of(i) is the byte offset in the document text of the rune that
	// produced text[i]; it never decreases.
	orig originMap
	src  string // the document text
}

func newNormalized(src string) *normalized {
	text, orig := normalize(src, true)
	return &normalized{text: text, orig: orig, src: src}
}

// firstAtOrAfter is the first normalised offset produced at or after
// original offset off.
func (n *normalized) firstAtOrAfter(off int) int {
	return n.orig.firstAtOrAfter(off, len(n.text))
}

// original maps the normalised range [lo, hi) to the original byte range
// covering every rune that produced it.
func (n *normalized) original(lo, hi int) (int, int) {
	start := n.orig.of(lo)
	last := n.orig.of(hi - 1)
	_, w := utf8.DecodeRuneInString(n.src[last:])
	return start, last + w
}

// runeIndex turns byte offsets into code point offsets without rescanning
// the text from its start: it records the code point count at rune
// boundaries about every runeBlock bytes.
type runeIndex struct {
	identity bool // every byte is one code point
	valid    bool // the text is valid UTF-8, so counting can take the fast path
	marks    []runeMark
}

type runeMark struct{ byteOff, runeOff int }

const runeBlock = 4096

func newRuneIndex(s string) runeIndex {
	x := runeIndex{valid: utf8.ValidString(s)}
	if x.count(s) == len(s) {
		return runeIndex{identity: true}
	}
	x.marks = make([]runeMark, 0, len(s)/runeBlock+1)
	prev := runeMark{}
	for k := 0; k*runeBlock < len(s); k++ {
		at := boundaryAtOrBefore(s, k*runeBlock)
		prev = runeMark{at, prev.runeOff + x.count(s[prev.byteOff:at])}
		x.marks = append(x.marks, prev)
	}
	return x
}

// offset is the code point offset of byte offset off, which must lie on a
// rune boundary of s.
func (x runeIndex) offset(s string, off int) int {
	if x.identity {
		return off
	}
	m := x.marks[min(off/runeBlock, len(x.marks)-1)]
	return m.runeOff + x.count(s[m.byteOff:off])
}

// count is the number of code points in s, a part of the indexed text cut
// at rune boundaries.
func (x runeIndex) count(s string) int {
	if !x.valid {
		return utf8.RuneCountInString(s)
	}
	// In valid UTF-8 every byte but a continuation byte (10xxxxxx) starts a
	// code point; count them eight at a time.
	n, i := 0, 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		n += 8 - bits.OnesCount64(w&^(w<<1)&0x8080808080808080)
	}
	for ; i < len(s); i++ {
		if utf8.RuneStart(s[i]) {
			n++
		}
	}
	return n
}

// boundaryAtOrBefore is the last boundary between runes, as Go's decoding
// of s sees them, at or before byte i. Any byte that is not a continuation
// byte starts a rune; a continuation byte not covered by the rune started
// up to three bytes before it is a rune (U+FFFD) of its own.
func boundaryAtOrBefore(s string, i int) int {
	if i <= 0 || i >= len(s) {
		return i
	}
	for j := i; j >= max(0, i-3); j-- {
		if utf8.RuneStart(s[j]) {
			if _, w := utf8.DecodeRuneInString(s[j:]); j+w > i {
				return j
			}
			return i
		}
	}
	return i
}

// searchSpace is a text to search verbatim, with its pages.
type searchSpace struct {
	text       string
	validPage  func(p int) bool
	pageOf     func(i int) int
	pageBounds func(p int) (lo, hi int)
}

// maxOccurrences bounds how many occurrences of a needle are weighed
// against each other, so a one-letter quote costs little even in a large
// document.
const maxOccurrences = 1 << 14

// probeLen is short enough for strings.Index's vectorised search on every
// amd64 and arm64 CPU (bytealg.MaxLen is 31 or more there).
const probeLen = 31

// indexLong is strings.Index for long needles. strings.Index falls back to
// Rabin-Karp for needles longer than its vectorised search takes, several
// times slower on natural text, and most quotes are that long. So this
// searches for a probeLen-byte window of the needle that starts with its
// least common byte (a rare first byte means few false starts) and checks the
// whole needle at each hit.
func indexLong(s, needle string) int {
	if len(needle) <= probeLen {
		return strings.Index(s, needle)
	}
	off := rarestStart(needle[:len(needle)-probeLen+1])
	probe := needle[off : off+probeLen]
	for from := off; from <= len(s); {
		i := strings.Index(s[from:], probe)
		if i < 0 {
			return -1
		}
		at := from + i - off
		if strings.HasPrefix(s[at:], needle) {
			return at
		}
		from += i + 1
	}
	return -1
}

// commonBytes orders the most frequent bytes of English text, commonest first.
const commonBytes = " etaoinshrdlcumwfgypbvk,.\n"

// rarestStart is the index of the least common byte among the first bytes
// of candidates (the earliest on ties).
func rarestStart(candidates string) int {
	best, bestRank := 0, len(commonBytes)+1
	for i := 0; i < len(candidates); i++ {
		rank := strings.IndexByte(commonBytes, candidates[i])
		if rank < 0 {
			return i // not among the common bytes: as rare as it gets
		}
		if rank > bestRank || bestRank > len(commonBytes) {
			best, bestRank = i, rank
		}
	}
	return best
}

// locate finds needle in the space. Among several occurrences it prefers,
// in order: one that neither starts nor ends inside a word, one on page
// (or nearest to it) when page is valid, and the earliest.
func (s searchSpace) locate(needle string, page int) (at int, aligned, ok bool) {
	if needle == "" {
		return 0, false, false
	}
	hasPage := s.validPage(page)
	best, bestAligned, bestDist := -1, false, math.MaxInt
	consider := func(i int) {
		a := wordAligned(s.text, i, i+len(needle))
		dist := 0
		if hasPage {
			dist = abs(s.pageOf(i) - page)
		}
		if best < 0 || (a && !bestAligned) || (a == bestAligned && dist < bestDist) {
			best, bestAligned, bestDist = i, a, dist
		}
	}
	if hasPage {
		// The cited page first: usually the quote is there, and searching
		// one page is cheap.
		lo, hi := s.pageBounds(page)
		region := s.text[lo:min(len(s.text), hi+len(needle)-1)]
		for from, n := 0, 0; n < maxOccurrences; n++ {
			i := indexLong(region[from:], needle)
			if i < 0 {
				break
			}
			consider(lo + from + i)
			if bestAligned {
				return best, true, true
			}
			from += i + 1
		}
	}
	for from, n := 0, 0; n < maxOccurrences; n++ {
		i := indexLong(s.text[from:], needle)
		if i < 0 {
			break
		}
		at := from + i
		consider(at)
		// Occurrences further on are on this page or later ones, so once
		// they can be no nearer to the cited page than the aligned one held,
		// none can beat it.
		if bestAligned && (!hasPage || s.pageOf(at)-page >= bestDist) {
			break
		}
		from = at + 1
	}
	return best, bestAligned, best >= 0
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
