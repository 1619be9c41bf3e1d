package verdictcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"rulevalidator/bucket"
	"rulevalidator/engine"
)

// ObjectStore keeps entries in object storage, one JSON object per verdict at
// <prefix>/<tenant>/<ruleset id>/<key>.json (tenant and ruleset id escaped by
// the one tenant-key scheme, bucket.TenantKey, as reports and job
// documents are): every replica reads what any replica stored, across
// restarts, and no tenant's entry can be read under another tenant's prefix.
// An entry older than the TTL is a miss; the bucket's lifecycle rule deletes
// it (for example <prefix>/ after the TTL). It is safe for concurrent use.
type ObjectStore struct {
	objects bucket.Objects
	prefix  string
	policy  Policy
	log     *slog.Logger
}

// ObjectStoreConfig configures ObjectStore; zero values take the defaults.
type ObjectStoreConfig struct {
	Policy
	// Prefix is the key prefix of the entries (default DefaultPrefix).
	Prefix string
	// Logger receives notices of entries that could not be read (default
	// slog.Default()).
	Logger *slog.Logger
}

// lookups bounds the entries one Get reads at once.
const lookups = 8

// NewObjectStore returns a verdict cache on objects.
func NewObjectStore(objects bucket.Objects, cfg ObjectStoreConfig) (*ObjectStore, error) {
	if objects == nil {
		return nil, errors.New("verdictcache: NewObjectStore needs object storage")
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	prefix := strings.TrimSuffix(cfg.Prefix, "/")
	if prefix == "" {
		prefix = DefaultPrefix
	}
	// The longest key shows whether the prefix can hold every key.
	longest := strings.Repeat("x", bucket.MaxSegmentBytes)
	key, err := bucket.TenantKey(prefix, longest, longest, longest)
	if err != nil {
		return nil, fmt.Errorf("verdictcache: prefix %q: %w", prefix, err)
	}
	if len(key)+len(entrySuffix) > bucket.MaxKeyBytes {
		return nil, fmt.Errorf("verdictcache: prefix %q is too long: the longest key would be over S3's %d bytes", prefix, bucket.MaxKeyBytes)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &ObjectStore{objects: objects, prefix: prefix, policy: cfg.Policy, log: cfg.Logger}, nil
}

const (
	entrySuffix      = ".json"
	entryContentType = "application/json"
)

// objectKey is where the entry under key of scope is stored.
func (s *ObjectStore) objectKey(scope engine.CacheScope, key string) (string, error) {
	k, err := bucket.TenantKey(s.prefix, scope.Tenant, scope.RulesetID, key)
	if err != nil {
		return "", fmt.Errorf("verdictcache: %w", err)
	}
	return k + entrySuffix, nil
}

// Get implements engine.VerdictCache: it reads the entries at once, a few at
// a time. A missing, expired, unreadable or oversized entry is a miss; any
// other failure of the store is an error (a storage fault).
func (s *ObjectStore) Get(ctx context.Context, scope engine.CacheScope, keys []string) (map[string]engine.CachedVerdict, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	out := map[string]engine.CachedVerdict{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(lookups)
	for _, key := range keys {
		g.Go(func() error {
			okey, err := s.objectKey(scope, key)
			if err != nil {
				return err
			}
			data, err := s.objects.GetBytes(gctx, okey)
			switch {
			case errors.Is(err, bucket.ErrNotFound):
				return nil
			case errors.Is(err, bucket.ErrTooLarge):
				s.log.Warn("verdictcache: an entry is larger than object storage reads; taken as a miss", "key", okey)
				return nil
			case err != nil:
				return err
			}
			entry, ok := decode(data, scope, key)
			if !ok {
				s.log.Warn("verdictcache: an entry could not be read; taken as a miss", "key", okey)
				return nil
			}
			if !s.policy.fresh(entry.JudgedAt) {
				return nil
			}
			mu.Lock()
			out[key] = entry
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// Put implements engine.VerdictCache. An entry over the size bound is left
// out.
func (s *ObjectStore) Put(ctx context.Context, scope engine.CacheScope, entries []engine.CachedVerdict) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(lookups)
	for _, entry := range entries {
		g.Go(func() error {
			okey, err := s.objectKey(scope, entry.Key)
			if err != nil {
				return err
			}
			data, err := encode(scope, entry)
			if err != nil {
				return err
			}
			if len(data) > s.policy.MaxEntryBytes {
				s.log.Info("verdictcache: a verdict is over the entry size bound and is not stored", "key", okey, "bytes", len(data), "max", s.policy.MaxEntryBytes)
				return nil
			}
			_, err = s.objects.Put(gctx, okey, data, entryContentType, nil)
			return err
		})
	}
	return g.Wait()
}

// Purge implements Purger: it deletes every entry under the tenant's prefix,
// or the ruleset's within it.
func (s *ObjectStore) Purge(ctx context.Context, tenant, rulesetID string) (int, error) {
	if tenant == "" {
		return 0, errNoTenant
	}
	var prefix string
	var err error
	if rulesetID == "" {
		prefix, err = bucket.TenantKey(s.prefix, tenant)
	} else {
		prefix, err = bucket.TenantKey(s.prefix, tenant, rulesetID)
	}
	if err != nil {
		return 0, fmt.Errorf("verdictcache: %w", err)
	}
	n := 0
	err = s.objects.List(ctx, prefix+"/", func(key string) error {
		if !strings.HasSuffix(key, entrySuffix) {
			return nil
		}
		if err := s.objects.Delete(ctx, key); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}
