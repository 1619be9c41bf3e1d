package ruleexpr

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func activation() Activation {
	return Activation{
		Inputs: map[string]any{
			"contract_value":    json.Number("250000"),
			"rate":              json.Number("0.75"),
			"counterparty_type": "supplier",
			"countries":         []any{"DE", "FR"},
			"personal_data":     true,
			"limits":            map[string]any{"liability": json.Number("1000000")},
			"nothing":           nil,
		},
		Documents: []Document{
			{Name: "MSA.pdf", MediaType: "application/pdf", Role: "primary", Pages: 12},
			{Name: "policy.txt", MediaType: "text/plain", Role: "auxiliary", Pages: 1},
		},
		Options: map[string]any{"generate_report": true, "model": "qwen"},
		Tenant:  "acme",
	}
}

func TestBool(t *testing.T) {
	tests := []struct {
		name, src string
		want      bool
		evalErr   bool
	}{
		{"int compared with int", "inputs.contract_value > 100000", true, false},
		{"int compared with double", "inputs.contract_value > 100000.5", true, false},
		{"double compared with int", "inputs.rate < 1", true, false},
		{"string equality", `inputs.counterparty_type == "supplier"`, true, false},
		{"string function", `inputs.counterparty_type.startsWith("sup")`, true, false},
		{"list membership", `"FR" in inputs.countries`, true, false},
		{"list size", `size(inputs.countries) == 3`, false, false},
		{"bool input", "inputs.personal_data", true, false},
		{"nested map", "inputs.limits.liability >= 1000000", true, false},
		{"index form", `inputs["counterparty_type"] != "customer"`, true, false},
		{"null input", "inputs.nothing == null", true, false},
		{"has on a missing input", "has(inputs.missing)", false, false},
		{"in on a missing input", `"missing" in inputs`, false, false},
		{"guarded missing input", `!has(inputs.missing) || inputs.missing > 3`, true, false},
		{"missing input fails at run time", "inputs.missing > 3", false, true},
		{"type mismatch fails at run time", "inputs.counterparty_type > 3", false, true},
		{"documents", `documents.exists(d, d.media_type == "application/pdf" && d.pages > 10)`, true, false},
		{"document names", `documents.map(d, d.name).exists(n, n.endsWith(".txt"))`, true, false},
		{"document roles", `documents.filter(d, d.role == "primary").size() == 1`, true, false},
		{"options", `has(options.generate_report) && options.generate_report`, true, false},
		{"tenant", `tenant == "acme"`, true, false},
	}
	env, err := NewEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	bound := env.Bind(activation())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := env.Compile(tc.src, ResultBool)
			if err != nil {
				t.Fatalf("Compile(%q): %v", tc.src, err)
			}
			got, err := p.Bool(t.Context(), bound)
			if tc.evalErr {
				if !errors.Is(err, ErrEval) {
					t.Fatalf("Bool(%q) = %v, %v; want an ErrEval", tc.src, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Bool(%q) = %v, %v; want %v", tc.src, got, err, tc.want)
			}
		})
	}
}

func TestNumber(t *testing.T) {
	tests := []struct {
		src     string
		want    float64
		isBool  bool
		boolean bool
	}{
		{"inputs.contract_value / 100000", 2, false, false},
		{"inputs.rate * 4.0", 3, false, false},
		{"size(inputs.countries)", 2, false, false},
		{"inputs.contract_value > 1", 0, true, true},
		{"dyn(inputs.rate)", 0.75, false, false},
	}
	env, _ := NewEnv(nil)
	bound := env.Bind(activation())
	for _, tc := range tests {
		p, err := env.Compile(tc.src, ResultNumber)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.src, err)
		}
		n, b, isBool, err := p.Number(t.Context(), bound)
		if err != nil || n != tc.want || isBool != tc.isBool || b != tc.boolean {
			t.Errorf("Number(%q) = %v, %v, %v, %v; want %v, %v, %v", tc.src, n, b, isBool, err, tc.want, tc.boolean, tc.isBool)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	declared := map[string]Type{"contract_value": TypeNumber, "counterparty_type": TypeString}
	tests := []struct {
		src        string
		want       Result
		line, col  int
		messageHas string
	}{
		{"inputs.contract_value >", ResultBool, 1, 24, "mismatched input"},
		{"inputs.contract_value > 1 &&\n  inputs.countries == []", ResultBool, 2, 10, `unknown input "countries"`},
		{`inputs["vendor"] == "x"`, ResultBool, 1, 8, `unknown input "vendor"`},
		{"contract_value > 1", ResultBool, 1, 1, "undeclared reference"},
		{`"a" + 1 == 2`, ResultBool, 1, 5, "no matching overload"},
		{`inputs.counterparty_type + "x"`, ResultBool, 1, 1, "must give a bool"},
		{`"x"`, ResultNumber, 1, 1, "must give a number"},
		{"   ", ResultBool, 1, 1, "empty expression"},
		{strings.Repeat("1 + ", 1100) + "1 > 0", ResultBool, 1, 1, "too long"},
	}
	env, err := NewEnv(declared)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		_, err := env.Compile(tc.src, tc.want)
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("Compile(%.40q) = %v; want an *Error", tc.src, err)
			continue
		}
		if ce.Line != tc.line || ce.Column != tc.col || !strings.Contains(ce.Message, tc.messageHas) {
			t.Errorf("Compile(%.40q) = %v; want line %d, column %d, %q", tc.src, ce, tc.line, tc.col, tc.messageHas)
		}
	}
}

