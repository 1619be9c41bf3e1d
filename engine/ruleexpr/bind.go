package ruleexpr

import (
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"
)

// Document is what an expression sees of one document.
type Document struct {
	Name      string
	MediaType string
	// Role is "primary" or "auxiliary".
	Role  string
	Pages int
}

// Activation is what one request gives its expressions.
type Activation struct {
	// Inputs are the named inputs by name, as decoded from JSON (numbers
	// as json.Number or float64).
	Inputs    map[string]any
	Documents []Document
	// Options are the request's options that were set, by their JSON names.
	Options map[string]any
	Tenant  string
}

// Bound is an Activation converted once for CEL, to evaluate every
// expression of a request with.
type Bound struct {
	vars map[string]any
	// raw are the named inputs as given, for evidence.
	raw map[string]any
	// bad holds, per named input, why its value does not have its declared
	// type; an expression reading it fails.
	bad map[string]string
	// quoted holds what Value gave for each input asked for: every rule
	// reading an input quotes it, and a large one is written once.
	quoted map[string]string
}

// Bind converts a for evaluation. Numbers become CEL ints when they are
// whole and fit, doubles otherwise; an input declared a number is always a
// double, so that arithmetic on it does not depend on how it was written.
func (e *Env) Bind(a Activation) *Bound {
	b := &Bound{bad: map[string]string{}, raw: a.Inputs}
	inputs := make(map[string]any, len(a.Inputs))
	for name, v := range a.Inputs {
		typ := TypeAny
		if e.declared != nil {
			if t, ok := e.declared[name]; ok {
				typ = t
			}
		}
		cv, err := convert(v, typ)
		if err != nil {
			b.bad[name] = err.Error()
			continue
		}
		inputs[name] = cv
	}
	docs := make([]any, len(a.Documents))
	for i, d := range a.Documents {
		docs[i] = map[string]any{"name": d.Name, "media_type": d.MediaType, "role": d.Role, "pages": int64(d.Pages)}
	}
	options := map[string]any{}
	for k, v := range a.Options {
		if cv, err := convert(v, TypeAny); err == nil {
			options[k] = cv
		}
	}
	b.vars = map[string]any{VarInputs: inputs, VarDocuments: docs, VarOptions: options, VarTenant: a.Tenant}
	return b
}

// convert makes a decoded JSON value a value CEL takes, checking it against
// its declared type.
func convert(v any, typ Type) (any, error) {
	switch x := v.(type) {
	case nil:
		if typ != TypeAny {
			return nil, fmt.Errorf("is null; declared %s", typ)
		}
		return types.NullValue, nil
	case json.Number:
		if typ == TypeNumber {
			f, err := x.Float64()
			return f, err
		}
		if n, err := x.Int64(); err == nil {
			return checkNumber(float64(n), n, true, typ)
		}
		f, err := x.Float64()
		if err != nil {
			return nil, err
		}
		return checkNumber(f, 0, false, typ)
	case float64:
		if typ == TypeNumber {
			return x, nil
		}
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return checkNumber(x, int64(x), true, typ)
		}
		return checkNumber(x, 0, false, typ)
	case int:
		return checkNumber(float64(x), int64(x), true, typ)
	case int64:
		return checkNumber(float64(x), x, true, typ)
	case string:
		if typ != TypeString && typ != TypeAny {
			return nil, fmt.Errorf("is a string; declared %s", typ)
		}
		return x, nil
	case bool:
		if typ != TypeBoolean && typ != TypeAny {
			return nil, fmt.Errorf("is a boolean; declared %s", typ)
		}
		return x, nil
	case []any:
		if typ != TypeList && typ != TypeAny {
			return nil, fmt.Errorf("is a list; declared %s", typ)
		}
		out := make([]any, len(x))
		for i, item := range x {
			cv, err := convert(item, TypeAny)
			if err != nil {
				return nil, err
			}
			out[i] = cv
		}
		return out, nil
	case map[string]any:
		if typ != TypeMap && typ != TypeAny {
			return nil, fmt.Errorf("is a map; declared %s", typ)
		}
		out := make(map[string]any, len(x))
		for k, item := range x {
			cv, err := convert(item, TypeAny)
			if err != nil {
				return nil, err
			}
			out[k] = cv
		}
		return out, nil
	}
	return nil, fmt.Errorf("has a value of type %T that expressions cannot read", v)
}

func checkNumber(f float64, n int64, whole bool, typ Type) (any, error) {
	switch typ {
	case TypeAny:
		if whole {
			return n, nil
		}
		return f, nil
	case TypeNumber:
		return f, nil
	case TypeInteger:
		if !whole {
			return nil, fmt.Errorf("is %v; declared integer", f)
		}
		return n, nil
	}
	return nil, fmt.Errorf("is a number; declared %s", typ)
}

// MaxQuotedBytes bounds what Value gives of one input: a check's rationale
// and evidence quote the inputs it read, and an input may be megabytes.
const MaxQuotedBytes = 1024

// Value is a named input as the request gave it, for the evidence of a
// check: its value written as JSON (a string as itself), clipped to
// MaxQuotedBytes with a note of its full size, and whether it was given at
// all. A Bound is not safe for concurrent use.
func (b *Bound) Value(name string) (text string, given bool) {
	v, ok := b.raw[name]
	if !ok {
		return "", false
	}
	if q, ok := b.quoted[name]; ok {
		return q, true
	}
	if s, ok := v.(string); ok {
		text = s
	} else if data, err := json.Marshal(v); err == nil {
		text = string(data)
	} else {
		text = fmt.Sprint(v)
	}
	text = clip(text, MaxQuotedBytes)
	if b.quoted == nil {
		b.quoted = map[string]string{}
	}
	b.quoted[name] = text
	return text, true
}

// clip cuts s to at most limit bytes at a character boundary, saying how
// long it was.
func clip(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… [clipped: %d bytes in all]", s[:cut], len(s))
}
