package report

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/xuri/excelize/v2"

	"rulevalidator/engine"
	"rulevalidator/verdict"
)

func TestBuildSheetsAndTitle(t *testing.T) {
	f, _ := build(t, mixedMeta(), mustRuleset(t, mixedRuleset), mixedResult())

	if got, want := f.GetSheetList(), []string{SheetReport, SheetEvidence, SheetChart}; !slices.Equal(got, want) {
		t.Errorf("sheets = %q, want %q", got, want)
	}
	if got := f.GetActiveSheetIndex(); got != 0 {
		t.Errorf("active sheet index = %d, want 0 (Report)", got)
	}
	if got, want := value(t, f, SheetReport, 1, TitleRow), "Validation report: ruleset loan-policy version 3"; got != want {
		t.Errorf("title = %q, want %q", got, want)
	}
	// The time is shown in UTC whatever zone it was given in.
	want := "Request req-42 · Tenant acme · Generated 2026-03-04T04:06:07Z · Model gemma-3-270m"
	if got := value(t, f, SheetReport, 1, SubtitleRow); got != want {
		t.Errorf("subtitle = %q, want %q", got, want)
	}
	props, err := f.GetDocProps()
	if err != nil {
		t.Fatal(err)
	}
	if props.Title != "Validation report" || props.Creator != "rulevalidator" || props.Created != "2026-03-04T04:06:07Z" {
		t.Errorf("doc props = title %q, creator %q, created %q", props.Title, props.Creator, props.Created)
	}
}

func TestBuildSummary(t *testing.T) {
	f, _ := build(t, mixedMeta(), mustRuleset(t, mixedRuleset), mixedResult())

	wantCounts := [][2]string{
		{"Rules", "5"}, {"Passed", "1"}, {"Failed", "1"}, {"Not applicable", "1"}, {"Insufficient data", "1"},
	}
	for i, want := range wantCounts {
		label, n := value(t, f, SheetReport, i+1, CountsRow), value(t, f, SheetReport, i+1, CountsRow+1)
		if label != want[0] || n != want[1] {
			t.Errorf("count column %d = %q %q, want %q %q", i+1, label, n, want[0], want[1])
		}
	}

	wantAggregates := [][]string{
		{"Aggregate", "Mode", "Result", "Detail"},
		{"Boolean", "all", "FAILED", "1 of 2 applicable boolean rules passed"},
		{"Numerical", "mean", "17.00", "2 scores counted"},
	}
	for i, want := range wantAggregates {
		row := AggregatesRow + i
		for col, w := range want {
			if got := value(t, f, SheetReport, col+1, row); got != w {
				t.Errorf("aggregate row %d column %d = %q, want %q", row, col+1, got, w)
			}
		}
	}
	if got := fill(t, f, SheetReport, 3, AggregatesRow+1); got != FillFail {
		t.Errorf("boolean aggregate fill = %q, want %q (failed)", got, FillFail)
	}
}

