package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"rulevalidator/engine/plan"
)

func TestPageList(t *testing.T) {
	tests := []struct {
		pages []int
		want  string
	}{
		{[]int{4}, "page 4"},
		{[]int{1, 2, 3}, "pages 1-3"},
		{[]int{1, 4, 5, 6, 250}, "pages 1, 4-6, 250"},
		{[]int{2, 4}, "pages 2, 4"},
	}
	for _, tt := range tests {
		if got := pagesPhrase(tt.pages); got != tt.want {
			t.Errorf("pagesPhrase(%v) = %q, want %q", tt.pages, got, tt.want)
		}
	}
}

// TestExcerptPromptMarksLeftOutParts renders an excerpt holding a middle part
// of a long page and a whole short page: the long page's left-out parts are
// marked, page numbers are the document's, and the document not in the
// excerpt is named as left out.
func TestExcerptPromptMarksLeftOutParts(t *testing.T) {
	long := strings.Repeat("Alpha clause text. ", 40) + "\n\n" + strings.Repeat("Bravo indemnity text. ", 40) + "\n\n" + strings.Repeat("Charlie clause text. ", 40)
	in := &Inputs{
		PrimaryDocs:   []Document{{Name: "main.pdf", Pages: []string{"Cover page.", long, "Short third page."}}},
		AuxiliaryDocs: []Document{{Name: "annex.pdf", Pages: []string{"Annex text."}}},
		Message:       "Check the indemnity.",
	}
	docs := in.Documents()
	chunks := plan.Chunks([]plan.Document{{Name: "main.pdf", Pages: docs[0].Pages}, {Name: "annex.pdf", Pages: docs[1].Pages}}, 200, 1)
	var bravo, third int = -1, -1
	for i, c := range chunks {
		if c.Page == 2 && strings.Contains(c.Text, "Bravo") {
			bravo = i
		}
		if c.Doc == 0 && c.Page == 3 {
			third = i
		}
	}
	if bravo < 0 || third < 0 || chunks[bravo].Whole {
		t.Fatalf("unexpected chunking: %+v", chunks)
	}
	p := &plan.Plan{Chunks: chunks, Calls: []plan.Call{{Rules: []int{0}, Chunks: []int{bravo, third}, Partial: true}}}
	got := renderer{in: in}.excerpt(docs, p, 0, pageBounds(docs)).user

	for _, want := range []string{
		`- "main.pdf" (primary document, 3 pages): pages 2-3`,
		`- "annex.pdf" (auxiliary document, 1 page): not included in this message`,
		"(primary document, 3 pages; this excerpt holds pages 2-3)",
		pageMarker(2) + "\n" + elision + "Bravo",
		"Bravo indemnity text.",
		elision + pageMarker(3) + "\nShort third page.\n" + endMarker("Document", "main.pdf"),
		startMarker("Message", "Message") + "\nCheck the indemnity.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("excerpt lacks %q:\n%s", want, got)
		}
	}
	for _, absent := range []string{"Alpha", "Charlie", "Cover page", "Annex text", startMarker("Document", "annex.pdf")} {
		if strings.Contains(got, absent) {
			t.Errorf("excerpt holds %q, which is not in it", absent)
		}
	}
}

// windowRefusal is a refusal naming a context window, as an LLM adapter reports one.
type windowRefusal struct{ window int }

func (e windowRefusal) Error() string      { return "the prompt exceeds the context window" }
func (e windowRefusal) ContextWindow() int { return e.window }

func TestContextLimit(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"a refusal naming the window", fmt.Errorf("openai: %w: too long: %w", ErrLLMRejected, windowRefusal{2048}), 2048},
		{"one call's of several", errors.Join(errors.New("call 1: fine"), fmt.Errorf("call 2: %w", windowRefusal{4096})), 4096},
		{"a refusal naming none", windowRefusal{0}, 0},
		// The adapter reads the provider's words; the engine does not.
		{"words only", fmt.Errorf("openai: %w: exceed context window of 2048", ErrLLMRejected), 0},
		{"nil", nil, 0},
	}
	for _, tt := range tests {
		got, ok := contextLimit(tt.err)
		if got != tt.want || ok != (tt.want > 0) {
			t.Errorf("%s: contextLimit(%v) = %d, %v; want %d", tt.name, tt.err, got, ok, tt.want)
		}
	}
}
