package anchor

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"  \n\t ", ""},
		{" Hello,\n\n  World! ", "hello, world!"},
		{"a\fb\u00a0c\u2003d\u2028e", "a b c d e"},
		{"‘single’ ‚low‛ “double” „low‟ ″ ′ «guillemets»", `'single' 'low' "double" "low" " ' "guillemets"`},
		{"a‐b‑c‒d–e—f―g−h", "a-b-c-d-e-f-g-h"},
		{"wait…", "wait..."},
		{"soft\u00adhyphen zero\u200bwidth\ufeff", "softhyphen zerowidth"},
		{"ÄÖÜ ẞ ß Σς σ ſ K", "äöü ß ß σσ σ s k"},
		{"契約 の", "契約 の"},
		{"bad \xff byte", "bad \ufffd byte"},
	} {
		got, origins := normalize(tc.in, true)
		orig := origins.expand(len(got))
		if got != tc.want {
			t.Errorf("normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if len(orig) != len(got) {
			t.Fatalf("normalize(%q): %d origins for %d bytes", tc.in, len(orig), len(got))
		}
		for i := range orig {
			if i > 0 && orig[i] < orig[i-1] {
				t.Errorf("normalize(%q): origin decreases at %d", tc.in, i)
			}
			if o := int(orig[i]); o >= len(tc.in) || !utf8.RuneStart(tc.in[o]) {
				t.Errorf("normalize(%q): origin %d of byte %d is not a rune start", tc.in, o, i)
			}
		}
	}
}

// Runes that strings.EqualFold holds equal must normalise alike.
func TestFoldAgreesWithEqualFold(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if _, keep := mapRune(r); !utf8.ValidRune(r) || !keep || unicode.IsSpace(r) {
			continue
		}
		want, _ := normalize(string(r), false)
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if got, _ := normalize(string(f), false); got != want {
				t.Fatalf("%U normalises to %q, %U (equal under folding) to %q", r, want, f, got)
			}
		}
	}
}

func TestBoundaryAtOrBefore(t *testing.T) {
	for _, s := range []string{
		"a€b", "𝄞𝄞", "\xf0\x9d\x84\x9e\x80\x80x", "\x80\x80\x80\x80\x80", "\xe2\x82a", "\xf0\x9d\x84", "é\xff\xc3",
	} {
		// The boundaries Go's decoding sees.
		boundary := map[int]bool{len(s): true}
		for i := range s { // ranging over a string decodes it
			boundary[i] = true
		}
		for i := 0; i <= len(s); i++ {
			got := boundaryAtOrBefore(s, i)
			want := i
			for !boundary[want] {
				want--
			}
			if got != want {
				t.Errorf("boundaryAtOrBefore(%q, %d) = %d, want %d", s, i, got, want)
			}
		}
	}
}

func TestRuneIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "b", " ", "é", "€", "𝄞", "契", "\xff", "\xe2\x82", "\x80", "\f", "\xf0\x9d\x84\x9e\x80\x80"}
	for round := range 20 {
		var b strings.Builder
		for b.Len() < 3*runeBlock+rng.IntN(runeBlock) {
			if round%2 == 0 {
				b.WriteString(pieces[rng.IntN(7)]) // valid UTF-8 only
			} else {
				b.WriteString(pieces[rng.IntN(len(pieces))])
			}
		}
		s := b.String()
		x := newRuneIndex(s)
		count := 0
		for off := 0; off <= len(s); {
			if got := x.offset(s, off); got != count {
				t.Fatalf("round %d: offset(%d) = %d, want %d", round, off, got, count)
			}
			if off == len(s) {
				break
			}
			_, w := utf8.DecodeRuneInString(s[off:])
			off += w
			count++
		}
	}
}

