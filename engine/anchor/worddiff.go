package anchor

import (
	"strings"
)

// hunk is a stretch where the words of quote and span differ: quote words
// [q0, q1) stand where the span has words [s0, s1).
type hunk struct{ q0, q1, s0, s1 int }

// maxAlignedWords bounds the word alignment's table; longer texts are
// compared as one stretch.
const maxAlignedWords = 1 << 20

// wordHunks aligns a and b by their longest common subsequence of folded
// words and returns the stretches between the words they share.
func wordHunks(a, b []word) []hunk {
	// The words both start and end with need no table.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre].folded == b[pre].folded {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf].folded == b[len(b)-1-suf].folded {
		suf++
	}
	am, bm := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if len(am) == 0 && len(bm) == 0 {
		return nil
	}
	if len(am) == 0 || len(bm) == 0 || len(am)*len(bm) > maxAlignedWords {
		return []hunk{{pre, pre + len(am), pre, pre + len(bm)}}
	}
	x, y := am, bm
	// lcs[i*w+j] is the length of the longest common subsequence of x[i:]
	// and y[j:].
	w := len(y) + 1
	lcs := make([]int32, (len(x)+1)*w)
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i].folded == y[j].folded {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	var out []hunk
	h := hunk{pre, pre, pre, pre}
	flush := func() {
		if h.q1 > h.q0 || h.s1 > h.s0 {
			out = append(out, h)
		}
	}
	for i, j := 0, 0; i < len(x) || j < len(y); {
		switch {
		case i < len(x) && j < len(y) && x[i].folded == y[j].folded:
			flush()
			i, j = i+1, j+1
			h = hunk{pre + i, pre + i, pre + j, pre + j}
		case j < len(y) && (i == len(x) || lcs[i*w+j+1] >= lcs[(i+1)*w+j]):
			j++
			h.s1 = pre + j
		default:
			i++
			h.q1 = pre + i
		}
	}
	flush()
	return out
}

// runsOf is the runs of consecutive words chosen by pick, each written as
// in its text.
func runsOf(ws []word, pick func(word) bool) []string {
	var runs, run []string
	for _, w := range ws {
		if pick(w) {
			run = append(run, w.text)
			continue
		}
		if len(run) > 0 {
			runs = append(runs, strings.Join(run, " "))
			run = nil
		}
	}
	if len(run) > 0 {
		runs = append(runs, strings.Join(run, " "))
	}
	return runs
}
