package anchor

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"
)

// Fuzzy search works in two steps so its cost grows with the size of the
// quote, not with the product of quote and document:
//
//  1. Candidate regions. The normalised document is split into word tokens
//     and every pair of adjacent tokens (a word bigram) is hashed into an
//     index. Each bigram of the quote found at document token p, quote
//     token j, votes for the alignment diagonal p-j; diagonals that fall
//     close together form a cluster, and the few clusters with the most
//     votes are the candidates. Bigrams so common that they say little
//     (more than maxPostings occurrences) are skipped.
//  2. Exact alignment. Around each candidate a window of the normalised
//     text is aligned with the quote by semi-global edit distance (Sellers'
//     algorithm: the quote must be consumed whole, the window's prefix and
//     suffix are free), computed bit-parallel (see bitalign.go) in
//     O(len(quote)/64 * len(window)). The match is then grown to whole
//     words where that keeps it above the threshold.
//
// Similarity is 1 - distance / max(len(quote), len(match)), both counted in
// code points of normalised text.

const (
	// maxPostings: a bigram occurring more often than this is skipped...
	maxPostings = 256
	// ...unless fewer than minShingles bigrams of the quote are left; then
	// the rarest are used anyway, if they occur at most maxForcedPostings
	// times (text made of nothing but very common pairs, such as a table
	// of zeros, is not worth a fuzzy search).
	minShingles       = 3
	maxForcedPostings = 4096
	// maxCandidates bounds the alignments one quote costs per document.
	maxCandidates = 4
)

// shingleIndex maps word bigrams of a normalised text to where they occur.
// Bigram i is the pair of tokens i and i+1. The index is a hash table in
// compressed form: the bigrams of bucket b are entries[bucketStart[b]:
// bucketStart[b+1]], in text order.
type shingleIndex struct {
	tokens
	mask        uint32
	bucketStart []int32
	entries     []int32
}

func newShingleIndex(text string) *shingleIndex {
	x := &shingleIndex{tokens: tokenize(text)}
	n := max(0, len(x.hash)-1)
	buckets := 1
	for buckets < n {
		buckets <<= 1
	}
	x.mask = uint32(buckets - 1)
	// Count each bucket's bigrams, sum the counts so bucketStart[b] is
	// where bucket b ends, then place the bigrams last to first, moving
	// each bucketStart[b] back to where its bucket starts.
	x.bucketStart = make([]int32, buckets+1)
	for i := range n {
		x.bucketStart[x.key(i)&x.mask]++
	}
	for b := 1; b < buckets; b++ {
		x.bucketStart[b] += x.bucketStart[b-1]
	}
	x.bucketStart[buckets] = int32(n)
	x.entries = make([]int32, n)
	for i := n - 1; i >= 0; i-- {
		b := x.key(i) & x.mask
		x.bucketStart[b]--
		x.entries[x.bucketStart[b]] = int32(i)
	}
	return x
}

// key is the hash of bigram i.
func (x *shingleIndex) key(i int) uint32 { return bigramKey(x.hash[i], x.hash[i+1]) }

// postings calls fn with every bigram whose hash is key, in text order.
func (x *shingleIndex) postings(key uint32, fn func(i int32)) {
	b := key & x.mask
	for _, i := range x.entries[x.bucketStart[b]:x.bucketStart[b+1]] {
		if x.key(int(i)) == key {
			fn(i)
		}
	}
}

// countUpTo counts the bigrams whose hash is key, stopping once there are
// more than limit.
func (x *shingleIndex) countUpTo(key uint32, limit int) int {
	b := key & x.mask
	n := 0
	for _, i := range x.entries[x.bucketStart[b]:x.bucketStart[b+1]] {
		if x.key(int(i)) == key {
			if n++; n > limit {
				break
			}
		}
	}
	return n
}

