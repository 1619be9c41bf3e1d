package eval

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"rulevalidator/engine"
)

// RestatingShare is the share of a rationale's words that, once reached,
// make it a restatement of the rule: a rationale that is mostly the rule's
// own words says nothing about the material.
const RestatingShare = 0.8

// words splits s into its words, lower-cased: the runs of letters and
// digits ("Party's" is "party" and "s").
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// ruleWords is the set of the words of a rule's text and of its
// not-applicable text.
func ruleWords(r engine.Rule) map[string]bool {
	set := map[string]bool{}
	for _, w := range words(r.RuleText + " " + r.NotApplicableText) {
		set[w] = true
	}
	return set
}

// restatesRule says at least RestatingShare of the rationale's words (each
// occurrence counted) are words of the rule. A rationale with no words
// restates nothing.
func restatesRule(rationale string, rule map[string]bool) bool {
	ws := words(rationale)
	if len(ws) == 0 {
		return false
	}
	in := 0
	for _, w := range ws {
		if rule[w] {
			in++
		}
	}
	return float64(in) >= RestatingShare*float64(len(ws))
}

// endsSentence says the text ends with a full stop, a question mark or an
// exclamation mark, closing quotes and brackets after it aside.
func endsSentence(s string) bool {
	s = strings.TrimRightFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune(`"')]}»”’`, r)
	})
	r, _ := utf8.DecodeLastRuneInString(s)
	return r == '.' || r == '!' || r == '?' || r == '…'
}
