package rulesetdiff

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// WriteText writes the diff for a person: the ruleset's own changes, the
// nested rulesets', then each rule added, removed or changed with its
// changes and what becomes of its cached verdicts, and the unchanged rules
// by what becomes of theirs.
func (d *Diff) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "ruleset %s → %s\n", describe(d.Old), describe(d.New))
	if d.Same() {
		fmt.Fprintln(ew, "no differences: every cached verdict stays valid")
		return ew.err
	}
	c := d.Counts
	fmt.Fprintf(ew, "rules: %d changed, %d added, %d removed, %d unchanged; cached verdicts: %d stay valid, %d invalidated\n",
		c.Changed, c.Added, c.Removed, c.Unchanged, c.CacheValid, c.CacheInvalidated)
	if len(d.Ruleset) > 0 {
		fmt.Fprintln(ew, "\nruleset")
		writeChanges(ew, d.Ruleset)
	}
	for _, g := range d.Groups {
		fmt.Fprintf(ew, "\n%s nested ruleset %s\n", g.Status, g.Path)
		writeChanges(ew, g.Changes)
	}
	type group struct {
		effect CacheEffect
		ids    []string
	}
	var unchanged []*group
	for _, r := range d.Rules {
		if r.Status == Unchanged {
			i := -1
			for k, g := range unchanged {
				if g.effect == r.Cache {
					i = k
				}
			}
			if i < 0 {
				unchanged = append(unchanged, &group{effect: r.Cache})
				i = len(unchanged) - 1
			}
			unchanged[i].ids = append(unchanged[i].ids, r.RuleID)
			continue
		}
		fmt.Fprintf(ew, "\n%s rule %s", r.Status, r.RuleID)
		if r.Group != "" {
			fmt.Fprintf(ew, " (in %s)", r.Group)
		}
		fmt.Fprintln(ew)
		writeChanges(ew, r.Changes)
		fmt.Fprintf(ew, "  %s\n", effect(r.Cache))
	}
	for _, g := range unchanged {
		fmt.Fprintf(ew, "\nunchanged, %s: %s\n", effect(g.effect), strings.Join(g.ids, ", "))
	}
	return ew.err
}

func describe(v Version) string {
	s := v.ID
	if s == "" {
		s = "(no id)"
	}
	if v.Version != "" {
		s += " version " + v.Version
	}
	if v.Source != "" {
		s += " (" + v.Source + ")"
	}
	return s
}

func effect(e CacheEffect) string {
	switch e.Status {
	case CacheValid:
		return "cached verdicts stay valid"
	case CacheInvalidated:
		return "cached verdicts invalidated (" + e.Reason + ")"
	}
	return "no cached verdicts to keep (" + e.Reason + ")"
}

func writeChanges(w io.Writer, cs []Change) {
	for _, c := range cs {
		fmt.Fprintf(w, "  %s: %s\n", c.Field, changeText(c))
	}
}

// changeText is a change in a line: a long text as the words that changed
// with a few words around them, anything else as old → new.
func changeText(c Change) string {
	oText, oOK := text(c.Old)
	nText, nOK := text(c.New)
	if oOK && nOK && max(len(oText), len(nText)) > 60 {
		return WordDiff(oText, nText)
	}
	return shown(c.Old) + " → " + shown(c.New)
}

// text is a JSON string's value; null reads as the empty text.
func text(v json.RawMessage) (string, bool) {
	if string(v) == "null" {
		return "", true
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

func shown(v json.RawMessage) string {
	if string(v) == "null" {
		return "(unset)"
	}
	return string(v)
}

// wordContext is how many unchanged words WordDiff keeps around a change.
const wordContext = 4

// WordDiff writes how new differs from old word by word, git's word-diff
// style: [-removed-] and {+added+}, with runs of unchanged words longer
// than a few cut to "…". White space is not compared.
func WordDiff(old, new string) string {
	a, b := strings.Fields(old), strings.Fields(new)
	if slices.Equal(a, b) {
		return "(white space only)"
	}
	ops := wordOps(a, b)
	var out []string
	for i := 0; i < len(ops); {
		j := i
		for j < len(ops) && ops[j].kind == ops[i].kind {
			j++
		}
		run := ops[i:j]
		words := make([]string, len(run))
		for k, op := range run {
			words[k] = op.word
		}
		switch run[0].kind {
		case '-':
			out = append(out, "[-"+strings.Join(words, " ")+"-]")
		case '+':
			out = append(out, "{+"+strings.Join(words, " ")+"+}")
		default:
			first, last := i == 0, j == len(ops)
			switch {
			case first && len(words) > wordContext:
				words = append([]string{"…"}, words[len(words)-wordContext:]...)
			case last && len(words) > wordContext:
				words = append(words[:wordContext:wordContext], "…")
			case !first && !last && len(words) > 2*wordContext:
				words = append(append(words[:wordContext:wordContext], "…"), words[len(words)-wordContext:]...)
			}
			out = append(out, strings.Join(words, " "))
		}
		i = j
	}
	return strings.Join(out, " ")
}

type wordOp struct {
	kind byte // '=', '-' or '+'
	word string
}

// wordOps is an edit script from a to b over a longest common subsequence
// of words (rule texts are at most a few thousand words).
func wordOps(a, b []string) []wordOp {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []wordOp
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			ops = append(ops, wordOp{'=', a[i]})
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			ops = append(ops, wordOp{'-', a[i]})
			i++
		default:
			ops = append(ops, wordOp{'+', b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		ops = append(ops, wordOp{'-', a[i]})
	}
	for ; j < m; j++ {
		ops = append(ops, wordOp{'+', b[j]})
	}
	return ops
}

// errWriter keeps the first write error, so that a report is written in
// plain Fprintf calls and checked once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
