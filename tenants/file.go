package tenants

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPollInterval is FileOptions.PollInterval's default.
const DefaultPollInterval = 2 * time.Second

// maxFileBytes bounds what is read of a tenants file.
const maxFileBytes = 4 << 20

// FileOptions configures a File.
type FileOptions struct {
	// PollInterval is how often Run reads the file again (default DefaultPollInterval).
	PollInterval time.Duration
	// Logger receives the reloads and the versions refused (default slog.Default()).
	Logger *slog.Logger
}

// File serves the tenants file at a path, read at Open and again every PollInterval by Run.
// A version that cannot be read or does not parse is logged, naming the problem, and the last
// good one stays served; the same bad version is logged once. The file is read whole each
// time and compared with the last version read, so that any change is seen, a Kubernetes
// ConfigMap's swap of its symbolic link included. Write it whole (a rename into place, as a
// ConfigMap update does): a version caught half written is corrected at the next poll.
//
// Its methods are safe for concurrent use; the readers take the current snapshot without a
// lock.
type File struct {
	path string
	poll time.Duration
	log  *slog.Logger

	current atomic.Pointer[Config]

	// mu serialises reloads and guards seen and lastErr.
	mu sync.Mutex
	// seen is the hash of the last content read, good or bad; lastErr the last read error,
	// so that a lasting one is logged once.
	seen    [sha256.Size]byte
	lastErr string
}

// Open reads and parses the tenants file at path: a file that is missing, unreadable or
// invalid is an error.
func Open(path string, opts FileOptions) (*File, error) {
	if opts.PollInterval < 0 {
		return nil, fmt.Errorf("tenants: FileOptions.PollInterval must not be negative (got %s)", opts.PollInterval)
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	f := &File{path: path, poll: opts.PollInterval, log: opts.Logger.With("tenants_file", path)}
	data, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("tenants file: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("tenants file %s: %w", path, err)
	}
	f.seen = sha256.Sum256(data)
	f.current.Store(cfg)
	f.log.Info("tenants file read", "tenants", len(cfg.Tenants))
	return f, nil
}

// Run reads the file every PollInterval until ctx ends, then returns nil.
func (f *File) Run(ctx context.Context) error {
	ticker := time.NewTicker(f.poll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			f.Reload()
		}
	}
}

// Reload reads the file now, as Run does at each poll, and reports whether a new version is
// served.
func (f *File) Reload() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := readFile(f.path)
	if err != nil {
		if msg := err.Error(); msg != f.lastErr {
			f.lastErr = msg
			f.log.Error("tenants file unreadable; the previous version stays in force", "err", err)
		}
		return false
	}
	f.lastErr = ""
	sum := sha256.Sum256(data)
	if sum == f.seen {
		return false
	}
	f.seen = sum
	cfg, err := Parse(data)
	if err != nil {
		f.log.Error("tenants file refused; the previous version stays in force", "err", err)
		return false
	}
	f.current.Store(cfg)
	f.log.Info("tenants file reloaded", "tenants", len(cfg.Tenants))
	return true
}

// Config is the version in force.
func (f *File) Config() *Config { return f.current.Load() }

// Weight is tenant's weight in the version in force (a consumer.Fairness.Weight).
func (f *File) Weight(tenant string) int { return f.Config().For(tenant).Weight }

// MaxInFlight is tenant's cap in the version in force, 0 for none (a
// consumer.Fairness.MaxInFlight).
func (f *File) MaxInFlight(tenant string) int { return f.Config().For(tenant).MaxInFlight }

// RequestsPerMinute is tenant's rate limit in the version in force, 0 for none (for
// NewRateLimiter).
func (f *File) RequestsPerMinute(tenant string) int { return f.Config().For(tenant).RequestsPerMinute }

// readFile reads path, refusing a file over maxFileBytes.
func readFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, errors.New(path + ": larger than 4 MiB; a tenants file is a few lines a tenant")
	}
	return data, nil
}
