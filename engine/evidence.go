package engine

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"unicode/utf8"

	"rulevalidator/engine/anchor"
	"rulevalidator/verdict"
)

// Non-document origins as the markers show them to the model, and as the
// contract spells them.
var nonDocumentAliases = map[string][]string{
	"text_input": {"text_input", "Text Input"},
	"message":    {"message", "Message"},
}

// anchoring resolves one request's evidence: cited passages (cite) and
// quotes anchored to verbatim spans (anchor). It is built once per request
// from all of the request's inputs and shared by every conversation and
// re-ask of that request, so each document is segmented and indexed at most
// once. It is safe for concurrent use.
type anchoring struct {
	docs []Document
	opts anchor.Options
	// nonDocument holds the origins that name a named input, the text input
	// or the message, folded for comparison.
	nonDocument map[string]bool

	once    sync.Once
	matcher *anchor.Matcher
	err     error

	// ps is the request's passages, what cite mode shows and evidence
	// cites: segmented on first use.
	in     *Inputs
	psOnce sync.Once
	ps     *passageSet
}

// newAnchoring prepares anchoring for a request's inputs. The matcher itself
// is built on first use: most requests quote something, some don't.
func (e *Engine) newAnchoring(in *Inputs) *anchoring {
	a := &anchoring{docs: in.Documents(), opts: e.anchorOptions(), nonDocument: make(map[string]bool, len(in.NamedInputs)+4), in: in}
	for _, n := range in.NamedInputs {
		a.nonDocument[foldOrigin(n.Name)] = true
	}
	if in.TextInput != "" {
		for _, s := range nonDocumentAliases["text_input"] {
			a.nonDocument[foldOrigin(s)] = true
		}
	}
	if in.Message != "" {
		for _, s := range nonDocumentAliases["message"] {
			a.nonDocument[foldOrigin(s)] = true
		}
	}
	return a
}

