package report

import (
	"testing"

	"rulevalidator/engine"
	"rulevalidator/verdict"
)

func TestBuildGroupedRows(t *testing.T) {
	rs := mustRuleset(t, `
id: grouped
rules:
  - {rule_id: signed, rule_text: Signed.}
nested_rulesets:
  - id: liability
    name: Liability
    required: true
    rules:
      - {rule_id: capped, rule_text: Capped.}
  - id: payment
    filter_criteria: inputs.value > 100
    rules:
      - {rule_id: terms, rule_text: Terms.}
`)
	res := &engine.Result{
		RulesetID: "grouped",
		Rules: []engine.Verdict{
			{RuleID: "signed", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: ptr(true), Rationale: "Signed on page 2."},
			{RuleID: "capped", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: ptr(false), Rationale: "No cap."},
			{RuleID: "terms", Type: verdict.Boolean, DataSufficiency: true, NotApplicable: true, Rationale: "not applicable: the filter is false"},
		},
		Aggregate: verdict.Aggregate{Boolean: &verdict.BooleanAggregate{Mode: "all", Applicable: 2, PassedCount: 1}},
		Groups: []verdict.GroupResult{
			{ID: "liability", Path: "liability", Name: "Liability", Required: true, RuleIDs: []string{"capped"},
				Aggregate: verdict.Aggregate{Boolean: &verdict.BooleanAggregate{Mode: "all", Applicable: 1}}},
			{ID: "payment", Path: "payment", NotApplicable: true, Reason: "not applicable: the filter is false", RuleIDs: []string{"terms"},
				Aggregate: verdict.Aggregate{Boolean: &verdict.BooleanAggregate{Mode: "all", Passed: true}}},
		},
	}
	f, _ := build(t, mixedMeta(), rs, res)
	want := []struct{ name, id, typ, result, rationale, fill string }{
		{"signed", "signed", "boolean", "PASS", "Signed on page 2.", FillPass},
		{"Liability (gate)", "liability", "group", "FAILED", "all: 0 of 1 applicable members passed", FillFail},
		{"capped", "capped", "boolean", "FAIL", "No cap.", FillFail},
		{"Group payment", "payment", "group", "N/A", "not applicable: the filter is false", FillAmber},
		{"terms", "terms", "boolean", "N/A", "not applicable: the filter is false", FillAmber},
	}
	for i, w := range want {
		row := FirstRuleRow + i
		for col, v := range map[int]string{ColName: w.name, ColRuleID: w.id, ColType: w.typ, ColResult: w.result, ColRationale: w.rationale} {
			if got := value(t, f, SheetReport, col, row); got != v {
				t.Errorf("row %d column %d = %q, want %q", row, col, got, v)
			}
		}
		if got := fill(t, f, SheetReport, ColResult, row); got != w.fill {
			t.Errorf("row %d fill %q, want %q", row, got, w.fill)
		}
	}
}
