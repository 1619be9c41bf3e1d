package engine

import (
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

func TestContextLimit(t *testing.T) {
	rejected := func(msg string) error { return fmt.Errorf("openai: %s: %w", msg, ErrLLMRejected) }
	tests := []struct {
		err  error
		want int
	}{
		{rejected("the input is too long for the model's context window (400: Requested tokens (6012) exceed context window of 2048)"), 2048},
		{rejected("the input is too long for the model's context window (400: This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.)"), 8192},
		{rejected(`the input is too long (400: {"type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":4096})`), 4096},
		{rejected("the input is too long for the model's context window (400: the request exceeds the available context size)"), 0},
		{fmt.Errorf("exceed context window of 2048: %w", ErrLLMUnavailable), 0}, // not a refusal
		{nil, 0},
	}
	for _, tt := range tests {
		got, ok := contextLimit(tt.err)
		if got != tt.want || ok != (tt.want > 0) {
			t.Errorf("contextLimit(%v) = %d, %v; want %d", tt.err, got, ok, tt.want)
		}
	}
}
