package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/internal/backoff"
)

// Start says where a partition is read from when nothing tells otherwise (no committed
// offset for a group, always for a Reader).
type Start int

const (
	// FromStart reads a partition from its first offset.
	FromStart Start = iota
	// FromEnd reads a partition from its end: only records written from then on.
	FromEnd
)

func (s Start) String() string {
	switch s {
	case FromStart:
		return "start"
	case FromEnd:
		return "end"
	}
	return fmt.Sprintf("Start(%d)", int(s))
}

func (s Start) offset() int64 {
	if s == FromEnd {
		return kafka.LastOffset
	}
	return kafka.FirstOffset
}

// Defaults for GroupConfig's zero fields.
const (
	DefaultSessionTimeout         = 10 * time.Second
	DefaultHeartbeatInterval      = 3 * time.Second
	DefaultRebalanceTimeout       = 60 * time.Second
	DefaultPartitionWatchInterval = 5 * time.Second
	DefaultMinBytes               = 1
	DefaultMaxBytes               = 10 << 20 // 10 MiB
	DefaultMaxWait                = 250 * time.Millisecond
)

const (
	// joinGroupBackoff is the pause before rejoining the group after a failed join; kafka-go's
	// 5s default adds needlessly to the recovery from a broker restart.
	joinGroupBackoff = time.Second
	// fetchBackoffMin and fetchBackoffMax bound the pause after a failed fetch.
	fetchBackoffMin = 100 * time.Millisecond
	fetchBackoffMax = 5 * time.Second
)

// GroupConfig configures a Group. Zero fields take the documented defaults.
type GroupConfig struct {
	// Client says how to reach the cluster. Required.
	Client *Client
	// GroupID is the consumer group. Required.
	GroupID string
	// Topic is the topic consumed. Required.
	Topic string
	// Start is where a partition with no committed offset is read from (default FromStart).
	Start Start

	// SessionTimeout is how long the coordinator waits without a heartbeat before it evicts
	// this member (default 10s). Heartbeats go on while a revoked generation drains.
	SessionTimeout time.Duration
	// HeartbeatInterval is how often heartbeats are sent (default 3s).
	HeartbeatInterval time.Duration
	// RebalanceTimeout is how long the coordinator waits for every member to rejoin after a
	// rebalance began (default 60s). A member drains its revoked work before it rejoins, so
	// this must exceed the time a drain may take.
	RebalanceTimeout time.Duration
	// PartitionWatchInterval is how often the topic's partition count is checked; partitions
	// added to the topic are assigned in the generation that follows (default 5s).
	PartitionWatchInterval time.Duration

	// MinBytes and MaxBytes bound a fetch response (defaults 1 and 10 MiB); MaxBytes must hold
	// the largest record. MaxWait is how long the broker may wait for MinBytes (default 250ms).
	MinBytes int
	MaxBytes int
	MaxWait  time.Duration

	// Logger receives the group's logs and kafka-go's (debug and warnings). Optional.
	Logger *slog.Logger
}

// SetDefaults fills the zero fields with their defaults. NewGroup calls it; a component that
// embeds the config calls it to validate the config as NewGroup will see it.
func (c *GroupConfig) SetDefaults() {
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = min(DefaultHeartbeatInterval, c.SessionTimeout/3)
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = DefaultRebalanceTimeout
	}
	if c.PartitionWatchInterval == 0 {
		c.PartitionWatchInterval = DefaultPartitionWatchInterval
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
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem with the configuration, each naming the field and value.
// It is meant for a configuration after SetDefaults, as NewGroup does.
func (c *GroupConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kafka group config: "+format, args...))
	}
	if c.Client == nil {
		bad("Client is nil")
	}
	if c.GroupID == "" {
		bad("GroupID is empty; offsets are committed for a consumer group, which needs an id")
	}
	if c.Topic == "" {
		bad("Topic is empty")
	}
	if c.Start != FromStart && c.Start != FromEnd {
		bad("Start must be FromStart or FromEnd, got %d", int(c.Start))
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"SessionTimeout", c.SessionTimeout},
		{"HeartbeatInterval", c.HeartbeatInterval},
		{"RebalanceTimeout", c.RebalanceTimeout},
		{"PartitionWatchInterval", c.PartitionWatchInterval},
		{"MaxWait", c.MaxWait},
	} {
		if d.value <= 0 {
			bad("%s must be positive, got %s", d.name, d.value)
		}
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		bad("HeartbeatInterval (%s) must be shorter than SessionTimeout (%s)", c.HeartbeatInterval, c.SessionTimeout)
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
	return errors.Join(errs...)
}

// Group is a member of a consumer group. Its work is organised in generations, as the
// group's own protocol is: each generation assigns this member some partitions, and ends
// when the group rebalances (a member joins or leaves, partitions are added) or the member
// stops. What a generation fetched may be committed in that generation only; the next one
// starts from the offsets committed.
type Group struct {
	cfg GroupConfig
	log *slog.Logger
}

