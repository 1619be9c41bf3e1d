package engine

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"rulevalidator/verdict"
)

// minRationaleWords is the fewest words a rationale may have: "C-11" or
// "Yes." explains nothing.
const minRationaleWords = 3

// placeholders are what models write when they have nothing to say, compared
// after folding case and trimming punctuation.
var placeholders = map[string]bool{
	"none": true, "n/a": true, "na": true, "n.a": true, "null": true, "nil": true, "nothing": true,
	"tbd": true, "todo": true, "unknown": true, "not available": true, "no evidence": true,
	"none found": true, "no rationale": true, "rationale": true, "evidence": true, "text": true,
	"quote": true, "source": true, "document": true, "placeholder": true, "lorem ipsum": true,
}

// isPlaceholder reports whether s stands for nothing: blank, punctuation or
// symbols only ("...", "-"), or one of the placeholder words.
func isPlaceholder(s string) bool {
	t := strings.ToLower(strings.TrimSpace(s))
	if !strings.ContainsFunc(t, isWordRune) {
		return true
	}
	t = strings.TrimFunc(t, func(r rune) bool { return !isWordRune(r) })
	return placeholders[t]
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// words splits s into its words, lower-cased, punctuation dropped.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !isWordRune(r) && r != '\'' })
}

// rationaleProblem says why a rationale explains nothing, or "" when it may.
func rationaleProblem(rule Rule, rationale string) string {
	if isPlaceholder(rationale) {
		return "is a placeholder"
	}
	w := words(rationale)
	// A copy of the rule, or of its start (a grammar server cuts a long
	// copy at the rationale's bound), explains nothing.
	copies := func(text string) bool {
		t := words(text)
		return len(t) > 0 && (slices.Equal(w, t) || len(w) >= minRationaleWords && len(w) < len(t) && slices.Equal(w, t[:len(w)]))
	}
	if copies(rule.RuleText) || slices.Equal(w, words(rule.RuleID)) ||
		(rule.NotApplicableText != "" && copies(rule.NotApplicableText)) {
		return "repeats the rule instead of explaining the verdict"
	}
	if explainingWords(w) < minRationaleWords {
		return fmt.Sprintf("has fewer than %d distinct words", minRationaleWords)
	}
	if !unspaced(rationale) && len(strings.Fields(rationale)) < minRationaleWords {
		return "is an identifier, not a sentence"
	}
	if contentWords(w) < minContentWords {
		return "says nothing about the material"
	}
	if copiesPrompt(w) {
		return "copies the instructions instead of explaining the verdict"
	}
	return ""
}

// A rationale copies the instructions when most of its words (copiedShare)
// lie in runs of three or more that the prompt's own English holds: the
// local model answered "one or two plain-English sentences of your own that
// state …" and "the material does not hold enough information to judge the
// rule". "The rule does not apply because the agreement names no term" has
// such a run too, but not most of its words.
const copiedShare = 0.6

// promptTrigrams is every run of three words in the fixed English of the
// prompts: the output contracts, the rules' heading and the rationale-only
// re-ask.
var promptTrigrams = sync.OnceValue(func() map[[3]string]bool {
	runs := map[[3]string]bool{}
	for _, text := range []string{outputContract(EvidenceCite), outputContract(EvidenceQuote), rulesHeading, rationaleInstruction} {
		w := words(text)
		for i := 0; i+3 <= len(w); i++ {
			runs[[3]string(w[i:i+3])] = true
		}
	}
	return runs
})

// copiesPrompt reports whether most of a rationale's words are copied from
// the prompt's own English.
func copiesPrompt(w []string) bool {
	if len(w) < 3 {
		return false
	}
	covered := make([]bool, len(w))
	for i := 0; i+3 <= len(w); i++ {
		if promptTrigrams()[[3]string(w[i:i+3])] {
			covered[i], covered[i+1], covered[i+2] = true, true, true
		}
	}
	n := 0
	for _, c := range covered {
		if c {
			n++
		}
	}
	return float64(n) >= copiedShare*float64(len(w))
}

// minContentWords is the fewest words of a rationale that say something of
// the material rather than of the answer: "Liability is limited." has two.
const minContentWords = 2

