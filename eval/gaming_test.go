package eval

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
)

// The tests in this file each script a judge that the earlier scoring let
// look better than it is, and check that the figure that exposes it does.

// tableCells returns the cells after the metric's name on the table's row
// for metric, or nil.
func tableCells(rep *Report, metric string) []string {
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		return []string{"error: " + err.Error()}
	}
	for _, line := range strings.Split(b.String(), "\n") {
		cells := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
		if cells[0] == metric {
			return cells[1:]
		}
	}
	return nil
}

// wantCells checks the cells of the table's row for metric.
func wantCells(t *testing.T, rep *Report, metric string, want ...string) {
	t.Helper()
	if got := tableCells(rep, metric); !slices.Equal(got, want) {
		var b strings.Builder
		_ = rep.WriteTable(&b)
		t.Errorf("table row %q: %q, want %q\n%s", metric, got, want, b.String())
	}
}

// labelledRules answers every label of c as labelled; quotes gives each
// rule's evidence.
func labelledRules(c *Case, quotes func(Label) []quote) []rule {
	var rules []rule
	for _, l := range c.Labels {
		rules = append(rules, rule{ID: l.RuleID, Boolean: l.Boolean, Numerical: l.Numerical, NA: l.NotApplicable, Quotes: quotes(l)})
	}
	return rules
}

// goldQuotes quotes a label's gold spans, citing page(gold page) for each.
func goldQuotes(page func(int) int) func(Label) []quote {
	return func(l Label) []quote {
		var qs []quote
		for _, g := range l.Gold {
			qs = append(qs, quote{g.Text, g.Document, page(g.Page)})
		}
		return qs
	}
}

// A judge that quotes in full every page that holds a gold passage overlaps
// every gold span: the overlap counts give it 100% precision and recall. By
// characters its precision is the share of those pages that is gold.
func TestWholePageQuotesScoreTheirShareOfGold(t *testing.T) {
	ds := loadTest(t)
	var replies []llmfake.Reply
	wantQuoted, wantInGold := 0, 0
	for _, c := range ds.Cases {
		doc := c.Inputs.Documents()[0]
		replies = append(replies, engineReply(labelledRules(c, func(l Label) []quote {
			var qs []quote
			for _, g := range l.Gold {
				page := doc.Pages[g.Page-1]
				qs = append(qs, quote{page, doc.Name, g.Page})
				wantQuoted += utf8.RuneCountInString(page)
				wantInGold += g.End - g.Start
			}
			return qs
		})...))
	}
	_, llm := newFake(t, replies...)
	rep := run(t, ds, llm, 1, "")
	ev := rep.System(SystemEngine).Overall.Evidence

	// The overlap counts are fooled.
	wantRatio(t, "overlap precision", ev.Precision, 1)
	wantRatio(t, "overlap recall", ev.Recall, 1)
	// Characters are not.
	if ev.QuotedChars != wantQuoted || ev.QuotedCharsInGold != wantInGold {
		t.Errorf("quoted %d characters, %d in gold; want %d and %d", ev.QuotedChars, ev.QuotedCharsInGold, wantQuoted, wantInGold)
	}
	wantRatio(t, "evidence precision by characters", ev.CharPrecision, float64(wantInGold)/float64(wantQuoted))
	if ev.CharPrecision != nil && *ev.CharPrecision > 0.5 {
		t.Errorf("quoting whole pages scores %.0f%% precision by characters", 100**ev.CharPrecision)
	}
	wantRatio(t, "evidence recall by characters", ev.CharRecall, 1)

	wantCells(t, rep, "evidence precision (chars)", frac(wantInGold, wantQuoted))
	wantCells(t, rep, "quotes overlapping gold", "100.0% (4/4)")
}

