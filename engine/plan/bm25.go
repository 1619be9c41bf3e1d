package plan

import (
	"cmp"
	"math"
	"slices"
	"unicode"
	"unicode/utf8"
)

// BM25 parameters: the usual ones, which suit passages of a page or less.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// index scores chunks against queries with BM25. Only the terms of the
// queries are indexed: a request's rules are known before its documents are
// read, and looking up a few hundred terms is much cheaper than building a
// full inverted index of a long document. Chunks are added as they are cut,
// in the same pass over the text that measures them.
type index struct {
	terms    map[string]int32 // query term → id
	filter   termFilter       // cheap test before the map
	prefixes termFilter       // the first two bytes of every query term: a cheaper test still
	postings [][]posting      // by term id
	lengths  []int32          // terms per chunk
	avgLen   float64
	queries  [][]int32 // term ids of each query, duplicates kept (they weigh more)

	// The chunk being measured: term counts by id, the ids counted.
	counts  []int32
	touched []int32
	buf     []byte
}

type posting struct {
	chunk int32
	tf    int32
}

// tally is what one pass over a text finds.
type tally struct {
	count tokenCount // Count's estimate is count.total()
	runes int
	terms int32
}

func newIndex(queries []string) *index {
	ix := &index{terms: map[string]int32{}, queries: make([][]int32, len(queries))}
	for q, text := range queries {
		eachTerm(text, &ix.buf, true, func(term []byte) {
			id, ok := ix.terms[string(term)]
			if !ok {
				id = int32(len(ix.terms))
				ix.terms[string(term)] = id
				ix.filter.add(term)
				ix.prefixes.set(prefixKey(term[0], term[1]))
			}
			ix.queries[q] = append(ix.queries[q], id)
		})
	}
	ix.postings = make([][]posting, len(ix.terms))
	ix.counts = make([]int32, len(ix.terms))
	return ix
}

// commit adds the text last measured as the next chunk.
func (ix *index) commit(t tally) {
	c := int32(len(ix.lengths))
	for _, id := range ix.touched {
		ix.postings[id] = append(ix.postings[id], posting{chunk: c, tf: ix.counts[id]})
		ix.counts[id] = 0
	}
	ix.touched = ix.touched[:0]
	ix.lengths = append(ix.lengths, t.terms)
}

// discard forgets the text last measured.
func (ix *index) discard() {
	for _, id := range ix.touched {
		ix.counts[id] = 0
	}
	ix.touched = ix.touched[:0]
}

// finish computes the mean chunk length once every chunk is in.
func (ix *index) finish() {
	total := 0
	for _, n := range ix.lengths {
		total += int(n)
	}
	if len(ix.lengths) > 0 {
		ix.avgLen = float64(total) / float64(len(ix.lengths))
	}
}

// scores fills out (one entry per chunk) with query q's BM25 score of each
// chunk.
func (ix *index) scores(q int, out []float64) {
	clear(out)
	n := float64(len(ix.lengths))
	avg := ix.avgLen
	if avg == 0 {
		avg = 1
	}
	for _, id := range ix.queries[q] {
		ps := ix.postings[id]
		if len(ps) == 0 {
			continue
		}
		df := float64(len(ps))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range ps {
			tf := float64(p.tf)
			norm := bm25K1 * (1 - bm25B + bm25B*float64(ix.lengths[p.chunk])/avg)
			out[p.chunk] += idf * tf * (bm25K1 + 1) / (tf + norm)
		}
	}
}

// eachTerm calls f with every indexable term of s, lower-cased and lightly
// stemmed, in buf (valid only during the call). Terms are runs of letters
// and digits of two or more characters, without stop words when skipStop is
// set (documents need not skip them: only query terms are looked up).
func eachTerm(s string, buf *[]byte, skipStop bool, f func(term []byte)) {
	b := (*buf)[:0]
	emit := func() {
		if len(b) >= 2 && !(skipStop && stopWords[string(b)]) {
			f(stem(b))
		}
		b = b[:0]
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
				b = append(b, c)
			case 'A' <= c && c <= 'Z':
				b = append(b, c+'a'-'A')
			default:
				emit()
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b = utf8.AppendRune(b, unicode.ToLower(r))
		} else {
			emit()
		}
	}
	emit()
	*buf = b
}

