package api

import (
	"container/list"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"rulevalidator/schemas"
)

// JobStatus is where a validation stands.
type JobStatus string

const (
	// JobPending: accepted, not started (or, through Kafka, no event seen yet).
	JobPending JobStatus = "pending"
	// JobRunning: being judged, or some of its events have arrived.
	JobRunning JobStatus = "running"
	// JobCompleted: the summary and every verdict are in.
	JobCompleted JobStatus = "completed"
	// JobFailed: the request could not be judged; the summary says why.
	JobFailed JobStatus = "failed"
)

// Job is one validation as the API tracks it.
type Job struct {
	TenantID  string
	RequestID string
	Status    JobStatus
	// SubmittedAt is zero for a job first seen through its events (submitted
	// elsewhere).
	SubmittedAt time.Time
	// CallbackURL is the request's options.callback_url, "" when none.
	CallbackURL string
	// Summary is set once the summary is known.
	Summary *schemas.SummaryEvent
	// Verdicts are in rule order, de-duplicated by event id.
	Verdicts []schemas.VerdictEvent
	// version is the stored document's ETag as Create wrote it.
	version string
}

// Done reports whether the job has its final result.
func (j Job) Done() bool { return j.Status == JobCompleted || j.Status == JobFailed }

// Jobs keeps the status of validations, keyed by (tenant, request id) so
// that one tenant can never address another's job: a *JobStore in memory, or
// a *StoredJobs in object storage. It is safe for concurrent use.
type Jobs interface {
	// Create records job unless the tenant has a job with its request id,
	// which is returned instead with created false: submitting a request id
	// twice does not run it twice.
	Create(ctx context.Context, job Job) (_ Job, created bool, _ error)
	// Get returns the tenant's job; ok is false when there is none.
	Get(ctx context.Context, tenant, requestID string) (_ Job, ok bool, _ error)
	// Queued records that the request of job, as Create returned it, is
	// acknowledged by the broker: a pending job never marked queued may be
	// submitted again once its submission must have ended.
	Queued(ctx context.Context, job Job) error
	// Delete forgets a job whose submission failed, so that it may be
	// submitted again.
	Delete(ctx context.Context, tenant, requestID string) error
}

var (
	_ Jobs = (*JobStore)(nil)
	_ Jobs = (*StoredJobs)(nil)
)

// JobStoreConfig bounds a JobStore; zero values take the defaults.
type JobStoreConfig struct {
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
	elem     *list.Element
}

// JobStore keeps recent jobs in memory, keyed by (tenant, request id), so
// that one tenant can never address another's job. It is bounded by entries
// and age, and safe for concurrent use. Jobs do not survive a restart and
// are not shared between processes: a client polling another replica sees
// the job once that replica's JobFeed has read its events. StoredJobs is the
// durable, shared alternative.
type JobStore struct {
	cfg JobStoreConfig

	mu    sync.Mutex
	jobs  map[jobKey]*jobEntry
	order *list.List // of jobKey, oldest first
}

// NewJobStore returns an empty store.
func NewJobStore(cfg JobStoreConfig) *JobStore {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 10000
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &JobStore{cfg: cfg, jobs: map[jobKey]*jobEntry{}, order: list.New()}
}

// Create adds job unless one with its tenant and request id exists, in
// which case that one is returned with created false. It never fails.
func (s *JobStore) Create(_ context.Context, job Job) (Job, bool, error) {
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
func (s *JobStore) Get(_ context.Context, tenant, requestID string) (Job, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(jobKey{tenant, requestID})
	if e == nil {
		return Job{}, false, nil
	}
	return e.snapshot(), true, nil
}

// Delete forgets a job. It never fails.
func (s *JobStore) Delete(_ context.Context, tenant, requestID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.jobs[jobKey{tenant, requestID}]; ok {
		s.remove(jobKey{tenant, requestID}, e)
	}
	return nil
}

// Queued does nothing: a job in memory goes with the process that would
// have published it.
func (s *JobStore) Queued(context.Context, Job) error { return nil }

// RecordVerdict adds a verdict event as read from the verdicts topic;
// redeliveries are ignored. A job not yet known is created.
func (s *JobStore) RecordVerdict(v schemas.VerdictEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(jobKey{v.TenantID, v.RequestID})
	e.verdicts[v.EventID] = v
	e.settle()
}

// RecordSummary adds a summary event as read from the summaries topic. The
// job completes once every verdict the summary counts is in. A job not yet
// known is created.
func (s *JobStore) RecordSummary(summary schemas.SummaryEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(jobKey{summary.TenantID, summary.RequestID})
	e.job.Summary = &summary
	e.settle()
}

// Len is the number of jobs kept, expired ones included until they are swept.
func (s *JobStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs)
}

// live returns the entry for key unless it has expired (and then drops it).
func (s *JobStore) live(key jobKey) *jobEntry {
	e, ok := s.jobs[key]
	if !ok {
		return nil
	}
	if s.cfg.Now().Sub(e.created) > s.cfg.TTL {
		s.remove(key, e)
		return nil
	}
	return e
}

// entry returns the live entry for key, creating a pending one.
func (s *JobStore) entry(key jobKey) *jobEntry {
	if e := s.live(key); e != nil {
		return e
	}
	e := s.insert(key)
	e.job = Job{TenantID: key.tenant, RequestID: key.requestID, Status: JobPending}
	return e
}

func (s *JobStore) insert(key jobKey) *jobEntry {
	now := s.cfg.Now()
	for s.order.Len() > 0 {
		oldest := s.order.Front().Value.(jobKey)
		e := s.jobs[oldest]
		if len(s.jobs) < s.cfg.MaxEntries && now.Sub(e.created) <= s.cfg.TTL {
			break
		}
		s.remove(oldest, e)
	}
	e := &jobEntry{created: now, verdicts: map[string]schemas.VerdictEvent{}}
	e.elem = s.order.PushBack(key)
	s.jobs[key] = e
	return e
}

func (s *JobStore) remove(key jobKey, e *jobEntry) {
	s.order.Remove(e.elem)
	delete(s.jobs, key)
}

// settle derives the status from what has arrived.
func (e *jobEntry) settle() {
	switch {
	case e.job.Summary != nil && e.job.Summary.Status == schemas.StatusFailed:
		e.job.Status = JobFailed
	case e.job.Summary != nil && len(e.verdicts) >= e.job.Summary.Counts.Rules:
		e.job.Status = JobCompleted
	case e.job.Summary != nil || len(e.verdicts) > 0:
		e.job.Status = JobRunning
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
