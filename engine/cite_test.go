package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"rulevalidator/verdict"
)

// citeInputs is a document whose passages are known: page 1 holds d1p1s1
// and d1p1s2, page 2 d1p2s1.
func citeInputs() *Inputs {
	return &Inputs{
		PrimaryDocs: []Document{{Name: "msa.pdf", Pages: []string{
			"Master Services Agreement between Acme and Beta. The supplier's total liability is capped at fees paid in the prior 12 months.",
			"The term of this agreement is two (2) years from the effective date.",
		}}},
		NamedInputs: []NamedInput{{Name: "budget", Value: 50000}},
	}
}

func cite(id, quote string) map[string]any { return map[string]any{"passage_id": id, "quote": quote} }

// TestCiteResolvesEvidenceFromPassages: the engine, not the model, fills each
// cited evidence's text, source, page and offsets: the words given when they
// are inside the passage, else the whole passage; a named input by its name.
func TestCiteResolvesEvidenceFromPassages(t *testing.T) {
	llm := &scriptedLLM{replies: []scriptedReply{{content: answer(t,
		boolRule("cap", true, cite("d1p1s2", "total liability is capped"), cite("[d1p2s1]", "")),
		boolRule("term", true, cite("d1p2s1", "a term of three years")),
		numRule("score", 2, cite("budget", "")),
	)}}}
	res, err := newTestEngine(t, llm, Config{}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: citeInputs()})
	if err != nil {
		t.Fatal(err)
	}
	if len(llm.calls) != 1 {
		t.Fatalf("%d calls, want 1: every citation resolves", len(llm.calls))
	}
	doc := []rune(strings.Join(citeInputs().PrimaryDocs[0].Pages, "\f"))
	check := func(ev verdict.Evidence, id, text string, page int, match verdict.Match) {
		t.Helper()
		if ev.PassageID != id || ev.Text != text || ev.SourceOrigin != "msa.pdf" || ev.SourcePageNumber != page || ev.CitedPageNumber != page || !ev.Anchored || ev.Match != match {
			t.Errorf("evidence %+v, want %s %q on page %d (%s)", ev, id, text, page, match)
			return
		}
		if got := string(doc[*ev.StartOffset:*ev.EndOffset]); got != text {
			t.Errorf("offsets hold %q, want %q", got, text)
		}
	}
	cap, term, score := res.Rules[0], res.Rules[1], res.Rules[2]
	check(cap.Evidences[0], "d1p1s2", "total liability is capped", 1, verdict.MatchExact)
	check(cap.Evidences[1], "d1p2s1", "The term of this agreement is two (2) years from the effective date.", 2, verdict.MatchPassage)
	// Words not in the passage: the passage stands, the words are kept.
	check(term.Evidences[0], "d1p2s1", "The term of this agreement is two (2) years from the effective date.", 2, verdict.MatchPassage)
	if term.Evidences[0].QuotedText != "a term of three years" {
		t.Errorf("the model's words are not kept: %+v", term.Evidences[0])
	}
	if ev := score.Evidences[0]; ev.PassageID != "budget" || ev.Text != "50000" || ev.SourceOrigin != "budget" || ev.Match != verdict.MatchNotDocument || ev.SourcePageNumber != 0 {
		t.Errorf("named input citation: %+v", ev)
	}
	for _, v := range res.Rules {
		if !v.DataSufficiency || len(v.Problems) > 0 {
			t.Errorf("%s: %+v", v.RuleID, v)
		}
	}
	if len(res.Sources) != 2 {
		t.Errorf("sources %+v, want the two document passages cited", res.Sources)
	}

	// The material shows every passage behind its id, and the schemas let
	// the model cite exactly those.
	req := llm.calls[0]
	if !strings.Contains(req.Messages[1].Content, "[d1p1s2] The supplier's total liability is capped at fees paid in the prior 12 months.\n") {
		t.Errorf("the passage is not shown behind its id:\n%s", req.Messages[1].Content)
	}
	// A grammar server cites a document's passage when the call shows
	// any; a strict-schema server may cite the named input too.
	for name, want := range map[string]string{
		string(req.Schema):        `"$defs":{"citable":{"type":"string","enum":["budget","d1p1s1","d1p1s2","d1p2s1"]}}`,
		string(req.GrammarSchema): `"$defs":{"citable":{"type":"string","enum":["d1p1s1","d1p1s2","d1p2s1"]}}`,
	} {
		if !strings.Contains(name, want) {
			t.Errorf("schema does not constrain citations to %s: %.400s", want, name)
		}
	}
	if strings.Contains(req.Messages[0].Content, `"..."`) {
		t.Error("the output contract shows a placeholder value")
	}
}

