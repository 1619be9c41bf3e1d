package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"rulevalidator/internal/synthdoc"
)

func TestCount(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"the cat", 2},
		{"indemnification", 3}, // 15 letters: 1 + ceil(8/6)
		{"net 30 days.", 6},    // net, the space before 3, 3, 0, days, .
		{"a\nb", 3},
		{"€5", 2},
		{"契約書", 3},
		{"   ", 0},
		// Not English: a word of up to three letters is one token, one more per three.
		{"Fahrlässigkeit", 6},    // Fahrl (2), ä, ssigkeit (3)
		{"die Haftung endet", 4}, // no accented letter: English, Haftung (2)
		{"die Haftung für", 7},   // die, Haftung (3), f, ü, r
		// One accented letter in twenty words or more leaves a text English.
		{"a café " + strings.Repeat("word ", 19), 22},
	}
	for _, tt := range tests {
		if got := Count(tt.text); got != tt.want {
			t.Errorf("Count(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

func TestEstimatorLearnsPerModel(t *testing.T) {
	e := NewEstimator()
	text := strings.Repeat("The supplier shall invoice monthly. ", 50)
	base := Count(text)
	if got := e.Tokens("m1", text); got != base {
		t.Fatalf("before any usage: %d tokens, want Count's %d", got, base)
	}
	for range 20 {
		e.ObservePrompt("m1", 1000, 600)
	}
	want := Scale(base, 0.6*promptMargin)
	if got := e.Tokens("m1", text); got != want {
		t.Errorf("after learning a ratio of 0.6: %d tokens, want %d", got, want)
	}
	if got := e.Tokens("m2", text); got != base {
		t.Errorf("another model is unaffected: %d tokens, want %d", got, base)
	}
	e.ObservePrompt("m3", 100, 100000) // absurd: clamped
	if r := e.PromptRatio("m3"); r > maxPromptRatio*promptMargin+1e-9 {
		t.Errorf("ratio %v not clamped to %v", r, maxPromptRatio)
	}
	e.ObservePrompt("m4", 0, 50) // no estimate: ignored
	e.ObservePrompt("m4", 50, 0) // no usage reported: ignored
	if r := e.PromptRatio("m4"); r != 1 {
		t.Errorf("ignored observations changed the ratio to %v", r)
	}

	if got := e.AnswerTokensPerRule("m1"); got != DefaultAnswerTokensPerRule {
		t.Errorf("answer tokens before any answer: %d, want %d", got, DefaultAnswerTokensPerRule)
	}
	e.ObserveAnswer("m1", 4, 400)
	if got := e.AnswerTokensPerRule("m1"); got != 125 {
		t.Errorf("answer tokens after 100 per rule: %d, want 125 (a quarter of slack)", got)
	}
}

func TestEstimatorConcurrent(t *testing.T) {
	e := NewEstimator()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				e.ObservePrompt(fmt.Sprint("m", i%2), 100+j, 80+j)
				e.ObserveAnswer("m0", 2, 300)
				_ = e.Tokens("m1", "some text")
				_ = e.AnswerTokensPerRule("m0")
			}
		})
	}
	wg.Wait()
}

func TestChunksOffsetsAndLimits(t *testing.T) {
	long := strings.Repeat("Première phrase du paragraphe, avec des accents. Deuxième phrase ici! ", 40) +
		"\n\n" + strings.Repeat("Second paragraph sentence. ", 60) +
		"\n\n" + strings.Repeat("x", 3000) // no spaces at all
	docs := []Document{
		{Name: "a", Pages: []string{"short page one", long, "€ last page"}},
		{Name: "b", Pages: []string{"only page"}},
	}
	const max = 120
	chunks := Chunks(docs, max, 1)
	byPage := map[[2]int]string{}
	for _, c := range chunks {
		if c.Tokens > max {
			t.Errorf("doc %d page %d: chunk of %d tokens over %d", c.Doc, c.Page, c.Tokens, max)
		}
		if c.Tokens != Count(c.Text) {
			t.Errorf("chunk tokens %d, Count says %d", c.Tokens, Count(c.Text))
		}
		text := []rune(docText(docs[c.Doc]))
		if got := string(text[c.Start:c.End]); got != c.Text {
			t.Fatalf("doc %d page %d: offsets [%d,%d) hold %q, chunk is %q", c.Doc, c.Page, c.Start, c.End, got, c.Text)
		}
		byPage[[2]int{c.Doc, c.Page}] += c.Text
	}
	for d, doc := range docs {
		for p, page := range doc.Pages {
			if got := byPage[[2]int{d, p + 1}]; got != page {
				t.Errorf("doc %d page %d: chunks join to %d bytes, page has %d", d, p+1, len(got), len(page))
			}
		}
	}
	if !chunks[0].Whole || chunks[1].Whole {
		t.Errorf("a short page is one whole chunk, a long one is split: %+v / %+v", chunks[0].Whole, chunks[1].Whole)
	}
	// The long page's first cut is at the end of a sentence, not mid-word.
	if first := chunks[1].Text; !strings.HasSuffix(first, "! ") && !strings.HasSuffix(first, ". ") {
		t.Errorf("first piece of the long page ends %q, not at a sentence end", first[len(first)-10:])
	}
	for _, c := range chunks {
		if !utf8.ValidString(c.Text) {
			t.Errorf("chunk cut inside a character: %q", c.Text)
		}
	}
}

