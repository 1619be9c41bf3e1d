package engine

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"rulevalidator/verdict"
)

// ConfidenceSource is where a verdict's confidence comes from.
type ConfidenceSource string

const (
	// ConfidenceLogProbs reads it from the log-probabilities the server
	// gives for the answer's tokens: the probability of the value the
	// model chose among the values it could have written. A server that
	// gives none leaves it absent.
	ConfidenceLogProbs ConfidenceSource = "logprobs"
	// ConfidenceSamples asks the judging call's question again, at a
	// sampling temperature, and makes the confidence the share of the
	// answers (the verdict's own among them) that give the verdict's value:
	// the self-consistency of the model, for servers that give no
	// log-probabilities, or models whose probabilities say little. It
	// costs ConfidenceSamples-1 more calls per judging call.
	ConfidenceSamples ConfidenceSource = "samples"
	// ConfidenceVerify asks, for each judged verdict, a short question of
	// its own: whether the passages the verdict cites show its value (the
	// rule met or not, the score, the rule not applying). The confidence is
	// the probability the server's log-probabilities give the answer that
	// agrees with the verdict; a server that gives none leaves it absent.
	// It costs a call per verdict, of the rule and the cited passages
	// alone: a check the model makes on a few sentences, not the verdict's
	// own last token, which follows a rationale that already says it.
	ConfidenceVerify ConfidenceSource = "verify"
	// ConfidenceOff asks for nothing and leaves every confidence absent.
	ConfidenceOff ConfidenceSource = "off"
)

func (c ConfidenceSource) validate() error {
	switch c {
	case ConfidenceLogProbs, ConfidenceSamples, ConfidenceVerify, ConfidenceOff:
		return nil
	}
	return fmt.Errorf("engine: Confidence %q is not one of logprobs, samples, verify, off", c)
}

// valueKey finds where a verdict's value starts in an answer: after its
// "boolean_output" or "numerical_output" key. A key inside a string is
// escaped (\"), so it is not matched.
var valueKey = regexp.MustCompile(`"(boolean_output|numerical_output)"\s*:\s*`)

// ruleIDKey finds an entry's rule id in an answer.
var ruleIDKey = regexp.MustCompile(`"rule_id"\s*:\s*"((?:[^"\\]|\\.)*)"`)

// valueConfidences reads, from an answer and its tokens, how sure the model
// was of each rule's verdict value: the probability of the token that
// starts the value, over the probabilities of the alternatives at that
// place that would have started an allowed value (true or false; an
// allowed score). Servers report probabilities before any grammar masks
// the vocabulary, so the alternatives the answer could not have taken are
// left out. A rule whose value is not found, or whose token carries no
// probabilities, has none. pending are the rules the answer was asked
// for; an answer to one rule may name none.
func valueConfidences(content string, tokens []TokenLogProb, pending []Rule) map[string]float64 {
	if len(tokens) == 0 || len(pending) == 0 {
		return nil
	}
	byID := make(map[string]Rule, len(pending))
	for _, r := range pending {
		byID[r.RuleID] = r
	}
	objects := objectSpans(content)
	out := map[string]float64{}
	for _, m := range valueKey.FindAllStringSubmatchIndex(content, -1) {
		at := m[1]
		rule, ok := ruleOf(content, objects, at, byID, pending)
		if !ok {
			continue
		}
		if _, seen := out[rule.RuleID]; seen {
			continue // answered twice: the answer is re-asked anyway
		}
		if p, ok := tokenConfidence(tokens, at, rule); ok {
			out[rule.RuleID] = p
		}
	}
	return out
}

