package schemas

import (
	"fmt"
	"strconv"
)

// Headers of a request sent again from a dead letter (`rulevalidator deadletter replay`).
// The request's own key, value and headers are kept; these are added, replacing any a
// previous replay set.
const (
	// HeaderReplayCount is how many times the request has been replayed: 1 the first
	// time, one more than the dead-lettered original's for each replay after.
	HeaderReplayCount = "rv-replay-count"
	// HeaderReplayTopic, HeaderReplayPartition and HeaderReplayOffset are where the
	// dead-lettered original was consumed from.
	HeaderReplayTopic     = "rv-replay-topic"
	HeaderReplayPartition = "rv-replay-partition"
	HeaderReplayOffset    = "rv-replay-offset"
	// HeaderReplayDeadLetter is the dead letter replayed, topic/partition/offset.
	HeaderReplayDeadLetter = "rv-replay-deadletter"
	// HeaderReplayTime is when the request was replayed, RFC 3339 in UTC.
	HeaderReplayTime = "rv-replay-time"
)

// ReplayHeaders are the headers a replay sets, in the order it sets them.
var ReplayHeaders = []string{HeaderReplayCount, HeaderReplayTopic, HeaderReplayPartition,
	HeaderReplayOffset, HeaderReplayDeadLetter, HeaderReplayTime}

// ReplayCount is the HeaderReplayCount of headers (the last one): 0 when there is none, an
// error naming the value when it is not a count.
func ReplayCount(headers []Header) (int, error) {
	for i := len(headers) - 1; i >= 0; i-- {
		if headers[i].Key != HeaderReplayCount {
			continue
		}
		n, err := strconv.Atoi(string(headers[i].Value))
		if err != nil || n < 0 {
			return 0, fmt.Errorf("header %s: %q is not a count of replays", HeaderReplayCount, truncate(string(headers[i].Value), 40))
		}
		return n, nil
	}
	return 0, nil
}
