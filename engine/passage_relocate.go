package engine

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// minRelocatedRunes is the shortest quote that moves a citation: shorter
// words ("Delaware", "30 days") stand in too many passages to say which one
// the model meant.
const minRelocatedRunes = 16

// minRelocatedWords is the fewest words, other than filler, of a quote that
// moves a citation by the words it shares with a passage rather than as
// written; a passage must hold four in five of them.
const minRelocatedWords = 4

// holding finds the passage whose text holds words when cited's does not:
// a model copies a sentence and gives the id of a neighbour, or of a
// passage it read for another rule. Words are compared as written, then
// with case, quotes, dashes and white space folded, and last by the words
// they share, for a quote that changed a word or two ("The annual fee"
// for "an annual fee"): a passage holding four in five of its words, and
// more of them than cited. Of several passages, the nearest cited in the
// material's order is taken. It reports false when cited holds the words,
// when they are too short to tell, or when no passage holds them.
func (s *passageSet) holding(words string, cited passage) (passage, bool) {
	want := foldQuote(words)
	if strings.Contains(foldQuote(cited.text), want) {
		return passage{}, false
	}
	if utf8.RuneCountInString(want) >= minRelocatedRunes {
		if i := s.nearest(cited, func(p passage) int {
			if strings.Contains(p.text, words) || strings.Contains(foldQuote(p.text), want) {
				return 1
			}
			return 0
		}); i >= 0 {
			return s.list[i], true
		}
	}
	quoted := contentWordSet(words)
	if len(quoted) < minRelocatedWords {
		return passage{}, false
	}
	need := (4*len(quoted) + 4) / 5
	if shared := sharedWordCount(quoted, cited.text); shared >= need {
		return passage{}, false
	}
	i := s.nearest(cited, func(p passage) int {
		if n := sharedWordCount(quoted, p.text); n >= need {
			return n
		}
		return 0
	})
	if i < 0 {
		return passage{}, false
	}
	return s.list[i], true
}

// maxUnrelatedWords is the most words, other than filler, a cited passage
// may share with the rule and the rationale together and still be taken for
// one the verdict is not about: a citation by id alone that shares at most
// this many is resolved by the rationale (spokenOf).
const maxUnrelatedWords = 1

// spokenOf finds the passage a rationale speaks of when a citation by id
// alone names one the verdict is not about: a small model writes "the
// agreement is governed by the laws of the State of Delaware" and cites a
// late-fee sentence, its ids being opaque to it. cited must share at most
// maxUnrelatedWords words with about (the rule's words and the
// rationale's); the passage taken shares at least minRelocatedWords of the
// rationale's, more than any other passage does, and is not in taken (the
// passages the verdict cites already). It reports false when no passage
// stands out, leaving the model's citation as it is.
func (s *passageSet) spokenOf(rationale, about map[string]bool, cited passage, taken map[string]bool) (passage, bool) {
	if len(rationale) < minRelocatedWords || sharedWordCount(about, cited.text) > maxUnrelatedWords {
		return passage{}, false
	}
	best, top, runnerUp := -1, 0, 0
	for i, p := range s.list {
		if taken[p.id] {
			continue
		}
		switch n := sharedWordCount(rationale, p.text); {
		case n > top:
			best, top, runnerUp = i, n, top
		case n > runnerUp:
			runnerUp = n
		}
	}
	if best < 0 || top < minRelocatedWords || top == runnerUp {
		return passage{}, false
	}
	return s.list[best], true
}

// nearest is the index of the passage with the highest positive score, of
// equals the one nearest cited in the material's order; -1 when none
// scores.
func (s *passageSet) nearest(cited passage, score func(passage) int) int {
	from := s.byID[cited.id]
	best, bestScore, bestDist := -1, 0, 0
	for i, p := range s.list {
		dist := i - from
		if dist < 0 {
			dist = -dist
		}
		n := score(p)
		if n > bestScore || n == bestScore && n > 0 && dist < bestDist {
			best, bestScore, bestDist = i, n, dist
		}
	}
	return best
}

// contentWordSet is the distinct words of s other than filler.
func contentWordSet(s string) map[string]bool {
	set := make(map[string]bool)
	for _, w := range words(s) {
		if !fillerWords[w] {
			set[w] = true
		}
	}
	return set
}

// sharedWordCount counts the distinct words of text in set.
func sharedWordCount(set map[string]bool, text string) int {
	seen := make(map[string]bool)
	for _, w := range words(text) {
		if set[w] && !seen[w] {
			seen[w] = true
		}
	}
	return len(seen)
}

// foldQuote is how a quote is compared with a passage when it is not found
// as written: lower case, typographic quotes and dashes as plain ones, and
// every run of white space (a PDF's line breaks) as one space, trimmed.
func foldQuote(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range strings.TrimSpace(s) {
		switch {
		case unicode.IsSpace(r):
			space = true
			continue
		case r == '‘' || r == '’' || r == '′':
			r = '\''
		case r == '“' || r == '”' || r == '″':
			r = '"'
		case r == '–' || r == '—' || r == '‐' || r == '‑':
			r = '-'
		default:
			r = unicode.ToLower(r)
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
