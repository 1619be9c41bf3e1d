package report

import (
	"fmt"
	"strings"
	"time"

	"rulevalidator/engine"
	"rulevalidator/verdict"
)

// ruleRow is one rule of the report and its verdict (nil when the result has none).
type ruleRow struct {
	id, name string
	typ      verdict.RuleType
	scores   []int
	verdict  *engine.Verdict
	// group, on a subtotal row, is the nested ruleset whose rules follow.
	group *verdict.GroupResult
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
	if !v.NotApplicable && r.typ != verdict.Boolean && r.typ != verdict.Numerical {
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
func outputText(typ verdict.RuleType, v *engine.Verdict) string {
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

// Evidence statuses, as the Evidence sheet's Status column shows them.
const (
	StatusSupports    = "supports"
	StatusAltered     = "ALTERED"
	StatusNotFound    = "NOT FOUND"
	StatusNotDocument = "not a document"
)

// evidenceStatus says whether a quote backs its verdict, and if not, why.
func evidenceStatus(e verdict.Evidence) string {
	switch {
	case e.Altered:
		return StatusAltered
	case e.Anchored:
		return StatusSupports
	case e.Match == verdict.MatchNotDocument:
		return StatusNotDocument
	}
	return StatusNotFound
}

// evidenceLines lists quotes one a line: "quote" — source, p. N, and says
// plainly when a quote was not found or the document says something else,
// as it shows a page the model cited wrongly beside the right one.
func evidenceLines(evs []verdict.Evidence) string {
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
func sourceLabel(e verdict.Evidence) string {
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
func pageCorrected(e verdict.Evidence) bool {
	return e.SourcePageNumber > 0 && e.CitedPageNumber > 0 && e.CitedPageNumber != e.SourcePageNumber
}

// differencesText says what an altered quote changed, one difference a line.
func differencesText(ds []verdict.Difference) string {
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
