package consumer

import (
	"slices"
	"testing"
)

// trackerOp is one step against an offsetTracker: a fetch or a handled offset, with the
// result the tracker should give.
type trackerOp struct {
	fetch     bool // true: fetched; false: handled
	partition int
	offset    int64
	want      bool
}

func fetch(p int, off int64) trackerOp {
	return trackerOp{fetch: true, partition: p, offset: off, want: true}
}
func refetch(p int, off int64) trackerOp {
	return trackerOp{fetch: true, partition: p, offset: off, want: false}
}
func done(p int, off int64) trackerOp    { return trackerOp{partition: p, offset: off, want: true} }
func unknown(p int, off int64) trackerOp { return trackerOp{partition: p, offset: off, want: false} }

func TestOffsetTrackerCommitPoint(t *testing.T) {
	tests := []struct {
		name string
		ops  []trackerOp
		want []commitPoint
	}{
		{
			name: "nothing fetched: nothing to commit",
			want: nil,
		},
		{
			name: "fetched, none handled: the first fetched offset",
			ops:  []trackerOp{fetch(0, 0), fetch(0, 1), fetch(0, 2)},
			want: []commitPoint{{0, 0}},
		},
		{
			name: "all handled in order: one past the last",
			ops:  []trackerOp{fetch(0, 0), fetch(0, 1), fetch(0, 2), done(0, 0), done(0, 1), done(0, 2)},
			want: []commitPoint{{0, 3}},
		},
		{
			name: "later offsets handled first: held at the lowest in flight",
			ops: []trackerOp{
				fetch(0, 0), fetch(0, 1), fetch(0, 2), fetch(0, 3), fetch(0, 4),
				done(0, 4), done(0, 2), done(0, 3),
			},
			want: []commitPoint{{0, 0}},
		},
		{
			name: "out of order, the lowest finished: jumps past what finished",
			ops: []trackerOp{
				fetch(0, 0), fetch(0, 1), fetch(0, 2), fetch(0, 3), fetch(0, 4),
				done(0, 4), done(0, 2), done(0, 0),
			},
			want: []commitPoint{{0, 1}},
		},
		{
			name: "out of order, then all finished",
			ops: []trackerOp{
				fetch(0, 0), fetch(0, 1), fetch(0, 2), fetch(0, 3), fetch(0, 4),
				done(0, 4), done(0, 2), done(0, 3), done(0, 1), done(0, 0),
			},
			want: []commitPoint{{0, 5}},
		},
		{
			name: "gaps: the commit point skips offsets that do not exist",
			ops:  []trackerOp{fetch(0, 10), fetch(0, 13), fetch(0, 20), done(0, 10), done(0, 13)},
			want: []commitPoint{{0, 20}},
		},
		{
			name: "gaps, in-flight in the middle",
			ops:  []trackerOp{fetch(0, 10), fetch(0, 13), fetch(0, 20), done(0, 10), done(0, 20)},
			want: []commitPoint{{0, 13}},
		},
		{
			name: "gaps, all handled: one past the highest fetched",
			ops:  []trackerOp{fetch(0, 10), fetch(0, 13), fetch(0, 20), done(0, 20), done(0, 10), done(0, 13)},
			want: []commitPoint{{0, 21}},
		},
		{
			name: "redelivery after a rebalance is refused and changes nothing",
			ops: []trackerOp{
				fetch(0, 0), fetch(0, 1), fetch(0, 2), done(0, 0), done(0, 2),
				refetch(0, 0), refetch(0, 1), refetch(0, 2), fetch(0, 3),
			},
			want: []commitPoint{{0, 1}},
		},
		{
			name: "handling an offset never fetched, or twice, is refused",
			ops:  []trackerOp{fetch(0, 5), unknown(0, 4), unknown(1, 5), done(0, 5), unknown(0, 5)},
			want: []commitPoint{{0, 6}},
		},
		{
			name: "partitions are independent",
			ops: []trackerOp{
				fetch(0, 0), fetch(1, 0), fetch(0, 1), fetch(1, 1), fetch(2, 7),
				done(0, 1), done(1, 0), done(1, 1),
			},
			want: []commitPoint{{0, 0}, {1, 2}, {2, 7}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newOffsetTracker()
			for i, op := range tt.ops {
				var got bool
				if op.fetch {
					got = tr.fetched(op.partition, op.offset)
				} else {
					got = tr.handled(op.partition, op.offset)
				}
				if got != op.want {
					t.Errorf("step %d (%+v) returned %v, want %v", i, op, got, op.want)
				}
			}
			if got := tr.uncommitted(); !slices.Equal(got, tt.want) {
				t.Errorf("uncommitted() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOffsetTrackerCommitted(t *testing.T) {
	tr := newOffsetTracker()
	for _, op := range []trackerOp{fetch(0, 0), fetch(0, 1), fetch(1, 4), done(0, 0), done(1, 4)} {
		if op.fetch {
			tr.fetched(op.partition, op.offset)
		} else {
			tr.handled(op.partition, op.offset)
		}
	}
	if got, want := tr.uncommitted(), []commitPoint{{0, 1}, {1, 5}}; !slices.Equal(got, want) {
		t.Fatalf("before any commit: uncommitted() = %v, want %v", got, want)
	}

	tr.committed(0, 1)
	tr.committed(1, 5)
	if got := tr.uncommitted(); len(got) != 0 {
		t.Fatalf("after committing both: uncommitted() = %v, want none", got)
	}

	tr.handled(0, 1)
	tr.committed(0, 1) // a late, stale commit must not move the mark back
	if got, want := tr.uncommitted(), []commitPoint{{0, 2}}; !slices.Equal(got, want) {
		t.Fatalf("after handling 0@1: uncommitted() = %v, want %v", got, want)
	}
	tr.committed(0, 2)
	tr.committed(0, 1)
	if got := tr.uncommitted(); len(got) != 0 {
		t.Fatalf("after a stale commit: uncommitted() = %v, want none", got)
	}
	if got := tr.inFlightCount(); got != 0 {
		t.Fatalf("inFlightCount() = %d, want 0", got)
	}
}
