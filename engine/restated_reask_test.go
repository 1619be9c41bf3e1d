package engine

import (
	"context"
	"strings"
	"testing"
)

// TestReaskRestatedRule: with Config.ReaskRestatedRule, a first answer whose
// rationale repeats its rule's words is asked once more, and the second
// answer is kept when it passes the checks, the first when none does; off,
// or for a rationale of its own, the first answer stands in one call.
func TestReaskRestatedRule(t *testing.T) {
	rs := &Ruleset{ID: "dpa", Version: "1", Rules: []Rule{{RuleID: "approval", Type: Boolean,
		RuleText: "The supplier must get the customer's written approval before engaging a subprocessor."}}}
	in := &Inputs{PrimaryDocs: []Document{{Name: "msa.txt", Pages: []string{
		"Supplier may engage subprocessors, provided it notifies Customer thirty days in advance."}}}}
	reply := func(pass bool, rationale string) scriptedReply {
		r := boolRule("approval", pass, cite("d1p1s1", ""))
		r["rationale"] = rationale
		return scriptedReply{content: answer(t, r)}
	}
	restating := reply(true, "The material states that the supplier must get the customer's written approval before engaging a subprocessor.")
	ownWords := reply(false, "The supplier only has to notify the customer thirty days ahead; no approval is asked.")
	malformed := scriptedReply{content: `{"rules": [`}
	for _, tc := range []struct {
		name      string
		on        bool
		replies   []scriptedReply
		wantCalls int
		wantPass  bool
	}{
		{"off: the restating answer stands", false, []scriptedReply{restating}, 1, true},
		{"on: an answer in its own words stands", true, []scriptedReply{ownWords}, 1, false},
		{"on: the re-ask's answer is kept", true, []scriptedReply{restating, ownWords}, 2, false},
		{"on: a restating re-ask is not asked again", true, []scriptedReply{restating, restating}, 2, true},
		{"on: the first answer is kept when no re-ask passes", true, []scriptedReply{restating, malformed, malformed}, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			llm := &scriptedLLM{replies: tc.replies}
			res, err := newTestEngine(t, llm, Config{ReaskRestatedRule: tc.on}).Evaluate(context.Background(), Task{Ruleset: rs, Inputs: in})
			if err != nil {
				t.Fatal(err)
			}
			if len(llm.calls) != tc.wantCalls {
				t.Fatalf("%d calls, want %d", len(llm.calls), tc.wantCalls)
			}
			v := res.Rules[0]
			if v.BooleanOutput == nil || *v.BooleanOutput != tc.wantPass || len(v.Problems) > 0 {
				t.Errorf("verdict %+v, want boolean_output %v and no problems", v, tc.wantPass)
			}
			if tc.wantCalls > 1 {
				asked := llm.calls[1].Messages[len(llm.calls[1].Messages)-1].Content
				if !strings.Contains(asked, "repeated the rule's own words") {
					t.Errorf("the re-ask does not say why:\n%s", asked)
				}
			}
		})
	}
}
