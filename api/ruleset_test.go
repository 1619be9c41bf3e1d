package api

import (
	"net/http"
	"strings"
	"testing"
)

// An inline ruleset that would not load (an expression that does not
// compile, on a rule of a nested ruleset) is refused with 400 naming where
// and why, on both submission routes, and nothing is queued.
func TestSubmitRefusesAnInvalidInlineRuleset(t *testing.T) {
	id := newIdentity(t)
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier, Internal: internalVerifier(t)})
	ruleset := `{"id":"grouped","rules":[{"rule_id":"signed","rule_text":"Signed?"}],` +
		`"nested_rulesets":[{"id":"payment","rules":[{"rule_id":"cap","rule_text":"Capped?","check":"inputs.cap <"}]}]}`
	want := `inline_ruleset: ruleset "grouped": nested_rulesets[0] ("payment"): rules[0] (rule_id "cap"): check: line 1, column 13 of "inputs.cap <"`
	for _, tc := range []struct{ url, token, body string }{
		{"/v1/validations", id.token(t, "acme"), `{"inline_ruleset":` + ruleset + `,"text_input":"x"}`},
		{"/internal/execute-async", internalToken, `{"job_id":"j","tenant_id":"acme","agent_config":{"type_config":` + ruleset + `},"inputs":{"text_input":"x"}}`},
	} {
		r := call(t, http.MethodPost, ts.URL+tc.url, tc.token, []byte(tc.body))
		if r.status != http.StatusBadRequest || !strings.Contains(r.errorMessage(), want) {
			t.Errorf("%s: got %s, want 400 saying %s", tc.url, r, want)
		}
	}
	if n := len(runner.requests()); n != 0 {
		t.Fatalf("%d requests queued, want none", n)
	}
}