// TestCiteUnknownPassageIsReasked: an id that was not shown is a content
// problem, named in the correction; the next answer is accepted.
func TestCiteUnknownPassageIsReasked(t *testing.T) {
	var retried []string
	llm := &scriptedLLM{replies: []scriptedReply{
		{content: answer(t, boolRule("cap", true, cite("d9p9s9", "")), boolRule("term", false, cite("d1p2s1", "")), numRule("score", 1, cite("d1p1s1", "")))},
		{content: answer(t, boolRule("cap", true, cite("d1p1s2", "")))},
	}}
	e := newTestEngine(t, llm, Config{Hooks: Hooks{OutputRetry: func(reason string) { retried = append(retried, reason) }}})
	res, err := e.Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: citeInputs()})
	if err != nil {
		t.Fatal(err)
	}
	if len(llm.calls) != 2 || strings.Join(retried, ",") != ReasonUnknownPassage+","+ReasonUnsupportedVerdict {
		t.Fatalf("%d calls, re-asked for %v", len(llm.calls), retried)
	}
	correction := llm.calls[1].Messages[len(llm.calls[1].Messages)-1].Content
	if !strings.Contains(correction, `passage_id "d9p9s9", which is not an id shown in the material`) || !strings.Contains(correction, `only these rules: "cap"`) {
		t.Errorf("correction does not name the unknown id: %s", correction)
	}
	if ev := res.Rules[0].Evidences[0]; ev.PassageID != "d1p1s2" || !ev.Anchored {
		t.Errorf("re-asked rule: %+v", ev)
	}
}

// TestCitePlaceholderRationaleShowsThePassage: a verdict whose only problem
// is its rationale is re-asked for the rationale alone, shown the verdict
// and the passage it cites, so the model is asked about one sentence rather
// than "the material"; when the budget runs out the reader's note names the
// rationale.
func TestCitePlaceholderRationaleShowsThePassage(t *testing.T) {
	bad := answer(t, withRationale(boolRule("cap", true, cite("d1p1s2", "")), "not applicable"),
		boolRule("term", false, cite("d1p2s1", "")), numRule("score", 1, cite("d1p1s1", "")))
	again := `{"rules":[{"rule_id":"cap","rationale":"not applicable"}]}`
	llm := &scriptedLLM{replies: []scriptedReply{{content: bad}, {content: again}, {content: again}, {content: again}}}
	res, err := newTestEngine(t, llm, Config{}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: citeInputs()})
	if err != nil {
		t.Fatal(err)
	}
	if len(llm.calls) != 1+rationaleRetries(2) {
		t.Fatalf("%d calls, want the budget of re-asks used", len(llm.calls))
	}
	reask := llm.calls[1]
	correction := reask.Messages[len(reask.Messages)-1].Content
	for _, want := range []string{
		`Rule 1, "cap": `,
		"Verdict: satisfied.",
		`Cited passage: [d1p1s2] "The supplier's total liability is capped at fees paid in the prior 12 months."`,
	} {
		if !strings.Contains(correction, want) {
			t.Errorf("rationale re-ask lacks %q:\n%s", want, correction)
		}
	}
	if strings.Contains(correction, `"not applicable"`) {
		t.Errorf("the rationale re-ask shows the placeholder, which a small model copies:\n%s", correction)
	}
	for _, schema := range [][]byte{reask.Schema, reask.GrammarSchema} {
		if !strings.Contains(string(schema), `"rationale"`) || strings.Contains(string(schema), "boolean_output") || strings.Contains(string(schema), "evidences") {
			t.Errorf("a rationale re-ask's schema asks for more than the rationale: %s", schema)
		}
	}
	cap := res.Rules[0]
	if !cap.DataSufficiency || len(cap.Problems) != 1 || !strings.HasPrefix(cap.Problems[0], "the model gave no rationale that explains the verdict") {
		t.Errorf("kept verdict: %+v", cap)
	}
	if cap.BooleanOutput == nil || !*cap.BooleanOutput || len(cap.Evidences) != 1 || cap.Evidences[0].PassageID != "d1p1s2" {
		t.Errorf("the kept verdict lost its output or evidence: %+v", cap)
	}
}

