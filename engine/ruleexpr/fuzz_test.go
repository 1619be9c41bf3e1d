package ruleexpr

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// FuzzExpression: any expression and any named inputs compile or fail with
// an *Error pointing into the source, and a compiled expression evaluates or
// fails with ErrEval, within its cost limit: never a panic, never a hang.
func FuzzExpression(f *testing.F) {
	inputs, err := json.Marshal(activation().Inputs)
	if err != nil {
		f.Fatal(err)
	}
	for _, src := range []string{
		"inputs.contract_value > 100000",
		`"FR" in inputs.countries && inputs.rate < 1`,
		`documents.exists(d, d.media_type == "application/pdf" && d.pages > 10)`,
		`documents.map(d, d.name).exists(n, n.endsWith(".txt"))`,
		`!has(inputs.missing) || inputs.missing > 3`,
		`has(options.generate_report) && options.generate_report`,
		"inputs.contract_value / 100000",
		`size(inputs.countries) * 2.5`,
		`inputs.limits.liability >= 1000000 ? 3 : 1`,
		`tenant.matches("^ac.*$")`,
		`[1, 2, 3].map(x, [1, 2, 3].map(y, x * y)).size() > 0`,
	} {
		f.Add(src, inputs, false, false)
	}
	f.Add("inputs.count > 1", []byte(`{"count": 2.5, "contract_value": "x"}`), true, false)
	f.Add("inputs.contract_value * 2", []byte(`{"contract_value": 1e308}`), true, true)
	f.Add("inputs.", []byte(`[]`), false, true)

	plain, err := NewEnv(nil)
	if err != nil {
		f.Fatal(err)
	}
	declared, err := NewEnv(map[string]Type{
		"contract_value": TypeNumber, "count": TypeInteger, "counterparty_type": TypeString,
		"countries": TypeList, "limits": TypeMap, "personal_data": TypeBoolean, "rate": TypeAny,
	})
	if err != nil {
		f.Fatal(err)
	}
	base := activation()
	f.Fuzz(func(t *testing.T, src string, inputsJSON []byte, useDeclared, number bool) {
		env := plain
		if useDeclared {
			env = declared
		}
		want := ResultBool
		if number {
			want = ResultNumber
		}
		p, err := env.Compile(src, want)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Compile(%q): %T %v, want an *Error", src, err, err)
			}
			if ce.Line < 1 || ce.Column < 1 {
				t.Fatalf("Compile(%q): error at line %d, column %d", src, ce.Line, ce.Column)
			}
			return
		}
		a := base
		dec := json.NewDecoder(bytes.NewReader(inputsJSON))
		dec.UseNumber()
		var in map[string]any
		if dec.Decode(&in) == nil {
			a.Inputs = in
		}
		bound := env.Bind(a)
		start := time.Now()
		if number {
			_, _, _, err = p.Number(t.Context(), bound)
		} else {
			_, err = p.Bool(t.Context(), bound)
		}
		if err != nil && !errors.Is(err, ErrEval) {
			t.Fatalf("evaluating %q: %T %v, want an ErrEval", src, err, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("evaluating %q took %s", src, d)
		}
		for _, name := range p.Reads {
			bound.Value(name)
		}
	})
}
