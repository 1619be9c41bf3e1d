package consumer

import (
	"cmp"
	"slices"
)

// offsetTracker decides, per partition, which offset may be committed: one such that every
// message fetched before it has been handled. It does not assume offsets are contiguous
// (compaction and transaction markers leave gaps), so it tracks the fetched offsets that are
// still in flight rather than counting. It is not safe for concurrent use.
type offsetTracker struct {
	partitions map[int]*partitionOffsets
}

type partitionOffsets struct {
	inFlight   []int64 // fetched and not yet handled, ascending
	maxFetched int64   // highest offset fetched; -1 before the first
	committed  int64   // offset last committed; -1 before the first commit
}

// commitPoint is a partition's offset to commit: the next offset the group should read there.
type commitPoint struct {
	partition int
	offset    int64
}

func newOffsetTracker() *offsetTracker {
	return &offsetTracker{partitions: make(map[int]*partitionOffsets)}
}

func (t *offsetTracker) partition(p int) *partitionOffsets {
	po, ok := t.partitions[p]
	if !ok {
		po = &partitionOffsets{maxFetched: -1, committed: -1}
		t.partitions[p] = po
	}
	return po
}

// fetched records that offset was fetched and is now in flight. It returns false, recording
// nothing, for an offset at or below one fetched before: a redelivery after a group rebalance
// re-read from the committed offset. Such a message is either in flight already or handled.
func (t *offsetTracker) fetched(partition int, offset int64) bool {
	po := t.partition(partition)
	if offset <= po.maxFetched {
		return false
	}
	po.maxFetched = offset
	po.inFlight = append(po.inFlight, offset)
	return true
}

// handled records that offset's effects are durable. It returns false for an offset that is
// not in flight.
func (t *offsetTracker) handled(partition int, offset int64) bool {
	po, ok := t.partitions[partition]
	if !ok {
		return false
	}
	i, found := slices.BinarySearch(po.inFlight, offset)
	if !found {
		return false
	}
	po.inFlight = slices.Delete(po.inFlight, i, i+1)
	return true
}

// commitPoint is the partition's commit point: its lowest offset still in flight, or, when none
// is, the highest fetched offset + 1 (everything fetched has been handled). ok is false before
// anything was fetched.
func (po *partitionOffsets) commitPoint() (offset int64, ok bool) {
	if len(po.inFlight) > 0 {
		return po.inFlight[0], true
	}
	if po.maxFetched < 0 {
		return 0, false
	}
	return po.maxFetched + 1, true
}

// uncommitted lists the partitions whose commit point is past their last commit, in partition
// order.
func (t *offsetTracker) uncommitted() []commitPoint {
	var out []commitPoint
	for p, po := range t.partitions {
		if off, ok := po.commitPoint(); ok && off > po.committed {
			out = append(out, commitPoint{partition: p, offset: off})
		}
	}
	slices.SortFunc(out, func(a, b commitPoint) int { return cmp.Compare(a.partition, b.partition) })
	return out
}

// committed records a successful commit of offset in partition. A stale value (an older
// commit finishing late) never moves the mark back.
func (t *offsetTracker) committed(partition int, offset int64) {
	po := t.partition(partition)
	po.committed = max(po.committed, offset)
}

// inFlightCount is the number of offsets in flight across partitions.
func (t *offsetTracker) inFlightCount() int {
	n := 0
	for _, po := range t.partitions {
		n += len(po.inFlight)
	}
	return n
}