// TestRationaleReaskKeepsTheVerdict: a rationale given in the rationale-only
// re-ask completes the first answer's verdict, which is accepted clean with
// its output and evidence; the rules already accepted are not asked again.
func TestRationaleReaskKeepsTheVerdict(t *testing.T) {
	bad := answer(t, withRationale(boolRule("cap", true, cite("d1p1s2", "")), "cap"),
		boolRule("term", false, cite("d1p2s1", "")), numRule("score", 1, cite("d1p1s1", "")))
	explained := `{"rules":[{"rationale":"Liability is capped at the fees of the prior twelve months, which is the cap the rule asks for."}]}`
	var retried []string
	llm := &scriptedLLM{replies: []scriptedReply{{content: bad}, {content: explained}}}
	e := newTestEngine(t, llm, Config{Hooks: Hooks{OutputRetry: func(reason string) { retried = append(retried, reason) }}})
	res, err := e.Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: citeInputs()})
	if err != nil {
		t.Fatal(err)
	}
	if len(llm.calls) != 2 || strings.Join(retried, ",") != ReasonPlaceholderRationale {
		t.Fatalf("%d calls, re-asked for %v", len(llm.calls), retried)
	}
	if llm.calls[0].Purpose != PurposeJudge || llm.calls[1].Purpose != PurposeRationale {
		t.Errorf("purposes %q, %q; want judge, then rationale", llm.calls[0].Purpose, llm.calls[1].Purpose)
	}
	if n := strings.Count(llm.calls[1].Messages[len(llm.calls[1].Messages)-1].Content, "\nRule "); n != 1 {
		t.Errorf("the re-ask names %d rules, want the one without a rationale", n)
	}
	cap := res.Rules[0]
	if !cap.DataSufficiency || len(cap.Problems) != 0 || !strings.HasPrefix(cap.Rationale, "Liability is capped") {
		t.Errorf("explained verdict: %+v", cap)
	}
	if cap.BooleanOutput == nil || !*cap.BooleanOutput || len(cap.Evidences) != 1 || cap.Evidences[0].PassageID != "d1p1s2" || !cap.Evidences[0].Anchored {
		t.Errorf("the explained verdict lost its output or evidence: %+v", cap)
	}
	if res.Usage.LLMCalls != 2 {
		t.Errorf("usage counts %d calls, want 2", res.Usage.LLMCalls)
	}
}

// TestCiteUnknownPassageKeptForTheReader: when the budget runs out on an
// unknown id, the kept verdict says what was wrong in the reader's terms.
func TestCiteUnknownPassageKeptForTheReader(t *testing.T) {
	bad := answer(t, boolRule("cap", true, cite("d7p1s1", "")), boolRule("term", false, cite("d1p2s1", "")), numRule("score", 1, cite("d1p1s1", "")))
	llm := &scriptedLLM{replies: []scriptedReply{{content: bad}, {content: answer(t, boolRule("cap", true, cite("d7p1s1", "")))}, {content: answer(t, boolRule("cap", true, cite("d7p1s1", "")))}}}
	res, err := newTestEngine(t, llm, Config{}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: citeInputs()})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []CallPurpose{PurposeJudge, PurposeReask, PurposeReask} {
		if got := llm.calls[i].Purpose; got != want {
			t.Errorf("call %d's purpose is %q, want %q", i, got, want)
		}
	}
	cap := res.Rules[0]
	want := []string{`the model cited a passage that is not in the material ("d7p1s1")`, "no evidence found in the material supports the verdict"}
	if !cap.DataSufficiency || strings.Join(cap.Problems, "|") != strings.Join(want, "|") {
		t.Errorf("kept verdict: problems %q, want %q", cap.Problems, want)
	}
	if strings.Contains(cap.SufficiencyNote, "cite the id") || strings.Contains(cap.SufficiencyNote, "passage_id") {
		t.Errorf("the note speaks to the model: %q", cap.SufficiencyNote)
	}
	if ev := cap.Evidences[0]; ev.Anchored || ev.Match != verdict.MatchNone {
		t.Errorf("an unknown id must not read as anchored: %+v", ev)
	}
}

