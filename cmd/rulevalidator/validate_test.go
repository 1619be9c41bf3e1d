package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/xuri/excelize/v2"

	"rulevalidator/engine"
	"rulevalidator/internal/llmfake"
	"rulevalidator/verdict"
)

const (
	exampleRuleset     = "../../examples/contract-review/ruleset.yaml"
	exampleInput       = "../../examples/contract-review/input.json"
	exampleRequestFile = "../../examples/contract-review/request.json"
)

// exampleAnswer is a valid answer to the example ruleset, quoting the example
// documents (one quote paraphrased, one from the wrong page).
func exampleAnswer(t *testing.T, override map[string]map[string]any) string {
	t.Helper()
	rules := []map[string]any{
		{"rule_id": "governing-law", "data_sufficiency": true, "rationale": "Governed by New York law, which the policy approves.", "boolean_output": true, "not_applicable": false,
			"evidences": []map[string]any{{"text": "This Agreement is governed by the laws of the State of", "source_origin": "northwind-msa.pdf", "source_page_number": 1}}},
		{"rule_id": "liability-cap", "data_sufficiency": true, "rationale": "Capped at twelve months of fees; confidentiality carved out but not data protection.", "boolean_output": false, "not_applicable": false,
			"evidences": []map[string]any{{"text": "“This limit does not apply to breach of clause 6 (Confidentiality).”", "source_origin": "northwind-msa.pdf", "source_page_number": 3}}},
		{"rule_id": "subprocessors", "data_sufficiency": true, "rationale": "Only notice is required, not approval.", "boolean_output": false, "not_applicable": false,
			"evidences": []map[string]any{{"text": "Supplier may engage subprocessors, provided it notifies Customer at least thirty days in advance.", "source_origin": "northwind-msa.pdf", "source_page_number": 2}}},
		{"rule_id": "contract-value", "data_sufficiency": true, "rationale": "USD 240,000 a year, under the approval limit.", "boolean_output": true, "not_applicable": false,
			"evidences": []map[string]any{{"text": "250000", "source_origin": "approval_limit_usd", "source_page_number": 0}}},
		{"rule_id": "payment-terms", "data_sufficiency": true, "rationale": "30 days with 1.5% monthly interest.", "numerical_output": 2, "not_applicable": false,
			"evidences": []map[string]any{{"text": "Invoices are payable within thirty (30) days of receipt.", "source_origin": "northwind-msa.pdf", "source_page_number": 2}}},
		{"rule_id": "termination", "data_sufficiency": true, "rationale": "Termination for convenience on 90 days' notice.", "numerical_output": 2, "not_applicable": false,
			"evidences": []map[string]any{{"text": "Customer may terminate for convenience on ninety (90) days' written notice.", "source_origin": "northwind-msa.pdf", "source_page_number": 3}}},
	}
	for _, r := range rules {
		for k, v := range override[r["rule_id"].(string)] {
			r[k] = v
		}
	}
	data, err := json.Marshal(map[string]any{"rules": rules})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func runCLI(t *testing.T, fake *llmfake.Server, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		switch k {
		case "OPENAI_BASE_URL":
			if fake != nil {
				return fake.URL()
			}
			return "http://127.0.0.1:1/v1"
		case "RULEVALIDATOR_MODEL":
			return "fake-model"
		case "RULEVALIDATOR_LLM_INSTRUCTIONS":
			// The scripted replies answer judging calls only; the probe of
			// auto has tests of its own.
			return "system"
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code = run(ctx, args, &out, &errOut, getenv)
	return code, out.String(), errOut.String()
}

func TestValidateJSON(t *testing.T) {
	t.Parallel()
	fake := llmfake.New()
	defer fake.Close()
	fake.Enqueue(llmfake.Reply{Content: exampleAnswer(t, nil), PromptTokens: 900, CompletionTokens: 300, CachedTokens: 512})

	code, stdout, stderr := runCLI(t, fake, "validate", "--ruleset", exampleRuleset, "--input", exampleInput, "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var out resultJSON
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("stdout is not one result object: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatal("stdout holds more than one JSON value")
	}
	res := engine.Result{RulesetID: out.RulesetID, RulesetVersion: out.RulesetVersion, Model: out.Model,
		Aggregate: out.Aggregate, Groups: out.Groups, Sources: out.Sources, Usage: out.Usage}
	for _, v := range out.Rules {
		// rule_type is the key the events use; type is kept beside it for one release.
		if v.RuleType == "" || v.RuleType != v.Type {
			t.Errorf("rule %s: rule_type %q, type %q: want both, the same", v.RuleID, v.RuleType, v.Type)
		}
		res.Rules = append(res.Rules, v.Verdict)
	}
	if n := strings.Count(stdout, `"rule_type": `); n != len(res.Rules) {
		t.Errorf("stdout has rule_type %d times, want once per rule (%d)", n, len(res.Rules))
	}
	if len(res.Rules) != len(exampleRuleIDs) || res.Rules[0].RuleID != "governing-law" || res.Rules[5].RuleID != "termination" {
		t.Fatalf("rules = %+v", res.Rules)
	}
	if res.Usage != (verdict.Usage{PromptTokens: 900, CompletionTokens: 300, CachedTokens: 512, LLMCalls: 1, PlannedCalls: 1, RulesFiltered: 1, RulesChecked: 1}) {
		t.Errorf("usage = %+v", res.Usage)
	}
	// Anchoring: exact (with a corrected page), normalised (curly quotes), fuzzy (paraphrase).
	want := []struct {
		rule  int
		match verdict.Match
		page  int
	}{{0, verdict.MatchExact, 3}, {1, verdict.MatchNormalized, 3}, {2, verdict.MatchFuzzy, 2}, {4, verdict.MatchExact, 2}}
	for _, w := range want {
		ev := res.Rules[w.rule].Evidences[0]
		if !ev.Anchored || ev.Match != w.match || ev.SourcePageNumber != w.page || ev.StartOffset == nil || ev.EndOffset == nil {
			t.Errorf("rule %s evidence = %+v, want anchored %s on page %d", res.Rules[w.rule].RuleID, ev, w.match, w.page)
		}
	}
	// The page the model cited is kept beside the one the quote is on.
	if ev := res.Rules[0].Evidences[0]; ev.CitedPageNumber != 1 || !strings.Contains(stdout, `"cited_page_number": 1`) {
		t.Errorf("governing-law evidence = %+v, want the model's page 1 kept as cited_page_number", ev)
	}
	if strings.ContainsAny(res.Rules[1].Evidences[0].Text, "“”") {
		t.Errorf("normalised quote kept the model's quotes: %q", res.Rules[1].Evidences[0].Text)
	}
	if b := res.Aggregate.Boolean; b == nil || b.Passed || b.Applicable != 5 || b.PassedCount != 3 || b.Mode != verdict.AggregateAll {
		t.Errorf("boolean aggregate = %+v", b)
	}
	if n := res.Aggregate.Numerical; n == nil || n.Score == nil || *n.Score != 2 || n.Counted != 2 || n.Mode != verdict.AggregateWeightedMean {
		t.Errorf("numerical aggregate = %+v", n)
	}
	if len(res.Sources) != 5 { // the named-input evidence cites no source
		t.Errorf("sources = %+v", res.Sources)
	}
	// The request asked for structured output constrained to the example's rules.
	req := fake.Requests()[0]
	if req.Format != "json_schema" || req.Model != "fake-model" || !bytes.Contains(req.Schema, []byte(`"enum":[0,1,2,3]`)) {
		t.Errorf("request format %q model %q schema %s", req.Format, req.Model, req.Schema)
	}
}

func TestValidateTable(t *testing.T) {
	t.Parallel()
	fake := llmfake.New()
	defer fake.Close()
	fake.Enqueue(llmfake.Reply{Content: exampleAnswer(t, nil)})
	code, stdout, stderr := runCLI(t, fake, "validate", "--ruleset", exampleRuleset, "--input", exampleInput)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"Ruleset contract-review (version 1.0.0) · model fake-model · 8 rules",
		"governing-law         Governing law",
		"PASS", "FAIL", "score 2",
		"northwind-msa.pdf, page 3, anchored (exact)",
		// The model cited page 1 for the governing-law quote.
		"northwind-msa.pdf, page 3 (cited page 1), anchored (exact)",
		"1 (1 page corrected)",
		"Boolean aggregate (all): FAILED — 3 of 5 applicable rules passed",
		"Numerical aggregate (weighted_mean): 2.00 over 2 rules",
		"Nested rulesets:",
		"  signing-authority (gate): PASSED 1/1",
		`  data-protection: N/A — not applicable: filter_criteria of nested ruleset "data-protection"`,
		"1 rule(s) left out by filters, 1 judged by their check, without the model.",
		"Usage:",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

// The whole repair path over HTTP: a 429 with Retry-After, then a fenced but
// broken answer, then an answer with a score outside the set, then the fix.
func TestValidateRetriesAndRepairsOverHTTP(t *testing.T) {
	t.Parallel()
	fake := llmfake.New()
	defer fake.Close()
	fake.Enqueue(
		llmfake.Reply{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "1"}, Error: &llmfake.Error{Message: "rate limited"}},
		llmfake.Reply{Content: "```json\n{\"rules\": [\n```"},
		llmfake.Reply{Content: exampleAnswer(t, map[string]map[string]any{"termination": {"numerical_output": 5}})},
		llmfake.Reply{Content: `{"rules":[{"rule_id":"termination","data_sufficiency":true,"rationale":"90 days' notice.","numerical_output":2,"not_applicable":false,"evidences":[]}]}`},
	)
	start := time.Now()
	code, stdout, stderr := runCLI(t, fake, "validate", "--ruleset", exampleRuleset, "--input", exampleInput, "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("finished after %v: Retry-After: 1 was not honoured", waited)
	}
	reqs := fake.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	fix := reqs[2].Messages[len(reqs[2].Messages)-1].Content
	if !strings.Contains(fix, "code fence") {
		t.Errorf("first correction does not name the code fence:\n%s", fix)
	}
	last := reqs[3]
	fix = last.Messages[len(last.Messages)-1].Content
	if !strings.Contains(fix, `rule "termination": numerical_output 5 is not one of the allowed scores 0, 1, 2, 3`) || !strings.Contains(fix, `only these rules: "termination"`) {
		t.Errorf("second correction:\n%s", fix)
	}
	if bytes.Contains(last.Schema, []byte(`"governing-law"`)) {
		t.Error("the last re-ask still asked for accepted rules")
	}
	var res engine.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if got := *res.Rules[5].NumericalOutput; got != 2 {
		t.Errorf("termination score %d, want the corrected 2", got)
	}
	if res.Usage.LLMCalls != 3 {
		t.Errorf("llm calls = %d, want 3 answered calls", res.Usage.LLMCalls)
	}
}

func TestValidateExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badRuleset := write("bad.yaml", "id: x\nrules:\n  - rule_id: a\n    rule_text: ok\n    scroe: 1\n")
	badInput := write("bad.json", `{"primary_docs": [{"name": "a"}]}`)
	inlineInput := write("inline.json", `{"inline_ruleset": {"rules": [{"rule_id": "a", "rule_text": "t"}]}, "text_input": "x"}`)
	ambiguous := write("ambiguous.json", `{"primary_docs": [{"name": "a", "content": "x", "markdown": "y"}]}`)
	byURI := write("uri.json", `{"primary_docs": [{"name": "a", "uri": "s3://b/k"}]}`)

	tests := []struct {
		name       string
		replies    []llmfake.Reply
		args       []string
		wantCode   int
		wantStderr string
		noCalls    bool
	}{
		{name: "no flags", args: []string{"validate"}, wantCode: exitInvalid, wantStderr: "--input or --document is required", noCalls: true},
		{name: "no ruleset", args: []string{"validate", "--input", exampleInput}, wantCode: exitInvalid, wantStderr: "--ruleset is required (or an inline_ruleset in the input)", noCalls: true},
		{name: "a stored ruleset named", args: []string{"validate", "--input", exampleRequestFile}, wantCode: exitInvalid, wantStderr: `names the stored ruleset "contract-review" (ruleset_ref); give its file with --ruleset`, noCalls: true},
		{name: "two rulesets", args: []string{"validate", "--ruleset", exampleRuleset, "--input", inlineInput}, wantCode: exitInvalid, wantStderr: "has an inline_ruleset and --ruleset is given too", noCalls: true},
		{name: "ambiguous document", args: []string{"validate", "--ruleset", exampleRuleset, "--input", ambiguous}, wantCode: exitInvalid, wantStderr: "primary_docs[0]: ambiguous: the document's text is given as both content and markdown", noCalls: true},
		{name: "document by uri", args: []string{"validate", "--ruleset", exampleRuleset, "--input", byURI}, wantCode: exitInvalid, wantStderr: "documents by uri are read by the service", noCalls: true},
		{name: "invalid ruleset", args: []string{"validate", "--ruleset", badRuleset, "--input", exampleInput}, wantCode: exitInvalid, wantStderr: `unknown field "scroe"`, noCalls: true},
		{name: "invalid input", args: []string{"validate", "--ruleset", exampleRuleset, "--input", badInput}, wantCode: exitInvalid, wantStderr: "primary_docs[0]", noCalls: true},
		{name: "missing file", args: []string{"validate", "--ruleset", filepath.Join(dir, "nope.yaml"), "--input", exampleInput}, wantCode: exitInvalid, wantStderr: "nope.yaml", noCalls: true},
		{name: "bad instructions setting", args: []string{"validate", "--ruleset", exampleRuleset, "--input", exampleInput, "--llm-instructions", "developer"}, wantCode: exitInvalid, wantStderr: `--llm-instructions: "developer" is not system, user or auto`, noCalls: true},
		{name: "model refuses", replies: []llmfake.Reply{{Status: http.StatusUnauthorized, Error: &llmfake.Error{Message: "bad key"}}}, args: []string{"validate", "--ruleset", exampleRuleset, "--input", exampleInput}, wantCode: exitFailure, wantStderr: "refused the request"},
		{name: "bad answers", replies: []llmfake.Reply{{Content: "nope"}, {Content: "nope"}, {Content: "nope"}}, args: []string{"validate", "--ruleset", exampleRuleset, "--input", exampleInput}, wantCode: exitFailure, wantStderr: "did not produce a valid answer"},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: exitInvalid, wantStderr: `unknown command "frobnicate"`, noCalls: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := llmfake.New()
			defer fake.Close()
			fake.Enqueue(tt.replies...)
			code, _, stderr := runCLI(t, fake, tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("exit %d (want %d), stderr:\n%s\nwant it to contain %q", code, tt.wantCode, stderr, tt.wantStderr)
			}
			if tt.noCalls && len(fake.Requests()) != 0 {
				t.Error("the model was called")
			}
		})
	}
}

