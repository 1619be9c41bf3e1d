package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

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
	// DefaultReadAhead is Fairness.ReadAhead's default.
	DefaultReadAhead = 256
)

// Config configures a Consumer. Zero fields take the documented defaults; New checks the rest.
type Config struct {
	// GroupConfig is the consumer group the consumer joins and commits for: Client, GroupID
	// and Topic (required), Start, SessionTimeout, the fetch sizes and the partition watch, with
	// stream.GroupConfig's defaults. Its Logger receives the consumer's logs as well as the
	// Kafka client's. A zero RebalanceTimeout is set to what a drain may take, DrainTimeout and
	// CommitTimeout and a few seconds' grace, plus a margin; a set one must exceed the drain.
	stream.GroupConfig

	// Concurrency is the most messages handled at once across all partitions (default 8).
	// Without Fairness it is also the most in flight, counting those waiting behind an
	// earlier message with the same key; with it, up to Fairness.ReadAhead more wait to be
	// started.
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
	// Fairness shares the handling slots among the tenants whose messages share the topic,
	// reading ahead of a tenant that floods it (see Fairness). Nil: messages are started in
	// the order they are fetched.
	Fairness *Fairness

	// Hooks observe the consumer, for metrics. Optional.
	Hooks Hooks
	// TracerProvider, when set, makes a CONSUMER span per message handled (see Trace), the
	// parent of the handler's spans, continuing the trace context the message carries.
	TracerProvider trace.TracerProvider
}

// Fairness shares a consumer's handling slots among tenants, the least recent user first: the
// consumer reads up to ReadAhead messages ahead of those it handles, queues each under its
// tenant, and gives each slot that comes free to the tenant that has held the slots least
// lately, per weight (the package doc says how usage is counted). A tenant that has used
// little lately is served ahead of a flooding one until its usage catches up; a tenant alone
// still gets every slot. What is read ahead holds its bytes of
// MaxBytesInFlight like a message being handled (the package doc says when it lends them);
// the order of each key within a partition and the order of commits are kept. The wiring is
// one field:
//
//	Fairness: &consumer.Fairness{Tenant: consumer.TenantHeader("rv-tenant-id")}
type Fairness struct {
	// Tenant names the tenant m belongs to; messages of the same tenant share one queue, and
	// "" is a tenant like the others (messages that name none). Required. It is called once
	// per message, from the fetching goroutine. TenantHeader reads it from a header.
	Tenant func(m *Message) string
	// Weight divides a tenant's usage when tenants are compared for a free slot, so that
	// tenants that all have messages waiting get slot time in proportion to their weights
	// (default 1 for every tenant); values below 1 count as 1. It is read at every scheduling
	// decision, under the consumer's lock, so weights may change while the consumer runs; it
	// must be quick and safe for concurrent use.
	Weight func(tenant string) int
	// MaxInFlight caps how many of a tenant's messages are handled at once (nil, or 0 or less
	// for a tenant: no cap). A tenant at its cap is passed over for a free slot, whatever its
	// usage, and its messages wait while the other tenants' start; a slot stays
	// free only when every message waiting belongs to a tenant at its cap. It is read at
	// every scheduling decision, under the consumer's lock, like Weight: a raised cap applies
	// from the next message fetched or finished, a lowered one holds the tenant back until it
	// is under it. Handlers of an ended generation still running count against it.
	// It must be quick and safe for concurrent use. A capped tenant's messages read ahead
	// still hold their room and bytes while they wait: a backlog of one capped tenant that
	// fills ReadAhead stops the fetching, whatever the tenant of the messages behind it,
	// until its messages are handled, at the cap's pace.
	MaxInFlight func(tenant string) int
	// ReadAhead is how many messages beyond Concurrency may be in flight: fetched and waiting
	// for a slot or behind their key, or being handled (default DefaultReadAhead). Fairness
	// reaches over this many: a tenant's message behind more than that of other tenants' in
	// its partition waits for the excess to be handled. Those read ahead and not started when
	// the partitions are revoked are let go uncommitted and redelivered, and messages handled
	// past them are handled again by the partition's next owner: the larger ReadAhead, the
	// more a rebalance may redo. MaxBytesInFlight bounds their bytes.
	ReadAhead int
	// MaxHeld is how many messages of a tenant held by a deferral (Defer) may wait read
	// ahead before its oldest is started anyway, not to be deferred again (default
	// ReadAhead/4, at least 1): a tenant over its budget holds no more of the read-ahead.
	MaxHeld int
}

// TenantHeader is a Fairness.Tenant naming the tenant in the header key: the value of the
// last such header, "" for a message without one.
func TenantHeader(key string) func(m *Message) string {
	return func(m *Message) string {
		v, _ := stream.HeaderValue(m.Headers, key)
		return string(v)
	}
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
	// OutcomeDeferred: the handler deferred the message (Defer); it waits to be handled again.
	OutcomeDeferred = "deferred"
)

// Hooks are optional observers, called from the consumer's goroutines; they must be safe for
// concurrent use and quick. Nil hooks are skipped.
type Hooks struct {
	// Fetched is called for every fetched record, once it is taken on (it may start from
	// then). highWaterMark-offset-1 is the partition's lag behind this record.
	Fetched func(topic string, partition int, offset, highWaterMark int64)
	// Handled is called when a handler returns, with one of the Outcome constants and the
	// context it ran in: its process span (Config.TracerProvider), still open.
	Handled func(ctx context.Context, outcome string, took time.Duration)
	// Committed is called after a successful commit, with the partition's committed offset:
	// the next offset the group will read there.
	Committed func(partition int, offset int64)
	// InFlight is called with +1 when a message is taken on (fetched, read ahead included)
	// and -1 when it is let go.
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

func (h Hooks) handled(ctx context.Context, outcome string, took time.Duration) {
	if h.Handled != nil {
		h.Handled(ctx, outcome, took)
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

// readAhead is Fairness.ReadAhead, 0 without Fairness.
func (c *Config) readAhead() int {
	if c.Fairness == nil {
		return 0
	}
	return c.Fairness.ReadAhead
}

// maxHeld is Fairness.MaxHeld, 0 without Fairness.
func (c *Config) maxHeld() int {
	if c.Fairness == nil {
		return 0
	}
	return c.Fairness.MaxHeld
}

// tenantOf is m's tenant: Fairness.Tenant's, "" for every message without Fairness.
func (c *Config) tenantOf(m *Message) string {
	if c.Fairness == nil {
		return ""
	}
	return c.Fairness.Tenant(m)
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
	if c.Fairness != nil {
		f := *c.Fairness // the caller's stays as it was
		if f.ReadAhead == 0 {
			f.ReadAhead = DefaultReadAhead
		}
		if f.MaxHeld == 0 {
			f.MaxHeld = max(f.ReadAhead/4, 1)
		}
		c.Fairness = &f
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
	if f := c.Fairness; f != nil {
		if f.Tenant == nil {
			bad("Fairness.Tenant is nil; it names each message's tenant")
		}
		if f.MaxHeld < 0 {
			bad("Fairness.MaxHeld must not be negative, got %d", f.MaxHeld)
		}
		if f.ReadAhead < 0 {
			bad("Fairness.ReadAhead must not be negative, got %d", f.ReadAhead)
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
