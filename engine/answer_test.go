package engine

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"rulevalidator/verdict"
)

func TestCheckAnswer(t *testing.T) {
	rules := testRuleset().Rules
	good := func() []map[string]any {
		return []map[string]any{boolRule("cap", true), boolRule("term", false), numRule("score", 2)}
	}
	tests := []struct {
		name        string
		content     string
		wantGood    []string
		wantReasons []string // problem reasons, in order
		wantDetail  string   // a substring of some problem's text
	}{
		{name: "valid", content: answer(t, good()...), wantGood: []string{"cap", "score", "term"}},
		{name: "valid in a code fence", content: "```json\n" + answer(t, good()...) + "\n```", wantGood: []string{"cap", "score", "term"}},
		{name: "malformed json", content: `{"rules": [`, wantReasons: []string{ReasonMalformedJSON}, wantDetail: "not valid JSON"},
		{name: "fenced and malformed", content: "```json\n{\"rules\": [\n```", wantReasons: []string{ReasonCodeFence}, wantDetail: "code fence"},
		{name: "prose around json", content: "Here you go: " + answer(t, good()...), wantReasons: []string{ReasonMalformedJSON}},
		{name: "trailing text", content: answer(t, good()...) + " hope this helps", wantReasons: []string{ReasonMalformedJSON}, wantDetail: "text after the JSON object"},
		{name: "empty", content: "  ", wantReasons: []string{ReasonEmptyResponse}},
		{name: "no rules array", content: `{"verdicts": []}`, wantReasons: []string{ReasonMalformedJSON}, wantDetail: `no "rules" array`},
		{name: "missing rule", content: answer(t, boolRule("cap", true), numRule("score", 2)), wantGood: []string{"cap", "score"}, wantReasons: []string{ReasonMissingRule}, wantDetail: `rule "term": no answer`},
		{name: "duplicate rule", content: answer(t, boolRule("cap", true), boolRule("cap", false), boolRule("term", true), numRule("score", 2)), wantGood: []string{"score", "term"}, wantReasons: []string{ReasonDuplicateRule}},
		{name: "unknown rule", content: answer(t, append(good(), boolRule("bogus", true))...), wantGood: []string{"cap", "score", "term"}, wantReasons: []string{ReasonUnknownRule}, wantDetail: `rule_id "bogus"`},
		{name: "missing rule id", content: answer(t, map[string]any{"rationale": "x", "boolean_output": true}, boolRule("cap", true), boolRule("term", true), numRule("score", 1)), wantGood: []string{"cap", "score", "term"}, wantReasons: []string{ReasonMissingRuleID}, wantDetail: "rules[0] has no rule_id"},
		{name: "missing rationale", content: answer(t, func() map[string]any { r := boolRule("cap", true); delete(r, "rationale"); return r }(), boolRule("term", true), numRule("score", 1)), wantGood: []string{"cap", "score", "term"}},
		{name: "blank rationale", content: answer(t, func() map[string]any { r := boolRule("cap", true); r["rationale"] = "  "; return r }(), boolRule("term", true), numRule("score", 1)), wantGood: []string{"cap", "score", "term"}},
		{name: "boolean without boolean_output", content: answer(t, func() map[string]any { r := boolRule("cap", true); delete(r, "boolean_output"); return r }(), boolRule("term", true), numRule("score", 1)), wantGood: []string{"score", "term"}, wantReasons: []string{ReasonMissingBoolean}},
		{name: "boolean given a score", content: answer(t, func() map[string]any {
			r := boolRule("cap", true)
			delete(r, "boolean_output")
			r["numerical_output"] = 2
			return r
		}(), boolRule("term", true), numRule("score", 1)), wantGood: []string{"score", "term"}, wantReasons: []string{ReasonWrongOutputType}},
		{name: "score outside the set", content: answer(t, boolRule("cap", true), boolRule("term", true), numRule("score", 7)), wantGood: []string{"cap", "term"}, wantReasons: []string{ReasonScoreNotAllowed}, wantDetail: "numerical_output 7 is not one of the allowed scores 1, 2, 3"},
		{name: "fractional score", content: answer(t, boolRule("cap", true), boolRule("term", true), numRule("score", 2.5)), wantGood: []string{"cap", "term"}, wantReasons: []string{ReasonScoreNotAllowed}},
		{name: "score as string and float", content: answer(t, boolRule("cap", true), boolRule("term", true), numRule("score", "3")), wantGood: []string{"cap", "score", "term"}},
		{name: "numerical without data needs no score", content: answer(t, boolRule("cap", true), boolRule("term", true), map[string]any{"rule_id": "score", "rationale": "no info", "data_sufficiency": false}), wantGood: []string{"cap", "score", "term"}},
		{name: "numerical missing score", content: answer(t, boolRule("cap", true), boolRule("term", true), map[string]any{"rule_id": "score", "rationale": "x", "data_sufficiency": true}), wantGood: []string{"cap", "term"}, wantReasons: []string{ReasonMissingScore}},
		{name: "not applicable with alternate still needs output", content: answer(t, map[string]any{"rule_id": "cap", "rationale": "x", "not_applicable": true}, boolRule("term", true), numRule("score", 1)), wantGood: []string{"score", "term"}, wantReasons: []string{ReasonMissingBoolean}},
		{name: "not applicable without alternate needs no output", content: answer(t, boolRule("cap", true), map[string]any{"rule_id": "term", "rationale": "x", "not_applicable": true}, numRule("score", 1)), wantGood: []string{"cap", "score", "term"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			good, problems := checkAnswer(tt.content, rules)
			var gotGood []string
			for id := range good {
				gotGood = append(gotGood, id)
			}
			slices.Sort(gotGood)
			if !slices.Equal(gotGood, tt.wantGood) {
				t.Errorf("accepted %v, want %v", gotGood, tt.wantGood)
			}
			var reasons []string
			var text strings.Builder
			for _, p := range problems {
				reasons = append(reasons, p.Reason)
				text.WriteString(p.String() + "\n")
			}
			if !slices.Equal(reasons, tt.wantReasons) {
				t.Errorf("problems %v, want %v:\n%s", reasons, tt.wantReasons, text.String())
			}
			if tt.wantDetail != "" && !strings.Contains(text.String(), tt.wantDetail) {
				t.Errorf("problems lack %q:\n%s", tt.wantDetail, text.String())
			}
		})
	}
}

