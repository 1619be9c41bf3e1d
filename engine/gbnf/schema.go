package gbnf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

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
