package registry

import (
	"cmp"
	"strings"
)

// CompareVersions orders ruleset versions: -1 when a is lower than b, 0 when
// they are the same string, +1 when a is higher. Versions are compared as
// dot-separated parts, left to right; parts made only of digits compare as
// numbers of any size ("1.10.0" > "1.9.2", "2" > "1.9"), other parts compare
// as strings. When every part present in both is equal, the version with more
// parts is higher ("1.0.0" > "1.0"). The unversioned "" is lower than any
// version. Versions that differ only in leading zeros ("1.01" and "1.1") are
// ordered by their text, so the order is total and sorting is deterministic.
func CompareVersions(a, b string) int {
	if a == b {
		return 0
	}
	if a == "" {
		return -1
	}
	if b == "" {
		return 1
	}
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if c := comparePart(as[i], bs[i]); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(len(as), len(bs)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func comparePart(a, b string) int {
	if !numeric(a) || !numeric(b) {
		return strings.Compare(a, b)
	}
	// Compared as digit strings, so parts too big for an int still order.
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if c := cmp.Compare(len(a), len(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func numeric(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