func TestBuildRuleRows(t *testing.T) {
	f, _ := build(t, mixedMeta(), mustRuleset(t, mixedRuleset), mixedResult())

	header := []string{"Rule", "Rule ID", "Type", "Result", "Allowed scores", "Data sufficient", "Rationale", "Evidence"}
	for col, want := range header {
		if got := value(t, f, SheetReport, col+1, HeaderRow); got != want {
			t.Errorf("header column %d = %q, want %q", col+1, got, want)
		}
	}

	tests := []struct {
		name, id, typ, result, scores, sufficient, rationale, evidence string
		fill                                                           string
	}{
		{"Proof of income", "income-proof", "boolean", "PASS", "", "yes", "Payslips for three months are attached.",
			"“Net salary: 3,200 EUR” — payslip.pdf, p. 2, passage d1p2s5\n“Employer: ACME” — payslip.pdf, p. 1 (cited p. 3)", FillPass},
		// No display name: the rule id stands in.
		{"no-arrears", "no-arrears", "boolean", "FAIL", "", "yes", "Two missed payments are listed.",
			"“missed payment” — statement.pdf, p. 4 — NOT FOUND in the documents", FillFail},
		{"Guarantor signed", "guarantor", "boolean", "N/A", "", "yes", "The loan is 8,000 EUR.", "", FillAmber},
		// 4 on 1..5 is three quarters up the red-yellow-green scale.
		{"Clarity", "clarity", "numerical", "4", "1, 2, 3, 4, 5", "yes", "Mostly clear.",
			"“plain language” — named_input:summary", "B1D580"},
		// Insufficient data wins over the score's colour.
		{"Risk", "risk", "numerical", "30", "0–100 (step 10)", "no",
			"No collateral information.\n⚠ Kept with problems; still wrong after every re-ask:\n• the model's quote does not say what the document says\n• no evidence found in the material supports the verdict",
			"“Repayment over 24 months” — contract.pdf, p. 3 — ALTERED: the model wrote “Repayment over 12 months” (number: “12” in the quote, “24” in the document)", FillAmber},
	}
	for i, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			row := FirstRuleRow + i
			want := []string{tt.name, tt.id, tt.typ, tt.result, tt.scores, tt.sufficient, tt.rationale, tt.evidence}
			for col, w := range want {
				if got := value(t, f, SheetReport, col+1, row); got != w {
					t.Errorf("row %d, %s = %q, want %q", row, header[col], got, w)
				}
			}
			if got := fill(t, f, SheetReport, ColResult, row); got != tt.fill {
				t.Errorf("row %d result fill = %q, want %q", row, got, tt.fill)
			}
		})
	}
	// The numerical result is a number, so it sorts and filters as one.
	if typ, err := f.GetCellType(SheetReport, cellName(t, ColResult, FirstRuleRow+3)); err != nil || typ == excelize.CellTypeSharedString || typ == excelize.CellTypeInlineString {
		t.Errorf("numerical result cell type = %v (err %v), want a number", typ, err)
	}
	if got := value(t, f, SheetReport, 1, FirstRuleRow+len(tests)); got != "" {
		t.Errorf("row after the last rule holds %q, want it empty", got)
	}
}

func TestBuildTableLayout(t *testing.T) {
	f, _ := build(t, mixedMeta(), mustRuleset(t, mixedRuleset), mixedResult())

	for _, tt := range []struct {
		sheet  string
		header int
		filter string
	}{
		{SheetReport, HeaderRow, "'Report'!$A$11:$J$16"},
		{SheetEvidence, 1, "'Evidence'!$A$1:$O$6"},
	} {
		panes, err := f.GetPanes(tt.sheet)
		if err != nil {
			t.Fatal(err)
		}
		if !panes.Freeze || panes.YSplit != tt.header || panes.XSplit != 0 {
			t.Errorf("%s panes = freeze %v, rows %d, columns %d; want the rows down to %d frozen",
				tt.sheet, panes.Freeze, panes.YSplit, panes.XSplit, tt.header)
		}
		if !hasDefinedName(t, f, "_xlnm._FilterDatabase", tt.sheet, tt.filter) {
			t.Errorf("%s has no autofilter on %s", tt.sheet, tt.filter)
		}
		if !hasDefinedName(t, f, "_xlnm.Print_Titles", tt.sheet, fmt.Sprintf("%s!$%d:$%d", tt.sheet, tt.header, tt.header)) {
			t.Errorf("%s does not repeat its header row on printed pages", tt.sheet)
		}
	}
	for col, want := range map[string]float64{"A": 30, "D": 14, "G": 60, "H": 60} {
		if got, err := f.GetColWidth(SheetReport, col); err != nil || got != want {
			t.Errorf("Report column %s width = %v (err %v), want %v", col, got, err, want)
		}
	}
}

func hasDefinedName(t *testing.T, f *excelize.File, name, scope, refersTo string) bool {
	t.Helper()
	for _, dn := range f.GetDefinedName() {
		if dn.Name == name && dn.Scope == scope && dn.RefersTo == refersTo {
			return true
		}
	}
	t.Logf("defined names: %+v", f.GetDefinedName())
	return false
}

