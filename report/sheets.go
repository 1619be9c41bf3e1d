package report

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/xuri/excelize/v2"
)

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