func TestDeclaredTypes(t *testing.T) {
	env, _ := NewEnv(map[string]Type{"contract_value": TypeNumber, "count": TypeInteger, "counterparty_type": TypeInteger})
	bound := env.Bind(Activation{Inputs: map[string]any{
		"contract_value": json.Number("2"), "count": json.Number("2.5"), "counterparty_type": "supplier",
	}})
	// A declared number is a double whoever wrote it as an integer.
	p, err := env.Compile("inputs.contract_value / 4.0 == 0.5", ResultBool)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := p.Bool(t.Context(), bound); !ok || err != nil {
		t.Errorf("declared number: %v, %v", ok, err)
	}
	for _, src := range []string{"inputs.count > 1", `inputs.counterparty_type == 1`} {
		p, err := env.Compile(src, ResultBool)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Bool(t.Context(), bound); !errors.Is(err, ErrEval) || !strings.Contains(err.Error(), "declared integer") {
			t.Errorf("%s: %v; want a declared-type error", src, err)
		}
	}
}

func TestReadsAndValues(t *testing.T) {
	env, _ := NewEnv(nil)
	p, err := env.Compile(`inputs.contract_value > 10 && has(inputs.cap) && "FR" in inputs.countries && inputs["rate"] < 1`, ResultBool)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"cap", "contract_value", "countries", "rate"}; !slices.Equal(p.Reads, want) {
		t.Errorf("Reads = %v; want %v", p.Reads, want)
	}
	bound := env.Bind(activation())
	for name, want := range map[string]string{"contract_value": "250000", "counterparty_type": "supplier", "countries": `["DE","FR"]`, "nothing": "null"} {
		if got, ok := bound.Value(name); !ok || got != want {
			t.Errorf("Value(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	if _, ok := bound.Value("cap"); ok {
		t.Error("Value of an input not given reports it given")
	}
}

// Value quotes an input for a check's rationale and evidence: as given when
// short, clipped at a character boundary with its full size when long.
func TestValueClipsLargeInputs(t *testing.T) {
	env, err := NewEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("y", 600<<10)
	accents := strings.Repeat("é", MaxQuotedBytes) // two bytes each
	list := make([]any, 100_000)
	for i := range list {
		list[i] = "item"
	}
	full, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	b := env.Bind(Activation{Inputs: map[string]any{"short": "250000", "long": long, "accents": accents, "list": list}})
	for _, tc := range []struct {
		name, want string
	}{
		{"short", "250000"},
		{"long", strings.Repeat("y", MaxQuotedBytes) + "… [clipped: 614400 bytes in all]"},
		{"accents", strings.Repeat("é", MaxQuotedBytes/2) + fmt.Sprintf("… [clipped: %d bytes in all]", 2*MaxQuotedBytes)},
		{"list", string(full[:MaxQuotedBytes]) + fmt.Sprintf("… [clipped: %d bytes in all]", len(full))},
	} {
		got, given := b.Value(tc.name)
		if !given || got != tc.want {
			t.Errorf("Value(%s) = %.80q… (%d bytes), %v; want %.80q… (%d bytes)", tc.name, got, len(got), given, tc.want, len(tc.want))
		}
	}
	if _, given := b.Value("missing"); given {
		t.Error("Value of an input not given says it was given")
	}
}