func TestBuildEvidenceSheet(t *testing.T) {
	f, _ := build(t, mixedMeta(), mustRuleset(t, mixedRuleset), mixedResult())

	want := [][]string{
		{"Rule ID", "Rule", "Quote", "Source", "Page", "Anchored", "Match", "Start offset", "End offset", "Status", "Model's words", "Similarity", "Differences", "Passage", "Cited page"},
		{"income-proof", "Proof of income", "Net salary: 3,200 EUR", "payslip.pdf", "2", "yes", "exact", "120", "141", "supports", "Net salary: 3,200 EUR", "1", "", "d1p2s5", "2"},
		{"income-proof", "Proof of income", "Employer: ACME", "payslip.pdf", "1", "yes", "fuzzy", "5", "19", "supports", "Employer ACME", "0.929", "", "", "3"},
		{"no-arrears", "no-arrears", "missed payment", "statement.pdf", "4", "no", "none", "", "", "NOT FOUND", "missed payment", "", "", "", "4"},
		{"clarity", "Clarity", "plain language", "named_input:summary", "", "no", "not_document", "", "", "not a document", "", "", "", "named_input:summary", "1"},
		{"risk", "Risk", "Repayment over 24 months", "contract.pdf", "3", "yes", "fuzzy", "40", "64", "ALTERED", "Repayment over 12 months", "0.917", "number: “12” in the quote, “24” in the document", "", "3"},
	}
	rows, err := f.GetRows(SheetEvidence)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(want) {
		t.Fatalf("evidence sheet has %d rows, want %d: %q", len(rows), len(want), rows)
	}
	for r, w := range want {
		for c := range w {
			if got := value(t, f, SheetEvidence, c+1, r+1); got != w[c] {
				t.Errorf("evidence row %d column %d (%s) = %q, want %q", r+1, c+1, want[0][c], got, w[c])
			}
		}
	}
	// Quotes that do not back their verdict stand out in red.
	for row, wantFill := range map[int]string{2: "", 4: FillFail, 5: "", 6: FillFail} {
		if got := fill(t, f, SheetEvidence, 10, row); got != wantFill {
			t.Errorf("evidence row %d status fill = %q, want %q", row, got, wantFill)
		}
	}
	// A page the model cited wrongly stands out in amber beside the page the
	// text is on; a named input has no page to correct.
	for row, wantFill := range map[int]string{2: "", 3: FillAmber, 4: "", 5: "", 6: ""} {
		if got := fill(t, f, SheetEvidence, 15, row); got != wantFill {
			t.Errorf("evidence row %d cited page fill = %q, want %q", row, got, wantFill)
		}
	}
}

