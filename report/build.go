// Package report renders a judged request as an Excel workbook (Build, pure:
// verdicts in, bytes out) and stores it in object storage under a
// tenant-scoped, unguessable key (Writer, Open).
//
// The workbook has three sheets. "Report": a title, the request's identity,
// summary counts and aggregates, then one row per rule in ruleset order with
// its coloured result, rationale and evidence. "Evidence": one row per quote
// with its source, page, anchoring and offsets, whether it supports the
// verdict (altered and unfound quotes marked in red), the model's own words
// beside the document's, the similarity and what differs, the passage the
// model cited and the page it gave (amber where the text was found on
// another page), for filtering and audit.
// "Chart": the outcome counts and a pie chart of them.
//
// Every piece of text that came from a document, a model or a request is
// written as a string cell, so a rationale such as =HYPERLINK(...) is shown
// as text and never becomes a formula.
package report

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/xuri/excelize/v2"

	"rulevalidator/engine"
)

// Meta identifies the request a report is about; it fills the title rows.
type Meta struct {
	RulesetID      string
	RulesetVersion string
	RequestID      string
	TenantID       string
	Model          string
	GeneratedAt    time.Time
	// Reviews, when not nil, adds the reviewers' columns to the rules
	// table: each rule's current review by rule id (a rule without one
	// leaves them blank).
	Reviews map[string]Review
}

// Review is what the reviewers' columns show of a rule's current review.
type Review struct {
	Decision   string // confirm or override
	Reviewer   string
	ReviewedAt time.Time
	Note       string
	// Final is the rule's final outcome in one word (pass, fail, a score,
	// not_applicable).
	Final string
}

// Sheet names and the fixed layout of the Report sheet, so that readers can
// find cells without searching.
const (
	SheetReport   = "Report"
	SheetEvidence = "Evidence"
	SheetChart    = "Chart"

	// Report sheet rows.
	TitleRow      = 1 // "Validation report: ruleset … version …"
	SubtitleRow   = 2 // request, tenant, generation time (UTC), model
	CountsRow     = 4 // labels; the counts are on the row below
	AggregatesRow = 7 // labels; boolean then numerical aggregate below
	HeaderRow     = 11
	// FirstRuleRow is the row of the first rule; rules follow in ruleset order.
	FirstRuleRow = HeaderRow + 1
)

// Report sheet columns of the rules table (1-based).
const (
	ColName = iota + 1
	ColRuleID
	ColType
	ColResult
	ColAllowedScores
	ColDataSufficient
	ColRationale
	ColEvidence
	// ColConfidence is the model's confidence, blank when unmeasured.
	ColConfidence
	// ColNeedsReview says whether the verdict was routed to a person, and why.
	ColNeedsReview
	// The reviewers' columns, present when Meta.Reviews is set.
	ColReviewDecision
	ColReviewer
	ColReviewedAt
	ColReviewNote
	ColFinal
)

// Fills (RRGGBB) of result cells: Excel's Good, Bad and Neutral styles.
const (
	FillPass  = "C6EFCE"
	FillFail  = "FFC7CE"
	FillAmber = "FFEB9C"

	fontPass  = "006100"
	fontFail  = "9C0006"
	fontAmber = "9C5700"
)

// column is a table column: its header and its width in digit widths.
type column struct {
	title string
	width float64
}

var ruleColumns = []column{
	{"Rule", 30}, {"Rule ID", 18}, {"Type", 11}, {"Result", 14},
	{"Allowed scores", 16}, {"Data sufficient", 10}, {"Rationale", 60}, {"Evidence", 60},
	{"Confidence", 11}, {"Needs review", 24},
}

var reviewColumns = []column{
	{"Review", 11}, {"Reviewer", 18}, {"Reviewed at", 20}, {"Review note", 50}, {"Final outcome", 14},
}

// columns are the rules table's columns: the reviewers' too when there are
// reviews.
func (b *builder) columns() []column {
	if b.meta.Reviews == nil {
		return ruleColumns
	}
	return append(slices.Clone(ruleColumns), reviewColumns...)
}

