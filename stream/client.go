// Package stream is the service's one boundary with Kafka: it alone imports the Kafka client
// (segmentio/kafka-go). The rest of the project sees its Record and Header types and four
// parts built on one validated ClientConfig:
//
//   - Group: a consumer group member whose work is scoped to a generation. Records fetched in
//     a generation are committed in that generation only, for partitions it still owns; a
//     revocation lets in-flight work drain (bounded) before the partitions are given up.
//   - Reader: every partition of some topics, without a group, from the start or the end,
//     following new records and partitions, recovering from broker failures. It serves
//     compacted topics read as tables (rulesets) and feeds that follow (job status, tail).
//   - Writer: one writer for every topic, acks from all in-sync replicas, one partitioner
//     (murmur2, as the Java client's default), batch limits read from each topic's
//     max.message.bytes.
//   - Client: the few admin questions the service asks (partitions, limits, offsets).
package stream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// SASL mechanisms ClientConfig.SASL accepts.
const (
	SASLPlain       = "PLAIN"
	SASLSCRAMSHA256 = "SCRAM-SHA-256"
	SASLSCRAMSHA512 = "SCRAM-SHA-512"
)

// DefaultClientID is ClientConfig.ClientID's default; brokers log it and quotas may key on it.
const DefaultClientID = "rulevalidator"

// ioTimeout bounds one exchange with a broker (dial, metadata, admin), so a silent broker is
// noticed.
const ioTimeout = 10 * time.Second

// ClientConfig says how to reach the cluster. Zero fields take the documented defaults;
// NewClient checks the rest once, for every part built on it.
type ClientConfig struct {
	// Brokers are the bootstrap addresses (host:port). Required.
	Brokers []string
	// ClientID names this process to the brokers (default DefaultClientID).
	ClientID string
	// TLS, when set, encrypts every connection with this configuration.
	TLS *tls.Config
	// SASL, when its Mechanism is set, authenticates every connection.
	SASL SASLConfig
}

// SASLConfig is a SASL mechanism and its credentials.
type SASLConfig struct {
	// Mechanism is SASLPlain, SASLSCRAMSHA256 or SASLSCRAMSHA512; empty: no SASL.
	Mechanism string
	Username  string
	Password  string
}

func (c *ClientConfig) setDefaults() {
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	c.SASL.Mechanism = strings.ToUpper(strings.TrimSpace(c.SASL.Mechanism))
}

// Validate reports every problem with the configuration, each naming the field.
func (c *ClientConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kafka client config: "+format, args...))
	}
	if len(c.Brokers) == 0 {
		bad("Brokers is empty; give at least one bootstrap address (host:port)")
	}
	for i, b := range c.Brokers {
		if strings.TrimSpace(b) == "" {
			bad("Brokers[%d] is empty", i)
		} else if !strings.Contains(b, ":") {
			bad("Brokers[%d] %q has no port; give host:port", i, b)
		}
	}
	switch c.SASL.Mechanism {
	case "":
		if c.SASL.Username != "" || c.SASL.Password != "" {
			bad("SASL credentials are given without a SASL.Mechanism (%s, %s or %s)", SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512)
		}
	case SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512:
		if c.SASL.Username == "" {
			bad("SASL.Mechanism %s needs SASL.Username", c.SASL.Mechanism)
		}
		if c.SASL.Password == "" {
			bad("SASL.Mechanism %s needs SASL.Password", c.SASL.Mechanism)
		}
	default:
		bad("SASL.Mechanism %q is not %s, %s or %s", c.SASL.Mechanism, SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512)
	}
	return errors.Join(errs...)
}

// Client holds a checked ClientConfig and the connections built from it. It is safe for
// concurrent use; Close releases its idle connections.
type Client struct {
	cfg       ClientConfig
	mechanism sasl.Mechanism
	transport *kafka.Transport
}

// NewClient checks cfg, after filling in its defaults, and returns a Client. It does not
// connect: the first request does.
func NewClient(cfg ClientConfig) (*Client, error) {
	cfg.Brokers = slices.Clone(cfg.Brokers)
	for i := range cfg.Brokers {
		cfg.Brokers[i] = strings.TrimSpace(cfg.Brokers[i])
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg}
	switch cfg.SASL.Mechanism {
	case SASLPlain:
		c.mechanism = plain.Mechanism{Username: cfg.SASL.Username, Password: cfg.SASL.Password}
	case SASLSCRAMSHA256, SASLSCRAMSHA512:
		algo := scram.SHA256
		if cfg.SASL.Mechanism == SASLSCRAMSHA512 {
			algo = scram.SHA512
		}
		m, err := scram.Mechanism(algo, cfg.SASL.Username, cfg.SASL.Password)
		if err != nil {
			return nil, fmt.Errorf("kafka client config: SASL %s: %w", cfg.SASL.Mechanism, err)
		}
		c.mechanism = m
	}
	c.transport = &kafka.Transport{
		DialTimeout: ioTimeout,
		ClientID:    cfg.ClientID,
		TLS:         cfg.TLS,
		SASL:        c.mechanism,
	}
	return c, nil
}

