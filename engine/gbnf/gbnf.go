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