// fillerWords are the English words a rationale can be made of without
// saying anything of the material: "the evidence shows it", "it is not
// true", "False, no rules". Another language's rationale loses none.
var fillerWords = map[string]bool{
	"the": true, "a": true, "an": true, "it": true, "its": true, "it's": true, "is": true, "are": true, "was": true, "were": true,
	"be": true, "been": true, "this": true, "that": true, "these": true, "those": true, "there": true, "here": true,
	"not": true, "no": true, "yes": true, "true": true, "false": true, "and": true, "or": true, "but": true, "so": true,
	"of": true, "to": true, "in": true, "on": true, "for": true, "by": true, "with": true, "as": true, "at": true, "from": true,
	"does": true, "do": true, "has": true, "have": true, "can": true, "will": true,
	"evidence": true, "show": true, "shows": true, "rule": true, "rules": true, "material": true, "passage": true,
	"applicable": true, "apply": true, "applies": true, "met": true, "satisfied": true, "verdict": true, "reason": true,
	"pass": true, "passes": true, "fail": true, "fails": true, "valid": true, "correct": true, "because": true,
}

// contentWords counts the distinct explaining words of w that are not filler.
func contentWords(w []string) int {
	var rest []string
	for _, word := range w {
		if !fillerWords[word] {
			rest = append(rest, word)
		}
	}
	return explainingWords(rest)
}

// unspaced reports whether s holds letters of a script written without
// spaces, whose sentences strings.Fields does not split.
func unspaced(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar)
	})
}

// rationaleProblem is the package's rationaleProblem, and a rationale that
// only copies a named input, the text input or the message ("Northwind
// Analytics Ltd", "The supplier under review") says nothing of the verdict
// either.
func (a *anchoring) rationaleProblem(rule Rule, rationale string) string {
	if why := rationaleProblem(rule, rationale); why != "" {
		return why
	}
	if a.in == nil {
		return ""
	}
	w := words(rationale)
	copies := func(s string) bool { return s != "" && slices.Equal(w, words(s)) }
	for _, n := range a.in.NamedInputs {
		if copies(renderValue(n.Value)) || copies(n.Description) {
			return "copies the named input " + strconv.Quote(n.Name) + " instead of explaining the verdict"
		}
	}
	if copies(a.in.TextInput) || copies(a.in.Message) {
		return "copies the request's text instead of explaining the verdict"
	}
	return ""
}

// explainingWords counts the distinct words of w that can say something:
// two letters or more and not a placeholder, so "n/a, n/a, n/a" and
// "1, 2, 3 (0-5)" explain nothing. A word of a script written without
// spaces (Chinese, Japanese, Thai) counts one for every two letters.
func explainingWords(w []string) int {
	seen := make(map[string]bool, len(w))
	n := 0
	for _, word := range w {
		letters := 0
		for _, r := range word {
			if unicode.IsLetter(r) {
				letters++
			}
		}
		if letters < 2 || placeholders[word] || seen[word] {
			continue
		}
		seen[word] = true
		if unspaced(word) {
			n += letters / 2
		} else {
			n++
		}
	}
	return n
}