// TestQuoteTooLongIsUnfocused: a quote of a whole page is not evidence of
// anything in particular: re-asked, and it supports nothing meanwhile.
func TestQuoteTooLongIsUnfocused(t *testing.T) {
	page := "The supplier shall deliver the services. The customer shall pay within 45 days. Late payments bear interest at 1% a month. Either party may terminate on 90 days' notice. This agreement is governed by English law."
	in := &Inputs{PrimaryDocs: []Document{{Name: "msa.pdf", Pages: []string{page}}}}
	whole := map[string]any{"text": page, "source_origin": "msa.pdf", "source_page_number": 1}
	focused := map[string]any{"text": "The customer shall pay within 45 days.", "source_origin": "msa.pdf", "source_page_number": 1}
	var retried []string
	llm := &scriptedLLM{replies: []scriptedReply{
		{content: answer(t, boolRule("cap", true, whole), boolRule("term", false), numRule("score", 1))},
		{content: answer(t, boolRule("cap", true, focused))},
	}}
	e := newTestEngine(t, llm, Config{Evidence: EvidenceQuote, Hooks: Hooks{OutputRetry: func(reason string) { retried = append(retried, reason) }}})
	res, err := e.Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(retried, ",") != ReasonUnfocusedEvidence+","+ReasonUnsupportedVerdict {
		t.Fatalf("re-asked for %v, want the unfocused quote and the verdict it left unsupported", retried)
	}
	if ev := res.Rules[0].Evidences[0]; ev.Text != focused["text"] || !ev.Anchored {
		t.Errorf("accepted evidence %+v", ev)
	}
}

// TestQuoteModeConstrainsOrigins: in quote mode the grammar names the
// sources a quote may give; the contract asks for quotes.
func TestQuoteModeConstrainsOrigins(t *testing.T) {
	llm := &scriptedLLM{replies: []scriptedReply{{content: answer(t, boolRule("cap", true, capQuote), boolRule("term", true, termQuote), numRule("score", 1))}}}
	if _, err := newTestEngine(t, llm, Config{Evidence: EvidenceQuote}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()}); err != nil {
		t.Fatal(err)
	}
	req := llm.calls[0]
	if !strings.Contains(string(req.GrammarSchema), `"citable":{"type":"string","enum":["msa.pdf","budget"]}`) {
		t.Errorf("grammar does not name the sources: %.300s", req.GrammarSchema)
	}
	if strings.Contains(req.Messages[1].Content, "[d1p1s1]") || !strings.Contains(req.Messages[0].Content, `"text": a quote of the material`) {
		t.Error("quote mode shows passage ids or asks for them")
	}
}

func TestSystemPromptShowsNoPlaceholders(t *testing.T) {
	for _, mode := range []EvidenceMode{EvidenceCite, EvidenceQuote} {
		if s := SystemPrompt(testRuleset(), mode); strings.Contains(s, `"..."`) || strings.Contains(s, "…") {
			t.Errorf("%s mode: the output contract shows a placeholder:\n%s", mode, s)
		}
	}
}

// TestMissingRationaleKeptWithItsNote: an answer with no rationale is
// re-asked; when it never comes, the verdict stands, kept with the note a
// reader needs, instead of failing the request.
func TestMissingRationaleKeptWithItsNote(t *testing.T) {
	silent := func(r map[string]any) map[string]any { r["rationale"] = " "; return r }
	reply := answer(t, silent(boolRule("cap", true, cite("d1p1s2", ""))), boolRule("term", true, cite("d1p2s1", "")), numRule("score", 2, cite("d1p1s1", "")))
	again := answer(t, silent(boolRule("cap", true, cite("d1p1s2", ""))))
	llm := &scriptedLLM{replies: []scriptedReply{{content: reply}, {content: again}, {content: again}, {content: again}}}
	res, err := newTestEngine(t, llm, Config{}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: citeInputs()})
	if err != nil {
		t.Fatalf("a missing rationale failed the request: %v", err)
	}
	cap := res.Rules[0]
	if len(llm.calls) != 1+rationaleRetries(2) || !cap.DataSufficiency || strings.Join(cap.Problems, "|") != "the model gave no rationale" || cap.Rationale != "" {
		t.Errorf("%d calls; kept verdict %+v", len(llm.calls), cap)
	}
	if ev := cap.Evidences[0]; ev.PassageID != "d1p1s2" || !ev.Anchored {
		t.Errorf("the kept verdict lost its cited evidence: %+v", ev)
	}
}