// contains reports whether needle occurs in text, the normalised text the
// index was built from, by checking only where the rarest pair of the
// needle's inner tokens occurs. Inner tokens (all but the first and the
// last, which may be cut words) are whole tokens of the text wherever the
// needle occurs, since token boundaries depend only on adjacent runes. It
// decides only for needles of four tokens or more.
func (x *shingleIndex) contains(text, needle string) (found, decided bool) {
	nt := tokenize(needle)
	starts, hashes := nt.start, nt.hash
	if len(hashes) < 4 {
		return false, false
	}
	rarest, rarestN := 0, math.MaxInt
	for j := 1; j+1 < len(hashes)-1 && rarestN > 0; j++ {
		if n := x.countUpTo(bigramKey(hashes[j], hashes[j+1]), rarestN); n < rarestN {
			rarest, rarestN = j, n
		}
	}
	x.postings(bigramKey(hashes[rarest], hashes[rarest+1]), func(i int32) {
		at := int(x.start[i] - starts[rarest])
		if !found && at >= 0 && at+len(needle) <= len(text) && text[at:at+len(needle)] == needle {
			found = true
		}
	})
	return found, true
}

// cluster is a run of alignment diagonals (document token - quote token)
// that agree to within the allowed drift.
type cluster struct {
	lo, hi int32
	votes  int
}

// clusters returns up to limit candidate regions for a quote with token
// hashes q, best first. drift is how far (in tokens) insertions and
// deletions may shift the diagonal across the quote. Between clusters of
// equal votes the one of lower rank (say, distance from the cited page)
// goes first, so text repeated on many pages is still looked for on the
// page cited.
func (x *shingleIndex) clusters(q []uint32, drift int32, limit int, rank func(diag int32) int) []cluster {
	type shingle struct {
		j, n int
		key  uint32
	}
	shingles := make([]shingle, 0, len(q)-1)
	for j := range len(q) - 1 {
		key := bigramKey(q[j], q[j+1])
		if n := x.countUpTo(key, maxForcedPostings); n > 0 {
			shingles = append(shingles, shingle{j: j, n: n, key: key})
		}
	}
	slices.SortStableFunc(shingles, func(a, b shingle) int { return a.n - b.n })
	var diags []int32
	for k, s := range shingles {
		if s.n > maxForcedPostings || (s.n > maxPostings && k >= minShingles) {
			break
		}
		x.postings(s.key, func(i int32) { diags = append(diags, i-int32(s.j)) })
	}
	if len(diags) == 0 {
		return nil
	}
	slices.Sort(diags)

	// votes[l] counts the diagonals in [diags[l], diags[l]+drift].
	votes := make([]int, len(diags))
	r := 0
	for l := range diags {
		for r < len(diags) && diags[r]-diags[l] <= drift {
			r++
		}
		votes[l] = r - l
	}
	// Clusters closer than half a quote would align to overlapping windows;
	// keep only the strongest of them.
	exclusion := int32(len(q)/2) + drift
	var out []cluster
	for len(out) < limit {
		l, lRank := -1, 0
		for i, v := range votes {
			if v == 0 || (l >= 0 && v < votes[l]) {
				continue
			}
			if l < 0 || v > votes[l] {
				l, lRank = i, -1 // ranked only when a tie needs it
				continue
			}
			if lRank < 0 {
				lRank = rank(diags[l])
			}
			if r := rank(diags[i]); r < lRank {
				l, lRank = i, r
			}
		}
		if l < 0 {
			break
		}
		c := cluster{lo: diags[l], hi: diags[l+votes[l]-1], votes: votes[l]}
		out = append(out, c)
		for i, d := range diags {
			if d >= c.lo-exclusion && d <= c.hi+exclusion {
				votes[i] = 0
			}
		}
	}
	return out
}

// tokens is a text split into words: runs of letters, digits and marks,
// with each rune of a script written without spaces a word of its own.
type tokens struct {
	start, end []int32 // byte range of each word
	hash       []uint32
}

