package anchor

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// Plain versions of the alignments (dynamic programming), normalize and
// tokenize (rune by rune), which the bit-parallel and word-at-a-time code
// must agree with exactly.

// semiGlobal finds the substring t[s:e] whose edit distance to q is least,
// with q consumed whole (Sellers' algorithm), if that distance is at most
// k. Each cell carries the start of the path that reached it, so no
// traceback is needed and memory is O(len(q)). Ukkonen's cut-off skips the
// rows of a column that can no longer come within k (a cell is never less
// than its upper-left neighbour), so unrelated text costs about
// O(k * len(t)) rather than O(len(q) * len(t)). Ties go to the earliest end.
func semiGlobal(q, t []rune, k int) (dist, s, e int, ok bool) {
	m := len(q)
	k = min(k, m)
	over := int32(k + 1)        // every cell beyond k is stored as k+1
	cost := make([]int32, m+1)  // column j: cost[i] = distance of q[:i] to the best t[x:j]
	start := make([]int32, m+1) // start[i] = that x
	for i := range cost {
		cost[i] = min(int32(i), over)
	}
	last := k // the last row at most k in the current column
	best, bs, be := over, int32(0), 0
	if last == m {
		best = cost[m]
	}
	for j := 1; j <= len(t); j++ {
		top := min(last+1, m)
		diag, diagStart := cost[0], start[0]
		cost[0], start[0] = 0, int32(j)
		tj := t[j-1]
		for i := 1; i <= top; i++ {
			v, st := diag, diagStart
			if q[i-1] != tj {
				v++
			}
			if skip := cost[i] + 1; skip < v { // t[j-1] left out of q
				v, st = skip, start[i]
			}
			if miss := cost[i-1] + 1; miss < v { // q[i-1] missing from t
				v, st = miss, start[i-1]
			}
			diag, diagStart = cost[i], start[i]
			cost[i], start[i] = min(v, over), st
		}
		last = top
		for last > 0 && cost[last] == over {
			last--
		}
		if last == m && cost[m] < best {
			best, bs, be = cost[m], start[m], j
		}
	}
	if best == over {
		return 0, 0, 0, false
	}
	return int(best), int(bs), be, true
}

// levenshtein is the edit distance between a and b.
func levenshtein(a, b []rune) int {
	row := make([]int, len(b)+1)
	for j := range row {
		row[j] = j
	}
	for i := 1; i <= len(a); i++ {
		diag := row[0]
		row[0] = i
		for j := 1; j <= len(b); j++ {
			v := diag
			if a[i-1] != b[j-1] {
				v++
			}
			v = min(v, row[j]+1, row[j-1]+1)
			diag, row[j] = row[j], v
		}
	}
	return row[len(b)]
}

// alignBits and bitPattern.distance must give exactly what semiGlobal and
// levenshtein give (distance, start and end, ties included), for quotes
// shorter and longer than one 64-bit block and on small alphabets, where
// ties abound.
func TestBitParallelMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for round := range 3000 {
		alphabet := []rune("ab")
		if round%3 == 1 {
			alphabet = []rune("abcé契 ")
		}
		word := func(n int) []rune {
			r := make([]rune, n)
			for i := range r {
				r[i] = alphabet[rng.IntN(len(alphabet))]
			}
			return r
		}
		var q, text []rune
		switch round % 4 {
		case 0:
			q, text = word(1+rng.IntN(10)), word(rng.IntN(20))
		case 1:
			q, text = word(1+rng.IntN(70)), word(rng.IntN(100))
		default: // the quote is a mutated piece of the text, across blocks
			text = word(rng.IntN(400))
			lo := rng.IntN(len(text) + 1)
			hi := min(len(text), lo+rng.IntN(200))
			q = append([]rune(nil), text[lo:hi]...)
			for range rng.IntN(len(q)/5 + 1) {
				if len(q) == 0 {
					break
				}
				i := rng.IntN(len(q))
				switch rng.IntN(3) {
				case 0:
					q = append(q[:i], q[i+1:]...)
				case 1:
					q[i] = alphabet[rng.IntN(len(alphabet))]
				default:
					q = append(q[:i], append([]rune{alphabet[rng.IntN(len(alphabet))]}, q[i:]...)...)
				}
			}
		}
		checkBitParallel(t, q, text, rng.IntN(len(q)+2)-1)
	}
}

