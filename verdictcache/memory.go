package verdictcache

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"rulevalidator/engine"
)

// DefaultMemoryEntries bounds Memory's entries.
const DefaultMemoryEntries = 10000

// Memory keeps entries in the process, for commands without object storage
// (validate, eval, serve without --s3-endpoint): the same keys and policy as
// ObjectStore, bounded by entry count (least recently used out first), lost
// when the process ends. It is safe for concurrent use.
type Memory struct {
	policy Policy
	mu     sync.Mutex
	// lru holds each entry as ObjectStore stores it (encode), so that
	// both stores give back the same verdicts and none shares memory with
	// a request.
	lru *simplelru.LRU[memoryKey, []byte]
}

// memoryKey is an entry's place: its scope and its key.
type memoryKey struct {
	scope engine.CacheScope
	key   string
}

// MemoryConfig configures Memory; zero values take the defaults.
type MemoryConfig struct {
	Policy
	// Entries bounds the entries kept (default DefaultMemoryEntries).
	Entries int
}

// NewMemory returns an empty in-process cache.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Entries < 0 {
		return nil, fmt.Errorf("verdictcache: Entries %d must not be negative", cfg.Entries)
	}
	if cfg.Entries == 0 {
		cfg.Entries = DefaultMemoryEntries
	}
	lru, err := simplelru.NewLRU[memoryKey, []byte](cfg.Entries, nil)
	if err != nil {
		return nil, fmt.Errorf("verdictcache: %w", err)
	}
	return &Memory{policy: cfg.Policy, lru: lru}, nil
}

// Get implements engine.VerdictCache.
func (m *Memory) Get(_ context.Context, scope engine.CacheScope, keys []string) (map[string]engine.CachedVerdict, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	out := map[string]engine.CachedVerdict{}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, key := range keys {
		data, ok := m.lru.Get(memoryKey{scope, key})
		if !ok {
			continue
		}
		// An expired entry is a miss and stays until it is replaced or
		// evicted, as in object storage.
		entry, ok := decode(data, scope, key)
		if !ok || !m.policy.fresh(entry.JudgedAt) {
			continue
		}
		out[key] = entry
	}
	return out, nil
}

// Put implements engine.VerdictCache. An entry over the size bound is left
// out.
func (m *Memory) Put(_ context.Context, scope engine.CacheScope, entries []engine.CachedVerdict) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	for _, entry := range entries {
		data, err := encode(scope, entry)
		if err != nil {
			return err
		}
		if len(data) > m.policy.MaxEntryBytes {
			continue
		}
		m.mu.Lock()
		m.lru.Add(memoryKey{scope, entry.Key}, data)
		m.mu.Unlock()
	}
	return nil
}

// Purge implements Purger.
func (m *Memory) Purge(_ context.Context, tenant, rulesetID string) (int, error) {
	if tenant == "" {
		return 0, errNoTenant
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, k := range m.lru.Keys() {
		if k.scope.Tenant == tenant && (rulesetID == "" || k.scope.RulesetID == rulesetID) {
			m.lru.Remove(k)
			n++
		}
	}
	return n, nil
}

// Len is how many entries are held.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lru.Len()
}
