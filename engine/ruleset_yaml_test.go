package engine

import "testing"

func TestParseRulesetKeepsAnUnquotedDateAsWritten(t *testing.T) {
	rs, err := ParseRuleset([]byte("id: r\nversion: 2024-03-31\nrules:\n  - {rule_id: a, rule_text: Say hi.}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if rs.Version != "2024-03-31" {
		t.Errorf("version %q, want 2024-03-31 as written", rs.Version)
	}
}