func TestChunksParagraphsFirst(t *testing.T) {
	para := strings.Repeat("word ", 30) + "end."
	page := para + "\n\n" + para + "\n\n" + para
	chunks := Chunks([]Document{{Pages: []string{page}}}, Count(para)+5, 1)
	if len(chunks) != 3 {
		t.Fatalf("%d chunks, want one per paragraph", len(chunks))
	}
	for i, c := range chunks {
		if strings.TrimSpace(c.Text) != para {
			t.Errorf("chunk %d is %q, want a whole paragraph", i, c.Text)
		}
	}
}

func TestBM25RanksTheClausePage(t *testing.T) {
	pages := synthdoc.Pages(50, 2000, 1)
	pages[36] += "\nThe supplier shall deposit the quantum cryptography keys in escrow with a Zurich notary.\n"
	ix := newIndex([]string{"The keys must be held in escrow by a notary.", synthdoc.RuleText(synthdoc.TopicOf(3))})
	chunks := chunk([]Document{{Name: "c", Pages: pages}}, 4000, 1, ix)
	scores := make([]float64, len(chunks))
	ix.scores(0, scores)
	if best := argmax(scores); chunks[best].Page != 37 {
		t.Errorf("best chunk for the escrow rule is page %d, want 37", chunks[best].Page)
	}
	ix.scores(1, scores)
	if best := argmax(scores); synthdoc.TopicOf(chunks[best].Page).Title != synthdoc.TopicOf(3).Title {
		t.Errorf("best chunk for the %s rule is page %d (%s)", synthdoc.TopicOf(3).Title, chunks[best].Page, synthdoc.TopicOf(chunks[best].Page).Title)
	}
}

func argmax(xs []float64) int {
	best := 0
	for i, x := range xs {
		if x > xs[best] {
			best = i
		}
	}
	return best
}

func budget(context, answer int) Budget {
	return Budget{Context: context, Answer: answer, Fixed: 700, AnswerPerRule: DefaultAnswerTokensPerRule, PerChunk: 8, PerDocument: 30}
}

func TestMakeLongDocument(t *testing.T) {
	pages := synthdoc.Pages(300, 2000, 2)
	pages[249] += "\nThe supplier shall deposit the quantum cryptography keys in escrow with a Zurich notary.\n"
	docs := []Document{{Name: "contract.pdf", Pages: pages}}
	var rules []Rule
	for i, topic := range synthdoc.Topics[:10] {
		rules = append(rules, Rule{ID: fmt.Sprint("r", i), Query: synthdoc.RuleText(topic), PromptTokens: 60})
	}
	rules = append(rules, Rule{ID: "escrow", Query: "The cryptography keys must be held in escrow by a notary.", PromptTokens: 40})
	b := budget(4096, 1024)
	p, err := Make(docs, rules, b, 1)
	if err != nil {
		t.Fatal(err)
	}
	judged := make([]int, len(rules))
	for c, call := range p.Calls {
		if call.Tokens > b.Prompt() {
			t.Errorf("call %d: %d tokens over the prompt room of %d", c, call.Tokens, b.Prompt())
		}
		// Recount independently of the planner's bookkeeping.
		n := b.Fixed + b.PerDocument
		for _, r := range call.Rules {
			n += rules[r].PromptTokens
			judged[r]++
		}
		for _, j := range call.Chunks {
			n += Count(p.Chunks[j].Text) + b.PerChunk
		}
		if n > b.Prompt() {
			t.Errorf("call %d: recounted %d tokens over %d", c, n, b.Prompt())
		}
		if len(call.Rules) > b.RulesPerCall() {
			t.Errorf("call %d: %d rules, answer holds %d", c, len(call.Rules), b.RulesPerCall())
		}
		if !call.Partial {
			t.Errorf("call %d holds the whole 300-page document", c)
		}
	}
	for r, n := range judged {
		if n != 1 {
			t.Errorf("rule %s judged in %d calls, want 1", rules[r].ID, n)
		}
	}
	escrow := len(rules) - 1
	if pages := p.Pages(p.CallOf[escrow])[0]; !contains(pages, 250) {
		t.Errorf("escrow rule judged on pages %v, want page 250 among them", pages)
	}
	for r := range rules[:10] {
		title := synthdoc.Topics[r].Title
		found := false
		for _, pg := range p.Pages(p.CallOf[r])[0] {
			if synthdoc.TopicOf(pg).Title == title {
				found = true
			}
		}
		if !found {
			t.Errorf("rule on %s judged without any page about it", title)
		}
	}
}