// foldOrigin is how origins are compared with input names: case and
// surrounding white space do not count.
func foldOrigin(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

func (a *anchoring) hasDocuments() bool { return len(a.docs) > 0 }

// citesInput reports whether origin names a named input, the text input or
// the message of the request.
func (a *anchoring) citesInput(origin string) bool { return a.nonDocument[foldOrigin(origin)] }

// passages is the request's passage set, segmented on first use.
func (a *anchoring) passages() *passageSet {
	a.psOnce.Do(func() { a.ps = segmentInputs(a.in) })
	return a.ps
}

// origins are the source names a quote may give, as the markers show them:
// the documents', the named inputs', "Text Input" and "Message".
func (a *anchoring) origins() []string {
	var out []string
	for _, d := range a.docs {
		out = append(out, markerName(d.Name))
	}
	for _, n := range a.in.NamedInputs {
		out = append(out, markerName(n.Name))
	}
	if a.in.TextInput != "" {
		out = append(out, "Text Input")
	}
	if a.in.Message != "" {
		out = append(out, "Message")
	}
	return dedupe(out)
}

// cite resolves an evidence that names a passage id in place: it takes the
// passage's origin, page and offsets, and as its text the words the model
// gave when they are found inside the passage, else the whole passage.
//
// The words and the id can disagree: a small model copies one sentence and
// gives the id of another, and either may be the one it meant (it quoted
// the governing-law clause beside a late-fee id, and a late-fee sentence
// beside the id of the fees clause its rationale was about). The one the
// rationale speaks of more is taken: when the words stand in another
// passage that shares more words with the rationale, the evidence is that
// passage, and CitedPassageID and CitedPageNumber keep what the model
// named. A citation by id alone is resolved by the rationale too: when its
// passage shares nothing with the rule and the rationale, and another, not
// in taken (the verdict's own citations), plainly is what the rationale
// speaks of (spokenOf). It reports false, leaving ev as given, when no
// passage has that id.
func (a *anchoring) cite(ev *verdict.Evidence, rule Rule, rationale string, taken map[string]bool) bool {
	p, ok := a.passages().lookup(ev.PassageID)
	if !ok {
		return false
	}
	words := withoutMarker(ev.Text)
	quoted := words != "" && !isPlaceholder(words)
	ev.CitedPassageID, ev.CitedPageNumber = "", p.page
	switch {
	case quoted && !strings.Contains(p.text, words):
		if other, ok := a.passages().holding(words, p); ok && sharedWords(rationale, other.text) > sharedWords(rationale, p.text) {
			ev.CitedPassageID, p = p.id, other
		}
	case !quoted:
		spoken := contentWordSet(rationale)
		about := contentWordSet(rule.RuleText)
		maps.Copy(about, spoken)
		if other, ok := a.passages().spokenOf(spoken, about, p, taken); ok {
			ev.CitedPassageID, p = p.id, other
		}
	}
	ev.PassageID = p.id
	ev.QuotedText = ev.Text
	ev.SourceOrigin = p.origin
	ev.Differences, ev.Altered = nil, false
	if p.doc < 0 { // a named input, the text input or the message
		ev.Text, ev.SourcePageNumber = p.text, 0
		ev.Anchored, ev.Match, ev.Similarity = false, verdict.MatchNotDocument, 0
		ev.StartOffset, ev.EndOffset = nil, nil
		return true
	}
	start, end, text, match := p.start, p.end, p.text, verdict.MatchPassage
	if quoted {
		if k := strings.Index(p.text, words); k >= 0 {
			start += utf8.RuneCountInString(p.text[:k])
			end = start + utf8.RuneCountInString(words)
			text, match = words, verdict.MatchExact
		}
	}
	ev.Text, ev.SourcePageNumber = text, p.page
	ev.Anchored, ev.Match, ev.Similarity = true, match, 1
	ev.StartOffset, ev.EndOffset = &start, &end
	return true
}

// Focus: a quote much longer than the passage it needs does not show what
// in it supports the verdict.
const (
	// maxFocusedRunes is the longest anchored quote that is focused evidence.
	maxFocusedRunes = 600
	// maxFocusedPassages is the most passages (sentences) one quote may span.
	maxFocusedPassages = 3
)

// unfocused reports whether an anchored quote spans more than a few
// sentences, or runs longer than maxFocusedRunes.
func (a *anchoring) unfocused(ev verdict.Evidence) bool {
	if !ev.Anchored || ev.StartOffset == nil || ev.EndOffset == nil {
		return false
	}
	start, end := *ev.StartOffset, *ev.EndOffset
	if end-start > maxFocusedRunes {
		return true
	}
	if end-start < (maxFocusedPassages+1)*minPassageRunes {
		return false // too short to hold more passages
	}
	// The span's own passages: cut as the page's would be, without
	// segmenting the whole document for one quote.
	return len(segmentPage(ev.Text)) > maxFocusedPassages
}

func (a *anchoring) getMatcher() (*anchor.Matcher, error) {
	a.once.Do(func() { a.matcher, a.err = newMatcher(a.docs, a.opts) })
	return a.matcher, a.err
}

// anchor resolves one evidence in place. A quote found in a supplied document
// gets the verbatim span as its text, its page and offsets, and keeps the
// model's words in QuotedText; a quote that cannot be found keeps its text
// and is marked unanchored; a quote from a named input, the text input or the
// message gets page 0.
func (a *anchoring) anchor(ev *verdict.Evidence) error {
	ev.QuotedText = ev.Text
	ev.CitedPageNumber = ev.SourcePageNumber
	if a.citesInput(ev.SourceOrigin) || !a.hasDocuments() {
		ev.Anchored = false
		ev.Match = verdict.MatchNotDocument
		ev.SourcePageNumber = 0
		return nil
	}
	m, err := a.getMatcher()
	if err != nil {
		return err
	}
	anchorOne(m, ev)
	return nil
}

func newMatcher(docs []Document, opts anchor.Options) (*anchor.Matcher, error) {
	ad := make([]anchor.Document, len(docs))
	for i, d := range docs {
		ad[i] = anchor.Document{Name: d.Name, Pages: d.Pages}
	}
	m, err := anchor.New(ad, opts)
	if err != nil {
		return nil, fmt.Errorf("engine: anchoring evidence: %w", err)
	}
	return m, nil
}

func anchorOne(m *anchor.Matcher, ev *verdict.Evidence) {
	span, ok := m.Find(anchor.Quote{Text: ev.Text, Origin: ev.SourceOrigin, Page: ev.SourcePageNumber})
	if !ok {
		ev.Anchored = false
		ev.Match = verdict.MatchNone
		ev.Similarity = 0
		return
	}
	start, end := span.Start, span.End
	ev.Text = span.Text
	ev.SourceOrigin = span.Document
	ev.SourcePageNumber = span.Page
	ev.Anchored = true
	ev.StartOffset, ev.EndOffset = &start, &end
	ev.Similarity = span.Similarity
	ev.Altered = len(span.Differences) > 0
	ev.Differences = nil
	for _, d := range span.Differences {
		ev.Differences = append(ev.Differences, verdict.Difference{Kind: d.Kind, Quote: d.Quote, Document: d.Span})
	}
	switch span.Method {
	case anchor.Exact:
		ev.Match = verdict.MatchExact
	case anchor.Normalized:
		ev.Match = verdict.MatchNormalized
	case anchor.Elided:
		ev.Match = verdict.MatchElided
	default:
		ev.Match = verdict.MatchFuzzy
	}
}

// supports reports whether ev backs a verdict: a quote anchored unaltered in
// a supplied document, or a citation of one of the request's named inputs,
// text input or message.
func (a *anchoring) supports(ev verdict.Evidence) bool {
	if ev.Anchored {
		return !ev.Altered
	}
	return ev.Match == verdict.MatchNotDocument && a.citesInput(ev.SourceOrigin)
}

// Size is the total bytes of text the inputs carry, the figure size limits
// are checked against.
func (in *Inputs) Size() int {
	n := len(in.TextInput) + len(in.Message)
	for _, d := range in.Documents() {
		n += len(d.Name)
		for _, p := range d.Pages {
			n += len(p)
		}
	}
	for _, ni := range in.NamedInputs {
		n += len(ni.Name) + len(ni.Description) + len(renderValue(ni.Value))
	}
	return n
}

// withoutMarker is a quote without the "[d1p2s3]" a model copied with the
// passage from the material, where the passage's id is shown before it.
func withoutMarker(quote string) string {
	q := strings.TrimSpace(quote)
	if !strings.HasPrefix(q, "[") {
		return q
	}
	if end := strings.IndexByte(q, ']'); end > 0 && end <= 40 {
		return strings.TrimSpace(q[end+1:])
	}
	return q
}

// sharedWords counts the distinct words of text, other than filler, that
// the rationale uses too: how much a passage is what the rationale is about.
func sharedWords(rationale, text string) int {
	return sharedWordCount(contentWordSet(rationale), text)
}
