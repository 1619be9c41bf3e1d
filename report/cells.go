package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"
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

// look is a cell style; styles are made once per distinct look.
type look struct {
	fill, font string
	bold       bool
	size       float64
	wrap       bool
	center     bool
	border     bool
	numFmt     string
}

func (b *builder) style(l look) (int, error) {
	if id, ok := b.styles[l]; ok {
		return id, nil
	}
	size := l.size
	if size == 0 {
		size = 11
	}
	s := &excelize.Style{
		// Name and size always, so that no reader falls back to odd defaults.
		Font:      &excelize.Font{Family: "Calibri", Bold: l.bold, Size: size, Color: l.font},
		Alignment: &excelize.Alignment{Vertical: "top", WrapText: l.wrap},
	}
	if l.center {
		s.Alignment.Horizontal = "center"
	}
	if l.fill != "" {
		s.Fill = excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{l.fill}}
	}
	if l.border {
		for _, side := range []string{"left", "right", "top", "bottom"} {
			s.Border = append(s.Border, excelize.Border{Type: side, Color: "BFBFBF", Style: 1})
		}
	}
	if l.numFmt != "" {
		s.CustomNumFmt = &l.numFmt
	}
	id, err := b.f.NewStyle(s)
	if err != nil {
		return 0, err
	}
	b.styles[l] = id
	return id, nil
}

// sheet writes cells of one sheet, keeping the first error so that layout
// code reads as a list of cells.
type sheet struct {
	b    *builder
	name string
	err  error
	// colWidths and lines size rows to their wrapped text: readers
	// (LibreOffice among them) do not grow rows on their own when a file is
	// opened, so each row gets an explicit height.
	colWidths map[int]float64
	lines     map[int]int
}

func newSheet(b *builder, name string) *sheet {
	return &sheet{b: b, name: name, colWidths: map[int]float64{}, lines: map[int]int{}}
}

func (s *sheet) cell(col, row int) string {
	name, err := excelize.CoordinatesToCellName(col, row)
	if err != nil && s.err == nil {
		s.err = err
	}
	return name
}

// text writes untrusted or fixed text as a string cell, never a formula.
func (s *sheet) text(col, row int, v string, l look) {
	if s.err != nil {
		return
	}
	cell := s.cell(col, row)
	v = cellText(v)
	if s.err = s.b.f.SetCellStr(s.name, cell, v); s.err == nil {
		s.styleCell(cell, l)
	}
	if l.wrap {
		s.lines[row] = max(s.lines[row], wrappedLines(v, s.colWidths[col]))
	}
}

// fitRows gives every row holding wrapped text the height of its tallest cell.
func (s *sheet) fitRows() {
	for row, n := range s.lines {
		if s.err != nil || n <= 1 {
			continue
		}
		s.err = s.b.f.SetRowHeight(s.name, row, min(lineHeight*float64(n)+2, maxRowHeight))
	}
}

func (s *sheet) int(col, row, v int, l look) {
	if s.err != nil {
		return
	}
	cell := s.cell(col, row)
	if s.err = s.b.f.SetCellInt(s.name, cell, int64(v)); s.err == nil {
		s.styleCell(cell, l)
	}
}

func (s *sheet) float(col, row int, v float64, l look) {
	if s.err != nil {
		return
	}
	cell := s.cell(col, row)
	if s.err = s.b.f.SetCellFloat(s.name, cell, v, -1, 64); s.err == nil {
		s.styleCell(cell, l)
	}
}

func (s *sheet) styleCell(cell string, l look) {
	if l == (look{}) {
		return
	}
	id, err := s.b.style(l)
	if err == nil {
		err = s.b.f.SetCellStyle(s.name, cell, cell, id)
	}
	s.err = err
}

func (s *sheet) widths(cols []column) {
	for i, c := range cols {
		if s.err != nil {
			return
		}
		col, _ := excelize.ColumnNumberToName(i + 1)
		s.err = s.b.f.SetColWidth(s.name, col, col, c.width)
		s.colWidths[i+1] = c.width
	}
}

// header writes a table header at row and freezes the rows down to it.
func (s *sheet) header(row int, cols []column) {
	for i, c := range cols {
		s.text(i+1, row, c.title, lookHeader)
	}
	if s.err != nil {
		return
	}
	s.err = s.b.f.SetPanes(s.name, &excelize.Panes{
		Freeze: true, YSplit: row, TopLeftCell: s.cell(1, row+1), ActivePane: "bottomLeft",
	})
}

// autoFilter puts a filter on the table whose header is at row, over n data rows.
func (s *sheet) autoFilter(row, cols, n int) {
	if s.err != nil {
		return
	}
	s.err = s.b.f.AutoFilter(s.name, s.cell(1, row)+":"+s.cell(cols, row+max(n, 1)), nil)
}

var (
	lookTitle    = look{bold: true, size: 14}
	lookSubtitle = look{font: "595959"}
	lookLabel    = look{bold: true, fill: "DDEBF7", border: true}
	lookValue    = look{border: true}
	lookCount    = look{border: true, center: true, bold: true, size: 12}
	lookHeader   = look{bold: true, font: "FFFFFF", fill: "1F4E78", border: true, wrap: true}
	lookBody     = look{wrap: true, border: true}
	lookScore    = look{border: true, center: true, bold: true, numFmt: "0.00"}
)

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