func TestMakeManyRulesBatches(t *testing.T) {
	docs := []Document{{Name: "short.txt", Pages: []string{"The supplier invoices monthly, payable within 30 days."}}}
	var rules []Rule
	for i := range 300 {
		rules = append(rules, Rule{ID: fmt.Sprintf("rule-%03d", i), Query: "payment within 30 days", PromptTokens: 40})
	}
	b := budget(32768, 1024)
	p, err := Make(docs, rules, b, 1)
	if err != nil {
		t.Fatal(err)
	}
	per := b.RulesPerCall()
	if want := (300 + per - 1) / per; len(p.Calls) != want {
		t.Errorf("%d calls, want %d of at most %d rules", len(p.Calls), want, per)
	}
	seen := map[int]bool{}
	for c, call := range p.Calls {
		if len(call.Rules)*b.AnswerPerRule > b.Answer {
			t.Errorf("call %d: %d rules' answers exceed %d tokens", c, len(call.Rules), b.Answer)
		}
		if call.Partial {
			t.Errorf("call %d: the short document fits and must be whole", c)
		}
		for _, r := range call.Rules {
			seen[r] = true
		}
	}
	if len(seen) != 300 {
		t.Errorf("%d rules planned, want 300", len(seen))
	}
	for r := range rules {
		if p.Cut[r] {
			t.Errorf("rule %d marked cut although the document is whole", r)
		}
	}
}

