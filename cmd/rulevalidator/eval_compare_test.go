package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"rulevalidator/engine/rulesetdiff"
	"rulevalidator/eval"
	"rulevalidator/internal/llmfake"
)

// askedRuleText is a rule as the rules after the material show it, with its text.
var askedRuleText = regexp.MustCompile(`(?m)^\d+\. rule_id: ("(?:[^"\\]|\\.)*")\n   type: [^\n]*\n   rule: ([^\n]*)`)

// labelAnswerer answers every rule as the case's label says, the case told
// by its document's name, except where wrong says to answer a boolean rule
// the other way; it counts the rules asked.
type labelAnswerer struct {
	labels map[string][]eval.Label // by document name
	wrong  func(doc, ruleID, ruleText string) bool
	mu     sync.Mutex
	asked  map[string]int
}

func newLabelAnswerer(t *testing.T, wrong func(doc, ruleID, ruleText string) bool) *labelAnswerer {
	t.Helper()
	ds, err := eval.Load(evalDataset)
	if err != nil {
		t.Fatal(err)
	}
	a := &labelAnswerer{labels: map[string][]eval.Label{}, wrong: wrong, asked: map[string]int{}}
	for _, c := range ds.Cases {
		a.labels[c.Inputs.PrimaryDocs[0].Name] = c.Labels
	}
	return a
}

func (a *labelAnswerer) answer(req llmfake.Call) llmfake.Reply {
	user := req.Messages[len(req.Messages)-1].Content
	var doc string
	for name := range a.labels {
		if strings.Contains(user, name) {
			doc = name
		}
	}
	var rules []map[string]any
	for _, m := range askedRuleText.FindAllStringSubmatch(user, -1) {
		id, _ := strconv.Unquote(m[1])
		a.mu.Lock()
		a.asked[id]++
		a.mu.Unlock()
		for _, l := range a.labels[doc] {
			if l.RuleID != id {
				continue
			}
			r := map[string]any{"rule_id": id, "data_sufficiency": true, "not_applicable": l.NotApplicable, "evidences": []any{},
				"rationale": "As the agreement states."}
			if l.Numerical != nil {
				r["numerical_output"] = *l.Numerical
			} else {
				r["boolean_output"] = *l.Boolean != a.wrong(doc, id, m[2])
			}
			rules = append(rules, r)
		}
	}
	data, _ := json.Marshal(map[string]any{"rules": rules})
	return llmfake.Reply{Content: string(data), PromptTokens: 3000, CompletionTokens: 100}
}

