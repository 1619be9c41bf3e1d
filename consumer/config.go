package consumer

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"rulevalidator/stream"
)

// Defaults for Config's zero fields.
const (
	DefaultConcurrency = 8
	// DefaultMaxBytesInFlight is Config.MaxBytesInFlight's default.
	DefaultMaxBytesInFlight = 64 << 20
	DefaultCommitInterval   = 100 * time.Millisecond
	DefaultCommitTimeout    = 10 * time.Second
	DefaultDrainTimeout     = 30 * time.Second
	DefaultSessionTimeout   = stream.DefaultSessionTimeout
	DefaultMinBytes         = stream.DefaultMinBytes
	DefaultMaxBytes         = stream.DefaultMaxBytes
	DefaultMaxWait          = stream.DefaultMaxWait
)

// Config configures a Consumer. Zero fields take the documented defaults; New checks the rest.
type Config struct {
	// Client says how to reach the cluster (brokers, TLS, SASL). Required.
	Client *stream.Client
	// GroupID is the consumer group whose offsets the consumer commits. Required.
	GroupID string
	// Topic is the topic to consume. Required.
	Topic string

	// Concurrency is the most messages in flight at once across all partitions, counting those
	// waiting behind an earlier message with the same key (default 8).
	Concurrency int
	// MaxBytesInFlight bounds the bytes of the messages in flight, as Cost weighs them,
	// besides their count (default 64 MiB), so that large documents cannot exhaust memory at a
	// high Concurrency. A message costing more than the bound is taken on alone.
	MaxBytesInFlight int64
	// Cost is what handling m takes of MaxBytesInFlight: the memory the handler holds for it
	// (default Size(m), the message alone). Handlers that copy or render a message should say
	// so here.
	Cost func(m *Message) int64
	// CommitInterval is how often completed offsets are committed (default 100ms). Each commit
	// is a synchronous call that returns once the group coordinator has stored the offsets.
	CommitInterval time.Duration
	// CommitTimeout bounds each commit call, the final one at shutdown included (default 10s).
	CommitTimeout time.Duration
	// DrainTimeout is how long in-flight messages may go on once their partitions are revoked,
	// by a rebalance or because Run's context is cancelled (default 30s); what finishes in time
	// is committed before the partitions are given up. Handlers' contexts are cancelled only
	// when it runs out, and what did not finish is left to the partitions' next owner.
	DrainTimeout time.Duration

	// SessionTimeout is how long the group coordinator waits without a heartbeat before it
	// evicts this member (default 10s; the broker allows 6s to 30min by default). Heartbeats run
	// apart from message handling, so slow handlers do not count against it; what it bounds is
	// how long the group waits for a member that vanished, a broker restart included.
	SessionTimeout time.Duration

	// MinBytes and MaxBytes bound a fetch response (defaults 1 and 10 MiB); MaxBytes must hold
	// the largest record. MaxWait is how long the broker may wait for MinBytes (default 250ms).
	MinBytes int
	MaxBytes int
	MaxWait  time.Duration

	// Start is where a group with no committed offset starts: stream.FromStart (the default)
	// or stream.FromEnd.
	Start stream.Start
	// PartitionWatchInterval is how often the topic is checked for added partitions, which
	// are then consumed without a restart (default stream.DefaultPartitionWatchInterval).
	PartitionWatchInterval time.Duration

	// Logger receives the consumer's logs and the Kafka client's (debug and warnings). Optional.
	Logger *slog.Logger
	// Hooks observe the consumer, for metrics. Optional.
	Hooks Hooks
}

// Outcomes passed to Hooks.Handled.
const (
	// OutcomeOK: the handler returned nil; the offset will be committed.
	OutcomeOK = "ok"
	// OutcomeFailed: the handler returned an error (or panicked) while it had time to finish;
	// the consumer stops and Run returns the error. The offset is not committed.
	OutcomeFailed = "failed"
	// OutcomeInterrupted: the handler returned after its context was cancelled at the end of
	// the drain; the offset is not committed and the message will be redelivered.
	OutcomeInterrupted = "interrupted"
)