func TestMakeCutAndUnmatched(t *testing.T) {
	pages := synthdoc.Pages(40, 2000, 3)
	docs := []Document{{Name: "c", Pages: pages}}
	rules := []Rule{
		// Every page mentions the generic words: far more relevant text than fits.
		{ID: "broad", Query: "agreement parties obligations services performance", PromptTokens: 30},
		{ID: "nothing", Query: "zebra giraffe", PromptTokens: 30},
	}
	b := budget(2048, 512)
	p, err := Make(docs, rules, b, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Cut[0] {
		t.Error("the broad rule's relevant passages cannot all fit, yet it is not marked cut")
	}
	if !p.Cut[1] {
		t.Error("a rule matching nothing is judged on a guess and must be marked cut")
	}
	if pages := p.Pages(p.CallOf[1])[0]; len(pages) == 0 || pages[0] != 1 {
		t.Errorf("unmatched rule judged on pages %v, want the beginning", pages)
	}
}

// TestMakeRuleTakingMostOfTheRoom: a rule whose entry (with its room for a
// re-ask) takes more than two thirds of the room still gets a passage
// beside it: chunks are cut small enough for every rule's call.
func TestMakeRuleTakingMostOfTheRoom(t *testing.T) {
	pages := synthdoc.Pages(12, 2000, 5)
	docs := []Document{{Name: "c", Pages: pages}}
	b := budget(2048, 512) // room: 2048 - 512 - 700 - 30 = 806
	rules := []Rule{
		{ID: "short", Query: synthdoc.RuleText(synthdoc.Topics[0]), PromptTokens: 40},
		{ID: "long", Query: synthdoc.RuleText(synthdoc.Topics[1]), PromptTokens: 700},
	}
	p, err := Make(docs, rules, b, 1)
	if err != nil {
		t.Fatal(err)
	}
	for r, rule := range rules {
		call := p.Calls[p.CallOf[r]]
		if len(call.Chunks) == 0 {
			t.Errorf("rule %s judged on no passage", rule.ID)
		}
		if call.Tokens > b.Prompt() {
			t.Errorf("rule %s: call of %d tokens over the prompt room of %d", rule.ID, call.Tokens, b.Prompt())
		}
	}
}

func TestMakeErrors(t *testing.T) {
	docs := []Document{{Name: "d", Pages: []string{"text"}}}
	rules := []Rule{{ID: "big", Query: "x", PromptTokens: 5000}}
	if _, err := Make(docs, rules, budget(4096, 1024), 1); !errors.Is(err, ErrTooSmall) {
		t.Errorf("rule over the window: %v, want ErrTooSmall", err)
	} else if !strings.Contains(err.Error(), `"big"`) {
		t.Errorf("error %q does not name the rule", err)
	}
	for _, b := range []Budget{{Context: 0, Answer: 1}, {Context: 100, Answer: 100}, {Context: 100, Answer: 10, Fixed: -1}} {
		if _, err := Make(docs, []Rule{{ID: "r"}}, b, 1); err == nil {
			t.Errorf("budget %+v accepted", b)
		}
	}
	if _, err := Make(docs, nil, budget(4096, 1024), 1); err == nil {
		t.Error("no rules accepted")
	}
}

// docText is a document's text as offsets count it.
func docText(d Document) string { return strings.Join(d.Pages, "\f") }

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestMeasureMatchesCountAndEachTerm checks the one-pass scanner of
// documents against the straightforward token estimate, rune count and
// tokeniser.
func TestMeasureMatchesCountAndEachTerm(t *testing.T) {
	queries := []string{"Termination for convenience: TERMINATES, terminated; policies", "Kündigung der Verträge, Straße 5 días", "net 30 days"}
	texts := []string{
		"The Agreement terminates upon notice; termination for CONVENIENCE is allowed. Policies apply.",
		"Die Kündigung des Vertrags… Straße 5, días hábiles. 30 days net, NET30 x",
		"ÉCOLE école’s naïve 契約 — a b c ab\n\n\fpage two\t99 bottles",
		"abc\u00e9def 12ab34 x1 ß",
		"",
	}
	hits := 0
	defer func() {
		if hits < 5 {
			t.Errorf("only %d query terms found in the texts: the test checks little", hits)
		}
	}()
	for _, text := range texts {
		ix := newIndex(queries)
		got := ix.measure(text)
		if got.count.total() != Count(text) {
			t.Errorf("%q: %d tokens, Count says %d", text, got.count.total(), Count(text))
		}
		if got.runes != utf8.RuneCountInString(text) {
			t.Errorf("%q: %d runes, want %d", text, got.runes, utf8.RuneCountInString(text))
		}
		ix.commit(got)
		want := map[int32]int32{}
		var wantN int32
		var buf []byte
		eachTerm(text, &buf, false, func(term []byte) {
			wantN++
			if id, ok := ix.terms[string(term)]; ok {
				want[id]++
				hits++
			}
		})
		if got.terms != wantN {
			t.Errorf("%q: %d terms, want %d", text, got.terms, wantN)
		}
		counts := map[int32]int32{}
		for id, ps := range ix.postings {
			for _, p := range ps {
				counts[int32(id)] += p.tf
			}
		}
		if fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Errorf("%q: counts %v, want %v (terms %v)", text, counts, want, ix.terms)
		}
	}
}

// TestCountNeverExceedsBytes: the engine skips counting a prompt that fits
// by its length in bytes.
func TestCountNeverExceedsBytes(t *testing.T) {
	texts := []string{"", "a", "1 2 3 4", " . , ; ", "a-b-c-d", "\n\n\n", "é", "契約", "x1y2z3", " 1", "!!!!!!!!!", synthdoc.Pages(1, 3000, 4)[0],
		"Invoice 2026-0417: EUR 1,234,567.89 due 2026-03-31; IBAN DE89 3704 0044 0532 0130 00."}
	for _, s := range texts {
		if n := Count(s); n > len(s) {
			t.Errorf("Count(%q) = %d, over its %d bytes", s, n, len(s))
		}
	}
}

func TestNearest(t *testing.T) {
	texts := []string{
		"Each party's total liability is limited to the fees paid in the twelve months before the claim.",
		"This Agreement is governed by the laws of the State of Delaware.",
		"Supplier may engage subprocessors, provided it notifies Customer in advance.",
		"The limit on liability does not apply to a breach of confidentiality.",
		"",
	}
	for _, tc := range []struct {
		name, query string
		k           int
		want        []int
	}{
		{"best first", "Liability is capped at the fees of twelve months.", 2, []int{0, 3}},
		{"k caps", "liability", 1, []int{3}},
		{"no shared term", "Disputes go to arbitration.", 3, nil},
		{"stemmed", "subprocessor notified", 3, []int{2}},
		{"k zero", "liability", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Nearest(tc.query, texts, tc.k); !slices.Equal(got, tc.want) {
				t.Errorf("Nearest = %v, want %v", got, tc.want)
			}
		})
	}
}
