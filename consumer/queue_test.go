package consumer

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// queueStep is one step of a queue script: items pushed for a tenant, or items popped with
// the tenants they must come from.
type queueStep struct {
	push string // tenant given items
	n    int    // how many, their seqs following the last pushed
	seqs []uint64
	pops string // tenants expected, space-separated; "-" for nothing to pop
}

func push(tenant string, n int) queueStep { return queueStep{push: tenant, n: n} }
func pushSeqs(tenant string, seqs ...uint64) queueStep {
	return queueStep{push: tenant, seqs: seqs}
}
func pops(tenants string) queueStep { return queueStep{pops: tenants} }

// TestTenantQueuesPick: the next item is the first of the tenant ranked lowest among those that
// may start, ties going to the tenant whose first item came first.
func TestTenantQueuesPick(t *testing.T) {
	tests := []struct {
		name  string
		ranks map[string]float64 // 0 for a tenant not named
		held  string             // tenants that may not start, space-separated
		steps []queueStep
	}{
		{
			name:  "a lone tenant gets every item, in order",
			steps: []queueStep{push("a", 5), pops("a a a a a -")},
		},
		{
			name:  "equal ranks: first come first served, across tenants",
			steps: []queueStep{push("a", 2), push("b", 2), push("a", 1), pops("a a b b a -")},
		},
		{
			name:  "ties go to the tenant whose first item came first, pushed in any order",
			steps: []queueStep{pushSeqs("b", 2, 4), pushSeqs("a", 1, 3), pops("a b a b -")},
		},
		{
			name:  "the lowest rank first, whatever came first",
			ranks: map[string]float64{"flood": 4, "calm": 0.5, "other": 2},
			steps: []queueStep{push("flood", 3), push("other", 2), push("calm", 2), pops("calm calm other other flood flood flood -")},
		},
		{
			name:  "a tenant that may not start is passed over; the others take the items",
			ranks: map[string]float64{"a": 0, "b": 1, "c": 2},
			held:  "a",
			steps: []queueStep{push("a", 2), push("b", 1), push("c", 1), pops("b c -")},
		},
		{
			name:  "nothing when every tenant with items is held",
			held:  "a b",
			steps: []queueStep{push("a", 2), push("b", 1), pops("-")},
		},
		{
			name:  "a held tenant without items changes nothing",
			held:  "c",
			steps: []queueStep{push("a", 1), push("b", 1), pops("a b -")},
		},
		{
			name:  "the empty tenant is a tenant like the others",
			ranks: map[string]float64{"a": 1},
			steps: []queueStep{push("a", 2), push("", 2), pops("  a a -")},
		},
		{
			name: "a tenant that comes back joins with its new items",
			steps: []queueStep{
				push("a", 1), push("b", 2), pops("a b"),
				push("a", 1), pops("b a -"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newTenantQueues[string]()
			held := strings.Fields(tt.held)
			rank := func(tenant string) (float64, bool) {
				return tt.ranks[tenant], !slices.Contains(held, tenant)
			}
			var seq uint64
			queued := 0
			for i, step := range tt.steps {
				if step.pops == "" {
					for range step.n {
						seq++
						q.push(step.push, seq, fmt.Sprintf("%s#%d", step.push, seq))
					}
					for _, s := range step.seqs {
						seq = max(seq, s)
						q.push(step.push, s, fmt.Sprintf("%s#%d", step.push, s))
					}
					queued += step.n + len(step.seqs)
					continue
				}
				var got []string
				for range strings.Split(step.pops, " ") {
					item, tenant, ok := q.pop(rank)
					if !ok {
						got = append(got, "-")
						break
					}
					queued--
					if !strings.HasPrefix(item, tenant+"#") {
						t.Errorf("step %d: item %q popped as tenant %q's", i, item, tenant)
					}
					got = append(got, tenant)
				}
				if g := strings.Join(got, " "); g != step.pops {
					t.Fatalf("step %d: popped %q, want %q", i, g, step.pops)
				}
				if q.len() != queued {
					t.Fatalf("step %d: len() = %d, want %d", i, q.len(), queued)
				}
			}
		})
	}
}

func TestTenantQueuesKeepEachTenantInSeqOrder(t *testing.T) {
	q := newTenantQueues[uint64]()
	for _, s := range []uint64{1, 4, 9, 3, 7} {
		q.push("a", s, s)
	}
	q.push("b", 2, 2)
	var got []uint64
	for {
		item, tenant, ok := q.pop(nil)
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

func TestTenantQueuesClear(t *testing.T) {
	q := newTenantQueues[int]()
	q.push("a", 1, 1)
	q.push("b", 2, 2)
	q.push("a", 3, 3)
	q.pop(nil)
	got := q.clear()
	slices.Sort(got)
	if want := []int{2, 3}; !slices.Equal(got, want) {
		t.Errorf("clear() = %v, want %v", got, want)
	}
	if q.len() != 0 {
		t.Errorf("len() after clear = %d", q.len())
	}
	if _, _, ok := q.pop(nil); ok {
		t.Error("pop after clear found an item")
	}
	q.push("c", 4, 4)
	if item, tenant, ok := q.pop(nil); !ok || tenant != "c" || item != 4 {
		t.Errorf("pop after clear and push = %v, %q, %v", item, tenant, ok)
	}
}
