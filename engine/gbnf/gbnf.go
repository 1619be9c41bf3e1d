// Package gbnf renders the JSON Schema subset the engine's output schemas use as a
// llama.cpp GBNF grammar for compact JSON: no whitespace outside strings and
// object keys in the schema's order.
//
// llama.cpp-family servers take such a grammar in a request's "grammar" field.
// Their own schema converters allow optional whitespace between every JSON
// token, and a small model spends a quarter of its output tokens on it; every
// token sampled under a grammar is expensive, so the grammar here allows
// exactly one spelling of each answer. Key order is fixed for the same reason,
// and because the schemas order keys as a model should think (evidence, then
// rationale, then verdict).
//
// Anything outside the subset is an error rather than ignored, so a schema
// change cannot silently loosen the grammar.
package gbnf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode"
)

// FromSchema returns a GBNF grammar (root rule "root") accepting exactly the compact JSON
// texts (no whitespace outside strings, object keys in the schema's order) that schema
// allows. It returns an error naming the unsupported keyword/construct and its JSON pointer
// (e.g. `gbnf: /properties/rules/items: "oneOf" is not supported`) for anything outside the subset.
func FromSchema(schema []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	tree, err := decode(dec)
	if err != nil {
		return "", fmt.Errorf("gbnf: decoding the schema: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", fmt.Errorf("gbnf: decoding the schema: data after the top-level value")
	}
	c := &converter{defs: map[string]string{}, byBody: map[string]string{}, taken: map[string]bool{}, shared: map[string]bool{}}
	for _, r := range sharedRules() {
		c.taken[r.name] = true
	}
	c.taken["root"] = true
	root, isObj := tree.(object)
	var defs object
	if isObj {
		if v, ok := root.get("$defs"); ok {
			if defs, ok = v.(object); !ok {
				return "", fmt.Errorf("gbnf: /$defs: not an object")
			}
			root = root.without("$defs")
		}
		tree = root
	}
	for _, d := range defs {
		c.defs[d.key] = c.newName("def-" + d.key)
	}
	body, _, err := c.expr(tree, "", "root")
	if err != nil {
		return "", err
	}
	for _, d := range defs {
		f, _, err := c.expr(d.val, "/$defs/"+escPointer(d.key), d.key)
		if err != nil {
			return "", err
		}
		c.rules = append(c.rules, rule{c.defs[d.key], f.expr})
		if _, ok := c.byBody[f.expr]; !ok {
			c.byBody[f.expr] = c.defs[d.key]
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "root ::= %s\n", body.expr)
	for _, r := range c.rules {
		fmt.Fprintf(&b, "%s ::= %s\n", r.name, r.body)
	}
	for _, r := range sharedRules() {
		if c.shared[r.name] {
			fmt.Fprintf(&b, "%s ::= %s\n", r.name, r.body)
		}
	}
	return b.String(), nil
}

// sharedRules are defined once, in this order, when used.
func sharedRules() []rule {
	return []rule{
		// One character of a JSON string as written: any character but a quote,
		// a backslash or a control character, or an escape.
		{"char", `[^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})`},
		{"string", `"\"" char* "\""`},
		{"integer", `"-"? ([0-9] | [1-9] [0-9]{0,15})`},
	}
}

type rule struct{ name, body string }

// member and object are a decoded JSON object with its keys in order: the
// order of "properties" is the order the grammar generates keys in.
type member struct {
	key string
	val any
}

type object []member

func (o object) get(key string) (any, bool) {
	for _, m := range o {
		if m.key == key {
			return m.val, true
		}
	}
	return nil, false
}

func (o object) without(key string) object {
	var out object
	for _, m := range o {
		if m.key != key {
			out = append(out, m)
		}
	}
	return out
}

// decode reads one JSON value: an object, []any, string, json.Number, bool
// or nil.
func decode(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := object{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key := k.(string)
			if _, dup := o.get(key); dup {
				return nil, fmt.Errorf("duplicate key %q", key)
			}
			v, err := decode(dec)
			if err != nil {
				return nil, err
			}
			o = append(o, member{key, v})
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := decode(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return tok, nil
}

// ignored reports whether keyword does not constrain what is generated.
func ignored(keyword string) bool {
	switch keyword {
	case "description", "title", "$schema", "$comment":
		return true
	}
	return false
}

// known reports whether keyword is in the subset, in some context; done
// refuses it in others.
func known(keyword string) bool {
	switch keyword {
	case "$ref", "anyOf", "enum", "type", "properties", "required", "additionalProperties",
		"items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern":
		return true
	}
	return false
}

// node is one schema object; get records which keywords were read, so done
// can refuse any other.
type node struct {
	ptr  string
	obj  object
	used map[string]bool
}

func (n *node) get(key string) (any, bool) {
	n.used[key] = true
	return n.obj.get(key)
}

func (n *node) errorf(format string, args ...any) error {
	ptr := n.ptr
	if ptr == "" {
		ptr = "(root)"
	}
	return fmt.Errorf("gbnf: %s: %s", ptr, fmt.Sprintf(format, args...))
}

func (n *node) done() error {
	for _, m := range n.obj {
		if !n.used[m.key] && !ignored(m.key) {
			return n.errorf("%q is not supported here", m.key)
		}
	}
	return nil
}

// count reads a non-negative integer keyword; it returns def when absent.
func (n *node) count(key string, def int) (int, error) {
	v, ok := n.get(key)
	if !ok {
		return def, nil
	}
	num, isNum := v.(json.Number)
	i, err := strconv.Atoi(num.String())
	if !isNum || err != nil || i < 0 {
		return 0, n.errorf("%q is not a non-negative integer", key)
	}
	return i, nil
}

type converter struct {
	defs   map[string]string // $defs name → rule name
	rules  []rule
	byBody map[string]string // a rule's body → its name, so equal rules are defined once
	taken  map[string]bool
	shared map[string]bool
}

// newName is a fresh rule name from hint, in the characters GBNF allows.
func (c *converter) newName(hint string) string {
	base := strings.Map(func(r rune) rune {
		if r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-') {
			return r
		}
		return '-'
	}, hint)
	if base == "" {
		base = "r"
	}
	name := base
	for i := 2; c.taken[name]; i++ {
		name = base + "-" + strconv.Itoa(i)
	}
	c.taken[name] = true
	return name
}

func (c *converter) use(name string) string {
	c.shared[name] = true
	if name == "string" {
		c.shared["char"] = true
	}
	return name
}

// ref is v's expression, made a rule of its own when it is worth naming.
func (c *converter) ref(v any, ptr, hint string) (frag, error) {
	f, named, err := c.expr(v, ptr, hint)
	if err != nil || !named {
		return f, err
	}
	name, ok := c.byBody[f.expr]
	if !ok {
		name = c.newName(hint)
		c.byBody[f.expr] = name
		c.rules = append(c.rules, rule{name, f.expr})
	}
	return frag{expr: name}, nil
}

// expr is the GBNF expression for schema v at ptr; named reports whether it
// is an object or a pattern, which read better as rules of their own.
func (c *converter) expr(v any, ptr, hint string) (f frag, named bool, err error) {
	o, ok := v.(object)
	if !ok {
		return frag{}, false, (&node{ptr: ptr}).errorf("a schema that is not an object is not supported")
	}
	n := &node{ptr: ptr, obj: o, used: map[string]bool{}}
	for _, m := range o {
		if !known(m.key) && !ignored(m.key) {
			return frag{}, false, n.errorf("%q is not supported", m.key)
		}
	}
	defer func() {
		if err == nil {
			err = n.done()
		}
	}()
	if r, ok := n.get("$ref"); ok {
		s, _ := r.(string)
		name, found := c.defs[unescPointer(strings.TrimPrefix(s, "#/$defs/"))]
		if !strings.HasPrefix(s, "#/$defs/") || !found {
			return frag{}, false, n.errorf("$ref %q is not a definition in the root's $defs", r)
		}
		return frag{expr: name}, false, nil
	}
	if a, ok := n.get("anyOf"); ok {
		alts, _ := a.([]any)
		if len(alts) == 0 {
			return frag{}, false, n.errorf(`"anyOf" is not a non-empty array`)
		}
		var fs []frag
		for i, alt := range alts {
			f, err := c.ref(alt, ptr+"/anyOf/"+strconv.Itoa(i), hint)
			if err != nil {
				return frag{}, false, err
			}
			fs = append(fs, f)
		}
		return alternation(fs), false, nil
	}
	t, hasType := n.get("type")
	if e, ok := n.get("enum"); ok {
		f, err := c.enum(n, e, t)
		return f, false, err
	}
	if !hasType {
		return frag{}, false, n.errorf(`a schema without "type", "enum", "anyOf" or "$ref" is not supported`)
	}
	switch t {
	case "object":
		f, err := c.object(n)
		return f, true, err
	case "array":
		f, err := c.array(n, hint)
		return f, false, err
	case "string":
		return c.string(n)
	case "integer":
		return frag{expr: c.use("integer")}, false, nil
	case "boolean":
		return frag{expr: `"true" | "false"`}, false, nil
	}
	return frag{}, false, n.errorf("type %v is not supported", t)
}

func (c *converter) enum(n *node, e, typ any) (frag, error) {
	values, _ := e.([]any)
	if len(values) == 0 {
		return frag{}, n.errorf(`"enum" is not a non-empty array`)
	}
	var fs []frag
	seen := map[string]bool{}
	for _, v := range values {
		var text, kind string
		switch v := v.(type) {
		case string:
			text, kind = jsonString(v), "string"
		case json.Number:
			i, err := strconv.ParseInt(v.String(), 10, 64)
			if err != nil {
				return frag{}, n.errorf("enum value %s is not supported (only integers)", v)
			}
			text, kind = strconv.FormatInt(i, 10), "integer"
		case bool:
			text, kind = strconv.FormatBool(v), "boolean"
		default:
			return frag{}, n.errorf("enum value %v is not supported", v)
		}
		if typ != nil && typ != kind {
			return frag{}, n.errorf("enum value %s is not of type %v", text, typ)
		}
		if !seen[text] {
			seen[text] = true
			fs = append(fs, litFrag(text))
		}
	}
	return alternation(fs), nil
}

func (c *converter) object(n *node) (frag, error) {
	if ap, ok := n.get("additionalProperties"); ok && ap != false {
		return frag{}, n.errorf(`"additionalProperties" other than false is not supported`)
	}
	var props object
	if p, ok := n.get("properties"); ok {
		if props, ok = p.(object); !ok {
			return frag{}, n.errorf(`"properties" is not an object`)
		}
	}
	required := map[string]bool{}
	if r, ok := n.get("required"); ok {
		list, isList := r.([]any)
		if !isList {
			return frag{}, n.errorf(`"required" is not an array`)
		}
		for _, name := range list {
			s, isStr := name.(string)
			if _, found := props.get(s); !isStr || !found {
				return frag{}, n.errorf("required property %v is not in \"properties\"", name)
			}
			required[s] = true
		}
	}
	var s seq
	s.add(litFrag("{"))
	for i, p := range props {
		if !required[p.key] {
			return frag{}, n.errorf("optional property %q is not supported", p.key)
		}
		if i > 0 {
			s.add(litFrag(","))
		}
		s.add(litFrag(jsonString(p.key) + ":"))
		f, err := c.ref(p.val, n.ptr+"/properties/"+escPointer(p.key), p.key)
		if err != nil {
			return frag{}, err
		}
		s.add(f)
	}
	s.add(litFrag("}"))
	return s.frag(), nil
}

func (c *converter) array(n *node, hint string) (frag, error) {
	minItems, err := n.count("minItems", 0)
	if err != nil {
		return frag{}, err
	}
	maxItems, err := n.count("maxItems", -1)
	if err != nil {
		return frag{}, err
	}
	if maxItems >= 0 && minItems > maxItems {
		return frag{}, n.errorf(`"minItems" is above "maxItems"`)
	}
	items, hasItems := n.get("items")
	var s seq
	s.add(litFrag("["))
	if p, ok := n.get("prefixItems"); ok {
		prefix, _ := p.([]any)
		switch {
		case items != false:
			return frag{}, n.errorf(`"prefixItems" without "items": false is not supported`)
		case minItems != len(prefix) || maxItems >= 0 && maxItems < len(prefix):
			return frag{}, n.errorf(`"prefixItems" with "minItems" other than their count is not supported`)
		}
		for i, item := range prefix {
			if i > 0 {
				s.add(litFrag(","))
			}
			f, err := c.ref(item, n.ptr+"/prefixItems/"+strconv.Itoa(i), hint+"-"+strconv.Itoa(i+1))
			if err != nil {
				return frag{}, err
			}
			s.add(f)
		}
		s.add(litFrag("]"))
		return s.frag(), nil
	}
	switch {
	case !hasItems:
		return frag{}, n.errorf(`an array without "items" is not supported`)
	case items == false || maxItems == 0:
		s.add(litFrag("]"))
		return s.frag(), nil
	}
	x, err := c.ref(items, n.ptr+"/items", hint+"-item")
	if err != nil {
		return frag{}, err
	}
	// X, then the further ones each after a comma, within the bounds.
	var more seq
	more.add(litFrag(","))
	more.add(x)
	var list seq
	list.add(x)
	restMax := -1
	if maxItems > 0 {
		restMax = maxItems - 1
	}
	if r := repeat(more.frag(), max(minItems-1, 0), restMax); r.expr != "" {
		list.add(r)
	}
	if minItems == 0 {
		s.add(repeat(list.frag(), 0, 1))
	} else {
		s.add(list.frag())
	}
	s.add(litFrag("]"))
	return s.frag(), nil
}

func (c *converter) string(n *node) (frag, bool, error) {
	minLen, err := n.count("minLength", 0)
	if err != nil {
		return frag{}, false, err
	}
	maxLen, err := n.count("maxLength", -1)
	if err != nil {
		return frag{}, false, err
	}
	if p, ok := n.get("pattern"); ok {
		_, hasMin := n.obj.get("minLength")
		_, hasMax := n.obj.get("maxLength")
		s, isStr := p.(string)
		switch {
		case !isStr:
			return frag{}, false, n.errorf(`"pattern" is not a string`)
		case hasMin || hasMax:
			return frag{}, false, n.errorf(`"pattern" with "minLength" or "maxLength" is not supported`)
		}
		f, err := c.pattern(s, n.ptr+"/pattern")
		return f, true, err
	}
	if minLen == 0 && maxLen < 0 {
		return frag{expr: c.use("string")}, false, nil
	}
	if maxLen >= 0 && minLen > maxLen {
		return frag{}, false, n.errorf(`"minLength" is above "maxLength"`)
	}
	var s seq
	s.add(litFrag(`"`))
	s.add(repeat(frag{expr: c.use("char")}, minLen, maxLen))
	s.add(litFrag(`"`))
	return s.frag(), false, nil
}

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

// jsonText is s JSON-encoded without its quotes; jsonString with them.
func jsonText(s string) string {
	q := jsonString(s)
	return q[1 : len(q)-1]
}

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "<" as itself: one spelling, the one a model writes
	_ = enc.Encode(s)        // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

func escPointer(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

func unescPointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}