var evidenceColumns = []column{
	{"Rule ID", 18}, {"Rule", 28}, {"Quote", 80}, {"Source", 24}, {"Page", 7},
	{"Anchored", 10}, {"Match", 13}, {"Start offset", 12}, {"End offset", 12},
	{"Status", 16}, {"Model's words", 60}, {"Similarity", 11}, {"Differences", 50},
	{"Passage", 12}, {"Cited page", 8},
}

// Build renders the report of res, judged against rs, as an xlsx workbook.
// rs may be nil; rules then follow res's order and numerical scores go
// uncoloured, their range being unknown.
func Build(meta Meta, rs *engine.Ruleset, res *engine.Result) ([]byte, error) {
	if res == nil {
		return nil, errors.New("report: no result to build a report from")
	}
	b := &builder{
		f:      excelize.NewFile(),
		meta:   fillMeta(meta, rs, res),
		rs:     rs,
		res:    res,
		rows:   ruleRows(rs, res),
		counts: engine.CountVerdicts(res.Rules),
		styles: map[look]int{},
	}
	defer b.f.Close()
	for _, step := range []struct {
		what string
		do   func() error
	}{
		{"report sheet", b.reportSheet},
		{"evidence sheet", b.evidenceSheet},
		{"chart sheet", b.chartSheet},
		{"document properties", b.docProps},
	} {
		if err := step.do(); err != nil {
			return nil, fmt.Errorf("report: ruleset %q, request %q: %s: %w", b.meta.RulesetID, b.meta.RequestID, step.what, err)
		}
	}
	buf, err := b.f.WriteToBuffer()
	if err != nil {
		return nil, fmt.Errorf("report: ruleset %q, request %q: writing the workbook: %w", b.meta.RulesetID, b.meta.RequestID, err)
	}
	return buf.Bytes(), nil
}

// fillMeta takes the ruleset's identity and the model from the result or the
// ruleset when meta leaves them out.
func fillMeta(meta Meta, rs *engine.Ruleset, res *engine.Result) Meta {
	if meta.RulesetID == "" {
		meta.RulesetID = res.RulesetID
	}
	if meta.RulesetVersion == "" {
		meta.RulesetVersion = res.RulesetVersion
	}
	if rs != nil {
		if meta.RulesetID == "" {
			meta.RulesetID = rs.ID
		}
		if meta.RulesetVersion == "" {
			meta.RulesetVersion = rs.Version
		}
	}
	if meta.Model == "" {
		meta.Model = res.Model
	}
	return meta
}

type builder struct {
	f      *excelize.File
	meta   Meta
	rs     *engine.Ruleset
	res    *engine.Result
	rows   []ruleRow
	counts engine.Counts
	styles map[look]int
}

// printSetup prints the sheet landscape on A4, one page wide and tall pages
// high (0: as many as it takes), repeating titleRows (if any) on every page.
func (b *builder) printSetup(name, titleRows string, tall int) error {
	landscape, a4, wide := "landscape", 9, 1
	if err := b.f.SetPageLayout(name, &excelize.PageLayoutOptions{
		Orientation: &landscape, Size: &a4, FitToWidth: &wide, FitToHeight: &tall,
	}); err != nil {
		return err
	}
	fit := true
	if err := b.f.SetSheetProps(name, &excelize.SheetPropsOptions{FitToPage: &fit}); err != nil {
		return err
	}
	if titleRows == "" {
		return nil
	}
	return b.f.SetDefinedName(&excelize.DefinedName{
		Name: "_xlnm.Print_Titles", RefersTo: name + "!" + titleRows, Scope: name,
	})
}

func (b *builder) docProps() error {
	b.f.SetActiveSheet(0)
	subject := "Ruleset " + orDash(b.meta.RulesetID)
	if b.meta.RulesetVersion != "" {
		subject += " version " + b.meta.RulesetVersion
	}
	return b.f.SetDocProps(&excelize.DocProperties{
		Title:   "Validation report",
		Subject: cellText(subject + ", request " + orDash(b.meta.RequestID)),
		Creator: "rulevalidator",
		Created: b.meta.GeneratedAt.UTC().Format(time.RFC3339),
	})
}
