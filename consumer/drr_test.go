package consumer

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// drrStep is one step of a scheduler script: items pushed for a tenant, a weight changed, or
// items popped with the tenants they must come from.
type drrStep struct {
	push   string // tenant given items
	n      int    // how many, their seqs following the last pushed
	seqs   []uint64
	weight map[string]int // weights set from this step on
	pops   string         // tenants expected, space-separated; "-" for an empty scheduler
}

func push(tenant string, n int) drrStep { return drrStep{push: tenant, n: n} }
func pushSeqs(tenant string, seqs ...uint64) drrStep {
	return drrStep{push: tenant, seqs: seqs}
}
func setWeights(w map[string]int) drrStep { return drrStep{weight: w} }
func pops(tenants string) drrStep         { return drrStep{pops: tenants} }

func TestDRRTurns(t *testing.T) {
	tests := []struct {
		name    string
		weights map[string]int
		steps   []drrStep
	}{
		{
			name:  "a lone tenant gets every turn",
			steps: []drrStep{push("a", 5), pops("a a a a a -")},
		},
		{
			name:  "equal weights alternate",
			steps: []drrStep{push("a", 4), push("b", 4), pops("a b a b a b a b -")},
		},
		{
			name:    "a turn lasts the tenant's weight",
			weights: map[string]int{"a": 3, "c": 2},
			steps:   []drrStep{push("a", 6), push("b", 6), push("c", 6), pops("a a a b c c a a a b c c b c c b b b -")},
		},
		{
			name:  "a tenant that runs out leaves the round; the others go on",
			steps: []drrStep{push("a", 3), push("b", 1), push("c", 3), pops("a b c a c a c -")},
		},
		{
			name: "a tenant that joins waits for the tenants ahead of it, not for their backlog",
			steps: []drrStep{
				push("flood", 100), pops("flood flood flood"),
				push("calm", 2), pops("flood calm flood calm flood flood"),
			},
		},
		{
			name:    "a tenant that joins behind a heavy one waits one turn of it",
			weights: map[string]int{"flood": 4},
			steps: []drrStep{
				push("flood", 100), pops("flood"),
				push("calm", 1), pops("flood flood flood calm flood flood"),
			},
		},
		{
			name:    "no saving up: a tenant that leaves forgets what was left of its turn",
			weights: map[string]int{"a": 3},
			steps: []drrStep{
				push("a", 1), push("b", 5), pops("a b b"),
				push("a", 5), pops("b a a a b a a b -"),
			},
		},
		{
			name:    "a raised weight applies from the next turn",
			weights: map[string]int{"a": 1},
			steps: []drrStep{
				push("a", 10), push("b", 10), pops("a b"),
				setWeights(map[string]int{"a": 3}), pops("a a a b a a a b"),
			},
		},
		{
			name:    "a lowered weight cuts the turn in progress short",
			weights: map[string]int{"a": 4},
			steps: []drrStep{
				push("a", 10), push("b", 10), pops("a a"),
				setWeights(map[string]int{"a": 1}), pops("a b a b"),
			},
		},
		{
			name:    "weights below one count as one",
			weights: map[string]int{"a": 0, "b": -3},
			steps:   []drrStep{push("a", 2), push("b", 2), pops("a b a b -")},
		},
		{
			name:  "the empty tenant is a tenant like the others",
			steps: []drrStep{push("", 2), push("a", 2), pops(" a  a -")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			weights := maps.Clone(tt.weights)
			s := newDRR[string](func(tenant string) int {
				if w, ok := weights[tenant]; ok {
					return w
				}
				return 1
			})
			var seq uint64
			for i, step := range tt.steps {
				switch {
				case step.push != "" || step.n > 0 || step.seqs != nil:
					for range step.n {
						seq++
						s.push(step.push, seq, fmt.Sprintf("%s#%d", step.push, seq))
					}
					for _, q := range step.seqs {
						s.push(step.push, q, fmt.Sprintf("%s#%d", step.push, q))
					}
				case step.weight != nil:
					maps.Copy(weights, step.weight)
				default:
					var got []string
					for _, want := range strings.Split(step.pops, " ") {
						item, tenant, ok := s.pop()
						if want == "-" {
							if ok {
								got = append(got, tenant)
							} else {
								got = append(got, "-")
							}
							break
						}
						if !ok {
							got = append(got, "-")
							break
						}
						if !strings.HasPrefix(item, tenant+"#") {
							t.Errorf("step %d: item %q popped as tenant %q's", i, item, tenant)
						}
						got = append(got, tenant)
					}
					if g := strings.Join(got, " "); g != step.pops {
						t.Fatalf("step %d: popped %q, want %q", i, g, step.pops)
					}
				}
			}
		})
	}
}

