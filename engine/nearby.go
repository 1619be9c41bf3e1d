package engine

import (
	"slices"
	"strings"

	"rulevalidator/engine/plan"
)

// MaxNearestPassages is the most passages Config.NearestPassages shows
// after a rule: a few clauses to read first, not a second material.
const MaxNearestPassages = 10

// nearRule picks, among the document passages a call shows (shown, its
// ids), the k whose words are nearest rule's text and alternate (the
// planner's BM25), in the material's order. A small model that reads
// the rule last, after a long material, judges it by the rule's own words
// ("the agreement states that disputes are taken to arbitration"); shown
// the clauses that speak of it right after the rule, it judges and cites
// them (docs/measurements/2026-12-local-model-nearest-passages.md).
func nearRule(ps *passageSet, shown []string, rule Rule, k int) []passage {
	var candidates []passage
	for _, id := range shown {
		if p, ok := ps.lookup(id); ok && p.doc >= 0 {
			candidates = append(candidates, p)
		}
	}
	texts := make([]string, len(candidates))
	for i, p := range candidates {
		texts[i] = p.text
	}
	best := plan.Nearest(rule.RuleText+"\n"+rule.NotApplicableText, texts, k)
	slices.Sort(best) // the material's order
	out := make([]passage, len(best))
	for i, j := range best {
		out[i] = candidates[j]
	}
	return out
}

// rulesPromptFor is RulesPrompt(rules) for a call on m: with
// Config.NearestPassages set, a call of one rule on the whole material in
// cite mode shows the rule's nearest passages after it. An excerpt of a
// long document is already the passages nearest its rules, and the plan
// keeps no room for more.
func (e *Engine) rulesPromptFor(rules []Rule, m material, an *anchoring) string {
	text := RulesPrompt(rules)
	if k := e.cfg.NearestPassages; k > 0 && len(rules) == 1 && m.whole && e.cfg.Evidence == EvidenceCite {
		text += nearRulePrompt(an.in, nearRule(an.passages(), m.ids, rules[0], k))
	}
	return text
}

// nearRulePrompt shows near (nearRule's passages) after a call's rule,
// under the name and role of each document they come from, each behind its
// id and shortened as a correction shows a passage (shown): the material
// holds it whole. "" when there are none.
func nearRulePrompt(in *Inputs, near []passage) string {
	if len(near) == 0 {
		return ""
	}
	docs := in.Documents()
	var b strings.Builder
	b.WriteString("   " + nearHeading + "\n")
	doc := -1
	for _, p := range near {
		if p.doc != doc {
			doc = p.doc
			role := "auxiliary"
			if doc < len(in.PrimaryDocs) {
				role = "primary"
			}
			b.WriteString("   in " + markerName(docs[doc].Name) + " (" + role + " document):\n")
		}
		b.WriteString("   [" + p.id + "] " + shown(p.text) + "\n")
	}
	return b.String()
}

// nearAllowance is the tokens nearRulePrompt is planned to take for k
// passages in mode: its heading, a line for each of two documents and k
// passages as long as shown makes them; none outside cite mode.
func nearAllowance(b budget, mode EvidenceMode, k int) int {
	if mode != EvidenceCite || k == 0 {
		return 0
	}
	line := "   in " + strings.Repeat("x", 40) + " (auxiliary document):\n"
	passage := "   [d99p999s99] \"" + strings.Repeat("word ", shownRunes/5) + "\"\n"
	return b.tokens("   " + nearHeading + "\n" + line + line + strings.Repeat(passage, k))
}

// nearHeading opens the passages shown again after a rule.
const nearHeading = "the passages whose words are nearest the rule's, to read first (others may bear on it too):"
