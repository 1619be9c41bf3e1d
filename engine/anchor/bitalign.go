package anchor

// Edit distances by Myers' bit-vector algorithm (J. ACM 1999), in the
// block-based form of Hyyrö (2003) for quotes longer than a machine word:
// one column of the edit-distance matrix is held as bit vectors of vertical
// differences (+1 or -1 between adjacent rows) and advanced by a handful of
// word operations per 64 rows, so aligning a quote of m code points with n
// code points of text costs O(n * m/64) rather than O(n * m).

// bitPattern is a quote prepared for bit-parallel alignment.
type bitPattern struct {
	m      int
	blocks int
	// peq[slot*blocks+b] has bit r set where rune 64*b+r of the quote is
	// the rune of that slot. Slot 0 stands for runes not in the quote.
	peq   []uint64
	ascii [128]int32 // slot of each ASCII rune
	other map[rune]int32
}

func newBitPattern(q []rune) *bitPattern {
	p := &bitPattern{m: len(q), blocks: (len(q) + 63) / 64}
	slots := int32(0)
	for _, r := range q {
		if p.slot(r) == 0 {
			slots++
			if r >= 0 && r < 128 {
				p.ascii[r] = slots
			} else {
				if p.other == nil {
					p.other = make(map[rune]int32)
				}
				p.other[r] = slots
			}
		}
	}
	p.peq = make([]uint64, int(slots+1)*p.blocks)
	for i, r := range q {
		p.peq[int(p.slot(r))*p.blocks+i/64] |= 1 << (i % 64)
	}
	return p
}

func (p *bitPattern) slot(r rune) int32 {
	if r >= 0 && r < 128 {
		return p.ascii[r]
	}
	return p.other[r]
}

// slots maps text to the quote's slots, once for all alignments with it.
func (p *bitPattern) slots(t []rune) []int32 {
	s := make([]int32, len(t))
	for i, r := range t {
		s[i] = p.slot(r)
	}
	return s
}

// advance moves one block of a column to the next column, given the block's
// vertical differences pv (+1) and mv (-1), the matches eq of the column's
// text rune in the block, and hin, the horizontal difference entering the
// block's top (-1, 0 or +1). It returns the new vertical differences and
// the horizontal differences leaving each row of the block (before
// shifting), ph (+1) and mh (-1).
func advance(pv, mv, eq uint64, hin int) (npv, nmv, ph, mh uint64) {
	xv := eq | mv
	if hin < 0 {
		eq |= 1
	}
	xh := (((eq & pv) + pv) ^ pv) | eq
	ph = mv | ^(xh | pv)
	mh = pv & xh
	sph, smh := ph<<1, mh<<1
	if hin < 0 {
		smh |= 1
	} else if hin > 0 {
		sph |= 1
	}
	return smh | ^(xv | sph), sph & xv, ph, mh
}

// column is the state of one column of the matrix.
type column struct{ pv, mv []uint64 }

func (p *bitPattern) newColumn() column {
	c := column{pv: make([]uint64, p.blocks), mv: make([]uint64, p.blocks)}
	for b := range c.pv {
		c.pv[b] = ^uint64(0) // column 0: row i is i, each row one more than the last
	}
	return c
}

// step advances c by the text rune of slot s; top is the horizontal
// difference in row 0 (0 when the text's prefix is free, +1 when it is
// not). It returns the horizontal difference in row m.
func (p *bitPattern) step(c column, s int32, top int) int {
	eqs := p.peq[int(s)*p.blocks : int(s+1)*p.blocks]
	h := top
	last := p.blocks - 1
	for b := range last {
		var ph, mh uint64
		c.pv[b], c.mv[b], ph, mh = advance(c.pv[b], c.mv[b], eqs[b], h)
		h = int(ph>>63) - int(mh>>63)
	}
	var ph, mh uint64
	c.pv[last], c.mv[last], ph, mh = advance(c.pv[last], c.mv[last], eqs[last], h)
	r := uint(p.m-1) % 64
	return int(ph>>r&1) - int(mh>>r&1)
}

// bestEnd finds the end e of the substring of the text (given as slots)
// whose edit distance to the quote is least, with the quote consumed whole
// and the text's prefix and suffix free, if that distance is at most k.
// Ties go to the earliest end.
func (p *bitPattern) bestEnd(t []int32, k int) (dist, e int, ok bool) {
	c := p.newColumn()
	score := p.m
	best, be := score, 0
	for j, s := range t {
		score += p.step(c, s, 0)
		if score < best {
			best, be = score, j+1
		}
	}
	if best > min(k, p.m) {
		return 0, 0, false
	}
	return best, be, true
}

// distance is the edit distance between the quote and the text t.
func (p *bitPattern) distance(t []int32) int {
	if p.m == 0 {
		return len(t)
	}
	c := p.newColumn()
	score := p.m
	for _, s := range t {
		score += p.step(c, s, 1)
	}
	return score
}

// bandedStart recovers where the least-cost alignment of q ending at e in
// t starts, with dist its distance, as semi-global alignment with
// per-cell start tracking finds it (ties: a substitution or match before a
// text rune left out, before a quote rune missing). Every path of cost at
// most dist into cell (m, e) keeps to the diagonals j-i within dist of
// e-m, so only those 2*dist+1 diagonals are computed.
func bandedStart(q, t []rune, dist, e int) int {
	m := len(q)
	lowDiag := e - m - dist // diagonal of band slot 0
	width := 2*dist + 1
	over := int32(dist + 1)
	cost := make([]int32, width+1) // slot width stays over: outside the band
	start := make([]int32, width+1)
	first := max(0, lowDiag) // first column computed
	for o := range cost {
		cost[o] = over
		if i := first - (lowDiag + o); o < width && i >= 0 && i <= m && i <= dist {
			cost[o], start[o] = int32(i), int32(first) // the column before text[first]
		}
	}
	for j := first + 1; j <= e; j++ {
		tj := t[j-1]
		// Slot o holds row i = j - lowDiag - o. Rows rise as o falls, so the
		// cell above (slot o+1) is already this column's and the cell to
		// the left (slot o-1) still the last column's.
		up, upStart := over, int32(0) // slot o+1 in this column
		for o := width - 1; o >= 0; o-- {
			i := j - lowDiag - o
			var v, st int32
			switch {
			case i < 0 || i > m:
				v = over
			case i == 0:
				v, st = 0, int32(j)
			default:
				v, st = cost[o], start[o] // diagonal: same slot, last column
				if q[i-1] != tj {
					v++
				}
				if o > 0 {
					if skip := cost[o-1] + 1; skip < v {
						v, st = skip, start[o-1]
					}
				}
				if miss := up + 1; miss < v {
					v, st = miss, upStart
				}
			}
			v = min(v, over)
			cost[o], start[o] = v, st
			up, upStart = v, st
		}
	}
	return int(start[e-m-lowDiag])
}

// alignBits finds the substring t[s:e] whose edit distance to q is least,
// with q consumed whole, if that distance is at most k; ties go to the
// earliest end. ts is t mapped by p.slots. The end and distance come from
// Myers' algorithm, the start from a band around that end. It agrees
// exactly with plain dynamic programming that carries each path's start
// along (semiGlobal in the tests).
func alignBits(p *bitPattern, q, t []rune, ts []int32, k int) (dist, s, e int, ok bool) {
	if len(q) == 0 {
		return 0, 0, 0, k >= 0
	}
	dist, e, ok = p.bestEnd(ts, k)
	if !ok {
		return 0, 0, 0, false
	}
	return dist, bandedStart(q, t, dist, e), e, true
}
