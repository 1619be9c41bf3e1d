package replay

import (
	"slices"
	"strconv"
	"time"

	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// Record is the record that replays d to topic at the given time: the original key, value and
// headers as they were, the headers of an earlier replay replaced by this one's (count one
// more than the original's, the original's position, the dead letter's, and when). d must
// have no Problem.
func Record(d *DeadLetter, topic string, at time.Time) stream.Record {
	dl := d.Letter
	headers := slices.DeleteFunc(slices.Clone(dl.OriginalHeaders), func(h stream.Header) bool {
		return slices.Contains(schemas.ReplayHeaders, h.Key)
	})
	orig := d.Original()
	headers = append(headers,
		stream.Header{Key: schemas.HeaderReplayCount, Value: []byte(strconv.Itoa(d.Replays + 1))},
		stream.Header{Key: schemas.HeaderReplayTopic, Value: []byte(orig.Topic)},
		stream.Header{Key: schemas.HeaderReplayPartition, Value: []byte(strconv.Itoa(orig.Partition))},
		stream.Header{Key: schemas.HeaderReplayOffset, Value: []byte(strconv.FormatInt(orig.Offset, 10))},
		stream.Header{Key: schemas.HeaderReplayDeadLetter, Value: []byte(d.At.String())},
		stream.Header{Key: schemas.HeaderReplayTime, Value: []byte(at.UTC().Format(time.RFC3339Nano))},
	)
	return stream.Record{Topic: topic, Key: dl.OriginalKey, Value: dl.OriginalValue, Headers: headers, Time: at}
}
