package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"rulevalidator/verdict"
)

// withRationale returns rule with its rationale replaced.
func withRationale(rule map[string]any, rationale string) map[string]any {
	rule["rationale"] = rationale
	return rule
}

// TestContentChecksTriggerReask: each answer is well formed but says nothing
// or cites what the documents do not say. The engine must re-ask, naming the
// problem, count it by reason, and accept the corrected answer.
func TestContentChecksTriggerReask(t *testing.T) {
	good := func() string {
		return answer(t, boolRule("cap", true, capQuote), boolRule("term", true, termQuote), numRule("score", 1))
	}
	tests := []struct {
		name       string
		first      string
		reason     string
		correction string // what the corrective message must say
	}{
		{
			name:       "punctuation rationale",
			first:      answer(t, withRationale(boolRule("cap", true, capQuote), "..."), boolRule("term", true, termQuote), numRule("score", 1)),
			reason:     ReasonPlaceholderRationale,
			correction: `the rationale "..." is a placeholder`,
		},
		{
			name:       "none rationale",
			first:      answer(t, boolRule("cap", true, capQuote), withRationale(boolRule("term", true, termQuote), "None"), numRule("score", 1)),
			reason:     ReasonPlaceholderRationale,
			correction: `the rationale "None" is a placeholder`,
		},
		{
			name:       "n/a rationale",
			first:      answer(t, boolRule("cap", true, capQuote), boolRule("term", true, termQuote), withRationale(numRule("score", 1), "N/A")),
			reason:     ReasonPlaceholderRationale,
			correction: `the rationale "N/A" is a placeholder`,
		},
		{
			name:       "rule text as rationale",
			first:      answer(t, withRationale(boolRule("cap", true, capQuote), "Liability is capped"), boolRule("term", true, termQuote), numRule("score", 1)),
			reason:     ReasonPlaceholderRationale,
			correction: "repeats the rule",
		},
		{
			name:       "rule id as rationale",
			first:      answer(t, withRationale(boolRule("cap", true, capQuote), "C-11"), boolRule("term", true, termQuote), numRule("score", 1)),
			reason:     ReasonPlaceholderRationale,
			correction: `the rationale "C-11" has fewer than 3 distinct words`,
		},
		{
			name:       "rationale of repeated placeholders",
			first:      answer(t, withRationale(boolRule("cap", true, capQuote), "n/a, n/a, n/a, n/a"), boolRule("term", true, termQuote), numRule("score", 1)),
			reason:     ReasonPlaceholderRationale,
			correction: `the rationale "n/a, n/a, n/a, n/a" has fewer than 3 distinct words`,
		},
		{
			name:       "rationale of numbers",
			first:      answer(t, boolRule("cap", true, capQuote), boolRule("term", true, termQuote), withRationale(numRule("score", 1), "1, 2, 3 (0-5)")),
			reason:     ReasonPlaceholderRationale,
			correction: `the rationale "1, 2, 3 (0-5)" has fewer than 3 distinct words`,
		},
		{
			name:       "rationale of one word repeated",
			first:      answer(t, withRationale(boolRule("cap", true, capQuote), "pass pass pass pass"), boolRule("term", true, termQuote), numRule("score", 1)),
			reason:     ReasonPlaceholderRationale,
			correction: "has fewer than 3 distinct words",
		},
		{
			name:       "rationale as an identifier",
			first:      answer(t, withRationale(boolRule("cap", true, capQuote), "yes_for_the_liability_cap"), boolRule("term", true, termQuote), numRule("score", 1)),
			reason:     ReasonPlaceholderRationale,
			correction: `the rationale "yes_for_the_liability_cap" is an identifier, not a sentence`,
		},
		{
			name:       "rationale of filler words",
			first:      answer(t, boolRule("cap", true, capQuote), withRationale(boolRule("term", true, termQuote), "the evidence shows it"), numRule("score", 1)),
			reason:     ReasonPlaceholderRationale,
			correction: `the rationale "the evidence shows it" says nothing about the material`,
		},
		{
			name:       "rationale of filler words, negated",
			first:      answer(t, boolRule("cap", true, capQuote), boolRule("term", true, termQuote), withRationale(numRule("score", 1), "False, no rules: it is not true")),
			reason:     ReasonPlaceholderRationale,
			correction: `says nothing about the material`,
		},
		{
			name: "placeholder evidence text",
			first: answer(t, boolRule("cap", true, capQuote, map[string]any{"text": "...", "source_origin": "msa.pdf", "source_page_number": 1}),
				boolRule("term", true, termQuote), numRule("score", 1)),
			reason:     ReasonPlaceholderEvidence,
			correction: `the evidence "..." is a placeholder, not a quote`,
		},
		{
			name: "placeholder evidence origin",
			first: answer(t, boolRule("cap", true, capQuote, map[string]any{"text": "The supplier is liable for everything without limit.", "source_origin": "N/A", "source_page_number": 1}),
				boolRule("term", true, termQuote), numRule("score", 1)),
			reason:     ReasonPlaceholderEvidence,
			correction: `cites the source "N/A", which names nothing`,
		},
		{
			name: "quote in no document",
			first: answer(t, boolRule("cap", true, capQuote), boolRule("term", true, termQuote,
				map[string]any{"text": "See https://example.com/terms for the full terms.", "source_origin": "msa.pdf", "source_page_number": 1}), numRule("score", 1)),
			reason:     ReasonUnanchoredQuote,
			correction: `rule "term": your quote "See https://example.com/terms for the full terms." was not found in "msa.pdf" — quote the document exactly, or give no evidence`,
		},
		{
			name: "quote citing an unknown source",
			first: answer(t, boolRule("cap", true, capQuote), boolRule("term", true, termQuote,
				map[string]any{"text": "The parties agree to arbitration in Geneva.", "source_origin": "annex.pdf", "source_page_number": 1}), numRule("score", 1)),
			reason:     ReasonUnanchoredQuote,
			correction: `was not found in any supplied document ("msa.pdf")`,
		},
		{
			name:       "passing boolean without evidence",
			first:      answer(t, boolRule("cap", true), boolRule("term", true, termQuote), numRule("score", 1)),
			reason:     ReasonUnsupportedVerdict,
			correction: `rule "cap": boolean_output is true but no evidence found in the material supports it`,
		},
		{
			name:       "score above the lowest without evidence",
			first:      answer(t, boolRule("cap", true, capQuote), boolRule("term", true, termQuote), numRule("score", 3)),
			reason:     ReasonUnsupportedVerdict,
			correction: `rule "score": numerical_output 3 is above the lowest score but no evidence`,
		},
		{
			name: "passing boolean whose only quote is unfound",
			first: answer(t, boolRule("cap", true, map[string]any{"text": "Liability is unlimited for all claims of any kind.", "source_origin": "msa.pdf", "source_page_number": 1}),
				boolRule("term", true, termQuote), numRule("score", 1)),
			reason:     ReasonUnsupportedVerdict,
			correction: `rule "cap": boolean_output is true but no evidence`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := &scriptedLLM{replies: []scriptedReply{{content: tt.first}, {content: good()}}}
			var retries []string
			var log bytes.Buffer
			res, err := newTestEngine(t, llm, Config{
				Hooks:  Hooks{OutputRetry: func(r string) { retries = append(retries, r) }},
				Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
			}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()})
			if err != nil {
				t.Fatal(err)
			}
			if len(llm.calls) != 2 {
				t.Fatalf("%d calls, want a re-ask", len(llm.calls))
			}
			correction := llm.calls[1].Messages[len(llm.calls[1].Messages)-1].Content
			if rationaleOnly := tt.reason == ReasonPlaceholderRationale || tt.reason == ReasonMissingRationale; rationaleOnly {
				// Asked for the rationale alone, the model is not shown the
				// placeholder (it would copy it): the problem is logged.
				if !strings.Contains(correction, "their verdicts stand") {
					t.Errorf("not a rationale-only re-ask:\n%s", correction)
				}
				if q := strconv.Quote(tt.correction); !strings.Contains(log.String(), q[1:len(q)-1]) {
					t.Errorf("the re-ask's log lacks %q:\n%s", tt.correction, log.String())
				}
			} else if !strings.Contains(correction, tt.correction) {
				t.Errorf("correction lacks %q:\n%s", tt.correction, correction)
			}
			found := false
			for _, r := range retries {
				found = found || r == tt.reason
			}
			if !found {
				t.Errorf("retry reasons %v lack %s", retries, tt.reason)
			}
			for _, v := range res.Rules {
				if !v.DataSufficiency || v.SufficiencyNote != "" {
					t.Errorf("corrected verdict %s still marked: %+v", v.RuleID, v)
				}
			}
		})
	}
}

