package consumer

import (
	"errors"
	"fmt"
	"time"

	"rulevalidator/stream"
)

// Defaults for Config's zero fields. The group's own (session timeout, fetch sizes, partition
// watch) are stream.GroupConfig's.
const (
	DefaultConcurrency = 8
	// DefaultMaxBytesInFlight is Config.MaxBytesInFlight's default.
	DefaultMaxBytesInFlight = 48 << 20
	DefaultCommitInterval   = 100 * time.Millisecond
	DefaultCommitTimeout    = 10 * time.Second
	DefaultDrainTimeout     = 30 * time.Second
)

// Config configures a Consumer. Zero fields take the documented defaults; New checks the rest.
type Config struct {
	// GroupConfig is the consumer group the consumer joins and commits for: Client, GroupID
	// and Topic (required), Start, SessionTimeout, the fetch sizes and the partition watch, with
	// stream.GroupConfig's defaults. Its Logger receives the consumer's logs as well as the
	// Kafka client's. A zero RebalanceTimeout is set to what a drain may take, DrainTimeout and
	// CommitTimeout and a few seconds' grace, plus a margin; a set one must exceed the drain.
	stream.GroupConfig

	// Concurrency is the most messages in flight at once across all partitions, counting those
	// waiting behind an earlier message with the same key (default 8).
	Concurrency int
	// MaxBytesInFlight bounds the bytes of the messages in flight, as Cost weighs them and as
	// their handlers Reserve more, besides their count (default 48 MiB), so that large
	// documents cannot exhaust memory at a high Concurrency. A message costing more than the
	// bound, or reserving more, holds the bound and so runs alone.
	MaxBytesInFlight int64
	// Cost is what handling m takes of MaxBytesInFlight: the memory the handler holds for it
	// (default Size(m), the message alone). Handlers that copy or render a message should say
	// so here; memory they learn of only while handling (a document they download) they
	// Reserve.
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

// setDefaults fills the zero fields with their defaults, the group's with stream's.
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
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = c.drainLimit() + rebalanceMargin
	}
	c.GroupConfig.SetDefaults()
}

// drainLimit is the longest a drain may take: in-flight work given DrainTimeout, then
// handlerExitGrace to return, then the commit.
func (c *Config) drainLimit() time.Duration {
	return c.DrainTimeout + handlerExitGrace + c.CommitTimeout
}

// Validate reports every problem with the configuration, each naming the field and value.
// It is meant for a configuration after setDefaults, as New does.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("consumer config: "+format, args...))
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
	} {
		if d.value <= 0 {
			bad("%s must be positive, got %s", d.name, d.value)
		}
	}
	// The coordinator must wait for a member that drains before it rejoins, or the member
	// is evicted mid-drain and its partitions handled twice.
	if c.RebalanceTimeout <= c.drainLimit() {
		bad("RebalanceTimeout (%s) must exceed what a drain may take, %s (DrainTimeout + CommitTimeout + %s); leave it zero to have it set",
			c.RebalanceTimeout, c.drainLimit(), handlerExitGrace)
	}
	errs = append(errs, c.GroupConfig.Validate())
	return errors.Join(errs...)
}
