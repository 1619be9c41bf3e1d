package eval

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"rulevalidator/engine"
)

// locateGold finds a gold passage in its document: verbatim first, then with
// runs of whitespace compared as one space.
func locateGold(in *engine.Inputs, ms ManifestSpan) (Span, error) {
	docs := in.Documents()
	var doc engine.Document
	switch {
	case ms.Document != "":
		i := slices.IndexFunc(docs, func(d engine.Document) bool { return d.Name == ms.Document })
		if i < 0 {
			names := make([]string, len(docs))
			for k, d := range docs {
				names[k] = strconv.Quote(d.Name)
			}
			return Span{}, fmt.Errorf("document: no document %q in the input (it has %s)", ms.Document, orNone(strings.Join(names, ", ")))
		}
		doc = docs[i]
	case len(docs) == 1:
		doc = docs[0]
	case len(docs) == 0:
		return Span{}, errors.New("the input has no document to hold gold evidence")
	default:
		return Span{}, fmt.Errorf("document: missing: the input has %d documents", len(docs))
	}
	if ms.Page > len(doc.Pages) {
		return Span{}, fmt.Errorf("page: %d is past the last page of %q (%d)", ms.Page, doc.Name, len(doc.Pages))
	}
	// Code-point offset of each page's start in the document text.
	starts := make([]int, len(doc.Pages))
	off := 0
	for i, p := range doc.Pages {
		starts[i] = off
		off += utf8.RuneCountInString(p) + 1 // the form feed
	}
	for i, p := range doc.Pages {
		if ms.Page != 0 && i != ms.Page-1 {
			continue
		}
		if s, e, ok := find(p, ms.Text); ok {
			return Span{Text: ms.Text, Document: doc.Name, Page: i + 1, Start: starts[i] + s, End: starts[i] + e}, nil
		}
	}
	where := fmt.Sprintf("%q", doc.Name)
	if ms.Page != 0 {
		where = fmt.Sprintf("page %d of %q", ms.Page, doc.Name)
	}
	return Span{}, fmt.Errorf("text: not found on %s: %q", where, clip(ms.Text, 80))
}

// find returns the code-point span of needle in hay, comparing runs of
// whitespace as a single space when the verbatim text is not there.
func find(hay, needle string) (start, end int, ok bool) {
	if i := strings.Index(hay, needle); i >= 0 {
		s := utf8.RuneCountInString(hay[:i])
		return s, s + utf8.RuneCountInString(needle), true
	}
	words := strings.Fields(needle)
	if len(words) == 0 {
		return 0, 0, false
	}
	// Collapse hay, remembering where each kept rune came from.
	var b strings.Builder
	var from []int // code-point index in hay of each rune of the collapsed text
	space := false
	i := 0
	for _, r := range hay {
		if unicode.IsSpace(r) {
			space = true
		} else {
			if space && b.Len() > 0 {
				b.WriteByte(' ')
				from = append(from, i-1)
			}
			space = false
			b.WriteRune(r)
			from = append(from, i)
		}
		i++
	}
	collapsed := b.String()
	target := strings.Join(words, " ")
	j := strings.Index(collapsed, target)
	if j < 0 {
		return 0, 0, false
	}
	first := utf8.RuneCountInString(collapsed[:j])
	last := first + utf8.RuneCountInString(target) - 1
	return from[first], from[last] + 1, true
}
