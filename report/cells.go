package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxCellChars is Excel's limit on the characters of one cell (counted in
// UTF-16 code units, as Excel counts them).
const MaxCellChars = 32767

// TruncationMarker ends a cell value cut to MaxCellChars.
const TruncationMarker = "… [truncated]"

// cellText makes untrusted text safe to store in a cell: invalid UTF-8 and the
// control characters XML 1.0 cannot carry are replaced (form and vertical
// feeds, which separate pages, become line breaks), and the result is capped
// at MaxCellChars. The text is always written as a string cell, never as a
// formula, whatever it starts with.
func cellText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\f', r == '\v':
			return '\n'
		case r == '\t', r == '\n', r == '\r':
			return r
		case r < 0x20, r == 0xFFFE, r == 0xFFFF:
			return '\uFFFD'
		}
		return r
	}, s)
	return capCell(s)
}

// capCell cuts s so that it and the marker fit in MaxCellChars UTF-16 units.
func capCell(s string) string {
	if utf16Len(s) <= MaxCellChars {
		return s
	}
	budget := MaxCellChars - utf16Len(TruncationMarker)
	used := 0
	for i, r := range s {
		n := utf16.RuneLen(r)
		if used+n > budget {
			return s[:i] + TruncationMarker
		}
		used += n
	}
	return s // unreachable: s is longer than the budget
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// Row heights in points: one line of 11-point Calibri, and Excel's maximum.
const (
	lineHeight   = 15.0
	maxRowHeight = 409.0
)

// wrappedLines estimates how many lines text takes in a column width units
// wide. A unit is the width of a digit; average body text fits about 1.15
// characters to the unit (Calibri fits more, wider substitutes less), so the
// estimate errs towards a little room to spare.
func wrappedLines(text string, width float64) int {
	perLine := max(int(width*1.15), 1)
	n := 0
	for line := range strings.SplitSeq(text, "\n") {
		n += max(1, (utf8.RuneCountInString(line)+perLine-1)/perLine)
	}
	return n
}

// truncateRunes shortens s to at most n runes, for labels such as chart titles.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// formatScores writes an allowed score set compactly: "0–100 (step 5)" for an
// arithmetic run of more than five values, "1, 2, 4" otherwise.
func formatScores(scores []int) string {
	if len(scores) == 0 {
		return ""
	}
	if len(scores) > 5 {
		step := scores[1] - scores[0]
		regular := step > 0
		for i := 2; regular && i < len(scores); i++ {
			regular = scores[i]-scores[i-1] == step
		}
		if regular {
			if step == 1 {
				return fmt.Sprintf("%d–%d", scores[0], scores[len(scores)-1])
			}
			return fmt.Sprintf("%d–%d (step %d)", scores[0], scores[len(scores)-1], step)
		}
	}
	parts := make([]string, len(scores))
	for i, s := range scores {
		parts[i] = strconv.Itoa(s)
	}
	return strings.Join(parts, ", ")
}

// scoreRange is the lowest and highest allowed score.
func scoreRange(scores []int) (lo, hi int, ok bool) {
	if len(scores) == 0 {
		return 0, 0, false
	}
	lo, hi = scores[0], scores[0]
	for _, s := range scores[1:] {
		lo, hi = min(lo, s), max(hi, s)
	}
	return lo, hi, true
}

// The 3-colour scale of Excel's default colour-scale rule: red at the lowest
// allowed score, yellow half way, green at the highest.
var (
	scaleLow  = rgb{0xF8, 0x69, 0x6B}
	scaleMid  = rgb{0xFF, 0xEB, 0x84}
	scaleHigh = rgb{0x63, 0xBE, 0x7B}
)

type rgb struct{ r, g, b uint8 }

func (c rgb) hex() string { return fmt.Sprintf("%02X%02X%02X", c.r, c.g, c.b) }

// scoreColour places score on the scale from lo to hi and returns the fill as
// RRGGBB. A single-valued range counts as the top of the scale.
func scoreColour(score, lo, hi int) string {
	if hi <= lo {
		return scaleHigh.hex()
	}
	f := float64(score-lo) / float64(hi-lo)
	f = math.Max(0, math.Min(1, f))
	if f <= 0.5 {
		return blend(scaleLow, scaleMid, f*2).hex()
	}
	return blend(scaleMid, scaleHigh, (f-0.5)*2).hex()
}

func blend(a, b rgb, f float64) rgb {
	mix := func(x, y uint8) uint8 { return uint8(math.Round(float64(x) + (float64(y)-float64(x))*f)) }
	return rgb{mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b)}
}