// Brokers returns the bootstrap addresses.
func (c *Client) Brokers() []string { return slices.Clone(c.cfg.Brokers) }

// Close releases the client's idle connections. Parts built on it close their own.
func (c *Client) Close() error {
	c.transport.CloseIdleConnections()
	return nil
}

// dialer is a kafka-go dialer with the client's identity, TLS and SASL.
func (c *Client) dialer() *kafka.Dialer {
	return &kafka.Dialer{
		ClientID:      c.cfg.ClientID,
		Timeout:       ioTimeout,
		DualStack:     true,
		TLS:           c.cfg.TLS,
		SASLMechanism: c.mechanism,
	}
}

// admin is a kafka-go client on the client's transport, addressed to the bootstrap brokers.
func (c *Client) admin() *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(c.cfg.Brokers...), Transport: c.transport, Timeout: ioTimeout}
}

// ErrUnknownTopic marks a topic the cluster does not have.
var ErrUnknownTopic = errors.New("no such topic")

// Partitions returns the ids of topic's partitions, in order. A topic the cluster does not
// have is an error wrapping ErrUnknownTopic; the topic is never created by asking.
func (c *Client) Partitions(ctx context.Context, topic string) ([]int, error) {
	all, err := c.partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	return all[topic], nil
}

// partitions asks for the partitions of several topics at once.
func (c *Client) partitions(ctx context.Context, topics ...string) (map[string][]int, error) {
	ctx, cancel := context.WithTimeout(ctx, ioTimeout)
	defer cancel()
	meta, err := c.admin().Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("metadata of %s from %s: %w", strings.Join(topics, ", "), strings.Join(c.cfg.Brokers, ","), err)
	}
	out := make(map[string][]int, len(topics))
	for _, t := range meta.Topics {
		if errors.Is(t.Error, kafka.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("topic %q: %w on %s", t.Name, ErrUnknownTopic, strings.Join(c.cfg.Brokers, ","))
		}
		if t.Error != nil {
			return nil, fmt.Errorf("topic %q: %w", t.Name, t.Error)
		}
		ids := make([]int, len(t.Partitions))
		for i, p := range t.Partitions {
			ids[i] = p.ID
		}
		slices.Sort(ids)
		out[t.Name] = ids
	}
	for _, name := range topics {
		if len(out[name]) == 0 {
			if _, listed := out[name]; listed {
				return nil, fmt.Errorf("topic %q has no partitions", name)
			}
			return nil, fmt.Errorf("topic %q: %w on %s", name, ErrUnknownTopic, strings.Join(c.cfg.Brokers, ","))
		}
	}
	return out, nil
}

// MaxMessageBytes returns the largest record batch topic accepts: its max.message.bytes,
// which defaults to the broker's message.max.bytes.
func (c *Client) MaxMessageBytes(ctx context.Context, topic string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, ioTimeout)
	defer cancel()
	res, err := c.admin().DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{
		Resources: []kafka.DescribeConfigRequestResource{{
			ResourceType: kafka.ResourceTypeTopic,
			ResourceName: topic,
			ConfigNames:  []string{"max.message.bytes"},
		}},
	})
	if err != nil {
		return 0, fmt.Errorf("reading max.message.bytes of topic %s: %w", topic, err)
	}
	for _, r := range res.Resources {
		if r.ResourceName != topic {
			continue
		}
		if errors.Is(r.Error, kafka.UnknownTopicOrPartition) {
			return 0, fmt.Errorf("topic %q: %w", topic, ErrUnknownTopic)
		}
		if r.Error != nil {
			return 0, fmt.Errorf("reading max.message.bytes of topic %s: %w", topic, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName != "max.message.bytes" {
				continue
			}
			var n int
			if _, err := fmt.Sscan(e.ConfigValue, &n); err != nil || n <= 0 {
				return 0, fmt.Errorf("topic %s: max.message.bytes %q is not a positive number", topic, e.ConfigValue)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("topic %s: the broker did not report max.message.bytes", topic)
}

// CommittedOffsets returns group's committed offset in each of topic's partitions: the next
// offset the group will read there, -1 where it committed none.
func (c *Client) CommittedOffsets(ctx context.Context, group, topic string) (map[int]int64, error) {
	parts, err := c.Partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, ioTimeout)
	defer cancel()
	res, err := c.admin().OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		return nil, fmt.Errorf("committed offsets of group %s on topic %s: %w", group, topic, err)
	}
	out := make(map[int]int64, len(parts))
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("committed offset of group %s on %s partition %d: %w", group, topic, p.Partition, p.Error)
		}
		out[p.Partition] = p.CommittedOffset
	}
	return out, nil
}
