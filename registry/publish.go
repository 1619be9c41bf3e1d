package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"rulevalidator/engine"
	"rulevalidator/stream"
)

// Publish writes rs to the compacted ruleset topic as one record: key = its
// id, value = the ruleset as JSON, and the VersionHeader when it has a version.
// The write waits for every in-sync replica (acks=all). The ruleset is
// checked first, as it will be read back, and a ruleset without an id is
// refused.
//
// Records are partitioned by the stream writer's murmur2, as the Java client
// does, so that records for one id published by this and by Java tools stay
// in one partition, in order.
func Publish(ctx context.Context, client *stream.Client, topic string, rs *engine.Ruleset) error {
	if rs == nil {
		return errors.New("registry: publish: no ruleset given")
	}
	if rs.ID == "" {
		return fmt.Errorf("registry: publish: %w: the ruleset has no id, and the id is the record key", engine.ErrInvalidRuleset)
	}
	if client == nil {
		return errors.New("registry: publish: no Kafka client given")
	}
	if topic == "" {
		return errors.New("registry: publish: no topic given")
	}
	value, err := json.Marshal(rs)
	if err != nil {
		return fmt.Errorf("registry: publish ruleset %q: encoding it: %w", rs.ID, err)
	}
	// Checked as readers will parse it, so a record that Topic would skip is
	// never written.
	if _, err := engine.ParseRuleset(value); err != nil {
		return fmt.Errorf("registry: publish ruleset %q version %q: %w", rs.ID, rs.Version, err)
	}
	msg := stream.Record{Topic: topic, Key: []byte(rs.ID), Value: value}
	if rs.Version != "" {
		msg.Headers = []stream.Header{{Key: VersionHeader, Value: []byte(rs.Version)}}
	}

	w, err := stream.NewWriter(ctx, stream.WriterConfig{Client: client, Topics: []string{topic}})
	if err != nil {
		return fmt.Errorf("registry: publish ruleset %q version %q to topic %s: %w", rs.ID, rs.Version, topic, err)
	}
	err = w.Write(ctx, msg)
	if closeErr := w.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("registry: publish ruleset %q version %q to topic %s: %w", rs.ID, rs.Version, topic, err)
	}
	return nil
}
