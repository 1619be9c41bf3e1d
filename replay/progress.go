package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// Marker records that a dead letter was replayed: the value of the progress topic's record
// keyed by the dead letter's position (Position.String), JSON. It is written only once the
// broker has acknowledged the replayed request.
type Marker struct {
	DeadLetter Position `json:"deadletter"`
	// FailedAt is the dead letter's failed_at: a dead letter at the same position with
	// another time (the dead-letter topic recreated) is not the one replayed.
	FailedAt time.Time `json:"failed_at"`
	Original Position  `json:"original"`
	// OriginalTime is the original's timestamp: another dead letter of the same original
	// (it was dead-lettered twice) is replayed with it, and not again.
	OriginalTime time.Time      `json:"original_time"`
	RequestID    string         `json:"request_id"`
	TenantID     string         `json:"tenant_id"`
	Reason       schemas.Reason `json:"reason"`
	// Replay is the replay count the request was sent with.
	Replay     int       `json:"replay"`
	ReplayedAt time.Time `json:"replayed_at"`
	// SentTo is where the replayed request was written.
	SentTo Position `json:"sent_to"`
	// Selection is the selection of the run that sent it (Filter.String).
	Selection string `json:"selection"`
}

// newMarker is the marker of d's replay.
func newMarker(d *DeadLetter, sentTo Position, at time.Time, selection string) Marker {
	return Marker{
		DeadLetter:   d.At,
		FailedAt:     schemas.EventTime(d.Letter.FailedAt),
		Original:     d.Original(),
		OriginalTime: schemas.EventTime(d.Letter.OriginalTimestamp),
		RequestID:    d.RequestID(),
		TenantID:     d.TenantID(),
		Reason:       d.Letter.Reason,
		Replay:       d.Replays + 1,
		ReplayedAt:   schemas.EventTime(at),
		SentTo:       sentTo,
		Selection:    selection,
	}
}

// record is the marker's record on the progress topic.
func (m Marker) record(topic string) (stream.Record, error) {
	value, err := json.Marshal(m)
	if err != nil {
		return stream.Record{}, fmt.Errorf("replay: encoding the marker of dead letter %s: %w", m.DeadLetter, err)
	}
	return stream.Record{Topic: topic, Key: []byte(m.DeadLetter.String()), Value: value, Time: m.ReplayedAt}, nil
}

// progress is what the progress topic says was replayed.
type progress struct {
	byDeadLetter map[string]Marker // by the progress topic's key
	byOriginal   map[Position]Marker
	// unreadable counts the records that are not markers, which are ignored.
	unreadable int
}

func newProgress() *progress {
	return &progress{byDeadLetter: map[string]Marker{}, byOriginal: map[Position]Marker{}}
}

// add records m, the latest for its keys.
func (p *progress) add(m Marker) {
	p.byDeadLetter[m.DeadLetter.String()] = m
	p.byOriginal[m.Original] = m
}

// read takes one record of the progress topic: a marker, or a tombstone (no value) that
// forgets the dead letter its key names.
func (p *progress) read(rec stream.Record) {
	if rec.Value == nil {
		if m, ok := p.byDeadLetter[string(rec.Key)]; ok {
			delete(p.byDeadLetter, string(rec.Key))
			if p.byOriginal[m.Original].DeadLetter == m.DeadLetter {
				delete(p.byOriginal, m.Original)
			}
		}
		return
	}
	var m Marker
	if err := json.Unmarshal(rec.Value, &m); err != nil || m.DeadLetter.String() != string(rec.Key) {
		p.unreadable++
		return
	}
	p.add(m)
}

// replayed returns the marker saying d was replayed: d's own, or that of another dead letter
// of the same original.
func (p *progress) replayed(d *DeadLetter) (Marker, bool) {
	if m, ok := p.byDeadLetter[d.At.String()]; ok && m.FailedAt.Equal(schemas.EventTime(d.Letter.FailedAt)) {
		return m, true
	}
	if m, ok := p.byOriginal[d.Original()]; ok && m.OriginalTime.Equal(schemas.EventTime(d.Letter.OriginalTimestamp)) {
		return m, true
	}
	return Marker{}, false
}

// readToEnd reads every partition of topic from its start up to where it ended when reached,
// calling handle for each record, from one goroutine per partition.
func readToEnd(ctx context.Context, client *stream.Client, topic string, logger *slog.Logger, handle func(stream.Record)) error {
	r, err := stream.NewReader(stream.ReaderConfig{
		Client: client,
		Topics: []string{topic},
		Start:  stream.FromStart,
		Handle: func(_ context.Context, rec stream.Record) { handle(rec) },
		Logger: logger,
	})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(runCtx) }) // returns nil when runCtx ends; failures are retried inside
	err = r.WaitReady(ctx)
	stop()
	wg.Wait()
	return err
}
