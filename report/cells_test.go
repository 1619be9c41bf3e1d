package report

import (
	"strings"
	"testing"
	"unicode/utf16"
)

func TestCellTextCap(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		capped bool
	}{
		{"short", "hello", false},
		{"exactly at the limit", strings.Repeat("a", MaxCellChars), false},
		{"one over", strings.Repeat("a", MaxCellChars+1), true},
		// Each emoji is two UTF-16 units, as Excel counts them.
		{"surrogate pairs", strings.Repeat("😀", MaxCellChars/2+1), true},
		{"multi-byte under the limit", strings.Repeat("é", MaxCellChars), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cellText(tt.in)
			units := len(utf16.Encode([]rune(got)))
			if units > MaxCellChars {
				t.Errorf("%d UTF-16 units, over %d", units, MaxCellChars)
			}
			if !tt.capped {
				if got != tt.in {
					t.Errorf("text under the limit was changed")
				}
				return
			}
			if !strings.HasSuffix(got, TruncationMarker) {
				t.Errorf("capped text does not end with %q", TruncationMarker)
			}
			if !strings.HasPrefix(tt.in, strings.TrimSuffix(got, TruncationMarker)) {
				t.Errorf("capped text is not a prefix of the original")
			}
		})
	}
}

func TestFormatScores(t *testing.T) {
	tests := []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{1, 2, 3, 4, 5}, "1, 2, 3, 4, 5"},
		{[]int{1, 2, 3, 4, 5, 6}, "1–6"},
		{[]int{0, 25, 50, 75, 100, 125}, "0–125 (step 25)"},
		{[]int{0, 1, 2, 3, 5, 8, 13}, "0, 1, 2, 3, 5, 8, 13"},
		{[]int{-2, 0, 7}, "-2, 0, 7"},
	}
	for _, tt := range tests {
		if got := formatScores(tt.in); got != tt.want {
			t.Errorf("formatScores(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestScoreColour(t *testing.T) {
	tests := []struct {
		score, lo, hi int
		want          string
	}{
		{1, 1, 5, "F8696B"},  // lowest: red
		{3, 1, 5, "FFEB84"},  // middle: yellow
		{5, 1, 5, "63BE7B"},  // highest: green
		{2, 1, 5, "FCAA78"},  // a quarter up: half way from red to yellow
		{9, 1, 5, "63BE7B"},  // out of range: clamped
		{-3, 1, 5, "F8696B"}, // out of range: clamped
		{7, 7, 7, "63BE7B"},  // a single allowed score
	}
	for _, tt := range tests {
		if got := scoreColour(tt.score, tt.lo, tt.hi); got != tt.want {
			t.Errorf("scoreColour(%d, %d, %d) = %s, want %s", tt.score, tt.lo, tt.hi, got, tt.want)
		}
	}
}

func TestWrappedLines(t *testing.T) {
	tests := []struct {
		text  string
		width float64
		want  int
	}{
		{"", 10, 1},
		{"short", 10, 1},
		{strings.Repeat("x", 11), 10, 1},
		{strings.Repeat("x", 12), 10, 2},
		{"a\nb\nc", 60, 3},
		{strings.Repeat("é", 100), 11, 9},
	}
	for _, tt := range tests {
		if got := wrappedLines(tt.text, tt.width); got != tt.want {
			t.Errorf("wrappedLines(%.20q, %v) = %d, want %d", tt.text, tt.width, got, tt.want)
		}
	}
}
