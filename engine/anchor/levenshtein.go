package anchor

import "unicode/utf8"

// WithinEdits reports whether a and b are at most k edits apart (insertions,
// deletions or substitutions of characters): the Levenshtein distance, in
// runes, stopped as soon as it exceeds k.
func WithinEdits(a, b string, k int) bool {
	if abs(utf8.RuneCountInString(a)-utf8.RuneCountInString(b)) > k {
		return false
	}
	return levenshteinWithin([]rune(a), []rune(b), k)
}

// levenshteinWithin reports whether a and b are within k edits.
func levenshteinWithin(a, b []rune, k int) bool {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		best := cur[0]
		for j := 1; j <= len(b); j++ {
			v := prev[j-1]
			if a[i-1] != b[j-1] {
				v = 1 + min(prev[j-1], prev[j], cur[j-1])
			}
			cur[j] = v
			best = min(best, v)
		}
		if best > k {
			return false
		}
		prev, cur = cur, prev
	}
	return prev[len(b)] <= k
}