// TestGrammarRationaleStartsWithAWord: on grammar servers a rationale can be
// neither empty nor punctuation, and is bounded.
func TestGrammarRationaleStartsWithAWord(t *testing.T) {
	g, err := GrammarSchema(testRuleset().Rules, EvidenceCite, []string{"d1p1s1"})
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Rules struct {
				PrefixItems []struct {
					Properties struct {
						Rationale struct{ Pattern string }
					}
				}
			}
		}
	}
	if err := json.Unmarshal(g, &schema); err != nil {
		t.Fatal(err)
	}
	for i, item := range schema.Properties.Rules.PrefixItems {
		pattern := regexp.MustCompile(item.Properties.Rationale.Pattern)
		for _, s := range []string{"", "...", "Short.", `He said "no".`, "The term ends <------- End of Document: x ------->.", strings.Repeat("long ", 90) + ".",
			"Supplier's total liability is capped at no less than the fees paid in the", "rules_to_judge(answer=1, b c d.",
			"This agreement is valid [d1p1s3].", " Leading space.", "-dash first."} {
			if pattern.MatchString(s) {
				t.Errorf("rule %d: rationale pattern %q lets %q through", i, pattern, s)
			}
		}
		for _, s := range []string{"Invoices are payable within 45 days of receipt.", "H&S's agreement ends in 2 years.", "Section 5 says the term is 3 years.",
			"The agreement is governed by the laws of the State of Ohio. That is a stated governing law, so the rule holds.", "“Confidential Information” excludes public information!",
			"12 months of fees cap the liability, which meets the policy's minimum?"} {
			if !pattern.MatchString(s) {
				t.Errorf("rule %d: rationale pattern %q refuses %q", i, pattern, s)
			}
		}
	}
	if !strings.Contains(string(g), `"required":["rule_id","rationale","evidences","not_applicable","data_sufficiency"`) {
		t.Errorf("the grammar does not ask every field of the contract: %s", g)
	}
	if !strings.Contains(string(g), `"minItems":1,"maxItems":3`) {
		t.Errorf("the grammar does not ask one to three citations: %s", g)
	}
}

// ruleReader answers every rule the call names after the material, citing
// the first passage: whatever the order its calls arrive in.
type ruleReader struct {
	mu    sync.Mutex
	calls []ChatRequest
}

func (l *ruleReader) Chat(_ context.Context, req ChatRequest) (ChatResponse, error) {
	l.mu.Lock()
	l.calls = append(l.calls, req)
	l.mu.Unlock()
	user := req.Messages[len(req.Messages)-1].Content
	var rules []map[string]any
	for _, m := range regexp.MustCompile(`(?m)^\d+\. rule_id: "([^"]+)"`).FindAllStringSubmatch(user, -1) {
		r := boolRule(m[1], true, cite("d1p1s1", ""))
		if m[1] == "score" {
			r = numRule(m[1], 2, cite("d1p1s1", ""))
		}
		rules = append(rules, r)
	}
	data, _ := json.Marshal(map[string]any{"rules": rules})
	return ChatResponse{Content: string(data), Format: req.Format, Usage: verdict.Usage{PromptTokens: 100, CompletionTokens: 20, LLMCalls: 1}}, nil
}

// TestRulesPerCallShareTheMaterial: with one rule a call, every call starts
// with the same instructions and material (the prefix a prompt cache keeps)
// and names its own rule after it; the verdicts merge in ruleset order, as
// judged on the whole material.
func TestRulesPerCallShareTheMaterial(t *testing.T) {
	llm := &ruleReader{}
	var planned []int
	e := newTestEngine(t, llm, Config{RulesPerCall: 1, Hooks: Hooks{PlannedCalls: func(_ string, n int) { planned = append(planned, n) }}})
	res, err := e.Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: citeInputs()})
	if err != nil {
		t.Fatal(err)
	}
	if len(llm.calls) != 3 || res.Usage.PlannedCalls != 3 || fmt.Sprint(planned) != "[3]" {
		t.Fatalf("%d calls, usage %+v, planned %v; want 3 calls of one rule", len(llm.calls), res.Usage, planned)
	}
	material := UserPrompt(citeInputs(), EvidenceCite)
	system := llm.calls[0].Messages[0].Content
	for i, c := range llm.calls {
		user := c.Messages[1].Content
		if c.Messages[0].Content != system || !strings.HasPrefix(user, material) || strings.Count(user, "rule_id:") != 1 {
			t.Errorf("call %d does not start with the shared prefix and name one rule:\n%s", i, user)
		}
	}
	for i, v := range res.Rules {
		if v.RuleID != testRuleset().Rules[i].RuleID || v.PagesConsidered != nil || !v.DataSufficiency {
			t.Errorf("verdict %d: %+v", i, v)
		}
	}
}