func checkBitParallel(t *testing.T, q, text []rune, k int) {
	t.Helper()
	p := newBitPattern(q)
	slots := p.slots(text)
	for _, k := range []int{k, len(q)} {
		wd, ws, we, wok := semiGlobal(q, text, k)
		gd, gs, ge, gok := alignBits(p, q, text, slots, k)
		if wd != gd || ws != gs || we != ge || wok != gok {
			t.Fatalf("q=%q text=%q k=%d: alignBits = %d [%d,%d) %v, semiGlobal = %d [%d,%d) %v",
				string(q), string(text), k, gd, gs, ge, gok, wd, ws, we, wok)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(len(q)), uint64(len(text))))
	for range 3 {
		lo := rng.IntN(len(text) + 1)
		hi := lo + rng.IntN(len(text)-lo+1)
		if got, want := p.distance(slots[lo:hi]), levenshtein(q, text[lo:hi]); got != want {
			t.Fatalf("q=%q text=%q: distance = %d, levenshtein = %d", string(q), string(text[lo:hi]), got, want)
		}
	}
}

// normalizeRef is normalize rune by rune, without the fast paths for runs
// of ASCII.
func normalizeRef(s string, withOrigin bool) (string, []int32) {
	out := make([]byte, 0, len(s))
	var orig []int32
	if withOrigin {
		orig = make([]int32, 0, len(s))
	}
	pendingSpace := -1 // offset of the first rune of a pending white-space run
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			m := asciiFold[c]
			if m == ' ' {
				if pendingSpace < 0 {
					pendingSpace = i
				}
				i++
				continue
			}
			if pendingSpace >= 0 {
				if len(out) > 0 {
					out = append(out, ' ')
					if withOrigin {
						orig = append(orig, int32(pendingSpace))
					}
				}
				pendingSpace = -1
			}
			out = append(out, m)
			if withOrigin {
				orig = append(orig, int32(i))
			}
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			if pendingSpace < 0 {
				pendingSpace = i
			}
			i += w
			continue
		}
		repl, keep := mapRune(r)
		if !keep {
			i += w
			continue
		}
		if pendingSpace >= 0 {
			if len(out) > 0 {
				out = append(out, ' ')
				if withOrigin {
					orig = append(orig, int32(pendingSpace))
				}
			}
			pendingSpace = -1
		}
		n := len(out)
		if repl != "" {
			out = append(out, repl...)
		} else {
			out = utf8.AppendRune(out, foldRune(r))
		}
		if withOrigin {
			for range len(out) - n {
				orig = append(orig, int32(i))
			}
		}
		i += w
	}
	return string(out), orig
}

func TestNormalizeMatchesReference(t *testing.T) {
	doc := strings.Join(newCorpus(13).document(200_000, 3000), "\f")
	for _, withOrigin := range []bool{false, true} {
		got, gotMap := normalize(doc, withOrigin)
		var gotOrig []int32
		if withOrigin {
			gotOrig = gotMap.expand(len(got))
		}
		want, wantOrig := normalizeRef(doc, withOrigin)
		if got != want || !slices.Equal(gotOrig, wantOrig) {
			t.Fatalf("normalize of a generated document (origins %v) differs from normalizeRef", withOrigin)
		}
	}
	rng := rand.New(rand.NewPCG(9, 10))
	pieces := []string{"a", "Z", "q", "M", "0", ".", "-", "@", "[", "`", "{", "~", "\x00", "\x7f",
		" ", " ", "  ", "\n", "\t", "\r\n", "\v", "\f", "\u00a0", "\u2003",
		"é", "É", "ß", "Ⱥ", "\u00ad", "\u2019", "…", "契", "\xff", "\xe2\x82"}
	for round := range 5000 {
		var b strings.Builder
		for range rng.IntN(60) {
			p := pieces[rng.IntN(len(pieces))]
			if round%2 == 0 && rng.IntN(3) > 0 {
				p = pieces[rng.IntN(16)] // mostly ASCII
			}
			b.WriteString(p)
		}
		s := b.String()
		for _, withOrigin := range []bool{false, true} {
			got, gotMap := normalize(s, withOrigin)
			var gotOrig []int32
			if withOrigin {
				gotOrig = gotMap.expand(len(got))
			}
			want, wantOrig := normalizeRef(s, withOrigin)
			if got != want || !slices.Equal(gotOrig, wantOrig) {
				t.Fatalf("normalize(%q, %v) = %q %v, want %q %v", s, withOrigin, got, gotOrig, want, wantOrig)
			}
			for off := 0; withOrigin && off <= len(s)+1; off++ {
				want, _ := slices.BinarySearch(wantOrig, int32(off))
				if got := gotMap.firstAtOrAfter(off, len(got)); got != want {
					t.Fatalf("normalize(%q): firstAtOrAfter(%d) = %d, want %d", s, off, got, want)
				}
			}
		}
	}
}

