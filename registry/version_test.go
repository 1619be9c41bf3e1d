package registry

import (
	"slices"
	"testing"
)

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		lower, higher string
	}{
		{"1.9.2", "1.10.0"},
		{"1.9", "2"},
		{"1", "2"},
		{"9", "10"},
		{"1.0", "1.0.0"},
		{"", "0"},
		{"", "a"},
		{"1.2.3", "1.2.10"},
		{"99999999999999999999", "100000000000000000000"}, // beyond int64
		{"1.01", "1.1"},        // numerically equal: ordered by text
		{"1.0.0", "1.0.0-rc1"}, // non-numeric part: lexicographic
		{"1.a", "1.b"},         // non-numeric part: lexicographic
		{"1.10", "1.9a"},       // "9a" is not numeric, so "10" < "9a" as text
		{"2024-01-31", "2024-02-01"},
	}
	for _, tt := range tests {
		t.Run(tt.lower+"<"+tt.higher, func(t *testing.T) {
			if got := CompareVersions(tt.lower, tt.higher); got != -1 {
				t.Errorf("CompareVersions(%q, %q) = %d, want -1", tt.lower, tt.higher, got)
			}
			if got := CompareVersions(tt.higher, tt.lower); got != 1 {
				t.Errorf("CompareVersions(%q, %q) = %d, want 1", tt.higher, tt.lower, got)
			}
			if got := CompareVersions(tt.lower, tt.lower); got != 0 {
				t.Errorf("CompareVersions(%q, %q) = %d, want 0", tt.lower, tt.lower, got)
			}
		})
	}
}

// TestCompareVersionsSorts checks the order is total and consistent: sorting
// any shuffle gives one result.
func TestCompareVersionsSorts(t *testing.T) {
	want := []string{"", "0", "1", "1.0", "1.0.0", "1.0.0-rc1", "1.01", "1.1", "1.9.2", "1.10.0", "2", "10", "10.0.1", "beta"}
	for _, shuffle := range [][]string{
		slices.Clone(want),
		reversed(want),
		{"1.10.0", "", "beta", "1.1", "2", "1.0", "10.0.1", "1.01", "0", "1.9.2", "1", "10", "1.0.0-rc1", "1.0.0"},
	} {
		got := slices.Clone(shuffle)
		slices.SortFunc(got, CompareVersions)
		if !slices.Equal(got, want) {
			t.Errorf("sorting %q gave %q, want %q", shuffle, got, want)
		}
	}
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}
