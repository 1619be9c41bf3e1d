package gbnf

import (
	"fmt"
	"regexp/syntax"
	"strings"
	"unicode"
)

// pattern is a string rule for the JSON encoding of the strings that the
// regular expression p (unanchored, as JSON Schema reads it) matches.
func (c *converter) pattern(p, ptr string) (frag, error) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return frag{}, fmt.Errorf("gbnf: %s: %w", ptr, err)
	}
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	begin := len(subs) > 0 && (subs[0].Op == syntax.OpBeginText || subs[0].Op == syntax.OpBeginLine)
	if begin {
		subs = subs[1:]
	}
	end := len(subs) > 0 && (subs[len(subs)-1].Op == syntax.OpEndText || subs[len(subs)-1].Op == syntax.OpEndLine)
	if end {
		subs = subs[:len(subs)-1]
	}
	var s seq
	s.add(litFrag(`"`))
	if !begin {
		s.add(frag{expr: c.use("char") + "*"})
	}
	for _, sub := range subs {
		f, err := regex(sub, ptr)
		if err != nil {
			return frag{}, err
		}
		s.add(f)
	}
	if !end {
		s.add(frag{expr: c.use("char") + "*"})
	}
	s.add(litFrag(`"`))
	return s.frag(), nil
}

func regex(re *syntax.Regexp, ptr string) (frag, error) {
	fail := func(what string) (frag, error) {
		return frag{}, fmt.Errorf("gbnf: %s: %s (%q) is not supported", ptr, what, re)
	}
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return fail("case-insensitive matching")
		}
		return litFrag(jsonText(string(re.Rune))), nil
	case syntax.OpCharClass:
		return class(re.Rune, ptr)
	case syntax.OpAnyCharNotNL:
		return class([]rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune}, ptr)
	case syntax.OpAnyChar:
		return class([]rune{0, unicode.MaxRune}, ptr)
	case syntax.OpEmptyMatch:
		return litFrag(""), nil
	case syntax.OpCapture:
		return regex(re.Sub[0], ptr)
	case syntax.OpConcat, syntax.OpAlternate:
		var fs []frag
		for _, sub := range re.Sub {
			f, err := regex(sub, ptr)
			if err != nil {
				return frag{}, err
			}
			fs = append(fs, f)
		}
		if re.Op == syntax.OpAlternate {
			return alternation(fs), nil
		}
		var s seq
		for _, f := range fs {
			s.add(f)
		}
		return s.frag(), nil
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		f, err := regex(re.Sub[0], ptr)
		if err != nil {
			return frag{}, err
		}
		switch re.Op {
		case syntax.OpStar:
			return repeat(f, 0, -1), nil
		case syntax.OpPlus:
			return repeat(f, 1, -1), nil
		case syntax.OpQuest:
			return repeat(f, 0, 1), nil
		}
		return repeat(f, re.Min, re.Max), nil
	case syntax.OpBeginText, syntax.OpEndText, syntax.OpBeginLine, syntax.OpEndLine:
		return fail("an anchor inside the pattern")
	}
	return fail(re.Op.String())
}

// class is a GBNF character class for ranges (lo, hi pairs, sorted) less
// the quote, the backslash and the control characters: a JSON string
// escapes them, and no pattern of ours needs a model to write them.
func class(ranges []rune, ptr string) (frag, error) {
	keep := subtract(ranges, []rune{0, 0x1f, '"', '"', '\\', '\\'})
	if len(keep) == 0 {
		return frag{}, fmt.Errorf("gbnf: %s: a character class of only quotes, backslashes or control characters is not supported", ptr)
	}
	pos := "[" + classBody(keep) + "]"
	// "Anything but a few" is shorter written as its complement.
	if neg := "[^" + classBody(subtract([]rune{0, unicode.MaxRune}, keep)) + "]"; len(neg) < len(pos) {
		return frag{expr: neg}, nil
	}
	return frag{expr: pos}, nil
}

// subtract is the ranges of a not in b.
func subtract(a, b []rune) []rune {
	var out []rune
	for i := 0; i < len(a); i += 2 {
		lo, hi := a[i], a[i+1]
		for j := 0; j < len(b) && lo <= hi; j += 2 {
			if b[j+1] < lo || b[j] > hi {
				continue
			}
			if b[j] > lo {
				out = append(out, lo, b[j]-1)
			}
			lo = b[j+1] + 1
		}
		if lo <= hi {
			out = append(out, lo, hi)
		}
	}
	return out
}

func classBody(ranges []rune) string {
	var b strings.Builder
	for i := 0; i < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		b.WriteString(classChar(lo))
		switch {
		case hi == lo+1:
			b.WriteString(classChar(hi))
		case hi > lo:
			b.WriteString("-" + classChar(hi))
		}
	}
	return b.String()
}

func classChar(r rune) string {
	switch r {
	case '\\', ']', '[':
		return `\` + string(r)
	case '-', '^', ' ': // in hex: llama.cpp has no \^ escape, and a space reads as a separator
		return fmt.Sprintf(`\x%02X`, r)
	}
	return char(r)
}