// tokenize splits s into words, hashing each with wordHash.
func tokenize(s string) tokens {
	guess := len(s)/5 + 1
	t := tokens{start: make([]int32, 0, guess), end: make([]int32, 0, guess), hash: make([]uint32, 0, guess)}
	open, h := -1, wordHash{}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !asciiWord[c] {
				if open >= 0 {
					t.add(open, i, h.sum())
					open, h = -1, wordHash{}
				}
				i++
				continue
			}
			if open < 0 {
				open = i
			}
			// The rest of the run of ASCII word bytes, eight at a time where
			// they are all ASCII.
			for i+8 <= len(s) {
				w := binary.LittleEndian.Uint64([]byte(s[i : i+8]))
				if w&highBits != 0 {
					break
				}
				other := ^wordBytes(w) & highBits
				if other == 0 {
					h.add(w, 8)
					i += 8
					continue
				}
				k := uint(bits.TrailingZeros64(other) / 8)
				h.add(w&(1<<(8*k)-1), k)
				i += int(k)
				break
			}
			for ; i < len(s) && asciiWordByte[s[i]]; i++ {
				h.add(uint64(s[i]), 1)
			}
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case !isWordRune(r):
			if open >= 0 {
				t.add(open, i, h.sum())
				open, h = -1, wordHash{}
			}
		case standalone(r):
			if open >= 0 {
				t.add(open, i, h.sum())
				h = wordHash{}
			}
			h.addString(s[i : i+w])
			t.add(i, i+w, h.sum())
			open, h = -1, wordHash{}
		default:
			if open < 0 {
				open = i
			}
			h.addString(s[i : i+w])
		}
		i += w
	}
	if open >= 0 {
		t.add(open, len(s), h.sum())
	}
	return t
}

// wordBytes has the high bit set of each byte of w, eight ASCII bytes, that
// is a letter or digit.
func wordBytes(w uint64) uint64 {
	return inRange(w, '0', '9') | inRange(w, 'a', 'z') | inRange(w, 'A', 'Z')
}

// wordHash hashes the bytes of a word eight at a time, so a run of ASCII
// letters costs one multiplication per eight of them; bytes added one by
// one hash the same as bytes added together.
type wordHash struct {
	h, pending uint64
	n          uint // bytes in pending
}

// add adds the k bytes (at most eight) of part, the first in its low byte.
func (x *wordHash) add(part uint64, k uint) {
	x.pending |= part << (8 * x.n)
	if x.n+k < 8 {
		x.n += k
		return
	}
	x.h = (x.h ^ x.pending) * 0x9E3779B97F4A7C15
	x.h ^= x.h >> 29
	x.pending = part >> (8 * (8 - x.n)) // 0 where x.n == 0: Go shifts out all bits
	x.n += k - 8
}

func (x *wordHash) addString(s string) {
	for i := 0; i < len(s); i++ {
		x.add(uint64(s[i]), 1)
	}
}

func (x *wordHash) sum() uint32 {
	h := (x.h ^ x.pending ^ uint64(x.n)<<59) * 0xD6E8FEB86659FD93
	h ^= h >> 32
	return uint32(h)
}

// add appends the word s[start:end] with hash h.
func (t *tokens) add(start, end int, h uint32) {
	t.start = append(t.start, int32(start))
	t.end = append(t.end, int32(end))
	t.hash = append(t.hash, h)
}

func bigramKey(a, b uint32) uint32 {
	return uint32((uint64(a)<<32 | uint64(b)) * 0x9E3779B97F4A7C15 >> 32)
}

// fuzzyMatch is a match in normalised text: bytes [lo, hi).
type fuzzyMatch struct {
	lo, hi     int
	similarity float64
}

