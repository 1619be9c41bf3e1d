// Package usage records what each tenant's judged requests cost, per hour window (UTC):
// tokens in and out, model calls and requests judged, kept in object storage so that every
// replica adds to, and reads, the same counts. Store.Record adds one request's usage; Hours
// reads a range of windows for GET /v1/usage; Reserve admits a request under a token budget
// of the tenants file (package tenants), and Admission waits for it.
//
// One window is one object, <prefix>/<tenant>/<yyyy-mm-ddThh>.json (both escaped with
// bucket.TenantKey), updated by a read, then a conditional write: PutNew for a window's
// first request, PutIfMatch on the ETag read for the others, read again and retried when
// another writer got there first (bucket.ErrConditionFailed). Two replicas adding to one
// window therefore never lose each other's counts.
//
// A request counts once: the window keeps a short hash of each request id it counted (the
// last MaxCounted of them), and Record adds nothing for a request counted in its window or
// the window before (a redelivery judged again after the hour turned). A request redelivered
// later than that, or after MaxCounted others of its tenant in the same window, counts again.
package usage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"rulevalidator/bucket"
	"rulevalidator/verdict"
)

// Defaults and bounds.
const (
	// DefaultPrefix is where the windows are kept in the bucket.
	DefaultPrefix = "usage"
	// DefaultMaxCounted is how many request ids a window keeps to count each request once.
	DefaultMaxCounted = 4096
	// MaxRange is the longest range Hours reads.
	MaxRange = 31 * 24 * time.Hour
	// maxAttempts bounds the read-and-write rounds of one Record under contention: each
	// round one of the writers racing on a window wins.
	maxAttempts = 64
	// windowLayout names a window's object: its hour in UTC.
	windowLayout = "2006-01-02T15"
)

// ErrContended: a window changed under every one of Record's attempts. Retrying later helps.
var ErrContended = errors.New("usage: the window kept changing under the update")

// ErrRange: a range Hours refuses (empty, reversed, or longer than MaxRange).
var ErrRange = errors.New("usage: invalid range")

// Counts are what one window, or a range, holds.
type Counts struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	ModelCalls   int64 `json:"model_calls"`
	Requests     int64 `json:"requests"`
}

// Tokens is the tokens in and out, what a budget counts.
func (c Counts) Tokens() int64 { return c.InputTokens + c.OutputTokens }

func (c Counts) add(o Counts) Counts {
	return Counts{
		InputTokens:  c.InputTokens + o.InputTokens,
		OutputTokens: c.OutputTokens + o.OutputTokens,
		ModelCalls:   c.ModelCalls + o.ModelCalls,
		Requests:     c.Requests + o.Requests,
	}
}

// FromUsage is one request's counts from its summary's usage.
func FromUsage(u verdict.Usage) Counts {
	return Counts{InputTokens: int64(u.PromptTokens), OutputTokens: int64(u.CompletionTokens), ModelCalls: int64(u.LLMCalls), Requests: 1}
}

// Sum is the usage of a window, or of a range.
type Sum struct {
	Counts
	// Models splits the counts by the model that judged the requests.
	Models map[string]Counts `json:"models,omitempty"`
	// Cost is the price of the tokens, from the price table; nil without one, or when a
	// model is not in it.
	Cost *float64 `json:"cost,omitempty"`
}

// Row is one hour window of a tenant.
type Row struct {
	Hour time.Time `json:"hour"`
	Sum
}

// window is a window's document.
type window struct {
	Tenant string            `json:"tenant"`
	Hour   time.Time         `json:"hour"`
	Total  Counts            `json:"total"`
	Models map[string]Counts `json:"models,omitempty"`
	// Counted holds the hashes of the request ids counted, oldest first.
	Counted []string `json:"counted"`
	// Largest is the most tokens one request counted in the window used: what a budget
	// reserves for a request admitted in the next one (Reserve).
	Largest int64 `json:"largest,omitempty"`
	// Reserved holds the reservations of the requests admitted under a token budget in
	// the window and not yet counted, by request id hash.
	Reserved map[string]reservation `json:"reserved,omitempty"`
}

// Options configure a Store; zero values take the defaults.
type Options struct {
	Prefix     string
	MaxCounted int
	// Prices prices the rows' tokens; nil leaves Row.Cost out.
	Prices PriceTable
}

