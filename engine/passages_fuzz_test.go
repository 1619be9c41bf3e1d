package engine

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSegmentPage: any page cuts into passages in page order, each a
// verbatim, non-empty substring of at most maxPassageRunes code points whose
// offsets (in code points) say where it is; a document of such pages gets
// ids that find each passage again, with offsets inside the document.
func FuzzSegmentPage(f *testing.F) {
	data, err := os.ReadFile("anchor/testdata/contracts/services-agreement.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(data[:min(len(data), 4000)]), "")
	for _, p := range testInputs().PrimaryDocs[0].Pages {
		f.Add(p, "Straße „Am Markt“. 契約の解除。\n\n1. Term\n(a) WHEREAS the parties; agree: x")
	}
	f.Add(strings.Repeat("word ", 200)+".", strings.Repeat("é, ", 300))
	f.Add("\xff\xfe. a\u00a0b\u2028c!", "\n\n\n")
	f.Fuzz(func(t *testing.T, page1, page2 string) {
		for _, page := range []string{page1, page2} {
			spans, runes := segmentPageCounted(page)
			if want := utf8.RuneCountInString(page); runes != want {
				t.Fatalf("%q: counted %d code points, want %d", page, runes, want)
			}
			// at[i] is the byte offset of code point i (len(page) at the end).
			at := make([]int, 0, runes+1)
			for i := range page {
				at = append(at, i)
			}
			// range over a string steps over an invalid byte as one code
			// point, as RuneCountInString counts it.
			at = append(at, len(page))
			last := 0
			for _, sp := range spans {
				if sp.start < last || sp.end <= sp.start || sp.end > runes {
					t.Fatalf("%q: span [%d, %d) after %d of %d code points", page, sp.start, sp.end, last, runes)
				}
				if got := page[at[sp.start]:at[sp.end]]; got != sp.text {
					t.Fatalf("%q: span [%d, %d) is %q, says %q", page, sp.start, sp.end, got, sp.text)
				}
				if n := sp.end - sp.start; n > maxPassageRunes {
					t.Fatalf("%q: a passage of %d code points (at most %d)", page, n, maxPassageRunes)
				}
				if strings.TrimSpace(sp.text) == "" {
					t.Fatalf("%q: a blank passage %q", page, sp.text)
				}
				last = sp.end
			}
		}
		in := &Inputs{PrimaryDocs: []Document{{Name: "doc", Pages: []string{page1, page2}}}, TextInput: page2}
		set := segmentInputs(in)
		docRunes := utf8.RuneCountInString(page1) + 1 + utf8.RuneCountInString(page2)
		for _, p := range set.list {
			got, ok := set.lookup("[" + p.id + "]")
			if !ok || got.id != p.id {
				t.Fatalf("passage %q not found by its id", p.id)
			}
			if p.doc >= 0 && (p.start < 0 || p.end > docRunes || p.start >= p.end) {
				t.Fatalf("passage %q at [%d, %d) of %d code points", p.id, p.start, p.end, docRunes)
			}
		}
	})
}
