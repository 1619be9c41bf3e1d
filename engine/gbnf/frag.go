package gbnf

import (
	"fmt"
	"strings"
)

// frag is a GBNF expression; lit is its text when it is a literal, and items
// its parts when it is a sequence, so that an enclosing sequence merges
// adjacent literals.
type frag struct {
	expr  string
	lit   string
	isLit bool
	items []frag
}

func litFrag(text string) frag {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range text {
		switch r {
		case '"', '\\':
			b.WriteString(`\` + string(r))
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteString(char(r))
		}
	}
	b.WriteByte('"')
	return frag{expr: b.String(), lit: text, isLit: true}
}

// seq is a sequence of fragments, adjacent literals merged.
type seq struct{ items []frag }

func (s *seq) add(f frag) {
	last := len(s.items) - 1
	switch {
	case f.items != nil:
		for _, item := range f.items {
			s.add(item)
		}
	case f.isLit && f.lit == "", !f.isLit && f.expr == "": // nothing, or repeated zero times
	case f.isLit && last >= 0 && s.items[last].isLit:
		s.items[last] = litFrag(s.items[last].lit + f.lit)
	default:
		s.items = append(s.items, f)
	}
}

func (s *seq) frag() frag {
	switch len(s.items) {
	case 0:
		return litFrag("")
	case 1:
		return s.items[0]
	}
	parts := make([]string, len(s.items))
	for i, f := range s.items {
		parts[i] = f.expr
		if alt, _, _ := scan(f.expr); alt {
			parts[i] = "(" + f.expr + ")"
		}
	}
	return frag{expr: strings.Join(parts, " "), items: s.items}
}

func alternation(fs []frag) frag {
	if len(fs) == 1 {
		return fs[0]
	}
	exprs := make([]string, len(fs))
	for i, f := range fs {
		exprs[i] = f.expr
	}
	return frag{expr: strings.Join(exprs, " | ")}
}

// repeat is f repeated min to max times (max < 0: unbounded); "" for none.
func repeat(f frag, lo, hi int) frag {
	if hi == 0 {
		return frag{}
	}
	if lo == 1 && hi == 1 {
		return f
	}
	a := f.expr
	if alt, space, suffix := scan(a); alt || space || suffix {
		a = "(" + a + ")"
	}
	switch {
	case lo == 0 && hi < 0:
		return frag{expr: a + "*"}
	case lo == 1 && hi < 0:
		return frag{expr: a + "+"}
	case lo == 0 && hi == 1:
		return frag{expr: a + "?"}
	case hi < 0:
		return frag{expr: fmt.Sprintf("%s{%d,}", a, lo)}
	case lo == hi:
		return frag{expr: fmt.Sprintf("%s{%d}", a, lo)}
	}
	return frag{expr: fmt.Sprintf("%s{%d,%d}", a, lo, hi)}
}

// scan reports whether expression e has, outside literals, classes and
// groups, an alternation or a sequence, and whether it ends in a repetition:
// all need parentheses before a repetition applies to e as a whole.
func scan(e string) (alt, space, suffix bool) {
	depth := 0
	for i := 0; i < len(e); i++ {
		switch c := e[i]; c {
		case '"', '[':
			closing := byte('"')
			if c == '[' {
				closing = ']'
			}
			for i++; i < len(e) && e[i] != closing; i++ {
				if e[i] == '\\' {
					i++
				}
			}
		case '(':
			depth++
		case ')':
			depth--
		case '|':
			alt = alt || depth == 0
		case ' ':
			space = space || depth == 0
		}
	}
	suffix = e != "" && strings.ContainsRune("*+?}", rune(e[len(e)-1]))
	return alt, space, suffix
}

// char writes r as GBNF does inside a literal or a class: printable ASCII as
// is, anything else as a hexadecimal escape, so the grammar is ASCII.
func char(r rune) string {
	switch {
	case r >= 0x20 && r < 0x7f:
		return string(r)
	case r <= 0xff:
		return fmt.Sprintf(`\x%02X`, r)
	case r <= 0xffff:
		return fmt.Sprintf(`\u%04X`, r)
	}
	return fmt.Sprintf(`\U%08X`, r)
}
