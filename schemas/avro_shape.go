package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// kind is the Avro type of a shape node.
type kind uint8

const (
	kindNull kind = iota
	kindBoolean
	kindInt
	kindLong
	kindFloat
	kindDouble
	kindBytes
	kindString
	kindRecord
	kindEnum
	kindArray
	kindMap
	kindUnion
	kindFixed
)

// shape is a compiled schema node.
type shape struct {
	kind     kind
	name     string // full name of a record, enum or fixed
	fields   []shapeField
	symbols  int      // enum
	items    *shape   // array items, map values
	branches []*shape // union
	size     int      // fixed
}

type shapeField struct {
	name  string
	shape *shape
}

// maxNesting bounds how deep a value may nest (only recursive schemas nest
// without bound), keeping the walk's stack small.
const maxNesting = 64

func compileShape(text string) (*shape, error) {
	var node any
	if err := json.Unmarshal([]byte(text), &node); err != nil {
		return nil, err
	}
	c := shapeCompiler{named: map[string]*shape{}}
	return c.compile(node, "")
}

type shapeCompiler struct {
	named map[string]*shape
}

func primitiveKind(name string) (kind, bool) {
	switch name {
	case "null":
		return kindNull, true
	case "boolean":
		return kindBoolean, true
	case "int":
		return kindInt, true
	case "long":
		return kindLong, true
	case "float":
		return kindFloat, true
	case "double":
		return kindDouble, true
	case "bytes":
		return kindBytes, true
	case "string":
		return kindString, true
	}
	return 0, false
}

func (c *shapeCompiler) compile(node any, namespace string) (*shape, error) {
	switch n := node.(type) {
	case string:
		if k, ok := primitiveKind(n); ok {
			return &shape{kind: k}, nil
		}
		if s, ok := c.named[fullName(n, namespace)]; ok {
			return s, nil
		}
		if s, ok := c.named[n]; ok {
			return s, nil
		}
		return nil, fmt.Errorf("unknown type %q", n)
	case []any:
		u := &shape{kind: kindUnion}
		for _, b := range n {
			bs, err := c.compile(b, namespace)
			if err != nil {
				return nil, err
			}
			u.branches = append(u.branches, bs)
		}
		if len(u.branches) == 0 {
			return nil, errors.New("empty union")
		}
		return u, nil
	case map[string]any:
		return c.compileObject(n, namespace)
	}
	return nil, fmt.Errorf("not a schema: %v", node)
}

func (c *shapeCompiler) compileObject(n map[string]any, namespace string) (*shape, error) {
	typ, ok := n["type"].(string)
	if !ok {
		if inner, nested := n["type"]; nested {
			return c.compile(inner, namespace)
		}
		return nil, errors.New("schema object without a type")
	}
	switch typ {
	case "record", "error", "enum", "fixed":
		name, _ := n["name"].(string)
		if name == "" {
			return nil, fmt.Errorf("%s without a name", typ)
		}
		if ns, ok := n["namespace"].(string); ok && !strings.Contains(name, ".") {
			namespace = ns
		}
		full := fullName(name, namespace)
		s := &shape{name: full}
		c.named[full] = s
		switch typ {
		case "enum":
			symbols, _ := n["symbols"].([]any)
			s.kind, s.symbols = kindEnum, len(symbols)
		case "fixed":
			size, _ := n["size"].(float64)
			s.kind, s.size = kindFixed, int(size)
		default:
			s.kind = kindRecord
			fields, _ := n["fields"].([]any)
			ns := full[:max(strings.LastIndex(full, "."), 0)]
			for _, f := range fields {
				fm, _ := f.(map[string]any)
				fname, _ := fm["name"].(string)
				fs, err := c.compile(fm["type"], ns)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %w", full, fname, err)
				}
				s.fields = append(s.fields, shapeField{name: fname, shape: fs})
			}
		}
		return s, nil
	case "array", "map":
		key := "items"
		k := kindArray
		if typ == "map" {
			key, k = "values", kindMap
		}
		items, err := c.compile(n[key], namespace)
		if err != nil {
			return nil, err
		}
		return &shape{kind: k, items: items}, nil
	}
	return c.compile(typ, namespace)
}

func fullName(name, namespace string) string {
	if strings.Contains(name, ".") || namespace == "" {
		return name
	}
	return namespace + "." + name
}
