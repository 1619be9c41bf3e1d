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
	"math"
	"slices"
	"strings"
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

// Evidence statuses, as the Evidence sheet's Status column shows them.
const (
	StatusSupports    = "supports"
	StatusAltered     = "ALTERED"
	StatusNotFound    = "NOT FOUND"
	StatusNotDocument = "not a document"
)

// evidenceStatus says whether a quote backs its verdict, and if not, why.
func evidenceStatus(e engine.Evidence) string {
	switch {
	case e.Altered:
		return StatusAltered
	case e.Anchored:
		return StatusSupports
	case e.Match == engine.MatchNotDocument:
		return StatusNotDocument
	}
	return StatusNotFound
}

// differencesText says what an altered quote changed, one difference a line.
func differencesText(ds []engine.Difference) string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = fmt.Sprintf("%s: %s in the quote, %s in the document", d.Kind, quotedOrNothing(d.Quote), quotedOrNothing(d.Document))
	}
	return strings.Join(lines, "\n")
}

func quotedOrNothing(s string) string {
	if s == "" {
		return "nothing"
	}
	return "“" + s + "”"
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

// ruleRow is one rule of the report and its verdict (nil when the result has none).
type ruleRow struct {
	id, name string
	typ      engine.RuleType
	scores   []int
	verdict  *engine.Verdict
	// group, on a subtotal row, is the nested ruleset whose rules follow.
	group *engine.GroupResult
}

// ruleRows lists the ruleset's rules in order with their verdicts, then any
// verdict for a rule the ruleset does not name, so nothing judged is hidden.
// A ruleset with nested rulesets lists its own rules, then each nested
// ruleset's subtotal row followed by its own rules, a group before the
// groups nested in it.
func ruleRows(rs *engine.Ruleset, res *engine.Result) []ruleRow {
	verdicts := make(map[string]*engine.Verdict, len(res.Rules))
	for i := range res.Rules {
		if _, dup := verdicts[res.Rules[i].RuleID]; !dup {
			verdicts[res.Rules[i].RuleID] = &res.Rules[i]
		}
	}
	var rows []ruleRow
	used := map[*engine.Verdict]bool{}
	addRule := func(rule engine.Rule) {
		row := ruleRow{id: rule.RuleID, name: rule.Name, typ: rule.Type, scores: rule.AllowedScores()}
		if v := verdicts[rule.RuleID]; v != nil {
			row.verdict = v
			used[v] = true
			if v.Name != "" {
				row.name = v.Name
			}
			if v.Type != "" {
				row.typ = v.Type
			}
		}
		rows = append(rows, row)
	}
	if rs != nil {
		all := rs.AllRules()
		if len(res.Groups) == 0 {
			for _, rule := range all {
				addRule(rule)
			}
		} else {
			byID := make(map[string]engine.Rule, len(all))
			for _, rule := range all {
				byID[rule.RuleID] = rule
			}
			placed := map[string]bool{}
			for _, rule := range rs.Rules {
				addRule(rule)
				placed[rule.RuleID] = true
			}
			for i := range res.Groups {
				g := &res.Groups[i]
				name := g.Name
				if name == "" {
					name = "Group " + g.ID
				}
				rows = append(rows, ruleRow{id: g.Path, name: name, group: g})
				for _, id := range g.RuleIDs {
					if rule, ok := byID[id]; ok && !placed[id] {
						addRule(rule)
						placed[id] = true
					}
				}
			}
			for _, rule := range all {
				if !placed[rule.RuleID] {
					addRule(rule)
				}
			}
		}
	}
	for i := range res.Rules {
		v := &res.Rules[i]
		if used[v] {
			continue
		}
		rows = append(rows, ruleRow{id: v.RuleID, name: v.Name, typ: v.Type, verdict: v})
	}
	for i := range rows {
		if rows[i].name == "" {
			rows[i].name = rows[i].id
		}
	}
	return rows
}

// groupRow writes a nested ruleset's subtotal row: its result, and in the
// rationale column what it combined and why it does not apply or failed.
func (b *builder) groupRow(s *sheet, row int, r ruleRow) {
	g := r.group
	bold := look{bold: true, border: true, wrap: true}
	label := r.name
	if g.Required {
		label += " (gate)"
	}
	s.text(ColName, row, label, bold)
	s.text(ColRuleID, row, r.id, bold)
	s.text(ColType, row, "group", bold)
	s.text(ColAllowedScores, row, "", bold)
	s.text(ColDataSufficient, row, "", bold)
	s.text(ColEvidence, row, "", bold)
	var details []string
	res := result{text: "N/A", fill: FillAmber, font: fontAmber}
	if !g.NotApplicable {
		var parts []string
		res = result{text: "—"}
		if a := g.Aggregate.Boolean; a != nil {
			res = result{text: "FAILED", fill: FillFail, font: fontFail}
			if a.Passed {
				res = result{text: "PASSED", fill: FillPass, font: fontPass}
			}
			parts = append(parts, res.text)
			details = append(details, fmt.Sprintf("%s: %d of %d applicable members passed", a.Mode, a.PassedCount, a.Applicable))
		}
		if n := g.Aggregate.Numerical; n != nil {
			score := "no score"
			if n.Score != nil {
				score = fmt.Sprintf("%.2f", *n.Score)
			}
			parts = append(parts, score)
			details = append(details, fmt.Sprintf("%s: %s over %d scores", n.Mode, score, n.Counted))
		}
		res.text = strings.Join(parts, " · ")
	}
	if len(g.GatedBy) > 0 {
		details = append(details, "failed by the gate "+strings.Join(g.GatedBy, ", "))
	}
	if g.Reason != "" {
		details = append(details, g.Reason)
	}
	s.text(ColResult, row, res.text, look{fill: res.fill, font: res.font, bold: true, center: true, border: true, wrap: true})
	s.text(ColRationale, row, strings.Join(details, "\n"), bold)
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

func (b *builder) reportSheet() error {
	if err := b.f.SetSheetName("Sheet1", SheetReport); err != nil {
		return err
	}
	s := newSheet(b, SheetReport)
	s.widths(b.columns())

	title := "Validation report: ruleset " + orDash(b.meta.RulesetID)
	if b.meta.RulesetVersion != "" {
		title += " version " + b.meta.RulesetVersion
	}
	s.text(1, TitleRow, title, lookTitle)
	subtitle := fmt.Sprintf("Request %s · Tenant %s · Generated %s · Model %s",
		orDash(b.meta.RequestID), orDash(b.meta.TenantID),
		b.meta.GeneratedAt.UTC().Format(time.RFC3339), orDash(b.meta.Model))
	if n := b.counts.Cached; n > 0 {
		subtitle += fmt.Sprintf(" · %d of %d verdicts from the verdict cache", n, b.counts.Rules)
	}
	s.text(1, SubtitleRow, subtitle, lookSubtitle)

	c := b.counts
	for i, stat := range []struct {
		label string
		n     int
	}{
		{"Rules", c.Rules}, {"Passed", c.Passed}, {"Failed", c.Failed},
		{"Not applicable", c.NotApplicable}, {"Insufficient data", c.InsufficientData},
	} {
		s.text(i+1, CountsRow, stat.label, lookLabel)
		s.int(i+1, CountsRow+1, stat.n, lookCount)
	}

	for i, label := range []string{"Aggregate", "Mode", "Result", "Detail"} {
		s.text(i+1, AggregatesRow, label, lookLabel)
	}
	b.booleanAggregate(s, AggregatesRow+1)
	b.numericalAggregate(s, AggregatesRow+2)

	s.header(HeaderRow, b.columns())
	for i, row := range b.rows {
		if row.group != nil {
			b.groupRow(s, FirstRuleRow+i, row)
			continue
		}
		b.ruleRow(s, FirstRuleRow+i, row)
	}
	s.autoFilter(HeaderRow, len(b.columns()), len(b.rows))
	s.fitRows()
	if s.err == nil {
		s.err = b.f.SetRowHeight(SheetReport, TitleRow, 22)
	}
	if s.err != nil {
		return s.err
	}
	return b.printSetup(SheetReport, fmt.Sprintf("$%d:$%d", HeaderRow, HeaderRow), 0)
}

func (b *builder) booleanAggregate(s *sheet, row int) {
	s.text(1, row, "Boolean", lookValue)
	agg := b.res.Aggregate.Boolean
	if agg == nil {
		s.text(2, row, "—", lookValue)
		s.text(3, row, "n/a", lookValue)
		s.text(4, row, "no boolean rules", look{})
		return
	}
	s.text(2, row, string(agg.Mode), lookValue)
	if agg.Passed {
		s.text(3, row, "PASSED", look{fill: FillPass, font: fontPass, bold: true, border: true, center: true})
	} else {
		s.text(3, row, "FAILED", look{fill: FillFail, font: fontFail, bold: true, border: true, center: true})
	}
	s.text(4, row, fmt.Sprintf("%d of %d applicable boolean rules passed", agg.PassedCount, agg.Applicable), look{})
}

func (b *builder) numericalAggregate(s *sheet, row int) {
	s.text(1, row, "Numerical", lookValue)
	agg := b.res.Aggregate.Numerical
	if agg == nil {
		s.text(2, row, "—", lookValue)
		s.text(3, row, "n/a", lookValue)
		s.text(4, row, "no numerical rules", look{})
		return
	}
	s.text(2, row, string(agg.Mode), lookValue)
	if agg.Score != nil {
		s.float(3, row, *agg.Score, lookScore)
	} else {
		s.text(3, row, "n/a", lookValue)
	}
	noun := "scores"
	if agg.Counted == 1 {
		noun = "score"
	}
	s.text(4, row, fmt.Sprintf("%d %s counted", agg.Counted, noun), look{})
}

func (b *builder) ruleRow(s *sheet, row int, r ruleRow) {
	s.text(ColName, row, r.name, lookBody)
	s.text(ColRuleID, row, r.id, lookBody)
	s.text(ColType, row, string(r.typ), lookBody)
	s.text(ColAllowedScores, row, formatScores(r.scores), lookBody)

	res := ruleResult(r)
	cellLook := look{fill: res.fill, font: res.font, bold: true, center: true, border: true, wrap: true}
	if res.score != nil {
		s.int(ColResult, row, *res.score, cellLook)
	} else {
		s.text(ColResult, row, res.text, cellLook)
	}

	v := r.verdict
	if v == nil {
		for _, col := range []int{ColDataSufficient, ColRationale, ColEvidence, ColConfidence, ColNeedsReview} {
			s.text(col, row, "", lookBody)
		}
		return
	}
	s.text(ColDataSufficient, row, yesNo(v.DataSufficiency), lookBody)
	s.text(ColRationale, row, rationaleText(v), lookBody)
	s.text(ColEvidence, row, evidenceLines(v.Evidences), lookBody)
	if v.Confidence != nil {
		s.float(ColConfidence, row, *v.Confidence, lookBody)
	} else {
		s.text(ColConfidence, row, "", lookBody)
	}
	s.text(ColNeedsReview, row, needsReviewText(v), lookBody)
	if b.meta.Reviews == nil {
		return
	}
	rv, ok := b.meta.Reviews[r.id]
	at := ""
	if ok {
		at = rv.ReviewedAt.UTC().Format(time.RFC3339)
	}
	s.text(ColReviewDecision, row, rv.Decision, lookBody)
	s.text(ColReviewer, row, rv.Reviewer, lookBody)
	s.text(ColReviewedAt, row, at, lookBody)
	s.text(ColReviewNote, row, rv.Note, lookBody)
	s.text(ColFinal, row, rv.Final, lookBody)
}

// needsReviewText is "no", or "yes: " and the reasons.
func needsReviewText(v *engine.Verdict) string {
	if !v.NeedsReview {
		return "no"
	}
	reasons := make([]string, len(v.ReviewReasons))
	for i, r := range v.ReviewReasons {
		reasons[i] = string(r)
	}
	return "yes: " + strings.Join(reasons, ", ")
}

// rationaleText is the verdict's rationale and, when the engine kept it
// with problems, the problems left in the answer, one a line; when the
// engine judged the data insufficient, its note.
func rationaleText(v *engine.Verdict) string {
	text := v.Rationale
	switch {
	case len(v.Problems) > 0:
		text += "\n⚠ Kept with problems; still wrong after every re-ask:"
		for _, p := range v.Problems {
			text += "\n• " + p
		}
	case v.SufficiencyNote != "":
		text += "\n⚠ Judged on insufficient data: " + v.SufficiencyNote
	}
	if c := v.Cached; c != nil {
		text += fmt.Sprintf("\nFrom the verdict cache: judged %s under request %s.", c.JudgedAt.UTC().Format(time.RFC3339), c.RequestID)
	}
	return text
}

// result is what a rule's result cell shows: a score as a number, or text.
type result struct {
	text       string
	score      *int
	fill, font string
}

// ruleResult colours pass green and fail red, numerical scores on the scale
// of the rule's allowed scores, and anything that is not a plain verdict
// (not applicable, insufficient data, missing) amber.
func ruleResult(r ruleRow) result {
	amber := func(text string) result { return result{text: text, fill: FillAmber, font: fontAmber} }
	v := r.verdict
	if v == nil {
		return amber("NO VERDICT")
	}
	if !v.NotApplicable && r.typ != engine.Boolean && r.typ != engine.Numerical {
		return amber("UNKNOWN TYPE")
	}
	var res result
	switch engine.VerdictOutcome(r.typ, v.NotApplicable, v.BooleanOutput, v.NumericalOutput) {
	case engine.OutcomeNotApplicable:
		if out := outputText(r.typ, v); out != "" {
			return amber("N/A (" + out + ")")
		}
		return amber("N/A")
	case engine.OutcomePass:
		res = result{text: "PASS", fill: FillPass, font: fontPass}
	case engine.OutcomeFail:
		res = result{text: "FAIL", fill: FillFail, font: fontFail}
		if v.BooleanOutput == nil {
			// Counted as failed, as the summary counts it.
			res.text = "FAIL (no verdict)"
		}
	case engine.OutcomeScore:
		score := *v.NumericalOutput
		res = result{score: &score}
		if lo, hi, ok := scoreRange(r.scores); ok {
			res.fill = scoreColour(score, lo, hi)
		}
	default:
		return amber("NO SCORE")
	}
	if !v.DataSufficiency {
		res.fill, res.font = FillAmber, fontAmber
	}
	return res
}

// outputText is a verdict's output in words, for cells that show it as text.
func outputText(typ engine.RuleType, v *engine.Verdict) string {
	switch engine.VerdictOutcome(typ, false, v.BooleanOutput, v.NumericalOutput) {
	case engine.OutcomePass:
		return "PASS"
	case engine.OutcomeFail:
		if v.BooleanOutput != nil {
			return "FAIL"
		}
	case engine.OutcomeScore:
		return fmt.Sprintf("score %d", *v.NumericalOutput)
	}
	return ""
}

// evidenceLines lists quotes one a line: "quote" — source, p. N, and says
// plainly when a quote was not found or the document says something else,
// as it shows a page the model cited wrongly beside the right one.
func evidenceLines(evs []engine.Evidence) string {
	lines := make([]string, len(evs))
	for i, e := range evs {
		lines[i] = fmt.Sprintf("“%s” — %s", e.Text, sourceLabel(e))
		switch evidenceStatus(e) {
		case StatusAltered:
			lines[i] += fmt.Sprintf(" — ALTERED: the model wrote “%s” (%s)", e.QuotedText, strings.ReplaceAll(differencesText(e.Differences), "\n", "; "))
		case StatusNotFound:
			lines[i] += " — NOT FOUND in the documents"
		}
	}
	return strings.Join(lines, "\n")
}

// sourceLabel: "contract.pdf, p. 2 (cited p. 9), passage d1p2s4 (cited
// d1p9s1)". The passage is left out where it is the source itself (a named
// input).
func sourceLabel(e engine.Evidence) string {
	label := e.SourceOrigin
	if label == "" {
		label = "unknown source"
	}
	if e.SourcePageNumber > 0 {
		label += fmt.Sprintf(", p. %d", e.SourcePageNumber)
		if pageCorrected(e) {
			label += fmt.Sprintf(" (cited p. %d)", e.CitedPageNumber)
		}
	}
	if e.PassageID != "" && e.PassageID != e.SourceOrigin {
		label += ", passage " + e.PassageID
		if e.CitedPassageID != "" {
			label += " (cited " + e.CitedPassageID + ")"
		}
	}
	return label
}

// pageCorrected says whether the text was found on another page of its
// document than the one the model cited.
func pageCorrected(e engine.Evidence) bool {
	return e.SourcePageNumber > 0 && e.CitedPageNumber > 0 && e.CitedPageNumber != e.SourcePageNumber
}

func (b *builder) evidenceSheet() error {
	if _, err := b.f.NewSheet(SheetEvidence); err != nil {
		return err
	}
	s := newSheet(b, SheetEvidence)
	s.widths(evidenceColumns)
	s.header(1, evidenceColumns)
	row := 2
	for _, r := range b.rows {
		if r.verdict == nil {
			continue
		}
		for _, e := range r.verdict.Evidences {
			s.text(1, row, r.id, lookBody)
			s.text(2, row, r.name, lookBody)
			s.text(3, row, e.Text, lookBody)
			s.text(4, row, e.SourceOrigin, lookBody)
			if e.SourcePageNumber > 0 {
				s.int(5, row, e.SourcePageNumber, lookBody)
			} else {
				s.text(5, row, "", lookBody)
			}
			s.text(6, row, yesNo(e.Anchored), lookBody)
			s.text(7, row, string(e.Match), lookBody)
			for i, off := range []*int{e.StartOffset, e.EndOffset} {
				if off != nil {
					s.int(8+i, row, *off, lookBody)
				} else {
					s.text(8+i, row, "", lookBody)
				}
			}
			status := evidenceStatus(e)
			statusLook := lookBody
			if status == StatusAltered || status == StatusNotFound {
				statusLook = look{fill: FillFail, font: fontFail, bold: true, border: true, wrap: true}
			}
			s.text(10, row, status, statusLook)
			s.text(11, row, e.QuotedText, lookBody)
			if e.Anchored && e.Similarity > 0 {
				s.float(12, row, math.Round(e.Similarity*1000)/1000, lookBody)
			} else {
				s.text(12, row, "", lookBody)
			}
			s.text(13, row, differencesText(e.Differences), lookBody)
			s.text(14, row, e.PassageID, lookBody)
			switch {
			case pageCorrected(e):
				s.int(15, row, e.CitedPageNumber, look{fill: FillAmber, font: fontAmber, bold: true, border: true, wrap: true})
			case e.CitedPageNumber > 0:
				s.int(15, row, e.CitedPageNumber, lookBody)
			default:
				s.text(15, row, "", lookBody)
			}
			row++
		}
	}
	s.autoFilter(1, len(evidenceColumns), row-2)
	s.fitRows()
	if s.err != nil {
		return s.err
	}
	return b.printSetup(SheetEvidence, "$1:$1", 0)
}

// Outcome rows of the Chart sheet; they partition the rules, so the pie adds up.
const (
	chartFirstRow = 2
	chartLastRow  = 5
)

func (b *builder) chartSheet() error {
	if _, err := b.f.NewSheet(SheetChart); err != nil {
		return err
	}
	s := newSheet(b, SheetChart)
	for col, w := range map[string]float64{"A": 38, "B": 10} {
		if err := b.f.SetColWidth(SheetChart, col, col, w); err != nil {
			return err
		}
	}
	c := b.counts
	outcomes := []struct {
		label  string
		n      int
		colour string
	}{
		{"Passed", c.Passed, scaleHigh.hex()},
		{"Failed", c.Failed, scaleLow.hex()},
		// Applicable numerical rules (and verdicts of unknown type): whatever
		// the other rows leave, so the rows add up to the rule count.
		{"Scored", c.Rules - c.Passed - c.Failed - c.NotApplicable, "5B9BD5"},
		{"Not applicable", c.NotApplicable, "FFD966"},
	}
	s.text(1, 1, "Outcome", lookHeader)
	s.text(2, 1, "Rules", lookHeader)
	points := make([]excelize.ChartDataPoint, len(outcomes))
	for i, o := range outcomes {
		s.text(1, chartFirstRow+i, o.label, lookValue)
		s.int(2, chartFirstRow+i, o.n, lookValue)
		points[i] = excelize.ChartDataPoint{Index: i, Fill: excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{o.colour}}}
	}
	s.text(1, chartLastRow+2, "Insufficient data (also counted above)", lookValue)
	s.int(2, chartLastRow+2, c.InsufficientData, lookValue)
	if s.err != nil {
		return s.err
	}
	ref := func(col string) string {
		return fmt.Sprintf("%s!$%s$%d:$%s$%d", SheetChart, col, chartFirstRow, col, chartLastRow)
	}
	if err := b.printSetup(SheetChart, "", 1); err != nil {
		return err
	}
	return b.f.AddChart(SheetChart, "D1", &excelize.Chart{
		Type: excelize.Pie,
		Series: []excelize.ChartSeries{{
			Name:       SheetChart + "!$B$1", // a reference: excelize writes series names as formulas
			Categories: ref("A"),
			Values:     ref("B"),
			DataPoint:  points,
		}},
		Title:     excelize.ChartTitle{Paragraph: []excelize.RichTextRun{{Text: cellText(truncateRunes("Rule outcomes: "+orDash(b.meta.RulesetID), 80))}}},
		Legend:    excelize.ChartLegend{Position: "right"},
		PlotArea:  excelize.ChartPlotArea{ShowVal: true},
		Dimension: excelize.ChartDimension{Width: 480, Height: 300},
		Format:    excelize.GraphicOptions{AltText: "Pie chart of rule outcomes"},
	})
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

// maxFileNamePart bounds each of the ruleset and request parts of a file name.
const maxFileNamePart = 60

// FileName is the report's download name,
// validation-report-<ruleset>-<request>.xlsx, kept to [A-Za-z0-9._-] and at
// most 150 bytes so that it is safe in a Content-Disposition header and on
// any file system.
func FileName(meta Meta) string {
	name := "validation-report"
	for _, part := range []string{meta.RulesetID, meta.RequestID} {
		if p := fileNamePart(part); p != "" {
			name += "-" + p
		}
	}
	return name + ".xlsx"
}

func fileNamePart(s string) string {
	var b strings.Builder
	last := rune(0)
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
		case r == '.' || r == '-':
			if last == '.' || last == '-' {
				continue // no "..", no runs of separators
			}
		default:
			if last == '-' || last == '.' {
				continue
			}
			r = '-'
		}
		b.WriteRune(r)
		last = r
	}
	out := b.String()
	if len(out) > maxFileNamePart {
		out = out[:maxFileNamePart]
	}
	return strings.Trim(out, ".-")
}
