// Package verdictcache keeps the engine's verdicts by the key of what decided
// them (engine.VerdictKey), so that a rule judged on the same material, with
// the same model and settings, for the same tenant, is not asked again: in
// object storage, shared by every replica and durable across restarts
// (ObjectStore), or in the process's memory when there is none (Memory). Both
// implement engine.VerdictCache, keep tenants and rulesets apart, and let an
// operator purge a tenant's or a ruleset's entries.
package verdictcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"rulevalidator/engine"
)

// Defaults of the cache's policy.
const (
	// DefaultTTL is how long a verdict is reused after it was judged.
	DefaultTTL = 30 * 24 * time.Hour
	// DefaultMaxEntryBytes bounds one stored verdict; a larger one is not
	// stored (its evidence is unusually long) and is asked again next time.
	DefaultMaxEntryBytes = 256 << 10
	// DefaultPrefix is the object key prefix of the entries.
	DefaultPrefix = "verdicts"
)

// Policy is what both stores keep and for how long.
type Policy struct {
	// TTL is how long an entry is reused after its verdict was judged
	// (default DefaultTTL). An older entry is a miss; object storage keeps it
	// until the bucket's lifecycle rule expires it.
	TTL time.Duration
	// MaxEntryBytes bounds one entry as stored (default
	// DefaultMaxEntryBytes); a larger one is not stored.
	MaxEntryBytes int
	// Now is the clock (tests).
	Now func() time.Time
}

func (p *Policy) setDefaults() {
	if p.TTL == 0 {
		p.TTL = DefaultTTL
	}
	if p.MaxEntryBytes == 0 {
		p.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if p.Now == nil {
		p.Now = time.Now
	}
}

func (p *Policy) validate() error {
	switch {
	case p.TTL < 0:
		return fmt.Errorf("verdictcache: TTL %v must not be negative", p.TTL)
	case p.MaxEntryBytes < 0:
		return fmt.Errorf("verdictcache: MaxEntryBytes %d must not be negative", p.MaxEntryBytes)
	}
	return nil
}

// fresh reports whether an entry judged at judgedAt may still be reused.
func (p *Policy) fresh(judgedAt time.Time) bool {
	return p.Now().Sub(judgedAt) < p.TTL
}

// errNoTenant refuses a scope without a tenant: every entry belongs to one.
var errNoTenant = errors.New("verdictcache: a tenant is required")

func checkScope(scope engine.CacheScope) error {
	if scope.Tenant == "" {
		return errNoTenant
	}
	return nil
}

// Purger removes stored entries: a tenant's, or one ruleset's of a tenant.
type Purger interface {
	// Purge removes the entries of tenant, of rulesetID only when it is not
	// empty, and returns how many it removed.
	Purge(ctx context.Context, tenant, rulesetID string) (int, error)
}

var (
	_ engine.VerdictCache = (*Memory)(nil)
	_ engine.VerdictCache = (*ObjectStore)(nil)
	_ Purger              = (*Memory)(nil)
	_ Purger              = (*ObjectStore)(nil)
)

// stored is an entry as both stores keep it: the entry and the scope it
// belongs to, checked again when it is read.
type stored struct {
	Tenant    string               `json:"tenant_id"`
	RulesetID string               `json:"ruleset_id"`
	Entry     engine.CachedVerdict `json:"entry"`
}

func encode(scope engine.CacheScope, entry engine.CachedVerdict) ([]byte, error) {
	data, err := json.Marshal(stored{Tenant: scope.Tenant, RulesetID: scope.RulesetID, Entry: entry})
	if err != nil {
		return nil, fmt.Errorf("verdictcache: encoding the verdict on rule %q: %w", entry.RuleID, err)
	}
	return data, nil
}

// decode reads an entry stored under key in scope; ok false when it is not
// one, or belongs to another scope or key (a miss).
func decode(data []byte, scope engine.CacheScope, key string) (engine.CachedVerdict, bool) {
	var s stored
	if err := json.Unmarshal(data, &s); err != nil {
		return engine.CachedVerdict{}, false
	}
	if s.Tenant != scope.Tenant || s.RulesetID != scope.RulesetID || s.Entry.Key != key {
		return engine.CachedVerdict{}, false
	}
	return s.Entry, true
}