// TestGrammarAsksWhatTheStrictSchemaAsks: on grammar servers every rule is
// asked whether it applies and whether the material answers it, as on
// strict-schema servers; only the id of the one rule of a call is left to
// its position. An answer without not_applicable or data_sufficiency (a
// json_object server's, say) reads as applicable and sufficient.
func TestGrammarAsksWhatTheStrictSchemaAsks(t *testing.T) {
	rules := testRuleset().Rules // cap has an alternate, term and score none
	for _, r := range rules {
		g, err := GrammarSchema([]Rule{r}, EvidenceCite, []string{"d1p1s1"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(g), `"not_applicable"`) || !strings.Contains(string(g), `"data_sufficiency"`) {
			t.Errorf("%s: the grammar does not ask not_applicable and data_sufficiency: %s", r.RuleID, g)
		}
		if strings.Contains(string(g), `"rule_id"`) {
			t.Errorf("%s: the grammar of one rule forces its id: %s", r.RuleID, g)
		}
		s, _ := OutputSchema([]Rule{r}, EvidenceCite, []string{"d1p1s1"})
		if !strings.Contains(string(s), `"not_applicable"`) || !strings.Contains(string(s), `"rule_id"`) {
			t.Errorf("%s: the strict schema lacks rule_id or not_applicable: %s", r.RuleID, s)
		}
	}
	if g, _ := GrammarSchema(rules, EvidenceCite, []string{"d1p1s1"}); strings.Count(string(g), `"rule_id":{`) != len(rules) {
		t.Errorf("the grammar of several rules does not name each: %s", g)
	}

	good, problems := checkAnswer(`{"rules":[{"rationale":"Invoices are payable within 45 days.","evidences":[{"passage_id":"d1p1s1"}],"boolean_output":true}]}`, rules[1:2])
	if v, ok := good[rules[1].RuleID]; !ok || len(problems) > 0 || v.NotApplicable || !v.DataSufficiency {
		t.Errorf("an answer of one rule without its id, not_applicable and data_sufficiency: %+v, problems %v", good, problems)
	}
	if _, problems := checkAnswer(`{"rules":[{"evidences":[],"rationale":"Invoices are payable within 45 days.","data_sufficiency":true,"boolean_output":true}]}`, rules[1:3]); !slices.ContainsFunc(problems, func(p Problem) bool { return p.Reason == ReasonMissingRuleID }) {
		t.Errorf("an entry without an id among several rules is not a problem: %v", problems)
	}
}

// TestCiteFindsThePassageByItsWords: a model that copies the deciding
// sentence and gives the id of another passage cites the passage its words
// stand in, when its rationale speaks of that passage more than of the one
// it named; the evidence keeps the id and page it gave.
func TestCiteFindsThePassageByItsWords(t *testing.T) {
	in := &Inputs{
		PrimaryDocs: []Document{{Name: "msa.pdf", Pages: []string{
			"1. Term. This Agreement runs for three years. 2. Fees. Customer pays USD 240,000 a year.",
			"8. Governing Law. This Agreement is governed by the laws of the State of\nDelaware. 9. Notices. Notices are given in writing.",
		}}},
		AuxiliaryDocs: []Document{{Name: "policy", Pages: []string{
			"1. Approved governing law: Delaware, New York. 2. Fees over the approval limit need the CFO.",
		}}},
	}
	const aboutLaw = "The agreement is governed by the laws of Delaware, which the policy approves."
	for _, tc := range []struct {
		name, rationale, id, quote string
		wantID, wantCitedID        string
		wantCitedPage              int
		wantMatch                  verdict.Match
		wantText                   string
	}{
		{"words in the cited passage", aboutLaw, "d1p2s1", "governed by the laws of the State of", "d1p2s1", "", 2, verdict.MatchExact, "governed by the laws of the State of"},
		{"words in another page's passage", aboutLaw, "d1p1s2", "governed by the laws of the State of", "d1p2s1", "d1p1s2", 1, verdict.MatchExact, "governed by the laws of the State of"},
		{"words in another document", aboutLaw, "d1p2s2", "Approved governing law: Delaware", "d2p1s1", "d1p2s2", 2, verdict.MatchExact, "Approved governing law: Delaware"},
		{"words across a line break, in other case", aboutLaw, "d1p1s1", "this agreement is governed by the laws of the state of Delaware", "d1p2s1", "d1p1s1", 1, verdict.MatchPassage,
			"8. Governing Law. This Agreement is governed by the laws of the State of\nDelaware."},
		{"words behind the passage's marker", aboutLaw, "d1p1s2", "[d1p2s1] 8. Governing Law. This Agreement is governed", "d1p2s1", "d1p1s2", 1, verdict.MatchExact, "8. Governing Law. This Agreement is governed"},
		{"words of another passage than the rationale's", "The annual fee of USD 240,000 is within the limit.", "d1p1s2", "Approved governing law: Delaware", "d1p1s2", "", 1, verdict.MatchPassage, "2. Fees. Customer pays USD 240,000 a year."},
		{"words changed a little", "The customer pays USD 240,000 a year, within the limit.", "d1p2s2", "The customer pays USD 240,000 each year", "d1p1s2", "d1p2s2", 2, verdict.MatchPassage, "2. Fees. Customer pays USD 240,000 a year."},
		{"the model's own words, not a passage's", "The fee is within the limit.", "d1p2s2", "the approval limit given in the inputs is also USD 250,000", "d1p2s2", "", 2, verdict.MatchPassage, "9. Notices. Notices are given in writing."},
		{"words too short to tell", aboutLaw, "d1p1s1", "Delaware", "d1p1s1", "", 1, verdict.MatchPassage, "1. Term. This Agreement runs for three years."},
		{"words in no passage", aboutLaw, "d1p1s2", "The supplier may subcontract freely.", "d1p1s2", "", 1, verdict.MatchPassage, "2. Fees. Customer pays USD 240,000 a year."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &anchoring{docs: in.Documents(), in: in}
			ev := verdict.Evidence{PassageID: tc.id, Text: tc.quote}
			if !a.cite(&ev, Rule{}, tc.rationale, nil) {
				t.Fatalf("cite(%s) found no passage", tc.id)
			}
			if ev.PassageID != tc.wantID || ev.CitedPassageID != tc.wantCitedID || ev.CitedPageNumber != tc.wantCitedPage || ev.Match != tc.wantMatch || ev.Text != tc.wantText || ev.QuotedText != tc.quote {
				t.Errorf("evidence %+v\nwant passage %s (cited %q, page %d), %s, text %q", ev, tc.wantID, tc.wantCitedID, tc.wantCitedPage, tc.wantMatch, tc.wantText)
			}
		})
	}
}

