package engine

import (
	"context"
	"strings"
	"testing"
)

// TestOneRuleCallShowsItsNearestPassages: a call of one rule on the whole
// material shows, after the rule, the passages whose words are nearest the
// rule's, under their documents' names and roles; a rule that shares no
// word with the material shows none, and neither does a call of several
// rules, one in quote mode, or one without the setting.
func TestOneRuleCallShowsItsNearestPassages(t *testing.T) {
	inputs := func() *Inputs {
		in := citeInputs()
		in.AuxiliaryDocs = []Document{{Name: "policy.txt", Pages: []string{"Liability caps must be at least twelve months of fees."}}}
		return in
	}
	afterRule := func(user string) string { return user[strings.Index(user, rulesHeading):] }
	llm := &ruleReader{}
	e := newTestEngine(t, llm, Config{RulesPerCall: 1, NearestPassages: 3})
	if _, err := e.Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: inputs()}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"cap":  {nearHeading, "in msa.pdf (primary document):\n   [d1p1s2] \"The supplier's total liability is capped", "in policy.txt (auxiliary document):\n   [d2p1s1] \"Liability caps"},
		"term": {nearHeading, "[d1p2s1] \"The term of this agreement is two (2) years"},
	}
	if len(llm.calls) != 3 {
		t.Fatalf("%d calls, want one for each of 3 rules", len(llm.calls))
	}
	for _, c := range llm.calls {
		tail := afterRule(c.Messages[len(c.Messages)-1].Content)
		id := tail[strings.Index(tail, `rule_id: "`)+len(`rule_id: "`):]
		id = id[:strings.Index(id, `"`)]
		for _, w := range want[id] {
			if !strings.Contains(tail, w) {
				t.Errorf("call of %s: after the rule, no %q:\n%s", id, w, tail)
			}
		}
		if want[id] == nil && strings.Contains(tail, nearHeading) {
			t.Errorf("call of %s, whose words no passage shares, shows passages:\n%s", id, tail)
		}
		if strings.Contains(tail, "[d1p1s1]") {
			t.Errorf("call of %s shows the title, which shares no word with the rule:\n%s", id, tail)
		}
	}
	for name, cfg := range map[string]Config{
		"several rules a call": {NearestPassages: 3},
		"quote mode":           {RulesPerCall: 1, NearestPassages: 3, Evidence: EvidenceQuote},
		"off (the default)":    {RulesPerCall: 1},
	} {
		llm := &ruleReader{}
		e := newTestEngine(t, llm, cfg)
		if _, err := e.Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: inputs()}); err != nil {
			t.Fatal(err)
		}
		for _, c := range llm.calls {
			if strings.Contains(c.Messages[len(c.Messages)-1].Content, nearHeading) {
				t.Errorf("%s: a call shows nearest passages", name)
			}
		}
	}
}