// Store keeps the windows in object storage. It is safe for concurrent use.
type Store struct {
	objects    bucket.Objects
	prefix     string
	maxCounted int
	prices     PriceTable
}

// New returns a Store on objects.
func New(objects bucket.Objects, opts Options) (*Store, error) {
	if objects == nil {
		return nil, errors.New("usage: New needs object storage")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if err := bucket.CheckPrefix(strings.TrimSuffix(opts.Prefix, "/")); err != nil {
		return nil, err
	}
	if opts.MaxCounted <= 0 {
		opts.MaxCounted = DefaultMaxCounted
	}
	return &Store{objects: objects, prefix: opts.Prefix, maxCounted: opts.MaxCounted, prices: opts.Prices}, nil
}

// Hour is the window at falls in: its hour, in UTC.
func Hour(at time.Time) time.Time { return at.UTC().Truncate(time.Hour) }

func (s *Store) key(tenant string, hour time.Time) (string, error) {
	return bucket.TenantKey(s.prefix, tenant, hour.Format(windowLayout)+".json")
}

// requestHash is what a window keeps of a request id: 64 bits of its SHA-256, in hex.
func requestHash(requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return hex.EncodeToString(sum[:8])
}

// Record adds one judged request's counts to its tenant's window of at (the hour it was
// judged), unless the request was counted already in that window or the one before, and
// lets go of the request's reservation (Reserve), in that window or the one before.
func (s *Store) Record(ctx context.Context, tenant, requestID, model string, at time.Time, c Counts) error {
	hour, id := Hour(at), requestHash(requestID)
	prev, _, err := s.read(ctx, tenant, hour.Add(-time.Hour))
	if err != nil {
		return err
	}
	counted := prev != nil && slices.Contains(prev.Counted, id)
	err = s.update(ctx, tenant, hour, func(w *window) (bool, error) {
		_, reserved := w.Reserved[id]
		delete(w.Reserved, id)
		if counted || slices.Contains(w.Counted, id) {
			return reserved, nil
		}
		w.Total = w.Total.add(c)
		if w.Models == nil {
			w.Models = map[string]Counts{}
		}
		w.Models[model] = w.Models[model].add(c)
		w.Largest = max(w.Largest, c.Tokens())
		w.Counted = append(w.Counted, id)
		if over := len(w.Counted) - s.maxCounted; over > 0 {
			w.Counted = slices.Delete(w.Counted, 0, over)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	return s.unreserve(ctx, tenant, hour.Add(-time.Hour), prev, id)
}

// Release lets go of the reservation of a request that ends without being counted (it
// failed before calling the model), in the window of at or the one before.
func (s *Store) Release(ctx context.Context, tenant, requestID string, at time.Time) error {
	hour, id := Hour(at), requestHash(requestID)
	for _, h := range []time.Time{hour, hour.Add(-time.Hour)} {
		w, _, err := s.read(ctx, tenant, h)
		if err != nil {
			return err
		}
		if err := s.unreserve(ctx, tenant, h, w, id); err != nil {
			return err
		}
	}
	return nil
}

// unreserve removes the reservation id from tenant's window of hour, w as last read (nil:
// none), when it holds one.
func (s *Store) unreserve(ctx context.Context, tenant string, hour time.Time, w *window, id string) error {
	if w == nil {
		return nil
	}
	if _, ok := w.Reserved[id]; !ok {
		return nil
	}
	return s.update(ctx, tenant, hour, func(w *window) (bool, error) {
		_, ok := w.Reserved[id]
		delete(w.Reserved, id)
		return ok, nil
	})
}

// update applies change to tenant's window of hour (a new one when there is none) and
// writes it when change says it changed it, by a conditional write on what was read: when
// another writer got there first, the window is read again and change applied to that.
func (s *Store) update(ctx context.Context, tenant string, hour time.Time, change func(w *window) (bool, error)) error {
	key, err := s.key(tenant, hour)
	if err != nil {
		return err
	}
	for attempt := range maxAttempts {
		w, etag, err := s.read(ctx, tenant, hour)
		if err != nil {
			return err
		}
		if w == nil {
			w = &window{Tenant: tenant, Hour: hour}
		}
		changed, err := change(w)
		if err != nil || !changed {
			return err
		}
		body, err := json.Marshal(w)
		if err != nil {
			return fmt.Errorf("usage: encoding window %s: %w", key, err)
		}
		if etag == "" {
			_, err = s.objects.PutNew(ctx, key, body, "application/json", nil)
		} else {
			_, err = s.objects.PutIfMatch(ctx, key, etag, body, "application/json", nil)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, bucket.ErrConditionFailed), errors.Is(err, bucket.ErrNotFound):
			// Another writer got there first: read what it wrote and change that.
			if err := sleep(ctx, attempt); err != nil {
				return err
			}
		default:
			return fmt.Errorf("usage: writing window %s: %w", key, err)
		}
	}
	return fmt.Errorf("%w: %s, %d attempts", ErrContended, key, maxAttempts)
}

// sleep waits a little, more after more attempts, jittered so that racing writers spread.
func sleep(ctx context.Context, attempt int) error {
	d := time.Duration(rand.N(int64(min(attempt+1, 20)) * int64(5*time.Millisecond)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// read reads tenant's window of hour and its ETag; nil and "" when there is none.
func (s *Store) read(ctx context.Context, tenant string, hour time.Time) (*window, string, error) {
	key, err := s.key(tenant, hour)
	if err != nil {
		return nil, "", err
	}
	body, info, err := s.objects.GetBytesInfo(ctx, key)
	if errors.Is(err, bucket.ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("usage: reading window %s: %w", key, err)
	}
	var w window
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, "", fmt.Errorf("usage: window %s is not a usage document: %w", key, err)
	}
	return &w, info.ETag, nil
}

// Report is a tenant's usage over a range.
type Report struct {
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	Hours []Row     `json:"hours"`
	Total Sum       `json:"total"`
}

// Hours reads tenant's windows from the hour of from up to to (exclusive; a window is in
// the range when its hour starts before to), the windows without requests left out. A range
// that is empty, reversed or longer than MaxRange fails with ErrRange.
func (s *Store) Hours(ctx context.Context, tenant string, from, to time.Time) (Report, error) {
	switch {
	case !to.After(from):
		return Report{}, fmt.Errorf("%w: to (%s) must be after from (%s)", ErrRange, to.Format(time.RFC3339), from.Format(time.RFC3339))
	case to.Sub(from) > MaxRange:
		return Report{}, fmt.Errorf("%w: the range is %s, over the limit of %d days", ErrRange, to.Sub(from), int(MaxRange/(24*time.Hour)))
	}
	r := Report{From: from.UTC(), To: to.UTC(), Hours: []Row{}}
	total := map[string]Counts{}
	hours, err := s.windows(ctx, tenant, "")
	if err != nil {
		return Report{}, err
	}
	for _, hour := range hours {
		if hour.Before(Hour(from)) || !hour.Before(to) {
			continue
		}
		w, _, err := s.read(ctx, tenant, hour)
		if err != nil {
			return Report{}, err
		}
		if w == nil {
			continue
		}
		r.Hours = append(r.Hours, Row{Hour: hour, Sum: s.sum(w.Total, w.Models)})
		for m, c := range w.Models {
			total[m] = total[m].add(c)
		}
		r.Total.Counts = r.Total.add(w.Total)
	}
	r.Total = s.sum(r.Total.Counts, total)
	return r, nil
}

func (s *Store) sum(c Counts, models map[string]Counts) Sum {
	row := Sum{Counts: c}
	if len(models) > 0 {
		row.Models = models
	}
	if s.prices != nil {
		row.Cost = s.prices.Cost(models)
	}
	return row
}

// windows lists the hours of tenant's windows whose names start with name (all of them for
// ""), in order.
func (s *Store) windows(ctx context.Context, tenant, name string) ([]time.Time, error) {
	dir, err := bucket.TenantKey(s.prefix, tenant)
	if err != nil {
		return nil, err
	}
	dir += "/"
	var hours []time.Time
	err = s.objects.List(ctx, dir+name, func(key string) error {
		stem, ok := strings.CutSuffix(strings.TrimPrefix(key, dir), ".json")
		if !ok {
			return nil
		}
		if h, err := time.Parse(windowLayout, stem); err == nil {
			hours = append(hours, h)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("usage: listing %s: %w", dir+name, err)
	}
	return hours, nil
}
