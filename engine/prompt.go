package engine

import (
	"regexp"
	"strconv"
	"strings"
)

// Document markers. Documents are wrapped in them in the user message; the
// model is told that everything between markers is data.
const (
	markerOpen  = "<------- "
	markerClose = " ------->"
)

// markerLike matches anything in untrusted text that could be read as one of
// our markers: a "<" followed (possibly after spaces or invisible format
// characters) by two or more dash-like characters.
var markerLike = regexp.MustCompile(`<[\s\p{Cf}]*[-‐‑‒–—―−]{2,}`)

// neutralize makes untrusted text unable to open or close a wrapper: the "<"
// of every marker-like sequence becomes "‹", which reads the same to a person
// but never matches a marker.
func neutralize(s string) string {
	if !strings.Contains(s, "<") {
		return s
	}
	return markerLike.ReplaceAllStringFunc(s, func(m string) string {
		return "‹" + m[1:]
	})
}

// markerName makes a name safe to print inside a marker: one line, no angle
// brackets, no dash runs that could end the marker early, bounded length.
func markerName(s string) string {
	var b strings.Builder
	prevDash := false
	for _, r := range s {
		switch {
		case r == '<' || r == '>':
			r = '_'
		case r < 0x20 || r == 0x7f || r == 0x2028 || r == 0x2029:
			r = ' '
		}
		dash := r == '-'
		if dash && prevDash {
			continue
		}
		prevDash = dash
		b.WriteRune(r)
		if b.Len() >= 200 {
			break
		}
	}
	return strings.TrimSpace(b.String())
}

func startMarker(kind, name string) string {
	return markerOpen + "Start of " + kind + ": " + name + markerClose
}
func endMarker(kind, name string) string {
	return markerOpen + "End of " + kind + ": " + name + markerClose
}
func pageMarker(page int) string { return markerOpen + "Page " + strconv.Itoa(page) + markerClose }

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