// TestDRRShares runs many rounds of always-busy tenants: each gets items in proportion to its
// weight, whatever the order the tenants arrived in.
func TestDRRShares(t *testing.T) {
	tests := []struct {
		name    string
		weights map[string]int
		pops    int
	}{
		{"equal", map[string]int{"a": 1, "b": 1, "c": 1}, 3000},
		{"3:1", map[string]int{"a": 3, "b": 1}, 4000},
		{"5:2:1", map[string]int{"big": 5, "mid": 2, "small": 1}, 8000},
		{"one", map[string]int{"only": 7}, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newDRR[int](func(tenant string) int { return tt.weights[tenant] })
			tenants := slices.Sorted(maps.Keys(tt.weights))
			var seq uint64
			for _, tenant := range tenants {
				for range tt.pops {
					seq++
					s.push(tenant, seq, int(seq))
				}
			}
			got := make(map[string]int)
			for range tt.pops {
				_, tenant, ok := s.pop()
				if !ok {
					t.Fatal("scheduler ran dry")
				}
				got[tenant]++
			}
			total := 0
			for _, w := range tt.weights {
				total += w
			}
			for tenant, w := range tt.weights {
				want := tt.pops * w / total
				if got[tenant] != want {
					t.Errorf("tenant %s (weight %d) got %d of %d, want %d", tenant, w, got[tenant], tt.pops, want)
				}
			}
		})
	}
}

func TestDRRKeepsEachTenantInSeqOrder(t *testing.T) {
	s := newDRR[uint64](nil)
	for _, q := range []uint64{1, 4, 9, 3, 7} {
		s.push("a", q, q)
	}
	s.push("b", 2, 2)
	var got []uint64
	for {
		item, tenant, ok := s.pop()
		if !ok {
			break
		}
		if tenant == "a" {
			got = append(got, item)
		}
	}
	if want := []uint64{1, 3, 4, 7, 9}; !slices.Equal(got, want) {
		t.Errorf("tenant a's items came out as %v, want %v (by seq)", got, want)
	}
}

func TestDRRClear(t *testing.T) {
	s := newDRR[int](nil)
	s.push("a", 1, 1)
	s.push("b", 2, 2)
	s.push("a", 3, 3)
	s.pop()
	got := s.clear()
	slices.Sort(got)
	if want := []int{2, 3}; !slices.Equal(got, want) {
		t.Errorf("clear() = %v, want %v", got, want)
	}
	if s.len() != 0 {
		t.Errorf("len() after clear = %d", s.len())
	}
	if _, _, ok := s.pop(); ok {
		t.Error("pop after clear found an item")
	}
	s.push("c", 4, 4)
	if item, tenant, ok := s.pop(); !ok || tenant != "c" || item != 4 {
		t.Errorf("pop after clear and push = %v, %q, %v", item, tenant, ok)
	}
}

// TestDRRPassesOverHeldTenants: a tenant that may not start is passed over where it stands,
// keeping its place and what is left of its turn; the others take the items meanwhile.
func TestDRRPassesOverHeldTenants(t *testing.T) {
	type pick struct {
		held string // tenants that may not start, space-separated
		want string // the tenant popped; "-" for none
	}
	tests := []struct {
		name    string
		weights map[string]int
		pushes  []drrStep
		picks   []pick
	}{
		{
			name:   "the others take the items while a tenant is held",
			pushes: []drrStep{push("a", 3), push("b", 3), push("c", 3)},
			picks:  []pick{{"a", "b"}, {"a", "c"}, {"a", "b"}, {"a", "c"}, {"", "a"}, {"", "b"}},
		},
		{
			name:    "a held tenant keeps what is left of its turn",
			weights: map[string]int{"a": 3},
			pushes:  []drrStep{push("a", 6), push("b", 6)},
			picks:   []pick{{"", "a"}, {"a", "b"}, {"a", "b"}, {"", "a"}, {"", "a"}, {"", "b"}, {"", "a"}},
		},
		{
			name:   "nothing when every tenant with items is held",
			pushes: []drrStep{push("a", 2), push("b", 1)},
			picks:  []pick{{"a b", "-"}, {"a", "b"}, {"a", "-"}, {"", "a"}, {"", "a"}, {"", "-"}},
		},
		{
			name:   "a held tenant without items changes nothing",
			pushes: []drrStep{push("a", 2), push("b", 2)},
			picks:  []pick{{"c", "a"}, {"c", "b"}, {"c", "a"}, {"c", "b"}, {"c", "-"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newDRR[string](func(tenant string) int {
				if w, ok := tt.weights[tenant]; ok {
					return w
				}
				return 1
			})
			var seq uint64
			for _, step := range tt.pushes {
				for range step.n {
					seq++
					s.push(step.push, seq, fmt.Sprintf("%s#%d", step.push, seq))
				}
			}
			queued := s.len()
			for i, p := range tt.picks {
				held := strings.Fields(p.held)
				item, tenant, ok := s.popWhere(func(tenant string) bool { return !slices.Contains(held, tenant) })
				got := tenant
				if !ok {
					got = "-"
				} else {
					queued--
					if !strings.HasPrefix(item, tenant+"#") {
						t.Errorf("pick %d: item %q popped as tenant %q's", i, item, tenant)
					}
				}
				if got != p.want {
					t.Fatalf("pick %d (held %q): popped %q, want %q", i, p.held, got, p.want)
				}
				if s.len() != queued {
					t.Fatalf("pick %d: len() = %d, want %d", i, s.len(), queued)
				}
			}
		})
	}
}