// TestCiteNearestOfSeveralPassages: words several passages hold move a
// citation to the nearest of them.
func TestCiteNearestOfSeveralPassages(t *testing.T) {
	in := &Inputs{PrimaryDocs: []Document{{Name: "a.pdf", Pages: []string{
		"Payment is due within thirty days. Intro text here for spacing. Payment is due within thirty days. Closing words for the page.",
	}}}}
	a := &anchoring{docs: in.Documents(), in: in}
	ev := verdict.Evidence{PassageID: "d1p1s4", Text: "Payment is due within thirty days"}
	if !a.cite(&ev, Rule{}, "Payment is due within thirty days of the invoice.", nil) || ev.PassageID != "d1p1s3" || ev.CitedPassageID != "d1p1s4" {
		t.Errorf("evidence %+v, want d1p1s3 cited as d1p1s4", ev)
	}
}

// TestCiteByIDAloneFollowsTheRationale: a citation by id alone whose passage
// shares nothing with the rule and the rationale is the passage the
// rationale plainly speaks of, keeping the id and page the model gave; a
// passage related to the verdict, a rationale that speaks of no passage
// more than another, and a passage the verdict cites already leave the
// model's citation as it is.
func TestCiteByIDAloneFollowsTheRationale(t *testing.T) {
	in := &Inputs{
		PrimaryDocs: []Document{{Name: "msa.pdf", Pages: []string{
			"1. Term. This Agreement runs for three years. 2. Fees. Customer pays USD 240,000 a year.",
			"8. Governing Law. This Agreement is governed by the laws of the State of\nDelaware. 9. Notices. Notices are given in writing.",
		}}},
		AuxiliaryDocs: []Document{{Name: "policy", Pages: []string{
			"1. Approved governing law: Delaware, New York. 2. Late fees above 1% a month are not accepted.",
		}}},
	}
	law := Rule{RuleID: "governing-law", RuleText: "The agreement is governed by the law of a jurisdiction the policy approves."}
	const aboutLaw = "The agreement states that it is governed by the laws of the State of Delaware, which is approved."
	for _, tc := range []struct {
		name, rationale, id string
		taken               []string
		wantID, wantCitedID string
	}{
		{"an unrelated passage: the one the rationale speaks of", aboutLaw, "d2p1s2", nil, "d1p2s1", "d2p1s2"},
		{"a passage of the rule's own words stays", aboutLaw, "d2p1s1", nil, "d2p1s1", ""},
		{"the passage the rationale speaks of", aboutLaw, "d1p2s1", nil, "d1p2s1", ""},
		{"the passage spoken of is cited already", aboutLaw, "d2p1s2", []string{"d1p2s1"}, "d2p1s2", ""},
		{"a rationale that speaks of no passage", "The material does not say.", "d2p1s2", nil, "d2p1s2", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &anchoring{docs: in.Documents(), in: in}
			taken := map[string]bool{tc.id: true}
			for _, id := range tc.taken {
				taken[id] = true
			}
			ev := verdict.Evidence{PassageID: tc.id}
			if !a.cite(&ev, law, tc.rationale, taken) {
				t.Fatalf("cite(%s) found no passage", tc.id)
			}
			if ev.PassageID != tc.wantID || ev.CitedPassageID != tc.wantCitedID || ev.Match != verdict.MatchPassage {
				t.Errorf("evidence %s (cited %q, %s), want %s (cited %q), the whole passage", ev.PassageID, ev.CitedPassageID, ev.Match, tc.wantID, tc.wantCitedID)
			}
		})
	}
}