func TestSourceLabel(t *testing.T) {
	for _, tt := range []struct {
		name string
		ev   verdict.Evidence
		want string
	}{
		{"quote on the page cited", verdict.Evidence{SourceOrigin: "msa.pdf", SourcePageNumber: 2, CitedPageNumber: 2}, "msa.pdf, p. 2"},
		{"page corrected", verdict.Evidence{SourceOrigin: "msa.pdf", SourcePageNumber: 2, CitedPageNumber: 9}, "msa.pdf, p. 2 (cited p. 9)"},
		{"no page cited", verdict.Evidence{SourceOrigin: "msa.pdf", SourcePageNumber: 2}, "msa.pdf, p. 2"},
		{"passage cited", verdict.Evidence{SourceOrigin: "msa.pdf", SourcePageNumber: 3, CitedPageNumber: 3, PassageID: "d1p3s4"}, "msa.pdf, p. 3, passage d1p3s4"},
		{"named input cited by name", verdict.Evidence{SourceOrigin: "volume", PassageID: "volume", CitedPageNumber: 1}, "volume"},
		{"no source", verdict.Evidence{}, "unknown source"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := sourceLabel(tt.ev); got != tt.want {
				t.Errorf("sourceLabel = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRationaleText(t *testing.T) {
	for _, tt := range []struct {
		name string
		v    engine.Verdict
		want string
	}{
		{"clean", engine.Verdict{Rationale: "Signed.", DataSufficiency: true}, "Signed."},
		{"kept with problems", engine.Verdict{Rationale: "Signed.", SufficiencyNote: "kept with problems after every re-ask: a; b", Problems: []string{"a", "b"}},
			"Signed.\n⚠ Kept with problems; still wrong after every re-ask:\n• a\n• b"},
		{"a note without problems", engine.Verdict{Rationale: "Signed.", SufficiencyNote: "judged on an excerpt"},
			"Signed.\n⚠ Judged on insufficient data: judged on an excerpt"},
		{"from the verdict cache", engine.Verdict{Rationale: "Signed.", DataSufficiency: true, Cached: &verdict.CachedFrom{JudgedAt: time.Date(2025, 3, 1, 9, 30, 0, 0, time.UTC), RequestID: "r-1"}},
			"Signed.\nFrom the verdict cache: judged 2025-03-01T09:30:00Z under request r-1."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := rationaleText(&tt.v); got != tt.want {
				t.Errorf("rationaleText = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBuildChartSheet(t *testing.T) {
	f, data := build(t, mixedMeta(), mustRuleset(t, mixedRuleset), mixedResult())

	// The outcomes partition the five rules: 1 passed, 1 failed, 2 scored, 1 not applicable.
	want := [][2]string{{"Passed", "1"}, {"Failed", "1"}, {"Scored", "2"}, {"Not applicable", "1"}}
	for i, w := range want {
		if got := [2]string{value(t, f, SheetChart, 1, chartFirstRow+i), value(t, f, SheetChart, 2, chartFirstRow+i)}; got != w {
			t.Errorf("chart data row %d = %q, want %q", chartFirstRow+i, got, w)
		}
	}
	if got := value(t, f, SheetChart, 2, chartLastRow+2); got != "1" {
		t.Errorf("insufficient data on the chart sheet = %q, want 1", got)
	}
	chart := zipEntry(t, data, "xl/charts/chart1.xml")
	for _, ref := range []string{"Chart!$A$2:$A$5", "Chart!$B$2:$B$5", "<pieChart>", "<f>Chart!$B$1</f>"} {
		if !strings.Contains(chart, ref) {
			t.Errorf("chart1.xml does not mention %s", ref)
		}
	}
}

func zipEntry(t *testing.T, data []byte, name string) string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := zr.Open(name)
	if err != nil {
		t.Fatalf("workbook part %s: %v", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Document text, model output and request fields are attacker-controlled;
// none of it may become a formula.
func TestBuildNeverWritesFormulas(t *testing.T) {
	rs := mustRuleset(t, `{"id": "=cmd|' /C calc'!A0", "rules": [
		{"rule_id": "+SUM(1,1)", "name": "@SUM(A1:A9)", "type": "boolean", "rule_text": "x"}]}`)
	res := &engine.Result{
		Rules: []engine.Verdict{{
			RuleID: "+SUM(1,1)", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: ptr(true),
			Rationale: `=HYPERLINK("http://evil")`,
			Evidences: []verdict.Evidence{{Text: "-2+3", SourceOrigin: "=1+1", SourcePageNumber: 1}},
		}},
		Aggregate: verdict.Aggregate{Boolean: &verdict.BooleanAggregate{Mode: verdict.AggregateAll, Passed: true, Applicable: 1, PassedCount: 1}},
	}
	meta := Meta{RequestID: "=2*3", TenantID: "@tenant", Model: "-model", GeneratedAt: generatedAt}
	f, data := build(t, meta, rs, res)

	cells := []struct {
		sheet    string
		col, row int
		want     string
	}{
		{SheetReport, ColRationale, FirstRuleRow, `=HYPERLINK("http://evil")`},
		{SheetReport, ColName, FirstRuleRow, "@SUM(A1:A9)"},
		{SheetReport, ColRuleID, FirstRuleRow, "+SUM(1,1)"},
		{SheetEvidence, 3, 2, "-2+3"},
		{SheetEvidence, 4, 2, "=1+1"},
	}
	for _, c := range cells {
		cell := cellName(t, c.col, c.row)
		if got := value(t, f, c.sheet, c.col, c.row); got != c.want {
			t.Errorf("%s!%s = %q, want %q", c.sheet, cell, got, c.want)
		}
		if formula, err := f.GetCellFormula(c.sheet, cell); err != nil || formula != "" {
			t.Errorf("%s!%s has formula %q (err %v), want none", c.sheet, cell, formula, err)
		}
		if typ, err := f.GetCellType(c.sheet, cell); err != nil || typ != excelize.CellTypeSharedString {
			t.Errorf("%s!%s type = %v (err %v), want a shared string", c.sheet, cell, typ, err)
		}
	}
	// No worksheet holds a formula element at all.
	for _, part := range []string{"xl/worksheets/sheet1.xml", "xl/worksheets/sheet2.xml", "xl/worksheets/sheet3.xml"} {
		xml := zipEntry(t, data, part)
		if strings.Contains(xml, "<f>") || strings.Contains(xml, "<f ") {
			t.Errorf("%s contains a formula element", part)
		}
	}
}

func TestBuildLargeResult(t *testing.T) {
	const n = 200
	var rules []string
	res := &engine.Result{RulesetID: "big", Model: "m"}
	long := strings.Repeat("Ünïcode rationale with a 😀 emoji. ", 1500) // ~54,000 UTF-16 units
	for i := range n {
		id := fmt.Sprintf("rule-%03d", i)
		rules = append(rules, fmt.Sprintf(`{"rule_id": %q, "name": "Rule %d", "type": "boolean", "rule_text": "x"}`, id, i))
		rationale := fmt.Sprintf("Rationale %d. %s", i, strings.Repeat("Long reasoning. ", 200))
		if i%50 == 0 {
			rationale = long
		}
		var evs []verdict.Evidence
		for j := range 3 {
			evs = append(evs, verdict.Evidence{Text: fmt.Sprintf("quote %d.%d", i, j), SourceOrigin: "doc.pdf", SourcePageNumber: j + 1})
		}
		res.Rules = append(res.Rules, engine.Verdict{
			RuleID: id, Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: ptr(i%3 != 0),
			Rationale: rationale, Evidences: evs,
		})
	}
	res.Aggregate.Boolean = &verdict.BooleanAggregate{Mode: verdict.AggregateMajority, Passed: true, Applicable: n, PassedCount: 133}
	rs := mustRuleset(t, `{"id": "big", "rules": [`+strings.Join(rules, ",")+`]}`)

	start := time.Now()
	f, data := build(t, Meta{RequestID: "r", TenantID: "t", GeneratedAt: generatedAt}, rs, res)
	t.Logf("200 rules: %d bytes in %v", len(data), time.Since(start).Round(time.Millisecond))

	if got := value(t, f, SheetReport, 1, CountsRow+1); got != "200" {
		t.Errorf("rule count = %q, want 200", got)
	}
	if got, want := value(t, f, SheetReport, 3, CountsRow+1), "67"; got != want {
		t.Errorf("failed count = %q, want %s", got, want)
	}
	for i := range n {
		row := FirstRuleRow + i
		if got, want := value(t, f, SheetReport, ColRuleID, row), fmt.Sprintf("rule-%03d", i); got != want {
			t.Fatalf("row %d rule id = %q, want %q", row, got, want)
		}
		wantResult, wantFill := "PASS", FillPass
		if i%3 == 0 {
			wantResult, wantFill = "FAIL", FillFail
		}
		if got := value(t, f, SheetReport, ColResult, row); got != wantResult {
			t.Errorf("row %d result = %q, want %q", row, got, wantResult)
		}
		if got := fill(t, f, SheetReport, ColResult, row); got != wantFill {
			t.Errorf("row %d fill = %q, want %q", row, got, wantFill)
		}
		rationale := value(t, f, SheetReport, ColRationale, row)
		if i%50 == 0 {
			if n := len(utf16.Encode([]rune(rationale))); n != MaxCellChars && n != MaxCellChars-1 {
				t.Errorf("row %d: truncated rationale is %d UTF-16 units, want %d (or one less before a surrogate pair)", row, n, MaxCellChars)
			}
			if !strings.HasSuffix(rationale, TruncationMarker) || !strings.HasPrefix(long, strings.TrimSuffix(rationale, TruncationMarker)) {
				t.Errorf("row %d: truncated rationale is not a prefix of the original plus %q", row, TruncationMarker)
			}
		} else if !strings.HasPrefix(rationale, "Rationale "+strconv.Itoa(i)+".") || strings.Contains(rationale, TruncationMarker) {
			t.Errorf("row %d: rationale %.40q… was altered", row, rationale)
		}
	}
	rows, err := f.GetRows(SheetEvidence)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+3*n {
		t.Errorf("evidence sheet has %d rows, want %d", len(rows), 1+3*n)
	}
}

func TestBuildSingleTypeRulesets(t *testing.T) {
	tests := []struct {
		name       string
		ruleset    string
		verdicts   []engine.Verdict
		aggregate  verdict.Aggregate
		counts     []string // rules, passed, failed, not applicable, insufficient
		boolean    []string // mode, result, detail
		numerical  []string
		results    []string
		fills      []string
		chartSlice []string // passed, failed, scored, not applicable
	}{
		{
			name: "boolean only",
			ruleset: `{"id": "b", "rules": [
				{"rule_id": "a", "type": "boolean", "rule_text": "x"},
				{"rule_id": "b", "type": "boolean", "rule_text": "y"}]}`,
			verdicts: []engine.Verdict{
				{RuleID: "a", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: ptr(true)},
				{RuleID: "b", Type: verdict.Boolean, DataSufficiency: false, BooleanOutput: ptr(true)},
			},
			aggregate:  verdict.Aggregate{Boolean: &verdict.BooleanAggregate{Mode: verdict.AggregateAny, Passed: true, Applicable: 2, PassedCount: 2}},
			counts:     []string{"2", "2", "0", "0", "1"},
			boolean:    []string{"any", "PASSED", "2 of 2 applicable boolean rules passed"},
			numerical:  []string{"—", "n/a", "no numerical rules"},
			results:    []string{"PASS", "PASS"},
			fills:      []string{FillPass, FillAmber},
			chartSlice: []string{"2", "0", "0", "0"},
		},
		{
			name: "numerical only",
			ruleset: `{"id": "n", "type": "numerical",
				"global_numerical_rule_config": {"min_score": 0, "max_score": 10, "increment": 5},
				"rules": [
				{"rule_id": "low", "rule_text": "x"},
				{"rule_id": "mid", "rule_text": "y"},
				{"rule_id": "high", "rule_text": "z"},
				{"rule_id": "na", "rule_text": "w"}]}`,
			verdicts: []engine.Verdict{
				{RuleID: "low", Type: verdict.Numerical, DataSufficiency: true, NumericalOutput: ptr(0)},
				{RuleID: "mid", Type: verdict.Numerical, DataSufficiency: true, NumericalOutput: ptr(5)},
				{RuleID: "high", Type: verdict.Numerical, DataSufficiency: true, NumericalOutput: ptr(10)},
				{RuleID: "na", Type: verdict.Numerical, DataSufficiency: true, NotApplicable: true, NumericalOutput: ptr(5)},
			},
			aggregate:  verdict.Aggregate{Numerical: &verdict.NumericalAggregate{Mode: verdict.AggregateSum, Score: ptr(15.0), Counted: 3}},
			counts:     []string{"4", "0", "0", "1", "0"},
			boolean:    []string{"—", "n/a", "no boolean rules"},
			numerical:  []string{"sum", "15.00", "3 scores counted"},
			results:    []string{"0", "5", "10", "N/A (score 5)"},
			fills:      []string{"F8696B", "FFEB84", "63BE7B", FillAmber},
			chartSlice: []string{"0", "0", "3", "1"},
		},
		{
			name: "numerical with nothing counted",
			ruleset: `{"id": "n", "type": "numerical",
				"global_numerical_rule_config": {"min_score": 1, "max_score": 3, "increment": 1},
				"rules": [{"rule_id": "na", "rule_text": "w"}]}`,
			verdicts: []engine.Verdict{
				{RuleID: "na", Type: verdict.Numerical, DataSufficiency: true, NotApplicable: true},
			},
			aggregate:  verdict.Aggregate{Numerical: &verdict.NumericalAggregate{Mode: verdict.AggregateMean, Counted: 0}},
			counts:     []string{"1", "0", "0", "1", "0"},
			boolean:    []string{"—", "n/a", "no boolean rules"},
			numerical:  []string{"mean", "n/a", "0 scores counted"},
			results:    []string{"N/A"},
			fills:      []string{FillAmber},
			chartSlice: []string{"0", "0", "0", "1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := &engine.Result{Rules: tt.verdicts, Aggregate: tt.aggregate}
			f, _ := build(t, Meta{RequestID: "r", TenantID: "t", GeneratedAt: generatedAt}, mustRuleset(t, tt.ruleset), res)
			for i, want := range tt.counts {
				if got := value(t, f, SheetReport, i+1, CountsRow+1); got != want {
					t.Errorf("count %q = %q, want %q", value(t, f, SheetReport, i+1, CountsRow), got, want)
				}
			}
			for i, want := range tt.boolean {
				if got := value(t, f, SheetReport, i+2, AggregatesRow+1); got != want {
					t.Errorf("boolean aggregate column %d = %q, want %q", i+2, got, want)
				}
			}
			for i, want := range tt.numerical {
				if got := value(t, f, SheetReport, i+2, AggregatesRow+2); got != want {
					t.Errorf("numerical aggregate column %d = %q, want %q", i+2, got, want)
				}
			}
			for i, want := range tt.results {
				row := FirstRuleRow + i
				if got := value(t, f, SheetReport, ColResult, row); got != want {
					t.Errorf("row %d result = %q, want %q", row, got, want)
				}
				if got := fill(t, f, SheetReport, ColResult, row); got != tt.fills[i] {
					t.Errorf("row %d fill = %q, want %q", row, got, tt.fills[i])
				}
			}
			for i, want := range tt.chartSlice {
				if got := value(t, f, SheetChart, 2, chartFirstRow+i); got != want {
					t.Errorf("chart %s = %q, want %q", value(t, f, SheetChart, 1, chartFirstRow+i), got, want)
				}
			}
		})
	}
}

func TestBuildWithoutRuleset(t *testing.T) {
	res := mixedResult()
	// A verdict for a rule the ruleset does not name, and a rule with no verdict.
	rs := mustRuleset(t, mixedRuleset)
	rs.Rules = append(rs.Rules, engine.Rule{RuleID: "late", RuleText: "x", Type: verdict.Boolean})
	res.Rules = append(res.Rules, engine.Verdict{RuleID: "stray", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: ptr(true)})

	t.Run("nil ruleset follows the result", func(t *testing.T) {
		f, _ := build(t, Meta{}, nil, res)
		if got, want := value(t, f, SheetReport, 1, TitleRow), "Validation report: ruleset loan-policy version 3"; got != want {
			t.Errorf("title = %q, want %q (from the result)", got, want)
		}
		for i, v := range res.Rules {
			if got := value(t, f, SheetReport, ColRuleID, FirstRuleRow+i); got != v.RuleID {
				t.Errorf("row %d = %q, want %q", FirstRuleRow+i, got, v.RuleID)
			}
		}
		// Without the ruleset the score's range is unknown: no colour.
		if got := fill(t, f, SheetReport, ColResult, FirstRuleRow+3); got != "" {
			t.Errorf("score fill without a ruleset = %q, want none", got)
		}
	})
	t.Run("missing and stray verdicts are shown", func(t *testing.T) {
		f, _ := build(t, mixedMeta(), rs, res)
		if got := value(t, f, SheetReport, ColResult, FirstRuleRow+5); got != "NO VERDICT" {
			t.Errorf("rule without a verdict shows %q, want NO VERDICT", got)
		}
		if got := value(t, f, SheetReport, ColRuleID, FirstRuleRow+6); got != "stray" {
			t.Errorf("row after the ruleset's rules = %q, want the stray verdict", got)
		}
	})
}

func TestBuildWithoutResult(t *testing.T) {
	if _, err := Build(mixedMeta(), nil, nil); err == nil {
		t.Fatal("Build with no result succeeded")
	}
}

func TestBuildControlCharacters(t *testing.T) {
	res := mixedResult()
	res.Rules[0].Rationale = "page one\fpage two\x00\x1b[31m"
	res.Rules[0].Evidences[0].Text = "bad \xff byte"
	f, _ := build(t, mixedMeta(), mustRuleset(t, mixedRuleset), res)
	if got, want := value(t, f, SheetReport, ColRationale, FirstRuleRow), "page one\npage two\uFFFD\uFFFD[31m"; got != want {
		t.Errorf("rationale = %q, want %q", got, want)
	}
	if got, want := value(t, f, SheetEvidence, 3, 2), "bad \uFFFD byte"; got != want {
		t.Errorf("quote = %q, want %q", got, want)
	}
}

func TestFileName(t *testing.T) {
	tests := []struct {
		name string
		meta Meta
		want string
	}{
		{"plain", Meta{RulesetID: "loan-policy", RequestID: "req-42"}, "validation-report-loan-policy-req-42.xlsx"},
		{"unsafe characters", Meta{RulesetID: "../../etc/passwd", RequestID: `a "b";c\d`}, "validation-report-etc-passwd-a-b-c-d.xlsx"},
		{"dots collapse", Meta{RulesetID: "v1...2", RequestID: ".hidden"}, "validation-report-v1.2-hidden.xlsx"},
		{"non-ASCII", Meta{RulesetID: "prüfung", RequestID: "日本"}, "validation-report-pr-fung.xlsx"},
		{"empty", Meta{}, "validation-report.xlsx"},
		{"long", Meta{RulesetID: strings.Repeat("r", 500), RequestID: strings.Repeat("q", 500)},
			"validation-report-" + strings.Repeat("r", maxFileNamePart) + "-" + strings.Repeat("q", maxFileNamePart) + ".xlsx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FileName(tt.meta)
			if got != tt.want {
				t.Errorf("FileName = %q, want %q", got, tt.want)
			}
			if !safeFileName(got) {
				t.Errorf("FileName %q is not a safe file name", got)
			}
		})
	}
}

func TestBuildConfidenceAndReviewerColumns(t *testing.T) {
	res := mixedResult()
	res.Rules[0].Confidence, res.Rules[0].NeedsReview = ptr(0.42), true
	res.Rules[0].ReviewReasons = []engine.ReviewReason{engine.ReviewLowConfidence, engine.ReviewCorrectedPage}
	f, _ := build(t, mixedMeta(), mustRuleset(t, mixedRuleset), res)
	row := FirstRuleRow
	if got := value(t, f, SheetReport, ColConfidence, row); got != "0.42" {
		t.Errorf("confidence = %q", got)
	}
	if got := value(t, f, SheetReport, ColNeedsReview, row); got != "yes: low_confidence, corrected_page" {
		t.Errorf("needs review = %q", got)
	}
	if got := value(t, f, SheetReport, ColConfidence, row+1); got != "" {
		t.Errorf("unmeasured confidence = %q, want blank", got)
	}
	if got := value(t, f, SheetReport, ColReviewDecision, HeaderRow); got != "" {
		t.Errorf("reviewer columns without reviews: %q", got)
	}

	meta := mixedMeta()
	meta.Reviews = map[string]Review{"income-proof": {Decision: "override", Reviewer: "user-7", ReviewedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC),
		Note: "=HYPERLINK(\"x\")", Final: "fail"}}
	f, _ = build(t, meta, mustRuleset(t, mixedRuleset), res)
	for col, want := range map[int]string{ColReviewDecision: "override", ColReviewer: "user-7", ColReviewedAt: "2026-12-01T09:00:00Z",
		ColReviewNote: "=HYPERLINK(\"x\")", ColFinal: "fail"} {
		if got := value(t, f, SheetReport, col, row); got != want {
			t.Errorf("column %d = %q, want %q", col, got, want)
		}
	}
	if got := value(t, f, SheetReport, ColFinal, HeaderRow); got != "Final outcome" {
		t.Errorf("header = %q", got)
	}
	if formula, _ := f.GetCellFormula(SheetReport, cellName(t, ColReviewNote, row)); formula != "" {
		t.Errorf("a reviewer's note became a formula: %q", formula)
	}
}