// TestContentChecksAccept: answers that say something pass without a re-ask.
func TestContentChecksAccept(t *testing.T) {
	in := testInputs()
	in.TextInput = "The customer is a public body."
	tests := []struct {
		name  string
		rules []map[string]any
	}{
		{"failing verdicts need no evidence", []map[string]any{boolRule("cap", false), boolRule("term", false), numRule("score", 1)}},
		{"insufficient data claims nothing", []map[string]any{func() map[string]any {
			r := boolRule("cap", true)
			r["data_sufficiency"] = false
			return r
		}(), boolRule("term", false), numRule("score", 1)}},
		{"not applicable claims nothing", []map[string]any{func() map[string]any {
			r := boolRule("cap", true)
			r["not_applicable"] = true
			return r
		}(), boolRule("term", false), numRule("score", 1)}},
		{"named input supports", []map[string]any{boolRule("cap", true, map[string]any{"text": "50000", "source_origin": "budget", "source_page_number": 0}), boolRule("term", false), numRule("score", 1)}},
		{"text input supports, marker spelling", []map[string]any{boolRule("cap", true, map[string]any{"text": "a public body", "source_origin": "Text Input", "source_page_number": 0}), boolRule("term", false), numRule("score", 1)}},
		{"three-word rationale", []map[string]any{withRationale(boolRule("cap", true, capQuote), "Liability is limited."), boolRule("term", false), numRule("score", 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := &scriptedLLM{replies: []scriptedReply{{content: answer(t, tt.rules...)}}}
			if _, err := newTestEngine(t, llm, Config{}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: in}); err != nil {
				t.Fatal(err)
			}
			if len(llm.calls) != 1 {
				t.Errorf("%d calls: an acceptable answer was re-asked:\n%s", len(llm.calls), llm.calls[len(llm.calls)-1].Messages[len(llm.calls[len(llm.calls)-1].Messages)-1].Content)
			}
		})
	}
}