// stem strips the commonest English inflections so that "terminates",
// "terminated" and "terminating" meet "terminate" half way. It is
// deliberately timid: a wrong merge costs more than a missed one. t is
// lower-case.
func stem(t []byte) []byte {
	keep, y := stemLen(string(t))
	t = t[:keep]
	if y {
		t = append(t, 'y')
	}
	return t
}

// stemLen says how much of word w (in any case) its stem keeps, and whether
// a 'y' follows.
func stemLen(w string) (keep int, y bool) {
	n := len(w)
	if n < 4 {
		return n, false
	}
	l1, l2, l3 := w[n-1]|0x20, w[n-2]|0x20, w[n-3]|0x20
	switch l1 {
	case 's':
		switch {
		case n > 5 && l2 == 'e' && l3 == 'i':
			return n - 3, true
		case n > 4 && l2 == 'e':
			n -= 2
		case l2 != 's':
			n--
		}
	case 'g':
		if n > 5 && l2 == 'n' && l3 == 'i' {
			n -= 3
		}
	case 'd':
		if n > 4 && l2 == 'e' {
			n -= 2
		}
	}
	if n > 4 && w[n-1]|0x20 == 'e' {
		n--
	}
	return n, false
}

// measure makes one pass over text: it counts its tokens as Count does, its
// runes, its terms, and the query terms among them (into ix.counts, to be
// committed or discarded). Plain ASCII words, nearly all of most documents,
// are measured, stemmed and tested against the filter in place; a word is
// copied only when it may be a query term.
func (ix *index) measure(text string) tally {
	var t tally
	n := len(text)
	for i := 0; i < n; {
		switch scanClass[text[i]] {
		case scanSpace:
			if i+1 < n {
				if c := scanClass[text[i+1]]; c == scanOther || c == scanDigit || c == scanMark {
					t.count.tokens++
				}
			}
			t.runes++
			i++
			continue
		case scanMark:
			j := i + 1
			for j < n && text[j] == text[i] {
				j++
			}
			t.count.tokens += markTokens(j - i)
			t.runes += j - i
			i = j
			continue
		case scanOther:
			t.count.tokens++
			t.runes++
			i++
			continue
		}
		// A run of ASCII letters and digits, maybe continued by non-ASCII
		// letters.
		j, letters := i, 0
		var run tokenCount
		for ; j < n; j++ {
			switch scanClass[text[j]] {
			case scanLetter:
				letters++
				continue
			case scanDigit:
				if letters > 0 {
					run.word(letters)
					letters = 0
				}
				run.tokens++
				continue
			}
			break
		}
		if j < n && scanClass[text[j]] == scanNonASCII {
			k := j
			for k < n {
				r, size := utf8.DecodeRuneInString(text[k:])
				if r < utf8.RuneSelf {
					if c := scanClass[byte(r)]; c != scanLetter && c != scanDigit {
						break
					}
				} else if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
					break
				}
				k += size
			}
			if k == i { // a non-ASCII character that is not a letter
				_, size := utf8.DecodeRuneInString(text[i:])
				t.count.add(text[i : i+size])
				t.runes++
				i += size
				continue
			}
			word := text[i:k]
			t.count.add(word)
			t.runes += utf8.RuneCountInString(word)
			eachTerm(word, &ix.buf, false, func(term []byte) {
				t.terms++
				ix.count(term)
			})
			i = k
			continue
		}
		if letters > 0 {
			run.word(letters)
		}
		t.count.plus(run)
		t.runes += j - i
		if j-i >= 2 {
			t.terms++
			word := text[i:j]
			if !ix.prefixes.hasHash(prefixKey(word[0], word[1])) {
				// Stemming keeps the first two bytes: no query term starts so.
				i = j
				continue
			}
			keep, y := stemLen(word)
			last := word[keep-1]
			before := word[max(keep-2, 0)]
			length := keep
			if y {
				before, last, length = last, 'y', keep+1
			}
			if ix.filter.hasHash(termHash4(length, word[0], word[1], before, last)) {
				b := ix.buf[:0]
				for k := 0; k < keep; k++ {
					b = append(b, word[k]|0x20)
				}
				if y {
					b = append(b, 'y')
				}
				ix.buf = b
				ix.countUnfiltered(b)
			}
		}
		i = j
	}
	return t
}

