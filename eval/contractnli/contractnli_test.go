package contractnli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulevalidator/eval"
)

// docText has a sentence whose words occur twice: "Related." first in the
// heading, then as the item the annotation points at.
const docText = "NON-DISCLOSURE AGREEMENT\nEmployment Related.\n1. The Recipient may share Confidential Information with its employees.  \n2. Nothing here restricts solicitation.\n______\nRelated.\n"

// span returns the [start, end) code-point offsets of the n-th occurrence
// (1-based) of s in docText.
func span(t *testing.T, s string, n int) [2]int {
	t.Helper()
	text := docText
	skip := 0
	for range n - 1 {
		i := strings.Index(text, s)
		skip += len([]rune(text[:i+len(s)]))
		text = text[i+len(s):]
	}
	i := strings.Index(text, s)
	if i < 0 {
		t.Fatalf("%q not in the text", s)
	}
	start := skip + len([]rune(text[:i]))
	return [2]int{start, start + len([]rune(s))}
}

func testSplit(t *testing.T) *Split {
	return &Split{
		Labels: map[string]Hypothesis{
			"nda-10": {ShortDescription: "No solicitation", Hypothesis: "Receiving Party shall not solicit some of Disclosing Party's representatives."},
			"nda-2":  {ShortDescription: "Sharing with employees", Hypothesis: "Receiving Party may share some Confidential Information with some of Receiving Party's employees."},
			"nda-3":  {ShortDescription: "Explicit identification", Hypothesis: "All Confidential Information shall be expressly identified by the Disclosing Party."},
		},
		Documents: []Document{{
			ID: 7, FileName: "nda.pdf", Text: docText, DocumentType: "search-pdf", URL: "https://example.com/nda.pdf",
			Spans: [][2]int{
				span(t, "1. The Recipient may share Confidential Information with its employees.  \n", 1), // trailing whitespace
				span(t, "2. Nothing here restricts solicitation.", 1),
				span(t, "______", 1),
				span(t, "Related.", 2), // its text first occurs in the heading
			},
			AnnotationSets: []AnnotationSet{{Annotations: map[string]Annotation{
				"nda-2":  {Choice: Entailment, Spans: []int{0, 2}},
				"nda-10": {Choice: Contradiction, Spans: []int{1, 3}},
				"nda-3":  {Choice: NotMentioned},
			}}},
		}},
	}
}

