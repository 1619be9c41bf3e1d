package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// DefaultMaxReplays is Config.MaxReplays's default.
const DefaultMaxReplays = 3

// DefaultReadTimeout is Config.ReadTimeout's default.
const DefaultReadTimeout = 30 * time.Second

// Status is what became, or would become, of a selected dead letter.
type Status string

const (
	// StatusReplayable: it would be sent (a dry run).
	StatusReplayable Status = "replayable"
	// StatusSent: it was sent, and its replay recorded.
	StatusSent Status = "sent"
	// StatusReplayed: it was replayed before (or another dead letter of its original was):
	// skipped.
	StatusReplayed Status = "replayed"
	// StatusRefused: its original was replayed MaxReplays times already: skipped.
	StatusRefused Status = "refused"
	// StatusNotReplayable: its original cannot be sent again (undecodable, not kept, not a
	// validation request): skipped, always.
	StatusNotReplayable Status = "not_replayable"
)

// Config configures Run.
type Config struct {
	// Client says how to reach the cluster. Required.
	Client *stream.Client
	// Serde decodes the dead letters and the originals they keep. Required.
	Serde *schemas.Serde
	// DeadLetterTopic is read, RequestsTopic written, and ProgressTopic (compacted) read
	// and written. Required.
	DeadLetterTopic, RequestsTopic, ProgressTopic string
	// Filter selects the dead letters.
	Filter Filter
	// MaxReplays refuses a dead letter whose original was replayed this many times
	// already (default DefaultMaxReplays).
	MaxReplays int
	// DryRun decides what would be sent and sends nothing. A progress topic that does not
	// exist then counts as empty.
	DryRun bool
	// ReadTimeout bounds reading the progress and dead-letter topics to their ends
	// (default DefaultReadTimeout).
	ReadTimeout time.Duration
	// WriteTimeout bounds each write, acknowledgements included (default
	// stream.DefaultWriteTimeout).
	WriteTimeout time.Duration
	// Now is the clock (tests).
	Now    func() time.Time
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.MaxReplays == 0 {
		c.MaxReplays = DefaultMaxReplays
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = stream.DefaultWriteTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem with the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("replay: Client is nil"))
	}
	if c.Serde == nil {
		errs = append(errs, errors.New("replay: Serde is nil"))
	}
	if c.DeadLetterTopic == "" || c.RequestsTopic == "" || c.ProgressTopic == "" {
		errs = append(errs, fmt.Errorf("replay: the dead-letter (%q), requests (%q) and progress (%q) topics are required", c.DeadLetterTopic, c.RequestsTopic, c.ProgressTopic))
	} else if c.ProgressTopic == c.DeadLetterTopic || c.ProgressTopic == c.RequestsTopic || c.DeadLetterTopic == c.RequestsTopic {
		errs = append(errs, fmt.Errorf("replay: the dead-letter (%q), requests (%q) and progress (%q) topics must differ", c.DeadLetterTopic, c.RequestsTopic, c.ProgressTopic))
	}
	if c.MaxReplays < 1 {
		errs = append(errs, fmt.Errorf("replay: MaxReplays %d must be at least 1", c.MaxReplays))
	}
	if c.ReadTimeout < 0 || c.WriteTimeout < 0 {
		errs = append(errs, fmt.Errorf("replay: ReadTimeout %v and WriteTimeout %v must be positive", c.ReadTimeout, c.WriteTimeout))
	}
	return errors.Join(errs...)
}

// Outcome is one selected dead letter and what became of it.
type Outcome struct {
	*DeadLetter
	Status Status
	// Why says why it was skipped; empty when it was (or would be) sent.
	Why string
	// Marker is its replay: the one just recorded (StatusSent) or the earlier one
	// (StatusReplayed); nil otherwise.
	Marker *Marker
}

// Report counts what a run read and decided.
type Report struct {
	// Read is how many dead letters were read; Selected how many the filter selected.
	Read, Selected int
	ByReason       map[schemas.Reason]int
	ByStatus       map[Status]int
	// NoProgressTopic: a dry run found no progress topic, and took nothing for replayed.
	NoProgressTopic bool
	// UnreadableMarkers counts the progress topic's records that are not markers.
	UnreadableMarkers int
}