// A judge that quotes the gold passages exactly but cites page 9 of a
// two-page document: anchoring finds the passage on its real page, so
// scoring the page it found gave 100%; the page the model cited is wrong.
func TestPagesRightScoresThePageTheModelCited(t *testing.T) {
	ds := loadTest(t)
	var replies []llmfake.Reply
	for _, c := range ds.Cases {
		replies = append(replies, engineReply(labelledRules(c, goldQuotes(func(int) int { return 9 }))...))
	}
	_, llm := newFake(t, replies...)
	rep := run(t, ds, llm, 1, "")
	ev := rep.System(SystemEngine).Overall.Evidence

	if ev.JudgedAnchored != 4 || ev.Hits != 4 {
		t.Fatalf("%d quotes anchored, %d hits; want the 4 gold passages found: %+v", ev.JudgedAnchored, ev.Hits, ev.EvidenceCounts)
	}
	wantRatio(t, "pages right", ev.PagesRightShare, 0)
	if ev.PagesCorrected != 4 {
		t.Errorf("%d pages corrected, want 4", ev.PagesCorrected)
	}
	for _, o := range rep.System(SystemEngine).Outcomes {
		if o.Evidence.PagesRight != 0 {
			t.Errorf("case %s rule %s: %d pages right for page 9 of 2", o.Case, o.RuleID, o.Evidence.PagesRight)
		}
	}

	// Cited on the right page, the same quotes score 100%.
	replies = nil
	for _, c := range ds.Cases {
		replies = append(replies, engineReply(labelledRules(c, goldQuotes(func(p int) int { return p }))...))
	}
	_, llm = newFake(t, replies...)
	ev = run(t, ds, llm, 1, "").System(SystemEngine).Overall.Evidence
	wantRatio(t, "pages right when cited right", ev.PagesRightShare, 1)
	if ev.PagesCorrected != 0 {
		t.Errorf("%d pages corrected, want none", ev.PagesCorrected)
	}
}

// Verdicts the engine kept with content problems when its re-asks ran out
// (here: quotes that are not in the document, with no re-ask allowed) are
// counted apart, and accuracy is given without them too.
func TestVerdictsKeptWithProblemsCountedApart(t *testing.T) {
	ds := loadTest(t)
	invented := []quote{{"The parties agree to everything forever.", "a.txt", 1}}
	_, llm := newFake(t,
		// Case a: every verdict right, each resting on an invented quote.
		engineReply(
			rule{ID: "law", Boolean: ptr(true), Quotes: invented},
			rule{ID: "term", Boolean: ptr(true), Quotes: invented},
			rule{ID: "years", Numerical: ptr(3), Quotes: invented},
		),
		// Case b: clean answers, one of them wrong.
		engineReply(
			rule{ID: "law", Boolean: ptr(false)},
			rule{ID: "term", Boolean: ptr(false), Quotes: []quote{{"The recipient keeps the information secret forever.", "b.txt", 1}}},
			rule{ID: "years", Numerical: ptr(0)},
		),
	)
	rep := run(t, ds, llm, 1, "")
	s := rep.System(SystemEngine)
	m := s.Overall
	if m.KeptWithProblems != 3 || m.KeptCorrect != 3 {
		t.Fatalf("%d kept with problems, %d of them correct; want 3 and 3", m.KeptWithProblems, m.KeptCorrect)
	}
	wantRatio(t, "accuracy", m.Accuracy, 5.0/6)
	wantRatio(t, "accuracy without the verdicts kept with problems", m.AccuracyWithoutProblems, 2.0/3)
	for _, o := range s.Outcomes {
		if o.KeptWithProblems() != (o.Case == "a") {
			t.Errorf("case %s rule %s: kept with problems %t (%q)", o.Case, o.RuleID, o.KeptWithProblems(), o.Problems)
		}
	}
	if pc := s.PerCase[0].Metrics; pc.KeptWithProblems != 3 || pc.AccuracyWithoutProblems != nil {
		t.Errorf("case a: %d kept, accuracy without them %v; want 3 and none", pc.KeptWithProblems, pc.AccuracyWithoutProblems)
	}

	wantCells(t, rep, "verdict accuracy", "83.3% (5/6)")
	wantCells(t, rep, "kept with problems left out", "66.7% (2/3)")
	wantCells(t, rep, "kept with problems (correct)", "3 (3)")
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	// The table names each kept verdict, with what was wrong.
	listed := b.String()[strings.Index(b.String(), "engine verdicts kept with problems"):]
	for _, id := range []string{"law", "term", "years"} {
		if !strings.Contains(listed, "case a run 1 rule "+id+": ") || strings.Contains(listed, "case b run 1 rule "+id) {
			t.Errorf("kept verdict %s of case a not listed alone:\n%s", id, listed)
		}
	}
}

