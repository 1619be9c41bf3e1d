package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"rulevalidator/verdict"
)

// Problem reasons: why an answer (or one rule of it) was not accepted. They are
// low-cardinality and double as metric labels.
const (
	ReasonMalformedJSON     = "malformed_json"
	ReasonCodeFence         = "code_fence"
	ReasonMissingRule       = "missing_rule"
	ReasonDuplicateRule     = "duplicate_rule"
	ReasonUnknownRule       = "unknown_rule"
	ReasonMissingRuleID     = "missing_rule_id"
	ReasonMissingRationale  = "missing_rationale"
	ReasonMissingBoolean    = "missing_boolean_output"
	ReasonMissingScore      = "missing_numerical_output"
	ReasonScoreNotAllowed   = "score_not_allowed"
	ReasonWrongOutputType   = "wrong_output_type"
	ReasonEmptyResponse     = "empty_response"
	ReasonMalformedEvidence = "malformed_evidence"

	// Content reasons: the answer has the right shape but says nothing, or
	// cites what the documents do not say. When the budget runs out on these
	// alone, the best answer is kept with data_sufficiency false.
	ReasonPlaceholderRationale = "placeholder_rationale"
	ReasonPlaceholderEvidence  = "placeholder_evidence"
	ReasonUnanchoredQuote      = "unanchored_quote"
	ReasonAlteredEvidence      = "altered_evidence"
	ReasonUnsupportedVerdict   = "unsupported_verdict"
	// ReasonUnknownPassage: a citation names a passage id that was not shown.
	ReasonUnknownPassage = "unknown_passage"
	// ReasonUnfocusedEvidence: a quote much longer than the passage it
	// needs (a whole page, several sentences).
	ReasonUnfocusedEvidence = "unfocused_evidence"
)

// Problem is one thing wrong with a model answer. RuleID is empty when the
// problem concerns the answer as a whole.
type Problem struct {
	RuleID string
	Reason string
	// Detail is written for the model: what to correct, in the corrective
	// message.
	Detail string
	// Note is written for a person reading a verdict kept with this problem
	// (event, report, table); content problems carry one.
	Note string
}

func (p Problem) String() string {
	if p.RuleID == "" {
		return p.Detail
	}
	return "rule " + strconv.Quote(p.RuleID) + ": " + p.Detail
}

// rawAnswer mirrors the output contract with pointers, so that a missing field
// can be told apart from a zero value.
type rawAnswer struct {
	Rules []json.RawMessage `json:"rules"`
}

type rawRule struct {
	RuleID          *string         `json:"rule_id"`
	DataSufficiency *bool           `json:"data_sufficiency"`
	Rationale       *string         `json:"rationale"`
	BooleanOutput   json.RawMessage `json:"boolean_output"`
	NumericalOutput json.RawMessage `json:"numerical_output"`
	NotApplicable   *bool           `json:"not_applicable"`
	Evidences       []rawEvidence   `json:"evidences"`
	// PassageID is a citation written as the entry's own key, the form a
	// grammar server is held to in cite mode (GrammarSchema); it is read
	// as one more evidence.
	PassageID *string `json:"passage_id"`
}

type rawEvidence struct {
	PassageID        string          `json:"passage_id"`
	Quote            string          `json:"quote"`
	Text             string          `json:"text"`
	SourceOrigin     string          `json:"source_origin"`
	SourcePageNumber json.RawMessage `json:"source_page_number"`
}

// checkAnswer parses one model answer and checks it against the rules still
// pending. It returns the verdicts that passed every check and the problems
// found; pending rules with neither a verdict nor a problem of their own get a
// missing_rule problem.
func checkAnswer(content string, pending []Rule) (map[string]Verdict, []Problem) {
	entries, problems, missing := parseAnswer(content, pending)
	good := make(map[string]Verdict, len(entries))
	for _, e := range entries {
		v, ps := checkRule(e.rule, e.raw)
		if len(ps) > 0 {
			problems = append(problems, ps...)
			continue
		}
		good[e.rule.RuleID] = v
	}
	return good, append(problems, missing...)
}

// checkRationales parses the answer to a rationale-only re-ask (rationaleNote):
// the rationale each pending rule was given, trimmed, with the problems of
// shape found.
func checkRationales(content string, pending []Rule) (map[string]string, []Problem) {
	entries, problems, missing := parseAnswer(content, pending)
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		out[e.rule.RuleID] = ""
		if e.raw.Rationale != nil {
			out[e.rule.RuleID] = strings.TrimSpace(*e.raw.Rationale)
		}
	}
	return out, append(problems, missing...)
}

// isRuleEntry reports whether body is a JSON object with a key of a rule's
// entry and no "rules".
func isRuleEntry(body string) bool {
	var keys map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &keys) != nil {
		return false
	}
	if _, ok := keys["rules"]; ok {
		return false
	}
	for _, k := range []string{"rationale", "evidences", "passage_id", "boolean_output", "numerical_output", "data_sufficiency"} {
		if _, ok := keys[k]; ok {
			return true
		}
	}
	return false
}

// answeredRule is one pending rule's entry in an answer.
type answeredRule struct {
	rule Rule
	raw  rawRule
}