// Byte classes of measure.
const (
	scanOther = iota // punctuation, line and page breaks, controls
	scanSpace
	scanLetter
	scanDigit
	scanMark // ASCII punctuation
	scanNonASCII
)

var scanClass = func() (t [256]uint8) {
	for c := '0'; c <= '9'; c++ {
		t[c] = scanDigit
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = scanLetter, scanLetter
	}
	t[' '], t['\t'], t['\r'] = scanSpace, scanSpace, scanSpace
	for _, c := range "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" {
		t[c] = scanMark
	}
	for c := utf8.RuneSelf; c < 256; c++ {
		t[c] = scanNonASCII
	}
	return t
}()

// count counts term if it is a query term.
func (ix *index) count(term []byte) {
	if ix.filter.has(term) {
		ix.countUnfiltered(term)
	}
}

// countUnfiltered is count for a term that passed the filter.
func (ix *index) countUnfiltered(term []byte) {
	if id, ok := ix.terms[string(term)]; ok {
		if ix.counts[id] == 0 {
			ix.touched = append(ix.touched, id)
		}
		ix.counts[id]++
	}
}

// stopWords carry no meaning of their own for retrieval.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range []string{
		"a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "do", "does", "for", "from",
		"has", "have", "he", "her", "his", "if", "in", "into", "is", "it", "its", "may", "must",
		"no", "not", "of", "on", "or", "our", "shall", "she", "should", "so", "such", "than", "that",
		"the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "under",
		"upon", "was", "we", "were", "what", "when", "where", "which", "who", "will", "with",
		"would", "you", "your", "any", "all", "each", "other", "document", "material", "rule",
	} {
		m[w] = true
	}
	return m
}()

// termFilter is a one-hash Bloom filter of the query terms: most words of a
// document are not query terms, and testing a bit is much cheaper than a map
// lookup.
type termFilter [1 << 16 / 64]uint64

// termHash looks at a term's length and first two and last two bytes only,
// with bit 5 set (which lower-cases ASCII letters and leaves digits alone),
// so that it can be taken of a word as it stands in the document at the cost
// of a few more false positives.
func termHash(t []byte) uint32 {
	return termHash4(len(t), t[0], t[1], t[max(len(t)-2, 0)], t[len(t)-1])
}

func termHash4(length int, b0, b1, b2, b3 byte) uint32 {
	h := uint32(b0|0x20) | uint32(b1|0x20)<<8 | uint32(b2|0x20)<<16 | uint32(b3|0x20)<<24
	h ^= uint32(length) * 0x9e3779b1
	h *= 0x85ebca6b
	return h ^ h>>15
}

func (f *termFilter) hasHash(h uint32) bool {
	h &= 1<<16 - 1
	return f[h/64]&(1<<(h%64)) != 0
}

// prefixKey is the first two bytes of a term, lower-cased as termHash does.
func prefixKey(b0, b1 byte) uint32 { return uint32(b0|0x20)<<8 | uint32(b1|0x20) }

func (f *termFilter) set(h uint32) {
	h &= 1<<16 - 1
	f[h/64] |= 1 << (h % 64)
}

func (f *termFilter) add(t []byte) {
	h := termHash(t) & (1<<16 - 1)
	f[h/64] |= 1 << (h % 64)
}

func (f *termFilter) has(t []byte) bool { return f.hasHash(termHash(t)) }

// Nearest ranks texts against query with the planner's BM25 (the same terms,
// stemming and stop words that choose a long document's pages) and returns
// the indexes of the k that score highest, best first, equals in their
// order; texts that share no term with query are left out.
func Nearest(query string, texts []string, k int) []int {
	if k <= 0 || len(texts) == 0 {
		return nil
	}
	ix := newIndex([]string{query})
	for _, t := range texts {
		ix.commit(ix.measure(t))
	}
	ix.finish()
	scores := make([]float64, len(texts))
	ix.scores(0, scores)
	var out []int
	for i, s := range scores {
		if s > 0 {
			out = append(out, i)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
	return out[:min(k, len(out))]
}