// Run reads the progress topic and the dead-letter topic to their ends, selects dead letters
// with cfg.Filter and, in the dead-letter topic's order (partition, then offset), decides
// each and, unless cfg.DryRun, sends it: the request first, then, once the broker has
// acknowledged it, its marker. each is told every outcome as it is decided, after the send
// for a sent one; an error from it stops the run. A failed write stops the run with an error
// naming the dead letter: what was sent before it is recorded, and a run again resumes there.
func Run(ctx context.Context, cfg Config, each func(Outcome) error) (Report, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	rep := Report{ByReason: map[schemas.Reason]int{}, ByStatus: map[Status]int{}}
	topics := []string{cfg.DeadLetterTopic}
	if !cfg.DryRun {
		topics = append(topics, cfg.RequestsTopic, cfg.ProgressTopic)
	}
	for _, t := range topics {
		if _, err := cfg.Client.Partitions(ctx, t); err != nil {
			if t == cfg.ProgressTopic && errors.Is(err, stream.ErrUnknownTopic) {
				return rep, fmt.Errorf("replay: the progress topic %s does not exist; create it compacted (cleanup.policy=compact) before replaying: %w", t, err)
			}
			return rep, fmt.Errorf("replay: %w", err)
		}
	}

	done, err := readProgress(ctx, cfg)
	switch {
	case cfg.DryRun && errors.Is(err, stream.ErrUnknownTopic):
		rep.NoProgressTopic = true
	case err != nil:
		return rep, err
	}
	rep.UnreadableMarkers = done.unreadable
	selected, read, err := readDeadLetters(ctx, cfg)
	rep.Read = read
	if err != nil {
		return rep, err
	}
	rep.Selected = len(selected)
	for _, d := range selected {
		if d.Letter != nil {
			rep.ByReason[d.Letter.Reason]++
		}
	}

	var s *sender
	if !cfg.DryRun {
		if s, err = newSender(ctx, cfg); err != nil {
			return rep, err
		}
		defer s.close()
	}
	// The originals this run sends, so that a second dead letter of one is not sent twice.
	sending := map[Position]Position{}
	selection := cfg.Filter.String()
	for _, d := range selected {
		out := decide(d, done, sending, cfg.MaxReplays)
		if out.Status == StatusReplayable {
			sending[d.Original()] = d.At
		}
		if out.Status == StatusReplayable && s != nil {
			m, err := s.send(ctx, d, selection)
			if err != nil {
				return rep, err
			}
			done.add(m)
			out.Status, out.Marker = StatusSent, &m
		}
		rep.ByStatus[out.Status]++
		if err := each(out); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// decide says what becomes of d: skipped, and why, or replayable.
func decide(d *DeadLetter, done *progress, sending map[Position]Position, maxReplays int) Outcome {
	out := Outcome{DeadLetter: d}
	if d.Problem != "" {
		out.Status, out.Why = StatusNotReplayable, d.Problem
		return out
	}
	if m, ok := done.replayed(d); ok {
		out.Status, out.Marker = StatusReplayed, &m
		out.Why = fmt.Sprintf("replayed at %s as replay %d, to %s", m.ReplayedAt.UTC().Format(time.RFC3339), m.Replay, m.SentTo)
		if m.DeadLetter != d.At {
			out.Why = fmt.Sprintf("its original was replayed from dead letter %s at %s, to %s", m.DeadLetter, m.ReplayedAt.UTC().Format(time.RFC3339), m.SentTo)
		}
		return out
	}
	if at, ok := sending[d.Original()]; ok {
		out.Status, out.Why = StatusReplayed, fmt.Sprintf("its original is replayed from dead letter %s", at)
		return out
	}
	if d.Replays >= maxReplays {
		out.Status, out.Why = StatusRefused, fmt.Sprintf("its original was replayed %d times already, the most allowed is %d", d.Replays, maxReplays)
		return out
	}
	out.Status = StatusReplayable
	return out
}

// readProgress reads the progress topic to its end.
func readProgress(ctx context.Context, cfg Config) (*progress, error) {
	p := newProgress()
	ctx, cancel := context.WithTimeout(ctx, cfg.ReadTimeout)
	defer cancel()
	if _, err := cfg.Client.Partitions(ctx, cfg.ProgressTopic); err != nil {
		return p, fmt.Errorf("replay: %w", err)
	}
	var mu sync.Mutex
	err := readToEnd(ctx, cfg.Client, cfg.ProgressTopic, cfg.Logger, func(rec stream.Record) {
		mu.Lock()
		defer mu.Unlock()
		p.read(rec)
	})
	if err != nil {
		return p, fmt.Errorf("replay: reading the progress topic: %w", err)
	}
	return p, nil
}

// readDeadLetters reads the dead-letter topic to its end and returns the dead letters the
// filter selects, by partition then offset, and how many it read.
func readDeadLetters(ctx context.Context, cfg Config) ([]*DeadLetter, int, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.ReadTimeout)
	defer cancel()
	var (
		mu       sync.Mutex
		read     int
		selected []*DeadLetter
	)
	err := readToEnd(ctx, cfg.Client, cfg.DeadLetterTopic, cfg.Logger, func(rec stream.Record) {
		d := Inspect(ctx, cfg.Serde, rec)
		match := cfg.Filter.Match(d)
		mu.Lock()
		defer mu.Unlock()
		read++
		if match {
			selected = append(selected, d)
		}
	})
	if err != nil {
		return nil, read, fmt.Errorf("replay: reading the dead letters: %w", err)
	}
	slices.SortFunc(selected, func(a, b *DeadLetter) int {
		return cmp.Or(cmp.Compare(a.At.Partition, b.At.Partition), cmp.Compare(a.At.Offset, b.At.Offset))
	})
	return selected, read, nil
}

// sender writes replayed requests and their markers.
type sender struct {
	w        *stream.Writer
	requests string
	progress string
	timeout  time.Duration
	now      func() time.Time

	mu    sync.Mutex
	acked stream.Record // the request record last acknowledged
}

func newSender(ctx context.Context, cfg Config) (*sender, error) {
	s := &sender{requests: cfg.RequestsTopic, progress: cfg.ProgressTopic, timeout: cfg.WriteTimeout, now: cfg.Now}
	w, err := stream.NewWriter(ctx, stream.WriterConfig{
		Client:       cfg.Client,
		Topics:       []string{cfg.RequestsTopic, cfg.ProgressTopic},
		WriteTimeout: cfg.WriteTimeout,
		Logger:       cfg.Logger,
		Completed: func(recs []stream.Record) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, r := range recs {
				if r.Topic == s.requests {
					s.acked = r
				}
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	s.w = w
	return s, nil
}

func (s *sender) close() { _ = s.w.Close() }

// send writes d's request and, once it is acknowledged, its marker, which it returns.
func (s *sender) send(ctx context.Context, d *DeadLetter, selection string) (Marker, error) {
	at := s.now()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.w.Write(ctx, Record(d, s.requests, at)); err != nil {
		return Marker{}, fmt.Errorf("replay: sending request %q of dead letter %s to %s: %w", d.RequestID(), d.At, s.requests, err)
	}
	s.mu.Lock()
	sent := Position{Topic: s.acked.Topic, Partition: s.acked.Partition, Offset: s.acked.Offset}
	s.mu.Unlock()
	m := newMarker(d, sent, at, selection)
	rec, err := m.record(s.progress)
	if err == nil {
		err = s.w.Write(ctx, rec)
	}
	if err != nil {
		return Marker{}, fmt.Errorf("replay: request %q of dead letter %s was sent to %s but its replay could not be recorded on %s (a run again sends it again): %w",
			d.RequestID(), d.At, sent, s.progress, err)
	}
	return m, nil
}