// TestUnsupportedVerdictNeedsDocuments: with no documents supplied there is
// nothing to anchor to, so a passing verdict without evidence is not flagged.
func TestUnsupportedVerdictNeedsDocuments(t *testing.T) {
	llm := &scriptedLLM{replies: []scriptedReply{{content: answer(t, boolRule("cap", true), boolRule("term", true), numRule("score", 3))}}}
	in := &Inputs{TextInput: "The supplier's liability is capped."}
	if _, err := newTestEngine(t, llm, Config{}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: in}); err != nil {
		t.Fatal(err)
	}
	if len(llm.calls) != 1 {
		t.Errorf("%d calls, want 1", len(llm.calls))
	}
}

// TestContentBudgetKeepsBestAnswer: when re-asks run out on content problems
// the request still completes; the rules keep their best answer, marked as
// judged on insufficient data with the reason.
func TestContentBudgetKeepsBestAnswer(t *testing.T) {
	twoProblems := withRationale(boolRule("cap", true), "...")
	oneProblem := boolRule("cap", true)
	llm := &scriptedLLM{replies: []scriptedReply{
		{content: answer(t, twoProblems, boolRule("term", false), numRule("score", 1))},
		{content: answer(t, oneProblem)},
		{content: answer(t, twoProblems)},
	}}
	res, err := newTestEngine(t, llm, Config{}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()})
	if err != nil {
		t.Fatal(err)
	}
	if len(llm.calls) != 3 {
		t.Errorf("%d calls, want 1 + 2 re-asks", len(llm.calls))
	}
	cap := res.Rules[0]
	if !cap.DataSufficiency || !strings.Contains(strings.Join(cap.Problems, "; "), "no evidence found in the material supports the verdict") {
		t.Errorf("cap not marked with its reason: %+v", cap)
	}
	// The note is for a reader: it names what was wrong, not what the model
	// was told to do about it.
	if strings.Contains(cap.SufficiencyNote, "quote the passage") || len(cap.Problems) != 1 {
		t.Errorf("cap's note and problems must be written for a reader: %q, %q", cap.SufficiencyNote, cap.Problems)
	}
	if cap.Rationale != "The material shows why cap is judged so." {
		t.Errorf("cap kept %q, want the answer with the fewest problems", cap.Rationale)
	}
	if term := res.Rules[1]; !term.DataSufficiency || term.SufficiencyNote != "" {
		t.Errorf("the accepted rule was marked: %+v", term)
	}
}

// TestShapeProblemsStillFail: content problems are forgiven at the end of
// the budget, shape problems are not.
func TestShapeProblemsStillFail(t *testing.T) {
	first := answer(t, boolRule("cap", true), boolRule("term", false), numRule("score", 9))
	again := answer(t, boolRule("cap", true), numRule("score", 9))
	llm := &scriptedLLM{replies: []scriptedReply{{content: first}, {content: again}, {content: again}}}
	_, err := newTestEngine(t, llm, Config{}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()})
	var oe *OutputError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "numerical_output 9") {
		t.Fatalf("err = %v, want an OutputError about the score", err)
	}
}