// fuzzyMatches finds the regions of the normalised text similar to the
// trimmed quote, whose similarity reaches threshold, best first: the most
// similar, then the nearest to page (when valid), then the earliest. It
// aligns the quote around each of the few candidate regions the index
// proposes (see clusters); matches that overlap count once, as the better
// of them. What trimming took off the quote joins a match where the text
// has it right there: the quotation marks were the document's own.
func (d *document) fuzzyMatches(pq preparedQuote, page int, threshold float64) []fuzzyMatch {
	quote := pq.trimmed
	n := d.normalized()
	x := d.shingleIndex()
	if n == nil || x == nil {
		return nil
	}
	qHash := tokenize(quote).hash
	if len(qHash) < 2 {
		return nil
	}
	q := []rune(quote)
	pattern := newBitPattern(q)
	drift := int32(math.Ceil((1-threshold)*float64(len(qHash)))) + 1
	words := int32(len(x.hash))

	pageDistance := func(normOff int) int {
		if !d.validPage(page) {
			return 0
		}
		return abs(d.pageOf(n.orig.of(normOff)) - page)
	}
	rank := func(diag int32) int { return pageDistance(int(x.start[min(max(diag, 0), words-1)])) }

	var found []fuzzyMatch
	var dists []int
	better := func(a fuzzyMatch, aDist int, b fuzzyMatch, bDist int) bool {
		return a.similarity > b.similarity ||
			(a.similarity == b.similarity && (aDist < bDist || (aDist == bDist && a.lo < b.lo)))
	}
	for _, c := range x.clusters(qHash, drift, maxCandidates, rank) {
		first := max(0, c.lo-drift)
		last := min(words, c.hi+int32(len(qHash))+drift) // exclusive
		lo, hi := 0, len(n.text)
		if first > 0 {
			lo = int(x.end[first-1])
		}
		if last < words {
			hi = int(x.start[last])
		}
		m, ok := alignWindow(pattern, q, n.text, lo, hi, threshold)
		if !ok {
			continue
		}
		m.lo, m.hi = surround(n.text, m.lo, m.hi, pq.lead, pq.trail)
		dist := pageDistance(m.lo)
		overlapped := false
		for k, f := range found {
			if m.lo < f.hi && f.lo < m.hi {
				overlapped = true
				if better(m, dist, f, dists[k]) {
					found[k], dists[k] = m, dist
				}
				break
			}
		}
		if !overlapped {
			found, dists = append(found, m), append(dists, dist)
		}
	}
	// Best first; a handful of matches at most.
	for i := 1; i < len(found); i++ {
		for j := i; j > 0 && better(found[j], dists[j], found[j-1], dists[j-1]); j-- {
			found[j], found[j-1] = found[j-1], found[j]
			dists[j], dists[j-1] = dists[j-1], dists[j]
		}
	}
	return found
}

// alignWindow aligns q with text[lo:hi] and returns the best match there,
// snapped to whole words when that keeps it above threshold.
func alignWindow(p *bitPattern, q []rune, text string, lo, hi int, threshold float64) (fuzzyMatch, bool) {
	window := make([]rune, 0, hi-lo)
	offs := make([]int, 0, hi-lo+1)
	for i := lo; i < hi; {
		r, w := utf8.DecodeRuneInString(text[i:])
		window = append(window, r)
		offs = append(offs, i)
		i += w
	}
	offs = append(offs, hi)
	slots := p.slots(window)

	// similarity >= threshold needs dist <= (1-threshold) * (len(q)+dist).
	dist, s, e, ok := alignBits(p, q, window, slots, int((1-threshold)*float64(len(q))/threshold+1e-9))
	if !ok {
		return fuzzyMatch{}, false
	}
	raw := similarity(dist, len(q), e-s)
	if raw < threshold {
		return fuzzyMatch{}, false
	}
	// Prefer the match grown to whole words, then the match without the
	// white space it may start or end with, then the alignment as it is.
	ts, te := s, e
	for ts < te && window[ts] == ' ' {
		ts++
	}
	for te > ts && window[te-1] == ' ' {
		te--
	}
	ws, we := ts, te
	for ws > 0 && ws < we && joins(window[ws-1], window[ws]) {
		ws--
	}
	for we < len(window) && we > ws && joins(window[we-1], window[we]) {
		we++
	}
	sim := raw
	for _, c := range [][2]int{{ws, we}, {ts, te}} {
		if c[0] >= c[1] || (c[0] == s && c[1] == e) {
			continue
		}
		if cs := similarity(p.distance(slots[c[0]:c[1]]), len(q), c[1]-c[0]); cs >= threshold {
			s, e, sim = c[0], c[1], cs
			break
		}
	}
	return fuzzyMatch{lo: offs[s], hi: offs[e], similarity: sim}, true
}