// TestEvalCLICompareRuleset: --compare-ruleset judges the shipped dataset
// with its ruleset and with the revised one through one verdict cache:
// only the reworded rule is asked again, its verdicts flip where the model
// answers it otherwise (one case fixed, one broken), and each version's
// accuracy is reported rule by rule and in all.
func TestEvalCLICompareRuleset(t *testing.T) {
	t.Parallel()
	fake := llmfake.New()
	defer fake.Close()
	// The old wording is answered wrongly on the NEBS agreement, the new
	// one on Michigan Genesis's.
	a := newLabelAnswerer(t, func(doc, ruleID, text string) bool {
		if ruleID != "return-or-destroy" {
			return false
		}
		revised := strings.Contains(text, "copies")
		return strings.HasPrefix(doc, "nebs-") != revised
	})
	fake.Answer(a.answer)
	cases := "--cases=" + strings.Join(evalCases, ",")
	args := []string{"--dataset", evalDataset, cases, "--output-retries", "0", "--compare-ruleset", ndaRulesetRevised}

	code, stdout, stderr := runEvalCLI(t, fake, append(args, "--json")...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var got comparison
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not one comparison: %v\n%s", err, stdout)
	}
	if len(got.Diffs) != 1 || got.Diffs[0].Counts != (rulesetdiff.Counts{Changed: 1, Unchanged: 9, CacheValid: 9, CacheInvalidated: 1}) {
		t.Errorf("diffs %+v", got.Diffs)
	}
	c := got.Comparison
	want := eval.CompareTotals{Flips: 2, Fixed: 1, Broken: 1, Reused: 18,
		Old: eval.VersionScore{Verdicts: 20, Correct: 19}, New: eval.VersionScore{Verdicts: 20, Correct: 19}}
	o := c.Overall
	o.Old.Accuracy, o.New.Accuracy = nil, nil
	if o != want || *c.Overall.Old.Accuracy != 0.95 || *c.Overall.New.Accuracy != 0.95 {
		t.Errorf("overall %+v, want %+v (accuracy 0.95 each)", c.Overall, want)
	}
	if len(c.PerRule) != 10 {
		t.Fatalf("%d rules compared, want 10", len(c.PerRule))
	}
	for _, r := range c.PerRule {
		flips, reused, oldRight, newRight := 0, 2, 2, 2
		if r.RuleID == "return-or-destroy" {
			flips, reused, oldRight, newRight = 2, 0, 1, 1
		}
		if len(r.Flips) != flips || r.Reused != reused || r.Old.Correct != oldRight || r.New.Correct != newRight || r.Old.Verdicts != 2 || r.New.Verdicts != 2 {
			t.Errorf("rule %s: %+v; want %d flips, %d reused, %d and %d right of 2", r.RuleID, r, flips, reused, oldRight, newRight)
		}
	}
	wantFlips := []eval.Flip{
		{Case: "nebs-premium-wear", RuleID: "return-or-destroy", Expected: "pass", Old: "fail", New: "pass", Change: eval.FlipFixed},
		{Case: "michigan-genesis", RuleID: "return-or-destroy", Expected: "pass", Old: "pass", New: "fail", Change: eval.FlipBroken},
	}
	for i, f := range c.PerRule[2].Flips {
		if i >= len(wantFlips) || f != wantFlips[i] {
			t.Errorf("flip %d: %+v, want %+v", i, f, wantFlips)
		}
	}
	for id, n := range a.asked {
		want := len(evalCases)
		if id == "return-or-destroy" {
			want *= 2
		}
		if n != want {
			t.Errorf("rule %s asked %d times, want %d", id, n, want)
		}
	}
	if got.Old == nil || got.New == nil || got.New.System(eval.SystemEngine).Cost.Calls != 2 {
		t.Errorf("the reports of both runs: the new run should make 2 calls (one per case): %+v", got.New)
	}

	// The table, and --min-accuracy gating the new version.
	code, stdout, stderr = runEvalCLI(t, fake, append(args, "--min-accuracy", "0.96")...)
	if code != exitBelowMinimum || !strings.Contains(stderr, "verdict accuracy 0.950 is below --min-accuracy 0.960") {
		t.Errorf("--min-accuracy 0.96: exit %d, want %d\n%s", code, exitBelowMinimum, stderr)
	}
	for _, pattern := range []string{
		`(?m)^changed rule return-or-destroy$`,
		`(?m)^RULE +OLD +NEW +FLIPS +FIXED +BROKEN +REUSED$`,
		`(?m)^governing-law +100\.0% \(2/2\) +100\.0% \(2/2\) +0 +0 +0 +2/2$`,
		`(?m)^return-or-destroy +50\.0% \(1/2\) +50\.0% \(1/2\) +2 +1 +1 +0/2$`,
		`(?m)^all +95\.0% \(19/20\) +95\.0% \(19/20\) +2 +1 +1 +18/20$`,
		`(?m)^RULE +CASE +LABEL +OLD +NEW +CHANGE$`,
		`(?m)^return-or-destroy +nebs-premium-wear +pass +fail +pass +fixed$`,
		`(?m)^return-or-destroy +michigan-genesis +pass +pass +fail +broken$`,
		`(?m)^model calls: old 2, new 2 \(through the cache the old run filled\)`,
		`(?m)^ruleset nda-review version 1 \(dataset \.\./\.\./examples/eval/edgar-nda\) → nda-review version 2 \(`,
	} {
		if !regexp.MustCompile(pattern).MatchString(stdout) {
			t.Errorf("the table does not match %s:\n%s", pattern, stdout)
		}
	}
}

func TestEvalCLICompareRulesetRefusals(t *testing.T) {
	t.Parallel()
	retyped := opWriteFile(t, "retyped.yaml", `id: nda-review
version: "3"
rules:
  - {rule_id: governing-law, rule_text: Governing law is named.}
  - rule_id: mutual
    type: numerical
    rule_text: Rate how mutual it is.
    numerical_rule_config: {possible_scores: [0, 1]}
`)
	other := opWriteFile(t, "other.yaml", "id: travel\nrules:\n  - {rule_id: class, rule_text: Economy class only.}\n")
	for _, tc := range []struct {
		args []string
		said string
	}{
		{[]string{"--runs", "2"}, "--compare-ruleset compares one run of the engine per version"},
		{[]string{"--revalidate-ruleset", ndaRulesetRevised}, "it takes no --runs, --baseline, --compare-evidence-mode or --revalidate-ruleset"},
		{[]string{"--compare-ruleset", retyped}, `rule "mutual" is labelled as boolean, the new ruleset makes it numerical`},
		{[]string{"--compare-ruleset", other}, `none of its labelled rules is in the new ruleset "travel" (the case's is "nda-review")`},
		{[]string{"--compare-ruleset", "missing.yaml"}, "missing.yaml"},
	} {
		args := append([]string{"--dataset", evalDataset}, tc.args...)
		if !strings.Contains(strings.Join(args, " "), "--compare-ruleset") {
			args = append(args, "--compare-ruleset", ndaRulesetRevised)
		}
		code, _, stderr := runEvalCLI(t, nil, args...)
		if code != exitInvalid || !strings.Contains(stderr, tc.said) {
			t.Errorf("%v: exit %d (want %d), stderr does not say %q:\n%s", tc.args, code, exitInvalid, tc.said, stderr)
		}
	}
}
