package main

import (
	"fmt"
	"strconv"
	"strings"

	"rulevalidator/verdict"
)

// groupResult says a nested ruleset's result in a few words: "FAILED 1/2",
// "3.50 over 2", "N/A", with "gate" and the gates that failed it.
func groupResult(g verdict.GroupResult) string {
	if g.NotApplicable {
		return "N/A"
	}
	var parts []string
	if b := g.Aggregate.Boolean; b != nil {
		verdict := "FAILED"
		if b.Passed {
			verdict = "PASSED"
		}
		parts = append(parts, fmt.Sprintf("%s %d/%d", verdict, b.PassedCount, b.Applicable))
	}
	if n := g.Aggregate.Numerical; n != nil {
		score := "no score"
		if n.Score != nil {
			score = strconv.FormatFloat(*n.Score, 'f', 2, 64)
		}
		parts = append(parts, fmt.Sprintf("%s %s over %d", n.Mode, score, n.Counted))
	}
	if len(g.GatedBy) > 0 {
		parts = append(parts, "failed by the gate "+strings.Join(g.GatedBy, ", "))
	}
	return strings.Join(parts, ", ")
}

// groupLabel is a group's path, marked when it is a gate.
func groupLabel(g verdict.GroupResult) string {
	if g.Required {
		return g.Path + " (gate)"
	}
	return g.Path
}

// decidedWithoutModel says how many rules no model was asked about, or "".
func decidedWithoutModel(u verdict.Usage) string {
	if u.RulesFiltered == 0 && u.RulesChecked == 0 {
		return ""
	}
	return fmt.Sprintf("%d rule(s) left out by filters, %d judged by their check, without the model", u.RulesFiltered, u.RulesChecked)
}