func similarity(dist, a, b int) float64 {
	return 1 - float64(dist)/float64(max(a, b, 1))
}

// maxShortRegions is how many matching regions a short quote's search
// looks for: two are enough to know it is ambiguous.
const maxShortRegions = 2

// maxShortCandidates bounds the places a short quote is aligned at in one
// document; a quote whose words occur in more places than that cannot be
// told apart from its look-alikes, and is taken for ambiguous.
const maxShortCandidates = 4096

// shortMatches finds the regions of the normalised text that match the
// trimmed quote, a short one, up to limit of them: regions of whole words
// whose similarity reaches threshold and whose words are the quote's but
// for one word (see oneWordApart). Unlike the index, which proposes
// regions by the word pairs they share with the quote, it misses none of
// them, so a quote resembling several places can be told from one that
// resembles one: each such region holds, verbatim, the quote with one of
// its words left out, so for each word the longer part of the quote on
// either side of it is searched for, and the quote aligned around each
// occurrence. A quote of one word is not matched.
func (d *document) shortMatches(pq preparedQuote, threshold float64, limit int) []fuzzyMatch {
	n := d.normalized()
	quote := pq.trimmed
	q := []rune(quote)
	words := tokenize(quote)
	k := int((1-threshold)*float64(len(q))/threshold + 1e-9)
	if n == nil || len(words.start) < 2 || k == 0 {
		return nil // k == 0: only an exact match, which the verbatim search did not find
	}
	p := newBitPattern(q)
	text := n.text
	var out []fuzzyMatch
	candidates := 0
	col := p.newColumn()
	for e := range words.start {
		pre, word, suf := quote[:words.start[e]], quote[words.start[e]:words.end[e]], quote[words.end[e]:]
		// The most the left-out word and the slack either side can take.
		reach := utf8.RuneCountInString(word) + 2*k
		fixed := pre
		if len(suf) > len(pre) {
			fixed = suf
		}
		for at := 0; ; {
			j := strings.Index(text[at:], fixed)
			if j < 0 {
				break
			}
			hit := at + j
			at = hit + 1
			if candidates++; candidates > maxShortCandidates {
				return nil
			}
			var lo, hi int
			if fixed == pre {
				lo, hi = hit, runesForward(text, hit+len(pre), reach+utf8.RuneCountInString(suf))
				if !strings.Contains(text[hit+len(pre):hi], suf) {
					continue
				}
			} else {
				lo, hi = runesBack(text, hit, reach+utf8.RuneCountInString(pre)), hit+len(suf)
				if !strings.Contains(text[lo:hit], pre) {
					continue
				}
			}
			if p.leastScore(col, text, lo, hi) > k {
				continue // a cheap look before the alignment that places the match
			}
			m, ok := alignWindow(p, q, text, lo, hi, threshold)
			if !ok || !wordAligned(text, m.lo, m.hi) || !oneWordApart(quote, text[m.lo:m.hi]) {
				continue
			}
			m.lo, m.hi = surround(text, m.lo, m.hi, pq.lead, pq.trail)
			if slices.ContainsFunc(out, func(f fuzzyMatch) bool { return m.lo < f.hi && f.lo < m.hi }) {
				continue // found again from another word
			}
			if out = append(out, m); len(out) >= limit {
				return out
			}
		}
	}
	return out
}

// leastScore is the least edit distance between the quote and a substring
// of text[lo:hi], computed in c, which it resets.
func (p *bitPattern) leastScore(c column, text string, lo, hi int) int {
	for b := range c.pv {
		c.pv[b], c.mv[b] = ^uint64(0), 0
	}
	score := p.m
	best := score
	for i := lo; i < hi; {
		r, w := utf8.DecodeRuneInString(text[i:])
		i += w
		score += p.step(c, p.slot(r), 0)
		best = min(best, score)
	}
	return best
}
