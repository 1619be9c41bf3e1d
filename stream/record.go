package stream

import (
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/schemas"
)

// Header is one record header: the contracts' own type, so that what a record carries goes to
// schemas.Serde and into a dead letter without a conversion.
type Header = schemas.Header

// Record is one Kafka record, read or to be written. Partition, Offset and HighWaterMark are
// set on records read (and on records written, once acknowledged); a writer ignores them.
type Record struct {
	Topic     string
	Partition int
	Offset    int64
	// HighWaterMark is the partition's high-water mark when the record was fetched: the offset
	// the next produced record will get. HighWaterMark - Offset - 1 records are behind it.
	HighWaterMark int64
	Key, Value    []byte
	Headers       []Header
	Time          time.Time
}

// Where names the record's position for errors and logs: "topic t partition 2 offset 41".
func (r *Record) Where() string {
	return fmt.Sprintf("topic %s partition %d offset %d", r.Topic, r.Partition, r.Offset)
}

// HeaderValue returns the value of the last header named key.
func HeaderValue(headers []Header, key string) ([]byte, bool) {
	for i := len(headers) - 1; i >= 0; i-- {
		if headers[i].Key == key {
			return headers[i].Value, true
		}
	}
	return nil, false
}

// Size is an upper bound of the record's size in a record batch, framing included, as
// brokers count it against max.message.bytes (for one uncompressed record in its batch).
func (r *Record) Size() int {
	const (
		batchOverhead  = 61 // record batch header
		recordOverhead = 21 // length, attributes, deltas and counts, as varints at their widest
		headerOverhead = 10
	)
	n := batchOverhead + recordOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += headerOverhead + len(h.Key) + len(h.Value)
	}
	return n
}

func fromKafka(m kafka.Message) Record {
	r := Record{
		Topic:         m.Topic,
		Partition:     m.Partition,
		Offset:        m.Offset,
		HighWaterMark: m.HighWaterMark,
		Key:           m.Key,
		Value:         m.Value,
		Time:          m.Time,
	}
	if len(m.Headers) > 0 {
		r.Headers = make([]Header, len(m.Headers))
		for i, h := range m.Headers {
			r.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	return r
}

func toKafka(r Record) kafka.Message {
	m := kafka.Message{Topic: r.Topic, Key: r.Key, Value: r.Value, Time: r.Time}
	if len(r.Headers) > 0 {
		m.Headers = make([]kafka.Header, len(r.Headers))
		for i, h := range r.Headers {
			m.Headers[i] = kafka.Header{Key: h.Key, Value: h.Value}
		}
	}
	return m
}