// checkContent anchors v's evidence in place and says what is wrong with
// what the verdict says, as opposed to its shape: a rationale or evidence
// that says nothing, a quote found in no document or contradicting the
// document, a verdict claiming support that no evidence gives.
func (a *anchoring) checkContent(rule Rule, v *Verdict) ([]Problem, error) {
	var problems []Problem
	add := func(reason, note, format string, args ...any) {
		problems = append(problems, Problem{RuleID: rule.RuleID, Reason: reason, Note: note, Detail: fmt.Sprintf(format, args...)})
	}
	supported := false
	taken := make(map[string]bool, len(v.Evidences)) // a citation resolved by the rationale is not moved onto another
	for _, ev := range v.Evidences {
		if ev.PassageID != "" {
			taken[ev.PassageID] = true
		}
	}
	for i := range v.Evidences {
		ev := &v.Evidences[i]
		if ev.PassageID != "" {
			if !a.cite(ev, rule, v.Rationale, taken) {
				ev.QuotedText, ev.Anchored, ev.Match = ev.Text, false, verdict.MatchNone
				add(ReasonUnknownPassage, "the model cited a passage that is not in the material ("+clip(ev.PassageID)+")",
					"the evidence cites passage_id %s, which is not an id shown in the material; cite the id in square brackets before the passage, or give no evidence", clip(ev.PassageID))
				continue
			}
			taken[ev.PassageID] = true
			if a.supports(*ev) {
				supported = true
			}
			continue
		}
		if isPlaceholder(ev.Text) {
			ev.QuotedText, ev.Anchored, ev.Match = ev.Text, false, verdict.MatchNone
			add(ReasonPlaceholderEvidence, "the model's evidence is a placeholder ("+clip(ev.Text)+"), not a passage of the material",
				"the evidence %s is a placeholder, not a quote; quote the material exactly, or give no evidence", clip(ev.Text))
			continue
		}
		if err := a.anchor(ev); err != nil {
			return nil, err
		}
		switch {
		case ev.Match == verdict.MatchNone && isPlaceholder(ev.SourceOrigin):
			add(ReasonPlaceholderEvidence, "the model's quote "+clip(ev.Text)+" names no source and is not in the documents",
				"the evidence %s cites the source %s, which names nothing; give the document's name exactly as its marker shows it", clip(ev.Text), clip(ev.SourceOrigin))
		case ev.Match == verdict.MatchNone:
			add(ReasonUnanchoredQuote, "the model's quote "+clip(ev.Text)+" is not in "+a.where(ev.SourceOrigin),
				"your quote %s was not found in %s — quote the document exactly, or give no evidence", clip(ev.Text), a.where(ev.SourceOrigin))
		case ev.Altered:
			add(ReasonAlteredEvidence, "the model's quote "+clip(ev.QuotedText)+" does not say what the document says ("+describeDifferences(ev.Differences)+")",
				"your quote %s does not say what the document says: %s — quote the document exactly, and judge by what it says", clip(ev.QuotedText), describeDifferences(ev.Differences))
		}
		if a.unfocused(*ev) {
			add(ReasonUnfocusedEvidence, "the model's quote runs over "+strconv.Itoa(*ev.EndOffset-*ev.StartOffset)+" characters of "+strconv.Quote(ev.SourceOrigin)+" instead of the passage that shows the verdict",
				"your quote %s covers %d characters, several sentences; quote only the sentence that shows the verdict", clip(ev.QuotedText), *ev.EndOffset-*ev.StartOffset)
			continue
		}
		if a.supports(*ev) {
			supported = true
		}
	}
	// The rationale is checked after the evidence so that a re-ask can show
	// the model the passage it cited.
	evidenceProblems := problems
	problems = nil // the rationale's problem is named first, as the reader reads it
	if p, ok := a.checkRationale(rule, v.Rationale, citedPassage(*v)); !ok {
		problems = append(problems, p)
	}
	problems = append(problems, evidenceProblems...)
	if a.hasDocuments() && !supported && claimsSupport(rule, *v) {
		claim := "boolean_output is true"
		if v.NumericalOutput != nil {
			claim = "numerical_output " + strconv.Itoa(*v.NumericalOutput) + " is above the lowest score"
		}
		add(ReasonUnsupportedVerdict, "no evidence found in the material supports the verdict",
			"%s but no evidence found in the material supports it — quote the passage it rests on, or reconsider the verdict", claim)
	}
	return problems, nil
}

// checkRationale says what is wrong with a verdict's rationale, as a problem,
// or reports true when it may stand. cited is the passage the verdict cites
// ("[id] text"), or "": a small model asked to explain "the material" writes
// a placeholder again, asked about one sentence it can say what the sentence
// shows.
func (a *anchoring) checkRationale(rule Rule, rationale, cited string) (Problem, bool) {
	explain := "explain the verdict in one to three sentences about the material"
	if cited != "" {
		explain = "you cited " + cited + "; say in one or two sentences what that passage shows and why it decides the rule"
	}
	if rationale == "" {
		return Problem{RuleID: rule.RuleID, Reason: ReasonMissingRationale, Note: "the model gave no rationale",
			Detail: "rationale is missing or empty; " + explain}, false
	}
	if why := a.rationaleProblem(rule, rationale); why != "" {
		return Problem{RuleID: rule.RuleID, Reason: ReasonPlaceholderRationale,
			Note:   "the model gave no rationale that explains the verdict (it wrote " + clip(rationale) + ")",
			Detail: "the rationale " + clip(rationale) + " " + why + "; " + explain}, false
	}
	return Problem{}, true
}