// parseAnswer reads the "rules" array of an answer: the entry of each pending
// rule answered exactly once, in the answer's order, the problems of shape
// (bad JSON, unknown or duplicate rules), and a missing_rule problem for
// each pending rule not answered.
func parseAnswer(content string, pending []Rule) (entries []answeredRule, problems, missing []Problem) {
	body, fenced := stripCodeFence(content)
	if strings.TrimSpace(body) == "" {
		return nil, []Problem{{Reason: ReasonEmptyResponse, Detail: "the answer was empty; answer with the JSON object"}}, nil
	}
	// A line break written raw inside a string is the commonest slip of small
	// models; read it as the escape it stands for instead of re-asking.
	body = EscapeStringControls(body)
	var ans rawAnswer
	dec := json.NewDecoder(strings.NewReader(body))
	if err := dec.Decode(&ans); err != nil {
		reason, detail := ReasonMalformedJSON, "the answer is not valid JSON ("+jsonErrorDetail(body, err)+")"
		if fenced {
			reason, detail = ReasonCodeFence, "the answer was wrapped in a code fence and its content is not valid JSON ("+jsonErrorDetail(body, err)+"); answer with bare JSON, no code fences"
		}
		return nil, []Problem{{Reason: reason, Detail: detail}}, nil
	}
	if dec.More() {
		return nil, []Problem{{Reason: ReasonMalformedJSON, Detail: "the answer has text after the JSON object; answer with exactly one JSON object"}}, nil
	}
	if ans.Rules == nil && len(pending) == 1 && isRuleEntry(body) {
		// The only rule asked for, its object alone: what GrammarSchema
		// asks of a grammar server.
		ans.Rules = []json.RawMessage{json.RawMessage(body)}
	}
	if ans.Rules == nil {
		return nil, []Problem{{Reason: ReasonMalformedJSON, Detail: `the answer has no "rules" array`}}, nil
	}

	byID := make(map[string]Rule, len(pending))
	for _, r := range pending {
		byID[r.RuleID] = r
	}
	seen := make(map[string]int, len(pending))
	for i, raw := range ans.Rules {
		var rr rawRule
		if err := json.Unmarshal(raw, &rr); err != nil {
			problems = append(problems, Problem{Reason: ReasonMalformedJSON, Detail: fmt.Sprintf("rules[%d] is not an object of the expected shape (%v)", i, err)})
			continue
		}
		if rr.PassageID != nil {
			rr.Evidences = append(rr.Evidences, rawEvidence{PassageID: *rr.PassageID})
		}
		if rr.RuleID == nil && len(pending) == 1 && len(ans.Rules) == 1 {
			// The only rule asked for: a grammar server is not made to
			// write its id (GrammarSchema).
			rr.RuleID = &pending[0].RuleID
		}
		if rr.RuleID == nil || strings.TrimSpace(*rr.RuleID) == "" {
			problems = append(problems, Problem{Reason: ReasonMissingRuleID, Detail: fmt.Sprintf("rules[%d] has no rule_id", i)})
			continue
		}
		id := *rr.RuleID
		rule, ok := byID[id]
		if !ok {
			problems = append(problems, Problem{Reason: ReasonUnknownRule, Detail: fmt.Sprintf("rules[%d] has rule_id %q, which is not one of the rules asked for (%s)", i, id, ruleIDList(pending))})
			continue
		}
		seen[id]++
		if seen[id] == 2 {
			problems = append(problems, Problem{RuleID: id, Reason: ReasonDuplicateRule, Detail: "answered more than once; give exactly one entry per rule"})
		}
		if seen[id] > 1 {
			continue
		}
		entries = append(entries, answeredRule{rule, rr})
	}
	// A rule answered twice has no entry: neither answer is taken.
	entries = slices.DeleteFunc(entries, func(e answeredRule) bool { return seen[e.rule.RuleID] > 1 })
	for _, r := range pending {
		if seen[r.RuleID] == 0 {
			missing = append(missing, Problem{RuleID: r.RuleID, Reason: ReasonMissingRule, Detail: "no answer was given for this rule"})
		}
	}
	return entries, problems, missing
}

