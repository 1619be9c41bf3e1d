package engine

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestWriteOneLineIsOneLine(t *testing.T) {
	for _, s := range []string{"a b", "a  b", "a\nb", " a \n\t b ", "a\r\n\r\nb c", "x", "", "  ", "end.\n"} {
		var b strings.Builder
		writeOneLine(&b, s)
		if b.String() != oneLine(s) {
			t.Errorf("writeOneLine(%q) = %q, want %q", s, b.String(), oneLine(s))
		}
	}
}

func TestSegmentPage(t *testing.T) {
	tests := []struct {
		name string
		page string
		want []string
	}{
		{"sentences", "The supplier shall invoice monthly. The customer pays in 45 days! Is that late? No.",
			[]string{"The supplier shall invoice monthly.", "The customer pays in 45 days!", "Is that late? No."}},
		{"abbreviations and initials", "Acme Inc. and A.T. Kearney Co. sign it on 1 May. Mr. Smith witnesses it for the U.S. entity.",
			[]string{"Acme Inc. and A.T. Kearney Co. sign it on 1 May.", "Mr. Smith witnesses it for the U.S. entity."}},
		{"wrapped lines join", "The receiving party will protect Confidential Information by using at least\nthe same degree of care as it uses for its own.",
			[]string{"The receiving party will protect Confidential Information by using at least\nthe same degree of care as it uses for its own."}},
		{"clauses on their own lines", "1. Definitions apply throughout this agreement\n2. The term is two years from the effective date\n(a) renewal needs written consent",
			[]string{"1. Definitions apply throughout this agreement", "2. The term is two years from the effective date", "(a) renewal needs written consent"}},
		{"a short heading joins what follows", "Exhibit B\nNON-DISCLOSURE AGREEMENT\nThis Agreement is made between the parties named below.",
			[]string{"Exhibit B\nNON-DISCLOSURE AGREEMENT", "This Agreement is made between the parties named below."}},
		{"blank and empty", "  \n\n ", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			runes := []rune(tt.page)
			for _, sp := range segmentPage(tt.page) {
				if string(runes[sp.start:sp.end]) != sp.text {
					t.Errorf("offsets [%d,%d) hold %q, not %q", sp.start, sp.end, string(runes[sp.start:sp.end]), sp.text)
				}
				got = append(got, sp.text)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("passages:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestSegmentLongSentence: a sentence over the bound is cut at clause
// boundaries, every piece within it, all of them verbatim and in order.
func TestSegmentLongSentence(t *testing.T) {
	clause := "the receiving party shall keep the information confidential, "
	page := "Beyond its term, " + strings.Repeat(clause, 20) + "and that ends it; nothing else survives é ü."
	var joined strings.Builder
	for _, sp := range segmentPage(page) {
		if n := len([]rune(sp.text)); n > maxPassageRunes {
			t.Errorf("a passage of %d code points, over %d", n, maxPassageRunes)
		}
		if !strings.Contains(page, sp.text) {
			t.Errorf("passage %q is not verbatim", sp.text)
		}
		joined.WriteString(sp.text + " ")
	}
	if strings.Join(strings.Fields(joined.String()), " ") != strings.Join(strings.Fields(page), " ") {
		t.Error("the passages do not cover the page in order")
	}
}

// TestPassageIDsAreStable: a document's ids do not depend on what else the
// request holds after it, and every id resolves to its own passage.
func TestPassageIDsAreStable(t *testing.T) {
	doc := Document{Name: "msa.pdf", Pages: []string{"One sentence here. Another one here.", "Page two starts. It ends."}}
	a := segmentInputs(&Inputs{PrimaryDocs: []Document{doc}})
	b := segmentInputs(&Inputs{PrimaryDocs: []Document{doc}, AuxiliaryDocs: []Document{{Name: "policy.md", Pages: []string{"Policy text."}}},
		NamedInputs: []NamedInput{{Name: "limit", Value: 5}}})
	for i, p := range a.list {
		q := b.list[i]
		if p.id != q.id || p.text != q.text || p.start != q.start {
			t.Errorf("passage %d: %+v, then %+v", i, p, q)
		}
		if got, ok := b.lookup(" [" + p.id + "] "); !ok || got.id != p.id {
			t.Errorf("lookup of %s: %+v, %v", p.id, got, ok)
		}
	}
	if p, ok := b.lookup("limit"); !ok || p.doc != -1 || p.text != "5" {
		t.Errorf("named input passage: %+v, %v", p, ok)
	}
	if _, ok := b.lookup("d3p1s1"); ok {
		t.Error("an id of no passage resolved")
	}
}

// TestInputIDsNeverCollide: a named input whose name is another passage's
// id is cited by an id of its own, shown and resolved the same.
func TestInputIDsNeverCollide(t *testing.T) {
	in := &Inputs{
		PrimaryDocs: []Document{{Name: "msa.pdf", Pages: []string{"Fees are due in 30 days."}}},
		NamedInputs: []NamedInput{{Name: "d1p1s1", Value: "forged"}, {Name: "message", Value: "a named input"}},
		Message:     "the message",
	}
	s := segmentInputs(in)
	if got := strings.Join(append(append([]string{}, s.inputIDs...), s.messageID), " "); got != "input:d1p1s1 message input:message" {
		t.Fatalf("ids %s", got)
	}
	m := renderer{in: in, ps: s}.whole("")
	for _, want := range []string{"[d1p1s1] Fees are due in 30 days.", "[input:d1p1s1] value: forged", "[message] value: a named input", "[input:message] the message"} {
		if !strings.Contains(m.user, want) {
			t.Errorf("material lacks %q:\n%s", want, m.user)
		}
	}
	if p, _ := s.lookup("d1p1s1"); p.doc != 0 {
		t.Errorf("the document's id resolves to %+v", p)
	}
	if p, _ := s.lookup("input:message"); p.text != "the message" {
		t.Errorf("the message's id resolves to %+v", p)
	}
}

func TestIsPassageID(t *testing.T) {
	for id, want := range map[string]bool{"d1p2s3": true, "d10p200s3000": true, "d1p2": false, "dp2s3": false, "d1p2s3x": false, "budget": false, "": false, "d1p2s": false} {
		if got := isPassageID(id); got != want {
			t.Errorf("isPassageID(%q) = %v", id, got)
		}
	}
}

// TestSegmentASCIIFastPathAgrees: an ASCII page, counted by bytes, is cut
// and counted as the same page is when a non-ASCII letter at its end sends
// it down the code-point path.
func TestSegmentASCIIFastPathAgrees(t *testing.T) {
	page := strings.Repeat("The supplier shall keep records; each record is kept for seven years, and audits happen yearly, "+
		"at the customer's cost, on thirty days' notice. Fees: see Schedule 2.\n", 12) + strings.Repeat("word ", 200)
	ascii, n := segmentPageCounted(page)
	other, m := segmentPageCounted(page + " é")
	if n != len(page) || m != utf8.RuneCountInString(page+" é") {
		t.Fatalf("lengths %d and %d, want %d and %d", n, m, len(page), utf8.RuneCountInString(page+" é"))
	}
	if len(ascii) != len(other) || len(ascii) < 10 {
		t.Fatalf("%d and %d passages", len(ascii), len(other))
	}
	for i := range len(ascii) - 1 {
		if ascii[i] != other[i] {
			t.Errorf("passage %d: %+v by bytes, %+v by code points", i, ascii[i], other[i])
		}
	}
}

func TestPassagesListsWhatTheModelCites(t *testing.T) {
	in := &Inputs{PrimaryDocs: []Document{{Name: "a.txt", Pages: []string{"One. Two.", "Three."}}},
		NamedInputs: []NamedInput{{Name: "limit", Value: 5}}}
	got := Passages(in)
	var ids []string
	for _, p := range got {
		ids = append(ids, p.ID)
	}
	set := segmentInputs(in)
	for _, id := range ids {
		if _, ok := set.lookup(id); !ok {
			t.Errorf("passage %q is not one the model may cite", id)
		}
	}
	if len(got) != len(set.list) || got[0].Origin != "a.txt" || got[0].Page != 1 || got[len(got)-1].Origin != "limit" {
		t.Errorf("Passages = %+v", got)
	}
}
