package jobs

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"rulevalidator/bucket"
	"rulevalidator/judging"
	"rulevalidator/schemas"
)

// DefaultPrefix is ObjectStoreConfig.Prefix's default.
const DefaultPrefix = "jobs"

// ObjectStore keeps jobs in object storage, one JSON document per job at
// <prefix>/<tenant>/<request id>.json (both escaped, see Key), read
// on demand: every replica answers the same status, it survives restarts,
// and no replica holds anything per job in memory. The submitting replica
// creates the pending document with a conditional write, so that of two
// replicas accepting one request id exactly one publishes it, and marks it
// queued once the broker has the request; the serve pipeline replaces it
// with the final one (StoreResult) before it publishes the request's
// events. Documents stay until a lifecycle rule of the bucket expires them.
type ObjectStore struct {
	objects  bucket.Objects
	prefix   string
	unqueued time.Duration
	now      func() time.Time
}

// ObjectStoreConfig configures ObjectStore; zero values take the defaults.
type ObjectStoreConfig struct {
	// Prefix is the key prefix of job documents (default DefaultPrefix;
	// segments separated by '/').
	Prefix string
	// UnqueuedAfter is how long a pending job never marked queued (its
	// replica stopped between recording and publishing it) blocks its
	// request id; past it the id may be submitted again (default 5m, well
	// past the time a submission may take).
	UnqueuedAfter time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

// NewObjectStore returns a job store on objects.
func NewObjectStore(objects bucket.Objects, cfg ObjectStoreConfig) (*ObjectStore, error) {
	if objects == nil {
		return nil, errors.New("jobs: NewObjectStore needs object storage")
	}
	prefix := strings.TrimSuffix(cfg.Prefix, "/")
	if prefix == "" {
		prefix = DefaultPrefix
	}
	// The longest key shows whether the prefix can hold every key.
	longest := strings.Repeat("x", bucket.MaxSegmentBytes)
	key, err := bucket.TenantKey(prefix, longest, longest)
	if err != nil {
		return nil, fmt.Errorf("jobs: job prefix %q: %w", prefix, err)
	}
	if len(key)+len(jobSuffix) > bucket.MaxKeyBytes {
		return nil, fmt.Errorf("jobs: job prefix %q is too long: the longest job key would be over S3's %d bytes", prefix, bucket.MaxKeyBytes)
	}
	if cfg.UnqueuedAfter < 0 {
		return nil, fmt.Errorf("jobs: ObjectStoreConfig.UnqueuedAfter %v must not be negative", cfg.UnqueuedAfter)
	}
	if cfg.UnqueuedAfter == 0 {
		cfg.UnqueuedAfter = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &ObjectStore{objects: objects, prefix: prefix, unqueued: cfg.UnqueuedAfter, now: cfg.Now}, nil
}

const jobContentType = "application/json"

// jobDocument is a job as stored: what GET answers plus what the API needs.
type jobDocument struct {
	TenantID    string    `json:"tenant_id"`
	RequestID   string    `json:"request_id"`
	Status      Status    `json:"status"`
	SubmittedAt time.Time `json:"submitted_at,omitzero"`
	CallbackURL string    `json:"callback_url,omitempty"`
	// Queued: the broker acknowledged the request (pending and delayed jobs only).
	Queued bool    `json:"queued,omitempty"`
	Delay  *Delay  `json:"delay,omitempty"`
	Result *Result `json:"result,omitempty"`
	// Token is the creating writer's random mark, so that a write whose
	// answer was lost is told from another replica's.
	Token string `json:"token,omitempty"`
}

func newJobDocument(j Job) jobDocument {
	d := jobDocument{TenantID: j.TenantID, RequestID: j.RequestID, Status: j.Status, SubmittedAt: j.SubmittedAt,
		CallbackURL: j.CallbackURL, Delay: j.Delay}
	if j.Summary != nil {
		verdicts := j.Verdicts
		if verdicts == nil {
			verdicts = []schemas.VerdictEvent{}
		}
		d.Result = &Result{Summary: *j.Summary, Verdicts: verdicts}
	}
	return d
}

func (d jobDocument) job() Job {
	j := Job{TenantID: d.TenantID, RequestID: d.RequestID, Status: d.Status, SubmittedAt: d.SubmittedAt,
		CallbackURL: d.CallbackURL, Delay: d.Delay}
	if d.Result != nil {
		summary := d.Result.Summary
		j.Summary = &summary
		j.Verdicts = d.Result.Verdicts
	}
	return j
}

// jobSuffix ends every job document's key.
const jobSuffix = ".json"

// Key is the object key of a tenant's job: bucket.TenantKey's, the one
// scheme of tenant-scoped keys, with jobSuffix.
func (s *ObjectStore) Key(tenant, requestID string) (string, error) {
	key, err := bucket.TenantKey(s.prefix, tenant, requestID)
	if err != nil {
		return "", fmt.Errorf("jobs: job %q of tenant %q: %w", requestID, tenant, err)
	}
	return key + jobSuffix, nil
}

// Create writes the pending document unless the tenant has the job already.
// It is a conditional write (If-None-Match: *): of two replicas creating one
// job, one creates it and the other answers it. An abandoned job (pending,
// never queued, past UnqueuedAfter) is replaced with a write conditional on
// the version read (If-Match).
func (s *ObjectStore) Create(ctx context.Context, job Job) (Job, bool, error) {
	job.Verdicts = nil
	doc := newJobDocument(job)
	doc.Token = rand.Text()
	body, err := json.Marshal(doc)
	if err != nil {
		return Job{}, false, fmt.Errorf("jobs: encoding job %q: %w", job.RequestID, err)
	}
	key, err := s.Key(job.TenantID, job.RequestID)
	if err != nil {
		return Job{}, false, err
	}
	// Each round loses at most to a writer that changed the document meanwhile.
	for range 3 {
		info, err := s.objects.PutNew(ctx, key, body, jobContentType, nil)
		if err == nil {
			job.version = info.ETag
			return job, true, nil
		}
		if !errors.Is(err, bucket.ErrConditionFailed) {
			return Job{}, false, fmt.Errorf("jobs: creating job %q of tenant %q: %w", job.RequestID, job.TenantID, err)
		}
		existing, etag, found, err := s.read(ctx, job.TenantID, job.RequestID)
		switch {
		case err != nil:
			return Job{}, false, err
		case !found:
			continue // deleted meanwhile
		case existing.Token == doc.Token:
			job.version = etag
			return job, true, nil // written by an attempt of ours whose answer was lost
		case !s.abandoned(existing):
			return existing.job(), false, nil
		}
		info, err = s.objects.PutIfMatch(ctx, key, etag, body, jobContentType, nil)
		if err == nil {
			job.version = info.ETag
			return job, true, nil
		}
		if !errors.Is(err, bucket.ErrConditionFailed) && !errors.Is(err, bucket.ErrNotFound) {
			return Job{}, false, fmt.Errorf("jobs: replacing job %q of tenant %q: %w", job.RequestID, job.TenantID, err)
		}
	}
	return Job{}, false, fmt.Errorf("jobs: job %q of tenant %q changed under every attempt to create it", job.RequestID, job.TenantID)
}

// abandoned reports whether a job is pending, never queued, and older than
// any submission takes: its replica stopped before it published the request.
func (s *ObjectStore) abandoned(d jobDocument) bool {
	return d.Status == Pending && !d.Queued && !d.SubmittedAt.IsZero() && s.now().Sub(d.SubmittedAt) > s.unqueued
}

// Queued marks the pending job just created as acknowledged by the broker.
// The write is conditional on the version Create wrote: a document the
// pipeline replaced meanwhile (the result was quicker) is left as it is.
func (s *ObjectStore) Queued(ctx context.Context, job Job) error {
	if job.version == "" {
		return fmt.Errorf("jobs: job %q of tenant %q was not created here", job.RequestID, job.TenantID)
	}
	doc := newJobDocument(job)
	doc.Queued = true
	body, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("jobs: encoding job %q: %w", job.RequestID, err)
	}
	key, err := s.Key(job.TenantID, job.RequestID)
	if err != nil {
		return err
	}
	_, err = s.objects.PutIfMatch(ctx, key, job.version, body, jobContentType, nil)
	if err != nil && !errors.Is(err, bucket.ErrConditionFailed) && !errors.Is(err, bucket.ErrNotFound) {
		return fmt.Errorf("jobs: marking job %q of tenant %q queued: %w", job.RequestID, job.TenantID, err)
	}
	return nil
}

// Delayed marks a request's job delayed until until, saying why, unless it is done: a
// write conditional on the version read, so that a result stored meanwhile (by another
// replica, after a rebalance) is never replaced. A request with no job yet (published to
// the requests topic directly) gets one.
func (s *ObjectStore) Delayed(ctx context.Context, req *schemas.Request, until time.Time, why string) error {
	key, err := s.Key(req.TenantID, req.RequestID)
	if err != nil {
		return err
	}
	for range 3 {
		doc, etag, found, err := s.read(ctx, req.TenantID, req.RequestID)
		if err != nil {
			return err
		}
		if !found {
			doc = jobDocument{TenantID: req.TenantID, RequestID: req.RequestID, SubmittedAt: req.SubmittedAt, Queued: true}
		}
		if doc.Status == Completed || doc.Status == Failed {
			return nil
		}
		doc.Status, doc.Delay = Delayed, &Delay{Until: until.UTC(), Reason: why}
		body, err := json.Marshal(doc)
		if err != nil {
			return fmt.Errorf("jobs: encoding job %q: %w", req.RequestID, err)
		}
		if found {
			_, err = s.objects.PutIfMatch(ctx, key, etag, body, jobContentType, nil)
		} else {
			_, err = s.objects.PutNew(ctx, key, body, jobContentType, nil)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, bucket.ErrConditionFailed) && !errors.Is(err, bucket.ErrNotFound) {
			return fmt.Errorf("jobs: marking job %q of tenant %q delayed: %w", req.RequestID, req.TenantID, err)
		}
	}
	return fmt.Errorf("jobs: job %q of tenant %q changed under every attempt to mark it delayed", req.RequestID, req.TenantID)
}

// Get reads the tenant's job.
func (s *ObjectStore) Get(ctx context.Context, tenant, requestID string) (Job, bool, error) {
	doc, _, found, err := s.read(ctx, tenant, requestID)
	if err != nil || !found {
		return Job{}, false, err
	}
	return doc.job(), true, nil
}

// save replaces the job's document.
func (s *ObjectStore) save(ctx context.Context, job Job) error {
	body, err := json.Marshal(newJobDocument(job))
	if err != nil {
		return fmt.Errorf("jobs: encoding job %q: %w", job.RequestID, err)
	}
	key, err := s.Key(job.TenantID, job.RequestID)
	if err != nil {
		return err
	}
	if _, err := s.objects.Put(ctx, key, body, jobContentType, nil); err != nil {
		return fmt.Errorf("jobs: storing job %q of tenant %q: %w", job.RequestID, job.TenantID, err)
	}
	return nil
}

// Delete removes the job's document.
func (s *ObjectStore) Delete(ctx context.Context, tenant, requestID string) error {
	key, err := s.Key(tenant, requestID)
	if err != nil {
		return err
	}
	if err := s.objects.Delete(ctx, key); err != nil {
		return fmt.Errorf("jobs: deleting job %q of tenant %q: %w", requestID, tenant, err)
	}
	return nil
}

// StoreResult stores a request's final result; it is the serve pipeline's
// judging.ResultStore. The document is made from the request alone (its
// submitted_at and callback URL are the ones the API recorded), so no read
// comes first.
func (s *ObjectStore) StoreResult(ctx context.Context, req *schemas.Request, out judging.Events) error {
	return s.save(ctx, Finished(req, out))
}

// read fetches and decodes a job document with its ETag. A document naming
// another tenant or request id than its key was asked for is refused: keys
// are one to one, so only tampering or a hash collision could make one.
func (s *ObjectStore) read(ctx context.Context, tenant, requestID string) (jobDocument, string, bool, error) {
	key, err := s.Key(tenant, requestID)
	if err != nil {
		return jobDocument{}, "", false, err
	}
	data, info, err := s.objects.GetBytesInfo(ctx, key)
	if errors.Is(err, bucket.ErrNotFound) {
		return jobDocument{}, "", false, nil
	}
	if err != nil {
		return jobDocument{}, "", false, fmt.Errorf("jobs: reading job %q of tenant %q: %w", requestID, tenant, err)
	}
	var doc jobDocument
	if err := json.Unmarshal(data, &doc); err != nil {
		return jobDocument{}, "", false, fmt.Errorf("jobs: job document %s: %w", info.URI, err)
	}
	if doc.TenantID != tenant || doc.RequestID != requestID {
		return jobDocument{}, "", false, fmt.Errorf("jobs: job document %s holds job %q of tenant %q, not %q of %q", info.URI, doc.RequestID, doc.TenantID, requestID, tenant)
	}
	return doc, info.ETag, true, nil
}