// Hooks are optional observers, called from the consumer's goroutines; they must be safe for
// concurrent use and quick. Nil hooks are skipped.
type Hooks struct {
	// Fetched is called for every fetched record. highWaterMark-offset-1 is the partition's lag
	// behind this record.
	Fetched func(topic string, partition int, offset, highWaterMark int64)
	// Handled is called when a handler returns, with one of the Outcome constants.
	Handled func(outcome string, took time.Duration)
	// Committed is called after a successful commit, with the partition's committed offset:
	// the next offset the group will read there.
	Committed func(partition int, offset int64)
	// InFlight is called with +1 when a message is taken on and -1 when it is let go.
	InFlight func(delta int)
	// Assigned is called when a group generation gives this member partitions, and Revoked
	// when that generation ends (a rebalance, or shutdown), before its in-flight messages
	// are drained.
	Assigned func(partitions []int)
	Revoked  func(partitions []int)
}

func (h Hooks) fetched(m *Message) {
	if h.Fetched != nil {
		h.Fetched(m.Topic, m.Partition, m.Offset, m.HighWaterMark)
	}
}

func (h Hooks) handled(outcome string, took time.Duration) {
	if h.Handled != nil {
		h.Handled(outcome, took)
	}
}

func (h Hooks) committed(partition int, offset int64) {
	if h.Committed != nil {
		h.Committed(partition, offset)
	}
}

func (h Hooks) inFlight(delta int) {
	if h.InFlight != nil {
		h.InFlight(delta)
	}
}

// setDefaults fills the zero fields with their defaults.
func (c *Config) setDefaults() {
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.MaxBytesInFlight == 0 {
		c.MaxBytesInFlight = DefaultMaxBytesInFlight
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = DefaultCommitInterval
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = DefaultCommitTimeout
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.MinBytes == 0 {
		c.MinBytes = DefaultMinBytes
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.PartitionWatchInterval == 0 {
		c.PartitionWatchInterval = stream.DefaultPartitionWatchInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem with the configuration, each naming the field and value.
// It is meant for a configuration after setDefaults, as New does.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("consumer config: "+format, args...))
	}
	if c.Client == nil {
		bad("Client is nil; build one with stream.NewClient")
	}
	if c.GroupID == "" {
		bad("GroupID is empty; offsets are committed for a consumer group, which needs an id")
	}
	if c.Topic == "" {
		bad("Topic is empty")
	}
	if c.Concurrency < 1 {
		bad("Concurrency must be positive, got %d", c.Concurrency)
	}
	if c.MaxBytesInFlight < 1 {
		bad("MaxBytesInFlight must be positive, got %d", c.MaxBytesInFlight)
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"CommitInterval", c.CommitInterval},
		{"CommitTimeout", c.CommitTimeout},
		{"DrainTimeout", c.DrainTimeout},
		{"SessionTimeout", c.SessionTimeout},
		{"MaxWait", c.MaxWait},
		{"PartitionWatchInterval", c.PartitionWatchInterval},
	} {
		if d.value <= 0 {
			bad("%s must be positive, got %s", d.name, d.value)
		}
	}
	if c.MinBytes < 1 {
		bad("MinBytes must be positive, got %d", c.MinBytes)
	}
	if c.MaxBytes < 1 {
		bad("MaxBytes must be positive, got %d", c.MaxBytes)
	}
	if c.MinBytes > c.MaxBytes {
		bad("MinBytes (%d) is greater than MaxBytes (%d)", c.MinBytes, c.MaxBytes)
	}
	if c.Start != stream.FromStart && c.Start != stream.FromEnd {
		bad("Start must be stream.FromStart or stream.FromEnd, got %d", int(c.Start))
	}
	return errors.Join(errs...)
}