// TestAlteredEvidence: a quote that anchors to a passage saying something
// else keeps the model's words beside the document's, is marked altered,
// does not support the verdict and is re-asked for.
func TestAlteredEvidence(t *testing.T) {
	tests := []struct{ name, quote, differs string }{
		{"digits", "The term of this agreement is three (3) years from the effective date.", "number"},
		{"negation", "The term of this agreement is not two (2) years from the effective date.", "negation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			altered := answer(t, boolRule("cap", true, capQuote),
				boolRule("term", true, map[string]any{"text": tt.quote, "source_origin": "msa.pdf", "source_page_number": 2}), numRule("score", 1))
			llm := &scriptedLLM{replies: []scriptedReply{{content: altered}}}
			res, err := newTestEngine(t, llm, Config{OutputRetries: -1}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()})
			if err != nil {
				t.Fatal(err)
			}
			ev := res.Rules[1].Evidences[0]
			if !ev.Anchored || !ev.Altered || ev.QuotedText != tt.quote || ev.Text == tt.quote || ev.Similarity <= 0 || ev.Similarity >= 1 {
				t.Fatalf("altered evidence = %+v", ev)
			}
			kinds := fmt.Sprint(ev.Differences)
			if !strings.Contains(kinds, tt.differs) {
				t.Errorf("differences %v lack a %s", ev.Differences, tt.differs)
			}
			if v := res.Rules[1]; !v.DataSufficiency || !strings.Contains(strings.Join(v.Problems, "; "), "does not say what the document says") {
				t.Errorf("a verdict resting on altered evidence must be marked: %+v", v)
			}
			for _, s := range res.Sources {
				if s.Text == tt.quote {
					t.Errorf("the model's words became a source: %+v", s)
				}
			}
		})
	}
}

func TestSourcesOnlyFromDocuments(t *testing.T) {
	in := testInputs()
	in.TextInput = "Renewal is automatic."
	in.Message = "Please check the cap."
	tests := []struct {
		name    string
		ev      []map[string]any
		sources int
	}{
		{"a document quote, twice", []map[string]any{capQuote, capQuote}, 1},
		{"named input", []map[string]any{{"text": "50000", "source_origin": "budget", "source_page_number": 2}}, 0},
		{"text input, contract spelling", []map[string]any{{"text": "Renewal is automatic.", "source_origin": "text_input", "source_page_number": 1}}, 0},
		{"text input, marker spelling", []map[string]any{{"text": "Renewal is automatic.", "source_origin": "Text Input", "source_page_number": 1}}, 0},
		{"message, contract spelling", []map[string]any{{"text": "check the cap", "source_origin": "message", "source_page_number": 1}}, 0},
		{"message, marker spelling", []map[string]any{{"text": "check the cap", "source_origin": "Message", "source_page_number": 1}}, 0},
		{"unfound quote", []map[string]any{{"text": "An invented sentence about penalties.", "source_origin": "msa.pdf", "source_page_number": 1}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := &scriptedLLM{replies: []scriptedReply{{content: answer(t, boolRule("cap", false, tt.ev...), boolRule("term", false), numRule("score", 1))}}}
			res, err := newTestEngine(t, llm, Config{OutputRetries: -1}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: in})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Sources) != tt.sources {
				t.Errorf("sources = %+v, want %d", res.Sources, tt.sources)
			}
			for _, ev := range res.Rules[0].Evidences {
				if strings.Contains(tt.name, "spelling") || tt.name == "named input" {
					if ev.Match != verdict.MatchNotDocument || ev.SourcePageNumber != 0 || ev.Anchored {
						t.Errorf("non-document evidence = %+v, want page 0 and not_document", ev)
					}
				}
			}
		})
	}
}