// checkRule turns one answered rule into a verdict, or says what is wrong.
func checkRule(rule Rule, rr rawRule) (Verdict, []Problem) {
	var problems []Problem
	add := func(reason, format string, args ...any) {
		problems = append(problems, Problem{RuleID: rule.RuleID, Reason: reason, Detail: fmt.Sprintf(format, args...)})
	}
	v := Verdict{
		RuleID:          rule.RuleID,
		Name:            rule.Name,
		Type:            rule.Type,
		DataSufficiency: rr.DataSufficiency == nil || *rr.DataSufficiency,
		NotApplicable:   rr.NotApplicable != nil && *rr.NotApplicable,
		Evidences:       []verdict.Evidence{},
	}
	// A missing rationale is a content problem (checkContent): the verdict
	// itself may stand, kept with a note, when re-asking does not help.
	if rr.Rationale != nil {
		v.Rationale = strings.TrimSpace(*rr.Rationale)
	}
	// A rule that does not apply and has no alternate has nothing to judge; a
	// numerical rule without sufficient data has no score to give.
	outputOptional := v.NotApplicable && rule.NotApplicableText == ""
	switch rule.Type {
	case verdict.Numerical:
		if !isAbsent(rr.BooleanOutput) && isAbsent(rr.NumericalOutput) {
			add(ReasonWrongOutputType, "this is a numerical rule: give numerical_output (one of %s), not boolean_output", joinInts(rule.AllowedScores()))
			break
		}
		if isAbsent(rr.NumericalOutput) {
			if !outputOptional && v.DataSufficiency {
				add(ReasonMissingScore, "numerical_output is missing; give one of %s", joinInts(rule.AllowedScores()))
			}
			break
		}
		score, ok := parseScore(rr.NumericalOutput)
		if !ok {
			add(ReasonScoreNotAllowed, "numerical_output %s is not an integer; give one of %s", string(rr.NumericalOutput), joinInts(rule.AllowedScores()))
			break
		}
		if !slices.Contains(rule.AllowedScores(), score) {
			add(ReasonScoreNotAllowed, "numerical_output %d is not one of the allowed scores %s", score, joinInts(rule.AllowedScores()))
			break
		}
		v.NumericalOutput = &score
	default:
		if isAbsent(rr.BooleanOutput) {
			if !outputOptional {
				if !isAbsent(rr.NumericalOutput) {
					add(ReasonWrongOutputType, "this is a boolean rule: give boolean_output (true or false), not numerical_output")
				} else {
					add(ReasonMissingBoolean, "boolean_output is missing; give true or false")
				}
			}
			break
		}
		var b bool
		if err := json.Unmarshal(rr.BooleanOutput, &b); err != nil {
			add(ReasonMissingBoolean, "boolean_output %s is not true or false", string(rr.BooleanOutput))
			break
		}
		v.BooleanOutput = &b
	}
	for _, e := range rr.Evidences {
		// A citation names a passage id, with the words inside it as quote;
		// a quote gives the words as text. Either form is read in either
		// mode: the schema asks for one, a model may write the other.
		id := strings.TrimSpace(e.PassageID)
		text := strings.TrimSpace(e.Text)
		if text == "" {
			text = strings.TrimSpace(e.Quote)
		}
		if id == "" && text == "" {
			continue // an empty quote supports nothing; drop it rather than re-ask
		}
		page, _ := parseScore(e.SourcePageNumber)
		v.Evidences = append(v.Evidences, verdict.Evidence{PassageID: id, Text: text, SourceOrigin: strings.TrimSpace(e.SourceOrigin), SourcePageNumber: max(page, 0)})
	}
	return v, problems
}

// isAbsent reports whether a raw JSON field was missing or null.
func isAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// parseScore reads an integer given as a JSON number (3 or 3.0) or a numeric
// string ("3"), which small models often produce.
func parseScore(raw json.RawMessage) (int, bool) {
	if isAbsent(raw) {
		return 0, false
	}
	s := strings.TrimSpace(string(raw))
	if unq, err := strconv.Unquote(s); err == nil {
		s = strings.TrimSpace(unq)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f != math.Trunc(f) || math.Abs(f) > 1e9 {
		return 0, false
	}
	return int(f), true
}

// stripCodeFence removes one surrounding Markdown code fence (```json … ```).
func stripCodeFence(s string) (string, bool) {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "```") {
		return s, false
	}
	t = strings.TrimPrefix(t, "```")
	if nl := strings.IndexByte(t, '\n'); nl >= 0 {
		t = t[nl+1:] // drop the info string, e.g. "json"
	} else {
		t = ""
	}
	t = strings.TrimSpace(t)
	t = strings.TrimSuffix(t, "```")
	return t, true
}

// jsonErrorDetail says where JSON parsing failed, with the byte offset.
func jsonErrorDetail(body string, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v at byte offset %d", se, se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Sprintf("unexpected end of input after %d bytes", len(body))
	}
	return err.Error()
}

func ruleIDList(rules []Rule) string {
	ids := make([]string, len(rules))
	for i, r := range rules {
		ids[i] = strconv.Quote(r.RuleID)
	}
	return strings.Join(ids, ", ")
}

// EscapeStringControls escapes the raw control characters (U+0000 to U+001F)
// that stand inside the string literals of a JSON text, which JSON forbids
// and small models write (a line break inside a rationale or a quote): the
// lenient reading of Python's json.loads(strict=False). Nothing else is
// touched, so a valid JSON text comes back unchanged, and what the strings
// say does not change.
func EscapeStringControls(s string) string {
	var b strings.Builder
	changed, inString, escaped := false, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString && !escaped && c < 0x20 {
			if !changed {
				changed = true
				b.Grow(len(s) + 16)
				b.WriteString(s[:i])
			}
			switch c {
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			default:
				fmt.Fprintf(&b, `\u%04x`, c)
			}
			continue
		}
		switch {
		case !inString:
			inString = c == '"'
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			inString = false
		}
		if changed {
			b.WriteByte(c)
		}
	}
	if !changed {
		return s
	}
	return b.String()
}