// A split converts into a dataset eval loads: each hypothesis a boolean
// rule, Entailment a pass, Contradiction a fail, NotMentioned a fail the
// material does not say, and the spans gold passages found where they were
// annotated.
func TestConvertMapsLabelsAndSpans(t *testing.T) {
	ds, err := Convert(testSplit(t), Options{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	st := ds.Stats
	if st.Cases != 1 || st.Labels != 3 || st.Gold != 3 || st.Widened != 1 || st.Dropped != 1 ||
		st.ByChoice[Entailment] != 1 || st.ByChoice[Contradiction] != 1 || st.ByChoice[NotMentioned] != 1 {
		t.Errorf("stats %+v", st)
	}
	if got := strings.Join(st.RuleIDs, " "); got != "sharing-with-employees explicit-identification no-solicitation" {
		t.Errorf("rules %s, want the hypotheses in their keys' number order", got)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "SOURCES.md"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "inputs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "inputs", "stale.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ds.Write(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "SOURCES.md")); err != nil {
		t.Errorf("the directory's own files are kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "inputs", "stale.json")); !os.IsNotExist(err) {
		t.Errorf("inputs/ is replaced whole: %v", err)
	}

	loaded, err := eval.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := loaded.Cases[0]
	if c.ID != "doc-007" || c.Description != "nda.pdf (search-pdf), https://example.com/nda.pdf" || c.Inputs.PrimaryDocs[0].Name != "nda.pdf" {
		t.Errorf("case %s %q, document %q", c.ID, c.Description, c.Inputs.PrimaryDocs[0].Name)
	}
	if got := c.Inputs.Documents()[0].Text(); got != docText {
		t.Errorf("the document's text changed:\n%q", got)
	}
	rules := c.Ruleset.AllRules()
	if len(rules) != 3 || rules[0].RuleText != rulePreamble+"Receiving Party may share some Confidential Information with some of Receiving Party's employees." || rules[0].Name != "Sharing with employees" {
		t.Errorf("rules %+v", rules)
	}
	byRule := map[string]eval.Label{}
	for _, l := range c.Labels {
		byRule[l.RuleID] = l
	}
	tests := []struct {
		rule         string
		pass         bool
		insufficient bool
		gold         []string
		goldAt       []int
	}{
		{"sharing-with-employees", true, false, []string{"1. The Recipient may share Confidential Information with its employees."},
			[]int{span(t, "1. The", 1)[0]}},
		{"no-solicitation", false, false, []string{"2. Nothing here restricts solicitation.", "______\nRelated."},
			[]int{span(t, "2. Nothing", 1)[0], span(t, "______", 1)[0]}},
		{"explicit-identification", false, true, nil, nil},
	}
	for _, tt := range tests {
		l := byRule[tt.rule]
		if l.Boolean == nil || *l.Boolean != tt.pass || l.Insufficient != tt.insufficient || len(l.Gold) != len(tt.gold) {
			t.Errorf("rule %s: label %+v, want pass %t, insufficient %t, %d gold", tt.rule, l, tt.pass, tt.insufficient, len(tt.gold))
			continue
		}
		for i, g := range l.Gold {
			if g.Text != tt.gold[i] || g.Start != tt.goldAt[i] {
				t.Errorf("rule %s: gold %d is %q at %d, want %q at %d", tt.rule, i, g.Text, g.Start, tt.gold[i], tt.goldAt[i])
			}
		}
	}
	// The widened passage ends where the annotated span did.
	if g := byRule["no-solicitation"].Gold[1]; g.End != span(t, "Related.", 2)[1] {
		t.Errorf("widened passage ends at %d, want %d", g.End, span(t, "Related.", 2)[1])
	}
	var m eval.Manifest
	data, err := os.ReadFile(filepath.Join(dir, "dataset.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if n := m.Cases[0].Labels[2].Note; !strings.Contains(n, "ContractNLI: Contradiction") || !strings.Contains(n, "1 gold passage(s) widened") {
		t.Errorf("note %q, want the choice and the widening", n)
	}
}

func TestGoldPassage(t *testing.T) {
	text := []rune("Aa bb. Cc dd.\nAa bb.  \n\t \n")
	tests := []struct {
		name       string
		start, end int
		want       string
		widened    bool
		ok         bool
	}{
		{"first occurrence", 0, 6, "Aa bb.", false, true},
		{"trimmed", 6, 14, "Cc dd.", false, true},
		{"widened to the word before", 14, 22, "dd.\nAa bb.", true, true},
		{"whitespace only", 22, 26, "", false, false},
	}
	for _, tt := range tests {
		got, widened, ok := goldPassage(text, tt.start, tt.end)
		if got != tt.want || widened != tt.widened || ok != tt.ok {
			t.Errorf("%s: got %q %t %t, want %q %t %t", tt.name, got, widened, ok, tt.want, tt.widened, tt.ok)
		}
	}
	// At the start of the text, a repeated passage widens to the right.
	repeated := []rune("ab ab x")
	if got, widened, ok := goldPassage(repeated, 3, 5); got != "ab ab" || !widened || !ok {
		t.Errorf("repeated: got %q %t %t", got, widened, ok)
	}
}

func TestConvertRefusesWhatItCannotMap(t *testing.T) {
	tests := []struct {
		name string
		edit func(s *Split)
		want string
	}{
		{"unknown choice", func(s *Split) {
			s.Documents[0].AnnotationSets[0].Annotations["nda-3"] = Annotation{Choice: "Neutral"}
		}, `document 7 (nda.pdf): hypothesis nda-3: unknown choice "Neutral"`},
		{"span index out of range", func(s *Split) {
			s.Documents[0].AnnotationSets[0].Annotations["nda-2"] = Annotation{Choice: Entailment, Spans: []int{9}}
		}, "hypothesis nda-2: span 9 is not one of the document's 4 spans"},
		{"span outside the text", func(s *Split) { s.Documents[0].Spans[0] = [2]int{5, 5000} }, "span 0 [5, 5000) is outside the text"},
		{"hypothesis not labelled", func(s *Split) {
			delete(s.Documents[0].AnnotationSets[0].Annotations, "nda-10")
		}, "hypothesis nda-10 is not labelled"},
		{"no annotation set", func(s *Split) { s.Documents[0].AnnotationSets = nil }, "no annotation set"},
		{"form feed", func(s *Split) { s.Documents[0].Text += "\f" }, "form feed"},
		{"two hypotheses, one slug", func(s *Split) {
			s.Labels["nda-11"] = Hypothesis{ShortDescription: "No Solicitation!", Hypothesis: "h"}
		}, `hypotheses nda-10 and nda-11 would both be rule "no-solicitation"`},
		{"hypothesis without text", func(s *Split) { s.Labels["nda-3"] = Hypothesis{ShortDescription: "x"} }, "hypothesis nda-3 has no text"},
		{"duplicate document", func(s *Split) { s.Documents = append(s.Documents, s.Documents[0]) }, "document 7: its id is not unique"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSplit(t)
			tt.edit(s)
			_, err := Convert(s, Options{Name: "t"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := Convert(testSplit(t), Options{}); err == nil {
		t.Error("a dataset without a name was converted")
	}
	if _, err := Decode(strings.NewReader(`{"documents": []}`)); err == nil || !strings.Contains(err.Error(), "is it a ContractNLI split?") {
		t.Errorf("an empty split: %v", err)
	}
}