func TestSemiGlobal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	word := func(n int) []rune {
		r := make([]rune, n)
		for i := range r {
			r[i] = rune('a' + rng.IntN(3))
		}
		return r
	}
	for range 2000 {
		q, text := word(1+rng.IntN(8)), word(rng.IntN(14))
		best := len(q)
		for s := 0; s <= len(text); s++ {
			for e := s; e <= len(text); e++ {
				best = min(best, levenshtein(q, text[s:e]))
			}
		}
		for _, k := range []int{len(q), best, best - 1} {
			dist, s, e, ok := semiGlobal(q, text, k)
			if ok != (best <= k) {
				t.Fatalf("semiGlobal(%q, %q, k=%d) ok = %v, best distance %d", string(q), string(text), k, ok, best)
			}
			if !ok {
				continue
			}
			if dist != best {
				t.Fatalf("semiGlobal(%q, %q, k=%d) = %d, want %d", string(q), string(text), k, dist, best)
			}
			if got := levenshtein(q, text[s:e]); got != dist {
				t.Fatalf("semiGlobal(%q, %q, k=%d) span [%d, %d) %q has distance %d, reported %d",
					string(q), string(text), k, s, e, string(text[s:e]), got, dist)
			}
		}
	}
}

func TestShingleIndexContains(t *testing.T) {
	c := newCorpus(11)
	text, _ := normalize(strings.Join(c.document(50_000, 3000), "\f"), false)
	x := newShingleIndex(text)
	rng := rand.New(rand.NewPCG(5, 6))
	decided := 0
	for range 3000 {
		lo := rng.IntN(len(text) - 200)
		for !utf8.RuneStart(text[lo]) {
			lo++
		}
		hi := lo + 5 + rng.IntN(150)
		for !utf8.RuneStart(text[hi]) {
			hi++
		}
		needle := text[lo:hi]
		if rng.IntN(2) == 0 { // a near miss
			i := rng.IntN(len(needle))
			needle = needle[:i] + "q" + needle[i+1:]
		}
		if !utf8.ValidString(needle) {
			continue
		}
		found, ok := x.contains(text, needle)
		if !ok {
			continue
		}
		decided++
		if want := strings.Contains(text, needle); found != want {
			t.Fatalf("contains(%q) = %v, strings.Contains says %v", needle, found, want)
		}
	}
	if decided < 1000 {
		t.Errorf("only %d of 3000 needles decided", decided)
	}
}

func TestIndexedAndScannedSearchAgree(t *testing.T) {
	c := newCorpus(12)
	docs := []Document{{Name: "a", Pages: c.document(40_000, 2500)}, {Name: "b", Pages: c.document(20_000, 2500)}}
	scanned := newMatcher(t, docs...)
	indexed := newMatcher(t, docs...)
	for _, d := range indexed.docs {
		d.shingleIndex()
	}
	for i := range 200 {
		d := docs[i%2]
		q, p := c.excerpt(d.Pages, 20+i)
		switch i % 4 {
		case 1:
			q = c.restyle(q)
		case 2:
			q = c.paraphrase(q, 1, 0)
		case 3:
			q = c.text(40 + i)
		}
		quote := Quote{Text: q, Origin: docs[(i/2)%2].Name, Page: p}
		a, aok := scanned.Find(quote)
		b, bok := indexed.Find(quote)
		if !reflect.DeepEqual(a, b) || aok != bok {
			t.Fatalf("quote %q: scanned %+v %v, indexed %+v %v", q, a, aok, b, bok)
		}
	}
}

func TestIndexLongMatchesStringsIndex(t *testing.T) {
	text := strings.Repeat("the quick brown fox jumps over the lazy dog; ", 50) + "the quick brown fox sleeps"
	for _, needle := range []string{"", "fox", "the quick brown fox jumps over the lazy dog; the quick", "the quick brown fox sleeps", "the quick brown fox jumps over the lazy cat", text, text + "x"} {
		if got, want := indexLong(text, needle), strings.Index(text, needle); got != want {
			t.Errorf("indexLong(%q) = %d, want %d", needle, got, want)
		}
	}
}