// TestEvidenceKindsThroughTheEngine: elided quotes anchor as elided and
// support the verdict; a misquoted amount or state name is altered.
func TestEvidenceKindsThroughTheEngine(t *testing.T) {
	doc := Document{Name: "nda.txt", Pages: []string{
		"This Agreement shall be governed by and construed in accordance with the laws of the State of California, without regard to its conflict of laws principles. " +
			"The Recipient shall pay a fee of $450 for each additional copy of the Confidential Information requested in writing.",
	}}
	rs := &Ruleset{ID: "nda", Rules: []Rule{{RuleID: "law", RuleText: "The governing law is named.", Type: verdict.Boolean}}}
	if err := rs.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, quote string
		match       verdict.Match
		altered     bool
		kind        string
	}{
		{"elided", "This Agreement shall be governed by … the State of California", verdict.MatchElided, false, ""},
		{"state name", "This Agreement shall be governed by and construed in accordance with the laws of the State of New York, without regard to its conflict of laws principles.", verdict.MatchFuzzy, true, "name"},
		{"amount", "The Recipient shall pay a fee of $540 for each additional copy of the Confidential Information requested in writing.", verdict.MatchFuzzy, true, "amount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reply := answer(t, boolRule("law", true, map[string]any{"text": tt.quote, "source_origin": "nda.txt", "source_page_number": 1}))
			llm := &scriptedLLM{replies: []scriptedReply{{content: reply}}}
			res, err := newTestEngine(t, llm, Config{OutputRetries: -1}).Evaluate(context.Background(), Task{Ruleset: rs, Inputs: &Inputs{PrimaryDocs: []Document{doc}}})
			if err != nil {
				t.Fatal(err)
			}
			ev, v := res.Rules[0].Evidences[0], res.Rules[0]
			if !ev.Anchored || ev.Match != tt.match || ev.Altered != tt.altered || ev.QuotedText != tt.quote {
				t.Fatalf("evidence = %+v, want anchored %s, altered %v", ev, tt.match, tt.altered)
			}
			if !strings.Contains(doc.Pages[0], ev.Text) {
				t.Errorf("anchored text %q is not the document's", ev.Text)
			}
			if tt.altered {
				if !strings.Contains(fmt.Sprint(ev.Differences), tt.kind) || len(v.Problems) == 0 || len(res.Sources) != 1 {
					t.Errorf("altered evidence: differences %+v, verdict %+v, sources %+v", ev.Differences, v, res.Sources)
				}
			} else if !v.DataSufficiency || len(llm.calls) != 1 {
				t.Errorf("an elided quote must support the verdict: %+v after %d calls", v, len(llm.calls))
			}
		})
	}
}

func TestRationaleProblem(t *testing.T) {
	rule := Rule{RuleID: "governing-law", RuleText: "The agreement is governed by an approved law."}
	tests := []struct {
		rationale string
		ok        bool
	}{
		{"The agreement is governed by the laws of England, an approved jurisdiction.", true},
		{"Payment is due in 30 days.", true},
		{"n/a, n/a, n/a, n/a", false},
		{"1, 2, 3 (0-5)", false},
		{"yes yes yes", false},
		{"The agreement is governed by an approved law.", false}, // the rule itself
		{"The agreement is governed by an", false},               // its start, cut at a bound
		{"The agreement is governed by English law.", true},
		{"本契約は英国法に準拠する。", true}, // a script written without spaces
		{"准拠", false},
		// Copies of the prompt's own English, which the local model wrote.
		{"one or two plain-English sentences in your own words", false},
		{"the material does not hold enough information to judge the rule", false},
		{"These rules are judged and their verdicts stand", false},
		// A run of the prompt's words inside a sentence of its own is not a copy.
		{"The rule does not apply because the agreement names no term.", true},
	}
	for _, tt := range tests {
		why := rationaleProblem(rule, tt.rationale)
		if (why == "") != tt.ok {
			t.Errorf("rationaleProblem(%q) = %q, want ok %v", tt.rationale, why, tt.ok)
		}
	}
}

// TestRationaleCopyingAnInputExplainsNothing: a rationale that only repeats a
// named input's value or description is a placeholder.
func TestRationaleCopyingAnInputExplainsNothing(t *testing.T) {
	in := &Inputs{NamedInputs: []NamedInput{{Name: "counterparty", Description: "The supplier under review", Value: "Northwind Analytics Ltd"}}}
	a := &anchoring{in: in}
	rule := Rule{RuleID: "governing-law", RuleText: "The agreement is governed by an approved law."}
	for rationale, want := range map[string]string{
		"Northwind Analytics Ltd":   `copies the named input "counterparty"`,
		"the supplier under review": `copies the named input "counterparty"`,
		"Northwind Analytics Ltd agreed to English law, which the policy approves.": "",
	} {
		if got := a.rationaleProblem(rule, rationale); !strings.Contains(got, want) || (want == "") != (got == "") {
			t.Errorf("rationaleProblem(%q) = %q, want %q", rationale, got, want)
		}
	}
}
