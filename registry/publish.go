package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/engine"
)

// Publish writes rs to the compacted ruleset topic as one record: key = its
// id, value = the ruleset as JSON, and the VersionHeader when it has a version.
// brokers is a comma-separated list of bootstrap addresses (host:port). The
// write waits for every in-sync replica (acks=all). The ruleset is checked
// first, as it will be read back, and a ruleset without an id is refused.
//
// Records are partitioned by murmur2 of the key, as the Java client does, so
// that records for one id published by this and by Java tools stay in one
// partition, in order.
func Publish(ctx context.Context, brokers, topic string, rs *engine.Ruleset) error {
	if rs == nil {
		return errors.New("registry: publish: no ruleset given")
	}
	if rs.ID == "" {
		return fmt.Errorf("registry: publish: %w: the ruleset has no id, and the id is the record key", engine.ErrInvalidRuleset)
	}
	var addrs []string
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			addrs = append(addrs, b)
		}
	}
	if len(addrs) == 0 {
		return errors.New("registry: publish: no broker address given")
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
	msg := kafka.Message{Key: []byte(rs.ID), Value: value}
	if rs.Version != "" {
		msg.Headers = []kafka.Header{{Key: VersionHeader, Value: []byte(rs.Version)}}
	}

	w := &kafka.Writer{
		Addr:         kafka.TCP(addrs...),
		Topic:        topic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond,
	}
	err = w.WriteMessages(ctx, msg)
	if closeErr := w.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("registry: publish ruleset %q version %q to topic %s: %w", rs.ID, rs.Version, topic, err)
	}
	return nil
}
