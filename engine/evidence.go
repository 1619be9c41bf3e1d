package engine

import (
	"fmt"

	"rulevalidator/engine/anchor"
)

// anchorEvidence replaces every quote that can be found in a supplied document
// with the verbatim span, its page and offsets. A quote that cannot be found
// keeps its text and is marked unanchored; a quote from a named input, the text
// input or the message gets page 0.
func anchorEvidence(verdicts []Verdict, in *Inputs, opts anchor.Options, observe func(Match)) error {
	docs := in.Documents()
	nonDocument := make(map[string]bool, len(in.NamedInputs)+2)
	for _, n := range in.NamedInputs {
		nonDocument[n.Name] = true
	}
	if in.TextInput != "" {
		nonDocument["text_input"] = true
	}
	if in.Message != "" {
		nonDocument["message"] = true
	}

	var matcher *anchor.Matcher // built on first use: most requests quote something, some don't
	for i := range verdicts {
		for j := range verdicts[i].Evidences {
			ev := &verdicts[i].Evidences[j]
			switch {
			case nonDocument[ev.SourceOrigin] || len(docs) == 0:
				ev.Anchored = false
				ev.Match = MatchNotDocument
				ev.SourcePageNumber = 0
			default:
				if matcher == nil {
					var err error
					if matcher, err = newMatcher(docs, opts); err != nil {
						return err
					}
				}
				anchorOne(matcher, ev)
			}
			if observe != nil {
				observe(ev.Match)
			}
		}
	}
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

func anchorOne(m *anchor.Matcher, ev *Evidence) {
	span, ok := m.Find(anchor.Quote{Text: ev.Text, Origin: ev.SourceOrigin, Page: ev.SourcePageNumber})
	if !ok {
		ev.Anchored = false
		ev.Match = MatchNone
		return
	}
	start, end := span.Start, span.End
	ev.Text = span.Text
	ev.SourceOrigin = span.Document
	ev.SourcePageNumber = span.Page
	ev.Anchored = true
	ev.StartOffset, ev.EndOffset = &start, &end
	switch span.Method {
	case anchor.Exact:
		ev.Match = MatchExact
	case anchor.Normalized:
		ev.Match = MatchNormalized
	default:
		ev.Match = MatchFuzzy
	}
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
