package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"rulevalidator/engine/rulesetdiff"
)

const (
	ndaRuleset        = evalDataset + "/ruleset.yaml"
	ndaRulesetRevised = evalDataset + "/ruleset-revised.yaml"
)

// TestRulesetsDiffShippedRevision: the shipped dataset's ruleset against its
// revision names the one rule reworded, the words that changed, the version
// bump, and the nine rules whose cached verdicts stay valid.
func TestRulesetsDiffShippedRevision(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := opRun(t, "rulesets", "diff", ndaRuleset, ndaRulesetRevised)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"ruleset nda-review version 1 (" + ndaRuleset + ") → nda-review version 2 (" + ndaRulesetRevised + ")\n",
		"rules: 1 changed, 0 added, 0 removed, 9 unchanged; cached verdicts: 9 stay valid, 1 invalidated\n",
		"\nruleset\n  version: \"1\" → \"2\"\n",
		"\nchanged rule return-or-destroy\n  rule_text: … or destroy the confidential [-materials-] {+materials, and any copies of them,+} when the disclosing party …\n" +
			"  cached verdicts invalidated (rule_text changed)\n",
		"\nunchanged, cached verdicts stay valid: governing-law, mutual, equitable-relief, discussions-confidential, non-compete, " +
			"mediation-or-arbitration, standstill-end, confidentiality-years, exclusions\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the diff does not say %q:\n%s", want, stdout)
		}
	}

	// Flags may follow the rulesets.
	code, stdout, stderr = opRun(t, "rulesets", "diff", ndaRuleset, ndaRulesetRevised, "--json")
	if code != exitOK {
		t.Fatalf("--json: exit %d, stderr:\n%s", code, stderr)
	}
	var d rulesetdiff.Diff
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		t.Fatalf("--json printed %q: %v", stdout, err)
	}
	if d.Old.Version != "1" || d.New.Version != "2" || d.New.Source != ndaRulesetRevised || len(d.Rules) != 10 ||
		d.Counts != (rulesetdiff.Counts{Changed: 1, Unchanged: 9, CacheValid: 9, CacheInvalidated: 1}) {
		t.Errorf("diff %+v", d)
	}
	r := d.Rule("return-or-destroy")
	if r == nil || r.Status != rulesetdiff.Changed || len(r.Changes) != 1 || r.Changes[0].Field != "rule_text" ||
		!strings.Contains(string(r.Changes[0].New), "any copies of them") || r.Cache.Status != rulesetdiff.CacheInvalidated {
		t.Errorf("return-or-destroy: %+v", r)
	}

	// A version against itself: nothing to say, every verdict kept.
	code, stdout, _ = opRun(t, "rulesets", "diff", ndaRuleset, ndaRuleset)
	if code != exitOK || !strings.HasSuffix(stdout, "no differences: every cached verdict stays valid\n") {
		t.Errorf("a ruleset against itself: exit %d:\n%s", code, stdout)
	}
}

// TestRulesetsDiffChanges: a revision that touches each kind of thing is
// reported kind by kind, with what becomes of each rule's cached verdicts.
func TestRulesetsDiffChanges(t *testing.T) {
	t.Parallel()
	old := opWriteFile(t, "old.yaml", `id: travel
version: "1"
global_numerical_rule_config: {min_score: 0, max_score: 3, increment: 1}
rules:
  - {rule_id: class, name: Class, rule_text: Economy class only.}
  - {rule_id: hotel, rule_text: Hotels under 200 a night.}
  - {rule_id: receipts, rule_text: Every expense has a receipt.}
  - {rule_id: rating, type: numerical, rule_text: Rate the trip's value.}
`)
	new := opWriteFile(t, "new.yaml", `id: travel
version: "2"
boolean_aggregation: majority
global_numerical_rule_config: {min_score: 0, max_score: 5, increment: 1}
rules:
  - {rule_id: class, name: Travel class, weight: 2, rule_text: Economy class only.}
  - {rule_id: receipts, rule_text: Every expense has a receipt., check: 'inputs.receipts == inputs.expenses'}
  - {rule_id: rating, type: numerical, rule_text: Rate the trip's value.}
  - {rule_id: per-diem, rule_text: Meals stay within the per diem.}
`)
	code, stdout, stderr := opRun(t, "rulesets", "diff", old, new)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, pattern := range []string{
		`rules: 3 changed, 1 added, 1 removed, 0 unchanged; cached verdicts: 1 stay valid, 2 invalidated`,
		`(?s)\nruleset\n  version: "1" → "2"\n  global_numerical_rule_config\.max_score: 3 → 5\n  boolean_aggregation: "all" → "majority"\n`,
		`(?s)\nchanged rule class\n  name: "Class" → "Travel class"\n  weight: 1 → 2\n  cached verdicts stay valid\n`,
		`(?s)\nchanged rule receipts\n  check: \(unset\) → "inputs.receipts == inputs.expenses"\n  cached verdicts invalidated \(the new version decides the rule by its check, without the model\)\n`,
		`(?s)\nchanged rule rating\n  numerical_rule_config\.possible_scores: \[0,1,2,3\] → \[0,1,2,3,4,5\]\n  cached verdicts invalidated \(numerical_rule_config changed\)\n`,
		`(?s)\nadded rule per-diem\n  no cached verdicts to keep \(a new rule: nothing is cached for it yet\)\n`,
		`(?s)\nremoved rule hotel\n  no cached verdicts to keep \(removed`,
	} {
		if !regexp.MustCompile(pattern).MatchString(stdout) {
			t.Errorf("the diff does not match %s:\n%s", pattern, stdout)
		}
	}
}

func TestRulesetsDiffRefusals(t *testing.T) {
	t.Parallel()
	broken := opWriteFile(t, "broken.yaml", invalidRuleset)
	for _, tc := range []struct {
		args []string
		code int
		said string
	}{
		{[]string{ndaRuleset}, exitInvalid, "give two rulesets, OLD and NEW; got 1"},
		{[]string{ndaRuleset, ndaRuleset, ndaRuleset}, exitInvalid, "got 3"},
		{[]string{ndaRuleset, "missing.yaml"}, exitInvalid, "missing.yaml: no such file (a ruleset of the rulesets topic is named ID@VERSION"},
		{[]string{ndaRuleset, "@2"}, exitInvalid, "@2: no ruleset id before the @"},
		{[]string{ndaRuleset, broken}, exitInvalid, broken + `: ruleset "broken": rules[1] (rule_id "heavy"): weight:`},
		{[]string{ndaRuleset, "nda-review@2", "--rulesets-topic", ""}, exitInvalid, "--rulesets-topic is required to read ID@VERSION"},
		{[]string{ndaRuleset, "nda-review@2", "--kafka-brokers", "127.0.0.1:1", "--timeout", "2s"}, exitFailure, "rulesets diff: "},
		{[]string{"--timeout", "0s", ndaRuleset, ndaRuleset}, exitInvalid, "--timeout: 0s must be positive"},
		{[]string{ndaRuleset, "--", "--json"}, exitInvalid, "--json: no such file"}, // "--" ends the flags
	} {
		code, stdout, stderr := opRun(t, append([]string{"rulesets", "diff"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.said) {
			t.Errorf("%v: exit %d (want %d), stderr does not say %q:\n%s%s", tc.args, code, tc.code, tc.said, stdout, stderr)
		}
	}
}