// NewGroup checks cfg, after filling in its defaults.
func NewGroup(cfg GroupConfig) (*Group, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Group{cfg: cfg, log: cfg.Logger.With("component", "kafka-group", "topic", cfg.Topic, "group", cfg.GroupID)}, nil
}

// Session is the work of one generation. It is called once per generation, in a goroutine
// of its own, and must return once gen.Done is closed: the group does not rejoin, and the
// partitions are not given to another member, until it has. In between it may let in-flight
// work finish and commit it, the way a revocation callback does; heartbeats keep the member
// in the group meanwhile, up to the RebalanceTimeout. An error it returns stops Run, which
// returns it.
type Session func(gen *Generation) error

// Run joins the group and runs session for each generation until ctx ends or a session
// fails. It then leaves the group and returns the session's error, or nil. Failures to
// join or fetch are logged and retried.
func (g *Group) Run(ctx context.Context, session Session) error {
	logger := g.cfg.Logger.With("component", "kafka-go", "topic", g.cfg.Topic, "group", g.cfg.GroupID)
	var debug kafka.Logger
	// kafka-go logs every rebalance step; format those only when someone reads them.
	if logger.Enabled(context.Background(), slog.LevelDebug) {
		debug = kafka.LoggerFunc(func(msg string, args ...any) { logger.Debug(fmt.Sprintf(msg, args...)) })
	}
	errorLog := kafka.LoggerFunc(func(msg string, args ...any) { logger.Warn(fmt.Sprintf(msg, args...)) })
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                     g.cfg.GroupID,
		Brokers:                g.cfg.Client.cfg.Brokers,
		Dialer:                 g.cfg.Client.dialer(),
		Topics:                 []string{g.cfg.Topic},
		HeartbeatInterval:      g.cfg.HeartbeatInterval,
		SessionTimeout:         g.cfg.SessionTimeout,
		RebalanceTimeout:       g.cfg.RebalanceTimeout,
		PartitionWatchInterval: g.cfg.PartitionWatchInterval,
		WatchPartitionChanges:  true,
		JoinGroupBackoff:       joinGroupBackoff,
		StartOffset:            g.cfg.Start.offset(),
		Logger:                 debug,
		ErrorLogger:            errorLog,
	})
	if err != nil {
		return fmt.Errorf("kafka group %s: %w", g.cfg.GroupID, err)
	}

	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	// Closing the group ends the current generation, waits for its session, then leaves.
	closed := make(chan struct{})
	go func() {
		<-runCtx.Done()
		cg.Close()
		close(closed)
	}()

	var (
		mu      sync.Mutex
		failure error
	)
	for {
		kgen, err := cg.Next(runCtx)
		if err != nil {
			if runCtx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				break
			}
			g.log.Warn("joining the consumer group failed; retrying", "err", err)
			continue
		}
		gen := g.generation(kgen)
		g.log.Info("generation started", "generation", kgen.ID, "member", kgen.MemberID, "partitions", gen.partitions)
		for _, pa := range kgen.Assignments[g.cfg.Topic] {
			kgen.Start(func(ctx context.Context) { gen.fetchPartition(ctx, pa.ID, pa.Offset) })
		}
		kgen.Start(func(ctx context.Context) {
			gen.done = ctx.Done()
			stopBeats := make(chan struct{})
			beatsDone := make(chan struct{})
			go func() {
				defer close(beatsDone)
				gen.heartbeatWhileDraining(stopBeats)
			}()
			err := g.runSession(session, gen)
			close(stopBeats)
			<-beatsDone
			g.log.Info("generation ended", "generation", kgen.ID, "partitions", gen.partitions)
			if err != nil {
				mu.Lock()
				if failure == nil {
					failure = err
				}
				mu.Unlock()
				stop(err)
			}
		})
	}
	stop(nil)
	<-closed
	mu.Lock()
	defer mu.Unlock()
	return failure
}

// runSession calls session, turning a panic into an error: it must not take the group's
// goroutines down with it.
func (g *Group) runSession(session Session, gen *Generation) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("kafka group %s: session of generation %d panicked: %v", g.cfg.GroupID, gen.ID, v)
		}
	}()
	return session(gen)
}

func (g *Group) generation(kgen *kafka.Generation) *Generation {
	gen := &Generation{
		ID:       kgen.ID,
		MemberID: kgen.MemberID,
		group:    g,
		kgen:     kgen,
		records:  make(chan Record),
		owned:    make(map[int]bool),
	}
	for _, pa := range kgen.Assignments[g.cfg.Topic] {
		gen.owned[pa.ID] = true
	}
	gen.partitions = slices.Sorted(maps.Keys(gen.owned))
	return gen
}

// ErrRevoked is what Generation.Fetch returns once its generation has ended.
var ErrRevoked = errors.New("the generation ended: its partitions are revoked")

// Generation is one generation of a Group, as its Session sees it.
type Generation struct {
	// ID is the generation id the coordinator gave; MemberID is this member's id in it.
	ID       int32
	MemberID string

	group      *Group
	kgen       *kafka.Generation
	partitions []int
	owned      map[int]bool
	records    chan Record
	done       <-chan struct{}
}