// A judge whose every answer is unreadable, run twice, gave the same
// (no) verdict every time: counting those pairs, runs agreed 100%.
func TestRunsAgreeingCountsOnlyPairsAnswered(t *testing.T) {
	ds := loadTest(t)
	garbage := llmfake.Reply{Content: "no JSON here"}
	tests := []struct {
		name          string
		replies       []llmfake.Reply
		answered      int
		agreeing      int
		agreement     *float64
		min, max, sd  float64
		tableAgreeing string
	}{
		{"garbage every run", []llmfake.Reply{garbage, garbage, garbage, garbage}, 0, 0, nil, 0, 0, 0, "-"},
		{"answered in one run only", append(allCorrect(), garbage, garbage), 6, 0, ptr(0.0), 0, 1, 0.7071067811865476, "0.0% (0/6)"},
		{"the same every run", append(allCorrect(), allCorrect()...), 6, 6, ptr(1.0), 1, 1, 0, "100.0% (6/6)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, llm := newFake(t, tt.replies...)
			rep := run(t, ds, llm, 2, "")
			sp := rep.System(SystemEngine).Spread
			if sp == nil {
				t.Fatal("no spread with two runs")
			}
			if sp.AnsweredPairs != tt.answered || sp.AgreeingPairs != tt.agreeing {
				t.Errorf("%d of %d pairs agreeing, want %d of %d", sp.AgreeingPairs, sp.AnsweredPairs, tt.agreeing, tt.answered)
			}
			if tt.agreement == nil {
				if sp.Agreement != nil {
					t.Errorf("agreement %v, want none", *sp.Agreement)
				}
			} else {
				wantRatio(t, "agreement", sp.Agreement, *tt.agreement)
			}
			if sp.Min != tt.min || sp.Max != tt.max || sp.SampleStdDev != tt.sd {
				t.Errorf("min %v max %v sample sd %v, want %v %v %v", sp.Min, sp.Max, sp.SampleStdDev, tt.min, tt.max, tt.sd)
			}
			wantCells(t, rep, "runs agreeing", tt.tableAgreeing)
		})
	}
}