// tokenizeRef is tokenize rune by rune, hashing byte by byte, without
// the fast paths for runs of ASCII.
func tokenizeRef(s string) tokens {
	var t tokens
	open, h := -1, wordHash{}
	for i, r := range s {
		w := utf8.RuneLen(r)
		if r == utf8.RuneError {
			_, w = utf8.DecodeRuneInString(s[i:])
		}
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
	}
	if open >= 0 {
		t.add(open, len(s), h.sum())
	}
	return t
}

func TestTokenizeMatchesReference(t *testing.T) {
	doc, _ := normalize(strings.Join(newCorpus(14).document(200_000, 3000), "\f"), false)
	rng := rand.New(rand.NewPCG(11, 12))
	pieces := []string{"a", "Z", "q", "7", "abcdefgh", "Word", " ", ".", "-", "'", "é", "ß", "\u0301", "契約", "の", "ไทย", "—", "\xff", "\x80"}
	inputs := []string{"", doc}
	for range 5000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		inputs = append(inputs, b.String())
	}
	for _, s := range inputs {
		got, want := tokenize(s), tokenizeRef(s)
		if !slices.Equal(got.start, want.start) || !slices.Equal(got.end, want.end) || !slices.Equal(got.hash, want.hash) {
			t.Fatalf("tokenize(%.80q) = %v %v %v, want %v %v %v", s, got.start, got.end, got.hash, want.start, want.end, want.hash)
		}
	}
}

// checkAgainstReference compares normalize, tokenize and the bit-parallel
// alignments with their plain counterparts on the fuzzer's inputs.
func checkAgainstReference(t *testing.T, page1, page2, quote string, k int) {
	t.Helper()
	for _, s := range []string{page1, page2, quote} {
		got, gotMap := normalize(s, true)
		want, wantOrig := normalizeRef(s, true)
		if got != want || !slices.Equal(gotMap.expand(len(got)), wantOrig) {
			t.Fatalf("normalize(%q) = %q %v, want %q %v", s, got, gotMap.expand(len(got)), want, wantOrig)
		}
		for off := 0; off <= len(s)+1; off++ {
			want, _ := slices.BinarySearch(wantOrig, int32(off))
			if got := gotMap.firstAtOrAfter(off, len(got)); got != want {
				t.Fatalf("normalize(%q): firstAtOrAfter(%d) = %d, want %d", s, off, got, want)
			}
		}
		if got, want := tokenize(s), tokenizeRef(s); !slices.Equal(got.start, want.start) ||
			!slices.Equal(got.end, want.end) || !slices.Equal(got.hash, want.hash) {
			t.Fatalf("tokenize(%q) = %v, want %v", s, got, want)
		}
	}
	q, text := []rune(quote), []rune(page1+page2)
	if len(q) > 300 || len(text) > 2000 {
		return // semiGlobal is quadratic
	}
	checkBitParallel(t, q, text, k%(len(q)+2)-1)
}