func TestCheckAnswerKeepsEvidence(t *testing.T) {
	rules := testRuleset().Rules[:1]
	content := answer(t, boolRule("cap", true,
		map[string]any{"text": " capped at fees ", "source_origin": "msa.pdf", "source_page_number": 1},
		map[string]any{"text": "", "source_origin": "msa.pdf", "source_page_number": 1},
		map[string]any{"text": "x", "source_origin": "msa.pdf", "source_page_number": -4},
	))
	good, problems := checkAnswer(content, rules)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	ev := good["cap"].Evidences
	if len(ev) != 2 || ev[0].Text != "capped at fees" || ev[0].SourcePageNumber != 1 || ev[1].SourcePageNumber != 0 {
		t.Errorf("evidences = %+v", ev)
	}
}

func FuzzCheckAnswer(f *testing.F) {
	f.Add(`{"rules":[{"rule_id":"cap","rationale":"x","boolean_output":true}]}`)
	f.Add("```json\n{\"rules\":[]}\n```")
	f.Add(`{"rules":[{"rule_id":"score","numerical_output":"1e400"}]}`)
	rules := testRuleset().Rules
	f.Fuzz(func(t *testing.T, content string) {
		good, problems := checkAnswer(content, rules)
		if len(good) < len(rules) && len(problems) == 0 {
			t.Fatalf("rules left unanswered without a problem: good=%v", good)
		}
		for id, v := range good {
			// A missing rationale is checkContent's to find, not checkAnswer's.
			if v.RuleID != id || v.Rationale != strings.TrimSpace(v.Rationale) {
				t.Fatalf("accepted an invalid verdict %+v", v)
			}
		}
	})
}

func TestEscapeStringControls(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"valid JSON is unchanged", `{"a": "x\ny", "b": [1, 2]}`, `{"a": "x\ny", "b": [1, 2]}`},
		{"whitespace between tokens is kept", "{\n\t\"a\": 1\r\n}", "{\n\t\"a\": 1\r\n}"},
		{"a raw line break inside a string", "{\"rationale\": \"first\nsecond\"}", `{"rationale": "first\nsecond"}`},
		{"tab, carriage return and other controls", "[\"a\tb\rc\x01d\"]", `["a\tb\rc\u0001d"]`},
		{"an escaped quote does not end the string", "{\"t\": \"say \\\"hi\\\"\nthen\"}", `{"t": "say \"hi\"\nthen"}`},
		{"an escaped backslash before the closing quote", "{\"t\": \"C:\\\\\", \"u\": \"a\nb\"}", `{"t": "C:\\", "u": "a\nb"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := EscapeStringControls(tc.in)
			if got != tc.want {
				t.Fatalf("EscapeStringControls(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("%q is not valid JSON", got)
			}
		})
	}
}

// An answer with a line break written raw inside its rationale is read, not re-asked.
func TestCheckAnswerReadsRawLineBreaks(t *testing.T) {
	rules := []Rule{{RuleID: "r1", Type: verdict.Boolean, RuleText: "The contract is signed."}}
	content := "{\"rules\": [{\"rule_id\": \"r1\", \"evidences\": [], \"rationale\": \"The contract\nis not signed.\", \"not_applicable\": false, \"data_sufficiency\": true, \"boolean_output\": false}]}"
	got, problems := checkAnswer(content, rules)
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	if v := got["r1"]; v.Rationale != "The contract\nis not signed." || v.BooleanOutput == nil || *v.BooleanOutput {
		t.Errorf("verdict %+v, want the rationale with its line break and boolean_output false", v)
	}
}
