package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"rulevalidator/engine"
	"rulevalidator/verdict"
)

// generatedAt is the time every test report is stamped with.
var generatedAt = time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("CET", 3600))

// mixedRuleset has every kind of row: boolean pass, fail and not applicable,
// a numerical score, and a numerical rule judged on insufficient data.
const mixedRuleset = `{
  "id": "loan-policy",
  "version": "3",
  "global_numerical_rule_config": {"min_score": 1, "max_score": 5, "increment": 1},
  "boolean_aggregation": "all",
  "numerical_aggregation": "mean",
  "rules": [
    {"rule_id": "income-proof", "name": "Proof of income", "type": "boolean", "rule_text": "The applicant proves an income."},
    {"rule_id": "no-arrears", "type": "boolean", "rule_text": "There are no arrears."},
    {"rule_id": "guarantor", "name": "Guarantor signed", "type": "boolean", "rule_text": "A guarantor signed.",
     "not_applicable_text": "The loan is under 10,000 EUR."},
    {"rule_id": "clarity", "name": "Clarity", "type": "numerical", "rule_text": "How clear is the contract?"},
    {"rule_id": "risk", "name": "Risk", "type": "numerical", "rule_text": "How low is the risk?",
     "numerical_rule_config": {"possible_scores": [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]}}
  ]
}`

func ptr[T any](v T) *T { return &v }

func mustRuleset(t testing.TB, text string) *engine.Ruleset {
	t.Helper()
	rs, err := engine.ParseRuleset([]byte(text))
	if err != nil {
		t.Fatalf("parsing the test ruleset: %v", err)
	}
	return rs
}

func mixedResult() *engine.Result {
	return &engine.Result{
		RulesetID:      "loan-policy",
		RulesetVersion: "3",
		Model:          "gemma-3-270m",
		Rules: []engine.Verdict{
			{RuleID: "income-proof", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: ptr(true),
				Rationale: "Payslips for three months are attached.",
				Evidences: []verdict.Evidence{
					// Cited by reference.
					{Text: "Net salary: 3,200 EUR", QuotedText: "Net salary: 3,200 EUR", Similarity: 1, SourceOrigin: "payslip.pdf", SourcePageNumber: 2, CitedPageNumber: 2,
						PassageID: "d1p2s5", Anchored: true, Match: verdict.MatchExact, StartOffset: ptr(120), EndOffset: ptr(141)},
					// Found on page 1; the model cited page 3.
					{Text: "Employer: ACME", QuotedText: "Employer ACME", Similarity: 0.9286, SourceOrigin: "payslip.pdf", SourcePageNumber: 1, CitedPageNumber: 3, Anchored: true,
						Match: verdict.MatchFuzzy, StartOffset: ptr(5), EndOffset: ptr(19)},
				}},
			{RuleID: "no-arrears", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: ptr(false),
				Rationale: "Two missed payments are listed.",
				Evidences: []verdict.Evidence{
					{Text: "missed payment", QuotedText: "missed payment", SourceOrigin: "statement.pdf", SourcePageNumber: 4, CitedPageNumber: 4, Anchored: false, Match: verdict.MatchNone},
				}},
			{RuleID: "guarantor", Type: verdict.Boolean, DataSufficiency: true, NotApplicable: true,
				Rationale: "The loan is 8,000 EUR."},
			{RuleID: "clarity", Type: verdict.Numerical, DataSufficiency: true, NumericalOutput: ptr(4),
				Rationale: "Mostly clear.",
				Evidences: []verdict.Evidence{
					// Cited by name; the page the model gave means nothing for a named input.
					{Text: "plain language", SourceOrigin: "named_input:summary", PassageID: "named_input:summary", CitedPageNumber: 1, Anchored: false, Match: verdict.MatchNotDocument},
				}},
			{RuleID: "risk", Type: verdict.Numerical, DataSufficiency: false, NumericalOutput: ptr(30),
				Rationale:       "No collateral information.",
				SufficiencyNote: "kept with problems after every re-ask: the model's quote does not say what the document says; no evidence found in the material supports the verdict",
				Problems:        []string{"the model's quote does not say what the document says", "no evidence found in the material supports the verdict"},
				Evidences: []verdict.Evidence{
					{Text: "Repayment over 24 months", QuotedText: "Repayment over 12 months", Similarity: 0.9167, SourceOrigin: "contract.pdf", SourcePageNumber: 3, CitedPageNumber: 3,
						Anchored: true, Match: verdict.MatchFuzzy, StartOffset: ptr(40), EndOffset: ptr(64), Altered: true,
						Differences: []verdict.Difference{{Kind: "number", Quote: "12", Document: "24"}}},
				}},
		},
		Aggregate: verdict.Aggregate{
			Boolean:   &verdict.BooleanAggregate{Mode: verdict.AggregateAll, Passed: false, Applicable: 2, PassedCount: 1},
			Numerical: &verdict.NumericalAggregate{Mode: verdict.AggregateMean, Score: ptr(17.0), Counted: 2},
		},
	}
}

func mixedMeta() Meta {
	return Meta{
		RulesetID:      "loan-policy",
		RulesetVersion: "3",
		RequestID:      "req-42",
		TenantID:       "acme",
		Model:          "gemma-3-270m",
		GeneratedAt:    generatedAt,
	}
}

// build renders a report and opens it again, as a reader of the file would.
func build(t testing.TB, meta Meta, rs *engine.Ruleset, res *engine.Result) (*excelize.File, []byte) {
	t.Helper()
	data, err := Build(meta, rs, res)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	f, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("opening the built workbook: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f, data
}

func cellName(t testing.TB, col, row int) string {
	t.Helper()
	name, err := excelize.CoordinatesToCellName(col, row)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func value(t testing.TB, f *excelize.File, sheet string, col, row int) string {
	t.Helper()
	v, err := f.GetCellValue(sheet, cellName(t, col, row))
	if err != nil {
		t.Fatalf("%s!%s: %v", sheet, cellName(t, col, row), err)
	}
	return v
}

// fill is the fill colour of a cell as RRGGBB, "" when it has none.
func fill(t testing.TB, f *excelize.File, sheet string, col, row int) string {
	t.Helper()
	idx, err := f.GetCellStyle(sheet, cellName(t, col, row))
	if err != nil {
		t.Fatalf("%s!%s style: %v", sheet, cellName(t, col, row), err)
	}
	style, err := f.GetStyle(idx)
	if err != nil {
		t.Fatalf("%s!%s style %d: %v", sheet, cellName(t, col, row), idx, err)
	}
	if len(style.Fill.Color) == 0 {
		return ""
	}
	return strings.ToUpper(strings.TrimPrefix(style.Fill.Color[0], "#"))
}
