package jobs

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"rulevalidator/schemas"
)

// MemoryStoreConfig bounds a MemoryStore; zero values take the defaults.
type MemoryStoreConfig struct {
	// MaxEntries is the most jobs kept (default 10000); past it the oldest
	// job is dropped first.
	MaxEntries int
	// TTL is how long a job is kept after it was created (default 24h).
	TTL time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

type jobKey struct{ tenant, requestID string }

type jobEntry struct {
	job      Job
	created  time.Time
	verdicts map[string]schemas.VerdictEvent // by event id
}

// MemoryStore keeps recent jobs in memory, keyed by (tenant, request id), so
// that one tenant can never address another's job. It is bounded by entries
// and age, and safe for concurrent use. Jobs do not survive a restart and
// are not shared between processes: a client polling another replica sees
// the job once that replica's Feed has read its events. ObjectStore is the
// durable, shared alternative.
type MemoryStore struct {
	cfg MemoryStoreConfig

	mu sync.Mutex
	// jobs is in order of creation, oldest first: entries are only ever
	// added once and read with Peek, so the list's recency is their age.
	jobs *simplelru.LRU[jobKey, *jobEntry]
}

// NewMemoryStore returns an empty store.
func NewMemoryStore(cfg MemoryStoreConfig) *MemoryStore {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 10000
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	jobs, err := simplelru.NewLRU[jobKey, *jobEntry](cfg.MaxEntries, nil)
	if err != nil {
		panic(err) // MaxEntries is positive
	}
	return &MemoryStore{cfg: cfg, jobs: jobs}
}

// Create adds job unless one with its tenant and request id exists, in
// which case that one is returned with created false. It never fails.
func (s *MemoryStore) Create(_ context.Context, job Job) (Job, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := jobKey{job.TenantID, job.RequestID}
	if e := s.live(key); e != nil {
		return e.snapshot(), false, nil
	}
	e := s.insert(key)
	e.job = job
	e.job.Verdicts = nil
	return e.snapshot(), true, nil
}

// Get returns the tenant's job, if it is kept. It never fails.
func (s *MemoryStore) Get(_ context.Context, tenant, requestID string) (Job, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(jobKey{tenant, requestID})
	if e == nil {
		return Job{}, false, nil
	}
	return e.snapshot(), true, nil
}

// Delete forgets a job. It never fails.
func (s *MemoryStore) Delete(_ context.Context, tenant, requestID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs.Remove(jobKey{tenant, requestID})
	return nil
}

// Queued does nothing: a job in memory goes with the process that would
// have published it.
func (s *MemoryStore) Queued(context.Context, Job) error { return nil }

// RecordVerdict adds a verdict event as read from the verdicts topic;
// redeliveries are ignored. A job not yet known is created.
func (s *MemoryStore) RecordVerdict(v schemas.VerdictEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(jobKey{v.TenantID, v.RequestID})
	e.verdicts[v.EventID] = v
	e.settle()
}

// RecordSummary adds a summary event as read from the summaries topic. The
// job completes once every verdict the summary counts is in. A job not yet
// known is created.
func (s *MemoryStore) RecordSummary(summary schemas.SummaryEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(jobKey{summary.TenantID, summary.RequestID})
	e.job.Summary = &summary
	e.settle()
}

// Len is the number of jobs kept, expired ones included until they are swept.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobs.Len()
}

// live returns the entry for key unless it has expired (and then drops it).
func (s *MemoryStore) live(key jobKey) *jobEntry {
	e, ok := s.jobs.Peek(key)
	if !ok {
		return nil
	}
	if s.cfg.Now().Sub(e.created) > s.cfg.TTL {
		s.jobs.Remove(key)
		return nil
	}
	return e
}

// entry returns the live entry for key, creating a pending one.
func (s *MemoryStore) entry(key jobKey) *jobEntry {
	if e := s.live(key); e != nil {
		return e
	}
	e := s.insert(key)
	e.job = Job{TenantID: key.tenant, RequestID: key.requestID, Status: Pending}
	return e
}

func (s *MemoryStore) insert(key jobKey) *jobEntry {
	now := s.cfg.Now()
	// Expired jobs go first; past MaxEntries, Add drops the oldest.
	for {
		_, oldest, ok := s.jobs.GetOldest()
		if !ok || now.Sub(oldest.created) <= s.cfg.TTL {
			break
		}
		s.jobs.RemoveOldest()
	}
	e := &jobEntry{created: now, verdicts: map[string]schemas.VerdictEvent{}}
	s.jobs.Add(key, e)
	return e
}

// settle derives the status from what has arrived.
func (e *jobEntry) settle() {
	switch {
	case e.job.Summary != nil && e.job.Summary.Status == schemas.StatusFailed:
		e.job.Status = Failed
	case e.job.Summary != nil && len(e.verdicts) >= e.job.Summary.Counts.Rules:
		e.job.Status = Completed
	case e.job.Summary != nil || len(e.verdicts) > 0:
		e.job.Status = Running
	}
}

// snapshot copies the job with its verdicts in rule order.
func (e *jobEntry) snapshot() Job {
	j := e.job
	if e.job.Summary != nil {
		s := *e.job.Summary
		j.Summary = &s
	}
	j.Verdicts = make([]schemas.VerdictEvent, 0, len(e.verdicts))
	for _, v := range e.verdicts {
		j.Verdicts = append(j.Verdicts, v)
	}
	slices.SortFunc(j.Verdicts, func(a, b schemas.VerdictEvent) int {
		if a.RuleIndex != b.RuleIndex {
			return a.RuleIndex - b.RuleIndex
		}
		return strings.Compare(a.RuleID, b.RuleID)
	})
	return j
}