// TestOneRuleCallsFitTheWholeMaterial: with one rule a call, a material
// that one rule's call holds, but not a call of every rule and its answers,
// is judged whole, each call sharing it as a prefix, not in an excerpt a
// call for each rule.
func TestOneRuleCallsFitTheWholeMaterial(t *testing.T) {
	var paras []string
	for i := range 60 {
		paras = append(paras, fmt.Sprintf("Clause %d. The supplier shall keep records of the services delivered under order %d for audit by the customer.", i+1, i+1))
	}
	in := &Inputs{PrimaryDocs: []Document{{Name: "msa.pdf", Pages: []string{strings.Join(paras, "\n\n")}}}}
	rs := testRuleset()
	probe := newTestEngine(t, &ruleReader{}, Config{})
	b, err := probe.budgetFor(context.Background(), "test-model")
	if err != nil {
		t.Fatal(err)
	}
	prompt := b.tokens(SystemPrompt(rs, EvidenceCite)) + b.tokens(UserPrompt(in, EvidenceCite)) + 3*perMessageTokens
	one := prompt + b.tokens(longestRules(rs.Rules, 1)) + b.perRule
	all := prompt + b.tokens(RulesPrompt(rs.Rules)) + len(rs.Rules)*b.perRule
	window := one + 16
	if window >= all {
		t.Fatalf("the test's material fits every rule's call (%d >= %d tokens)", window, all)
	}
	for _, perCall := range []int{1, 0} {
		llm := &ruleReader{}
		var planned []int
		e := newTestEngine(t, llm, Config{RulesPerCall: perCall, ContextTokens: window, Hooks: Hooks{PlannedCalls: func(_ string, n int) { planned = append(planned, n) }}})
		res, err := e.Evaluate(context.Background(), Task{Ruleset: rs, Inputs: in})
		if err != nil {
			t.Fatalf("rules per call %d: %v", perCall, err)
		}
		whole := 0
		for _, c := range llm.calls {
			if strings.HasPrefix(c.Messages[1].Content, UserPrompt(in, EvidenceCite)) {
				whole++
			}
		}
		switch perCall {
		case 1:
			if len(llm.calls) != 3 || whole != 3 || fmt.Sprint(planned) != "[3]" {
				t.Errorf("one rule a call: %d calls, %d on the whole material, planned %v; want 3 on the whole material", len(llm.calls), whole, planned)
			}
			for _, v := range res.Rules {
				if v.PagesConsidered != nil {
					t.Errorf("%s judged on %v, want the whole material", v.RuleID, v.PagesConsidered)
				}
			}
		default: // every rule in one call does not fit: excerpts
			if whole != 0 {
				t.Errorf("as many rules a call as fit: %d calls on the whole material, want excerpts", whole)
			}
		}
	}
}
