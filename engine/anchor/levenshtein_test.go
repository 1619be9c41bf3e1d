package anchor_test

import (
	"testing"

	"rulevalidator/engine/anchor"
)

func TestWithinEdits(t *testing.T) {
	tests := []struct {
		a, b string
		k    int
		want bool
	}{
		{"primary_docs", "primary_docs", 0, true},
		{"primary_docs", "primary_doc", 0, false},
		{"primary_docs", "primary_doc", 1, true},
		{"primry_dcs", "primary_docs", 2, true},
		{"primry_dc", "primary_docs", 2, false},
		{"message", "massage", 1, true},
		{"text_input", "input_text", 2, false},
		{"", "ab", 2, true},
		{"", "abc", 2, false},
		// Characters, not bytes: é for e is one edit.
		{"méssage", "message", 1, true},
		{"naïve", "naive", 0, false},
	}
	for _, tt := range tests {
		if got := anchor.WithinEdits(tt.a, tt.b, tt.k); got != tt.want {
			t.Errorf("WithinEdits(%q, %q, %d) = %v, want %v", tt.a, tt.b, tt.k, got, tt.want)
		}
	}
}