// citedPassage is the first passage v's resolved evidence cites, as the
// model is shown it ("[d1p2s3] \"text\"", or a quote with its page), or "".
func citedPassage(v Verdict) string {
	for _, ev := range v.Evidences {
		switch {
		case ev.Match == verdict.MatchNone || ev.Match == "":
		case ev.PassageID != "":
			return "[" + ev.PassageID + "] " + shown(ev.Text)
		case ev.Match == verdict.MatchNotDocument:
			return shown(ev.Text) + " (" + strconv.Quote(ev.SourceOrigin) + ")"
		default:
			return shown(ev.Text) + " (page " + strconv.Itoa(ev.SourcePageNumber) + " of " + strconv.Quote(ev.SourceOrigin) + ")"
		}
	}
	return ""
}

// onlyRationale reports whether every problem is the rationale's: the
// verdict and its evidence passed.
func onlyRationale(problems []Problem) bool {
	for _, p := range problems {
		if p.Reason != ReasonMissingRationale && p.Reason != ReasonPlaceholderRationale {
			return false
		}
	}
	return len(problems) > 0
}

// claimsSupport reports whether v says the material satisfies the rule: a
// boolean true, or a score above the lowest allowed. A verdict that does not
// apply, or that says the data are insufficient, claims nothing.
func claimsSupport(rule Rule, v Verdict) bool {
	if v.NotApplicable || !v.DataSufficiency {
		return false
	}
	if v.BooleanOutput != nil {
		return *v.BooleanOutput
	}
	if v.NumericalOutput != nil {
		if allowed := rule.AllowedScores(); len(allowed) > 0 {
			return *v.NumericalOutput > slices.Min(allowed)
		}
	}
	return false
}

// where names what a quote citing origin was searched in.
func (a *anchoring) where(origin string) string {
	names := make([]string, 0, len(a.docs))
	for _, d := range a.docs {
		if foldOrigin(d.Name) == foldOrigin(origin) {
			return strconv.Quote(d.Name)
		}
		names = append(names, strconv.Quote(d.Name))
	}
	return "any supplied document (" + strings.Join(names, ", ") + ")"
}

func describeDifferences(ds []verdict.Difference) string {
	parts := make([]string, 0, len(ds))
	for _, d := range ds {
		switch {
		case d.Quote == "":
			parts = append(parts, fmt.Sprintf("the document says %s (%s) where the quote does not", strconv.Quote(d.Document), d.Kind))
		case d.Document == "":
			parts = append(parts, fmt.Sprintf("the quote says %s (%s) where the document does not", strconv.Quote(d.Quote), d.Kind))
		default:
			parts = append(parts, fmt.Sprintf("the quote says %s where the document says %s (%s)", strconv.Quote(d.Quote), strconv.Quote(d.Document), d.Kind))
		}
	}
	if len(parts) == 0 {
		return "the document's words differ"
	}
	return strings.Join(parts, "; ")
}

// shownRunes is the most characters shown keeps of a passage.
const shownRunes = 240

// shown is a passage as the model reads it in the material, on one line
// and in quotes, shortened like clip: not as a Go string with escapes.
func shown(s string) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > shownRunes {
		s = string(r[:shownRunes]) + "…"
	}
	return "\"" + s + "\""
}

// clip quotes s for a message to the model, shortened to a readable length.
func clip(s string) string {
	const maxRunes = 120
	if utf8.RuneCountInString(s) <= maxRunes {
		return strconv.Quote(s)
	}
	r := []rune(s)
	return strconv.Quote(string(r[:maxRunes]) + "…")
}
