package report

import (
	"strings"
)

// maxFileNamePart bounds each of the ruleset and request parts of a file name.
const maxFileNamePart = 60

// FileName is the report's download name,
// validation-report-<ruleset>-<request>.xlsx, kept to [A-Za-z0-9._-] and at
// most 150 bytes so that it is safe in a Content-Disposition header and on
// any file system.
func FileName(meta Meta) string {
	name := "validation-report"
	for _, part := range []string{meta.RulesetID, meta.RequestID} {
		if p := fileNamePart(part); p != "" {
			name += "-" + p
		}
	}
	return name + ".xlsx"
}

func fileNamePart(s string) string {
	var b strings.Builder
	last := rune(0)
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
		case r == '.' || r == '-':
			if last == '.' || last == '-' {
				continue // no "..", no runs of separators
			}
		default:
			if last == '-' || last == '.' {
				continue
			}
			r = '-'
		}
		b.WriteRune(r)
		last = r
	}
	out := b.String()
	if len(out) > maxFileNamePart {
		out = out[:maxFileNamePart]
	}
	return strings.Trim(out, ".-")
}