// A server without json_schema refuses the first call's format, and one
// call is answered 503 before it succeeds: four HTTP requests for two calls.
// Counting calls said two; the attempts say four, with their time.
func TestCostCountsEveryHTTPAttempt(t *testing.T) {
	ds := loadTest(t)
	fake := llmfake.New()
	t.Cleanup(fake.Close)
	fake.RefuseFormats("json_schema")
	fake.Enqueue(append([]llmfake.Reply{{Status: 503, Delay: 20 * time.Millisecond}}, allCorrect()...)...)
	fake.SetDefault(llmfake.Reply{Status: 400, Error: &llmfake.Error{Message: "unexpected call"}})
	attempts := &Attempts{}
	client, err := openai.New(openai.Config{
		BaseURL:   fake.URL(),
		OnAttempt: attempts.Observe,
		Sleep:     func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), ds, Options{
		LLM: client, Engine: engine.Config{Model: "fake-model", OutputRetries: -1}, Attempts: attempts,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.System(SystemEngine)
	c := s.Cost
	sent := len(fake.Requests())
	if sent != 4 {
		t.Fatalf("the server saw %d requests, want 4", sent)
	}
	if c.Calls != 2 || !c.AttemptsObserved || c.Attempts != sent || c.FailedAttempts != 2 || c.FormatRefusals != 1 {
		t.Errorf("cost %+v, want 2 calls, %d HTTP attempts, 2 failed, 1 format refusal", c, sent)
	}
	if c.PromptTokens != 2000 || c.CompletionTokens != 200 || c.CachedTokens != 400 {
		t.Errorf("tokens %d/%d/%d, want 2000/200/400", c.PromptTokens, c.CompletionTokens, c.CachedTokens)
	}
	if c.ModelTime < 20*time.Millisecond || c.ModelTime > c.Wall {
		t.Errorf("model time %s, want at least the 503's 20ms and at most the wall time %s", c.ModelTime, c.Wall)
	}
	if a := s.PerCase[0].Cost; a.Attempts != 3 || a.Calls != 1 {
		t.Errorf("case a cost %+v, want 1 call of 3 attempts", a)
	}
	wantRatio(t, "accuracy", s.Overall.Accuracy, 1)

	wantCells(t, rep, "model calls (failed)", "2 (0)")
	wantCells(t, rep, "HTTP attempts (failed)", "4 (2)")
	wantCells(t, rep, "format refusals", "1")
}

// Without Options.Attempts the cost says attempts were not observed, and the
// table shows no figure rather than zero.
func TestCostWithoutAttemptsSaysSo(t *testing.T) {
	ds := loadTest(t)
	_, llm := newFake(t, allCorrect()...)
	rep := run(t, ds, llm, 1, "")
	if c := rep.System(SystemEngine).Cost; c.AttemptsObserved || c.Attempts != 0 || c.PromptTokens != 2000 {
		t.Errorf("cost %+v, want no attempts observed and the calls' 2000 prompt tokens", c)
	}
	wantCells(t, rep, "HTTP attempts (failed)", "-")
	wantCells(t, rep, "model time", "-")
}

// A judge that flags every rule not applicable finds every verdict labelled
// not applicable (recall 100%); its precision shows what that cost.
func TestNotApplicablePrecisionBesideRecall(t *testing.T) {
	ds := loadTest(t)
	var replies []llmfake.Reply
	for _, c := range ds.Cases {
		rules := labelledRules(c, goldQuotes(func(p int) int { return p }))
		for i := range rules {
			rules[i].NA = true
		}
		replies = append(replies, engineReply(rules...))
	}
	_, llm := newFake(t, replies...)
	rep := run(t, ds, llm, 1, "")
	na := rep.System(SystemEngine).Overall.NotApplicable
	wantRatio(t, "not-applicable recall", na.Recall, 1)
	if na.FlaggedTotal != 6 || na.Flagged != 1 {
		t.Errorf("%d flagged, %d of them labelled so; want 6 and 1", na.FlaggedTotal, na.Flagged)
	}
	wantRatio(t, "not-applicable precision", na.Precision, 1.0/6)
	wantCells(t, rep, "not-applicable found", "100.0% (1/1)")
	wantCells(t, rep, "not-applicable precision", "16.7% (1/6)")
}

// The engine's re-asks are counted by reason, each problem named in a
// correction once; the baseline re-asks nothing.
func TestReasksCountedByReason(t *testing.T) {
	ds := loadTest(t)
	invented := []quote{{"The parties agree to everything forever.", "a.txt", 1}}
	_, llm := newFake(t,
		engineReply(
			rule{ID: "law", Boolean: ptr(true), Quotes: invented},
			rule{ID: "term", Boolean: ptr(false)},
			rule{ID: "years", Numerical: ptr(0)},
		),
		engineReply(rule{ID: "law", Boolean: ptr(false)}),
		engineReply(
			rule{ID: "law", Boolean: ptr(false)},
			rule{ID: "term", Boolean: ptr(false)},
			rule{ID: "years", Numerical: ptr(0)},
		),
	)
	rep, err := Run(context.Background(), ds, Options{LLM: llm, Engine: engine.Config{Model: "fake-model", OutputRetries: 1}})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.System(SystemEngine)
	want := map[string]int{engine.ReasonUnanchoredQuote: 1, engine.ReasonUnsupportedVerdict: 1}
	if len(s.Reasks) != len(want) || s.Reasks[engine.ReasonUnanchoredQuote] != 1 || s.Reasks[engine.ReasonUnsupportedVerdict] != 1 {
		t.Errorf("re-asks %v, want %v", s.Reasks, want)
	}
	wantCells(t, rep, "re-asks", "2 (unanchored_quote 1, unsupported_verdict 1)")
}
