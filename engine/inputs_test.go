package engine_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"rulevalidator/engine"
)

func TestInputsValidate(t *testing.T) {
	tests := []struct {
		name string
		in   *engine.Inputs
		want []string
	}{
		{name: "nil", in: nil, want: []string{
			"inputs: no inputs: give at least one of primary_docs, auxiliary_docs, text_input, named_inputs or message"}},
		{name: "nothing to judge", in: &engine.Inputs{TextInput: "\n", Message: " "}, want: []string{
			"inputs: no inputs: give at least one of primary_docs, auxiliary_docs, text_input, named_inputs or message"}},
		{name: "fine", in: &engine.Inputs{
			PrimaryDocs: []engine.Document{{Name: "a", Pages: []string{"x", ""}}},
			NamedInputs: []engine.NamedInput{{Name: "n", Value: map[string]any{"k": []int{1}}}},
		}},
		{
			name: "document problems",
			in: &engine.Inputs{
				PrimaryDocs:   []engine.Document{{Name: "a", Pages: []string{"x\fy"}}, {Name: " ", Pages: []string{"x"}}},
				AuxiliaryDocs: []engine.Document{{Name: "a", Pages: []string{"z"}}, {Name: "empty", Pages: []string{" "}}, {Name: "none"}},
			},
			want: []string{
				`inputs: primary_docs[0].pages[0]: must not contain a form feed ("\f" separates pages)`,
				"inputs: primary_docs[1].name: missing or blank",
				`inputs: auxiliary_docs[0]: duplicate document name "a" (primary_docs[0] has it too)`,
				`inputs: auxiliary_docs[1]: document "empty" is empty: give its text as content, text, markdown or pages`,
				`inputs: auxiliary_docs[2]: document "none" is empty: give its text as content, text, markdown or pages`,
			},
		},
		{
			name: "named input problems",
			in: &engine.Inputs{NamedInputs: []engine.NamedInput{
				{Name: "a", Value: 1}, {Name: "a", Value: 2}, {Name: "", Value: 3}, {Name: "c", Value: math.Inf(-1)}, {Name: "d", Value: make(chan int)},
			}},
			want: []string{
				`inputs: named_inputs[1].name: duplicate name "a" (named_inputs[0] has it too)`,
				"inputs: named_inputs[2].name: missing or blank",
				"inputs: named_inputs[3].value: cannot be written as JSON: json: unsupported value: -Inf",
				"inputs: named_inputs[4].value: cannot be written as JSON: json: unsupported type: chan int",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.in.Validate()
			if got := joinedErrorLines(err); !slices.Equal(got, tc.want) {
				t.Fatalf("Validate errors:\n got %q\nwant %q", got, tc.want)
			}
			if err != nil && !errors.Is(err, engine.ErrInvalidInput) {
				t.Errorf("errors.Is(err, ErrInvalidInput) = false for %v", err)
			}
		})
	}
}