// TestValidateModelUnreachable: with nothing listening at the model's address, validate fails
// (exit 1) naming the address, once the adapter's retries are spent. Their backoff runs on the
// fake clock of a testing/synctest bubble: the refused connections are real, the waits are not.
func TestValidateModelUnreachable(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		code, _, stderr := runCLI(t, nil, "validate", "--ruleset", exampleRuleset, "--input", exampleInput, "--llm-timeout", "1s")
		if code != exitFailure || !strings.Contains(stderr, "could not reach the model at http://127.0.0.1:1/v1") {
			t.Errorf("exit %d, stderr:\n%s", code, stderr)
		}
	})
}

// TestValidateReadsRequestsAndWritesTheReport: validate reads a whole request
// in its JSON form, as the service does, and --report writes the workbook the
// service would store.
func TestValidateReadsRequestsAndWritesTheReport(t *testing.T) {
	t.Parallel()
	fake := llmfake.New()
	defer fake.Close()
	fake.SetDefault(llmfake.Reply{Content: exampleAnswer(t, nil)})

	xlsx := filepath.Join(t.TempDir(), "report.xlsx")
	code, stdout, stderr := runCLI(t, fake, "validate", "--ruleset", exampleRuleset, "--input", exampleRequestFile, "--json", "--report", xlsx)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var res engine.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res.Rules) != len(exampleRuleIDs) {
		t.Fatalf("result %v: %s", err, stdout)
	}
	f, err := excelize.OpenFile(xlsx)
	if err != nil {
		t.Fatalf("the report is not a workbook: %v", err)
	}
	defer f.Close()
	if got := f.GetSheetList(); !slices.Equal(got, []string{"Report", "Evidence", "Chart"}) {
		t.Errorf("sheets %v", got)
	}
	rows, err := f.GetRows("Report")
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, r := range rows {
		text.WriteString(strings.Join(r, " ") + "\n")
	}
	for _, want := range []string{"contract-review-demo-1", "governing-law", "termination", "Signing authority (gate)", "approval-limit-given"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the Report sheet does not mention %q:\n%s", want, text.String())
		}
	}

	// The report goes where it is asked even when it cannot.
	code, _, stderr = runCLI(t, fake, "validate", "--ruleset", exampleRuleset, "--input", exampleInput, "--report", filepath.Join(t.TempDir(), "no", "such", "dir.xlsx"))
	if code != exitFailure || !strings.Contains(stderr, "writing the report") {
		t.Errorf("unwritable report: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestValidateAutoInstructions: by default the model is probed once; a server
// that drops system messages gets the rules folded into the user message.
func TestValidateAutoInstructions(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		// withSystem is the prompt tokens the server counts for the question
		// with a system message; without one it counts 16.
		withSystem int
		wantRoles  []string
	}{
		{"system dropped", 16, []string{"user"}},
		{"system rendered", 80, []string{"system", "user"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := llmfake.New()
			defer fake.Close()
			fake.Enqueue(llmfake.Reply{Content: "Reply", PromptTokens: 16, CompletionTokens: 1},
				llmfake.Reply{Content: "Reference", PromptTokens: tt.withSystem, CompletionTokens: 1},
				llmfake.Reply{Content: exampleAnswer(t, nil)})
			code, _, stderr := runCLI(t, fake, "validate", "--ruleset", exampleRuleset, "--input", exampleInput, "--json", "--llm-instructions", "auto")
			if code != exitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			reqs := fake.Requests()
			if len(reqs) != 3 || reqs[0].Format != "" || reqs[0].MaxTokens != 1 || len(reqs[0].Messages) != 1 ||
				reqs[1].Format != "" || reqs[1].MaxTokens != 1 || reqs[1].Messages[0].Role != "system" {
				t.Fatalf("want a one-token question without a system message, the same with one, then the judging call; got %d requests: %+v", len(reqs), reqs)
			}
			judge := reqs[2].Messages
			roles := make([]string, len(judge))
			for i, m := range judge {
				roles[i] = m.Role
			}
			if strings.Join(roles, ",") != strings.Join(tt.wantRoles, ",") {
				t.Fatalf("judging call roles %v, want %v", roles, tt.wantRoles)
			}
			last := judge[len(judge)-1].Content
			rules := strings.Index(last, `rule_id: "governing-law"`)
			data := strings.Index(last, "Start of Document: northwind-msa.pdf")
			if data < 0 || rules < data {
				t.Errorf("the user message must hold the data, then the rules:\n%.400s", last)
			}
		})
	}
}

// TestPrintResultShowsAlteredAndUnfoundEvidence: evidence that does not back
// its verdict is plain to see in the terminal output.
func TestPrintResultShowsAlteredAndUnfoundEvidence(t *testing.T) {
	t.Parallel()
	start, end := 10, 40
	res := &engine.Result{Model: "m", Rules: []engine.Verdict{{
		RuleID: "term", Type: verdict.Boolean, BooleanOutput: new(true), Rationale: "The term is three years.",
		Confidence: new(0.55), NeedsReview: true, ReviewReasons: []engine.ReviewReason{engine.ReviewLowConfidence, engine.ReviewKeptWithProblems, engine.ReviewCorrectedPage},
		SufficiencyNote: "the answer was kept with problems left after every re-ask",
		Evidences: []verdict.Evidence{
			{Text: "The term is five (5) years.", QuotedText: "The term is three (3) years.", SourceOrigin: "msa.pdf", SourcePageNumber: 2,
				Anchored: true, Match: verdict.MatchFuzzy, Similarity: 0.91, Altered: true, StartOffset: &start, EndOffset: &end,
				Differences: []verdict.Difference{{Kind: "number", Quote: "three (3)", Document: "five (5)"}}},
			{Text: "Renewal is automatic.", QuotedText: "Renewal is automatic.", SourceOrigin: "msa.pdf", SourcePageNumber: 1, Match: verdict.MatchNone},
		},
	}}}
	var out bytes.Buffer
	printResult(&out, &engine.Ruleset{}, res)
	for _, want := range []string{
		"2 (1 not found, 1 altered)",
		"! judged on insufficient data: the answer was kept",
		`anchored (fuzzy, similarity 0.91)`,
		`! ALTERED: the model wrote "The term is three (3) years."; number: "three (3)" in the quote, "five (5)" in the document`,
		"! NOT FOUND in any document",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestPrintResultShowsCitationsAndProblems: the passage the model cited, a
// page it cited wrongly and the problems left in an answer kept with them
// are plain to see in the terminal output.
func TestPrintResultShowsCitationsAndProblems(t *testing.T) {
	start, end := 10, 40
	res := &engine.Result{Model: "m", Rules: []engine.Verdict{{
		RuleID: "term", Type: verdict.Boolean, BooleanOutput: new(true), Rationale: "The term is three years.",
		Confidence: new(0.55), NeedsReview: true, ReviewReasons: []engine.ReviewReason{engine.ReviewLowConfidence, engine.ReviewKeptWithProblems, engine.ReviewCorrectedPage},
		SufficiencyNote: "kept with problems after every re-ask: the model gave no rationale; no evidence found in the material supports the verdict",
		Problems:        []string{"the model gave no rationale", "no evidence found in the material supports the verdict"},
		Evidences: []verdict.Evidence{
			{Text: "The term is three (3) years.", SourceOrigin: "msa.pdf", SourcePageNumber: 2, CitedPageNumber: 2, PassageID: "d1p2s4",
				Anchored: true, Match: verdict.MatchExact, Similarity: 1, StartOffset: &start, EndOffset: &end},
			{Text: "Renewal is automatic.", QuotedText: "Renewal is automatic.", SourceOrigin: "msa.pdf", SourcePageNumber: 1, CitedPageNumber: 7,
				Anchored: true, Match: verdict.MatchExact, Similarity: 1, StartOffset: &start, EndOffset: &end},
			{Text: "36", SourceOrigin: "term_months", PassageID: "term_months", CitedPageNumber: 1, Match: verdict.MatchNotDocument},
		},
	}}}
	var out bytes.Buffer
	printResult(&out, &engine.Ruleset{}, res)
	for _, want := range []string{
		"3 (1 page corrected)",
		"CONFIDENCE  REVIEW",
		"0.55        needed",
		"  needs review: low_confidence, kept_with_problems, corrected_page\n",
		"  ! kept with problems; still wrong after every re-ask:\n    - the model gave no rationale\n    - no evidence found in the material supports the verdict\n",
		"msa.pdf, page 2, passage d1p2s4, anchored (exact)",
		"msa.pdf, page 1 (cited page 7), anchored (exact)",
		"term_months, not a document",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "kept with problems after every re-ask: the model") {
		t.Errorf("the problems are listed; the note saying them again is not needed:\n%s", out.String())
	}
}

func TestEvidencePlaces(t *testing.T) {
	for _, tt := range []struct {
		name, got, want string
	}{
		{"page as cited", pagePlace("page ", 3, 3), "page 3"},
		{"no page cited", pagePlace("page ", 3, 0), "page 3"},
		{"page corrected", pagePlace("p.", 3, 9), "p.3 (cited p.9)"},
		{"no page", pagePlace("p.", 0, 4), ""},
		{"passage", passagePlace("d1p3s4", "", "msa.pdf"), "passage d1p3s4"},
		{"passage found by the quoted words", passagePlace("d1p3s4", "d1p1s2", "msa.pdf"), "passage d1p3s4 (cited d1p1s2)"},
		{"named input cited by name", passagePlace("limit", "", "limit"), ""},
		{"quoted", passagePlace("", "", "msa.pdf"), ""},
		{"two pages corrected", evidenceCount([]verdict.Evidence{
			{SourcePageNumber: 1, CitedPageNumber: 2, Anchored: true}, {SourcePageNumber: 3, CitedPageNumber: 4, Anchored: true}, {SourcePageNumber: 5, CitedPageNumber: 5, Match: verdict.MatchNone},
		}), "3 (1 not found, 2 pages corrected)"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

// validate --json writes every field of the engine's result: resultJSON mirrors it.
func TestResultJSONMirrorsTheResult(t *testing.T) {
	tags := func(typ reflect.Type) []string {
		var out []string
		for i := range typ.NumField() {
			out = append(out, typ.Field(i).Tag.Get("json"))
		}
		return out
	}
	if got, want := tags(reflect.TypeFor[resultJSON]()), tags(reflect.TypeFor[engine.Result]()); !reflect.DeepEqual(got, want) {
		t.Errorf("resultJSON's fields %q, engine.Result's %q", got, want)
	}
}