// ruleOf is the rule whose entry holds the value at offset at: the rule id
// written in the innermost object around it, wherever the server put its
// keys, or the lone pending rule of an answer that names none.
func ruleOf(content string, objects [][2]int, at int, byID map[string]Rule, pending []Rule) (Rule, bool) {
	span := [2]int{0, len(content)}
	for _, o := range objects {
		if o[0] <= at && at < o[1] && o[1]-o[0] <= span[1]-span[0] {
			span = o
		}
	}
	m := ruleIDKey.FindStringSubmatch(content[span[0]:span[1]])
	if m == nil {
		if len(pending) == 1 {
			return pending[0], true
		}
		return Rule{}, false
	}
	id, err := strconv.Unquote(`"` + m[1] + `"`)
	if err != nil {
		return Rule{}, false
	}
	r, ok := byID[id]
	return r, ok
}

// objectSpans are the byte spans of the JSON objects of content, outside
// strings, as [start, end).
func objectSpans(content string) [][2]int {
	var spans [][2]int
	var open []int
	inString, escaped := false, false
	for i := 0; i < len(content); i++ {
		c := content[i]
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{':
			open = append(open, i)
		case c == '}' && len(open) > 0:
			spans = append(spans, [2]int{open[len(open)-1], i + 1})
			open = open[:len(open)-1]
		}
	}
	return spans
}

// tokenConfidence is the confidence of the value starting at byte offset at
// of the answer the tokens spell.
func tokenConfidence(tokens []TokenLogProb, at int, rule Rule) (float64, bool) {
	chosen, alts, ok := alternativesAt(tokens, at)
	if !ok || !startsValue(rule, chosen.Text) {
		return 0, false
	}
	allowed := func(text string) bool { return startsValue(rule, text) }
	written := func(text string) bool { return text == chosen.Text }
	return probabilityShare(chosen, alts, allowed, written)
}

// probabilityShare is, among the chosen token and its alternatives (each
// counted once) that allowed takes, the share of the probability held by
// those that agree takes.
func probabilityShare(chosen TokenAlternative, alts []TokenAlternative, allowed, agree func(text string) bool) (float64, bool) {
	var total, agreeing float64
	for i, a := range append([]TokenAlternative{chosen}, alts...) {
		if (i > 0 && a.Text == chosen.Text) || !allowed(a.Text) {
			continue
		}
		p := math.Exp(a.LogProb)
		total += p
		if agree(a.Text) {
			agreeing += p
		}
	}
	if total <= 0 || math.IsNaN(total) {
		return 0, false
	}
	return min(agreeing/total, 1), true
}

// alternativesAt is what the model wrote where byte offset at of the
// answer the tokens spell falls, and what it could have written there: the
// token holding that offset and the server's alternatives to it, each with
// what precedes the offset in that token (a space, a colon the tokenizer
// joined to it) cut off. An alternative that does not begin with those
// bytes is left out: it would not have put a value there.
func alternativesAt(tokens []TokenLogProb, at int) (TokenAlternative, []TokenAlternative, bool) {
	pos := 0
	for _, t := range tokens {
		end := pos + len(t.Text)
		if at >= end {
			pos = end
			continue
		}
		lead := t.Text[:at-pos]
		alts := make([]TokenAlternative, 0, len(t.Top))
		for _, alt := range t.Top {
			if rest, ok := strings.CutPrefix(alt.Text, lead); ok {
				alts = append(alts, TokenAlternative{Text: rest, LogProb: alt.LogProb})
			}
		}
		return TokenAlternative{Text: t.Text[at-pos:], LogProb: t.LogProb}, alts, true
	}
	return TokenAlternative{}, nil, false
}

// startsValue reports whether a token's text, from where the value starts,
// begins a value the rule allows: a boolean, or one of its scores.
func startsValue(rule Rule, s string) bool {
	s = strings.TrimLeft(s, " \t\n\"")
	if s == "" {
		return false
	}
	if rule.Type != verdict.Numerical {
		return startsAlike(s, "true") || startsAlike(s, "false")
	}
	n := 0
	if s[0] == '-' {
		n = 1
	}
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	digits := s[:n]
	if digits == "" || digits == "-" {
		return false
	}
	for _, score := range rule.AllowedScores() {
		if strings.HasPrefix(strconv.Itoa(score), digits) {
			return true
		}
	}
	return false
}