// Partitions are the partitions assigned to this member in this generation, in order.
func (gen *Generation) Partitions() []int { return slices.Clone(gen.partitions) }

// Topic is the topic consumed.
func (gen *Generation) Topic() string { return gen.group.cfg.Topic }

// Done is closed when the generation ends: a rebalance revokes its partitions, or Run is
// stopping. Nothing more is fetched after it.
func (gen *Generation) Done() <-chan struct{} { return gen.done }

// Fetch returns the next record from any of the generation's partitions, in offset order
// within each. It returns ErrRevoked once the generation has ended, or ctx's error.
func (gen *Generation) Fetch(ctx context.Context) (Record, error) {
	select {
	case r := <-gen.records:
		return r, nil
	case <-gen.done:
		return Record{}, ErrRevoked
	case <-ctx.Done():
		return Record{}, ctx.Err()
	}
}

// Commit commits offsets, partition → the next offset the group should read there, in this
// generation. A partition this generation does not own is refused: its work belongs to
// whichever member owns it now. Commit may be called after Done, until the session
// returns; the coordinator refuses it once the group moved on to a later generation.
func (gen *Generation) Commit(offsets map[int]int64) error {
	if len(offsets) == 0 {
		return nil
	}
	for p := range offsets {
		if !gen.owned[p] {
			return fmt.Errorf("kafka group %s: generation %d does not own partition %d of topic %s; not committing it",
				gen.group.cfg.GroupID, gen.ID, p, gen.group.cfg.Topic)
		}
	}
	if err := gen.kgen.CommitOffsets(map[string]map[int]int64{gen.group.cfg.Topic: offsets}); err != nil {
		return fmt.Errorf("kafka group %s: committing in generation %d: %w", gen.group.cfg.GroupID, gen.ID, err)
	}
	return nil
}

// readAhead is how many records a partition reader holds ready beyond the one it is
// handing over.
const readAhead = 1

// fetchPartition reads one partition from offset and hands its records to Fetch until the
// generation ends. Failures are retried: returning early would end the generation.
func (gen *Generation) fetchPartition(ctx context.Context, partition int, offset int64) {
	cfg := gen.group.cfg
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:   cfg.Client.cfg.Brokers,
		Topic:     cfg.Topic,
		Partition: partition,
		Dialer:    cfg.Client.dialer(),
		MinBytes:  cfg.MinBytes,
		MaxBytes:  cfg.MaxBytes,
		MaxWait:   cfg.MaxWait,
		// kafka-go reads ahead up to QueueCapacity records per partition (100 by default):
		// with megabyte records that is memory no in-flight bound sees. Fetch hands records
		// over one at a time, as the consumer has room for them.
		QueueCapacity:   readAhead,
		ReadLagInterval: -1,
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			gen.group.log.Warn(fmt.Sprintf(msg, args...), "partition", partition)
		}),
	})
	defer r.Close()
	if err := r.SetOffset(offset); err != nil {
		gen.group.log.Error("cannot position the partition reader", "partition", partition, "offset", offset, "err", err)
		<-ctx.Done()
		return
	}
	fetchBackoff := backoff.Policy{Initial: fetchBackoffMin, Max: fetchBackoffMax}
	for {
		var m kafka.Message
		err := fetchBackoff.Retry(ctx, func(int) error {
			var err error
			m, err = r.FetchMessage(ctx)
			return err
		}, backoff.OnRetry(func(_ int, wait time.Duration, err error) {
			gen.group.log.Warn("fetching failed; retrying", "partition", partition, "err", err, "retry_in", wait)
		}))
		if err != nil {
			return // only ctx ends an unbounded retry
		}
		select {
		case gen.records <- fromKafka(m):
		case <-ctx.Done():
			return
		}
	}
}

// heartbeatWhileDraining keeps the member in the group once its generation has ended and
// until stop is closed, while the session drains: kafka-go stops its own heartbeats when the
// generation ends, and the coordinator would otherwise evict the member after the session
// timeout, refusing its last commit.
func (gen *Generation) heartbeatWhileDraining(stop <-chan struct{}) {
	select {
	case <-stop:
		return
	case <-gen.done:
	}
	cfg := gen.group.cfg
	client := cfg.Client.admin()
	ticker := time.NewTicker(cfg.HeartbeatInterval)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		res, err := client.Heartbeat(ctx, &kafka.HeartbeatRequest{GroupID: cfg.GroupID, GenerationID: gen.ID, MemberID: gen.MemberID})
		cancel()
		if err == nil {
			err = res.Error
		}
		// A rebalance in progress is what the coordinator answers now; the heartbeat still
		// counts. Anything else means the member is no longer in this generation.
		if err != nil && !errors.Is(err, kafka.RebalanceInProgress) {
			gen.group.log.Debug("heartbeat while draining", "generation", gen.ID, "err", err)
		}
	}
}
