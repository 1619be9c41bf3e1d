package verdictcache

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"rulevalidator/bucket"
	"rulevalidator/engine"
	"rulevalidator/internal/s3test"
	"rulevalidator/objstore"
	"rulevalidator/verdict"
)

// store is what the contract suite runs against: either implementation.
type store interface {
	engine.VerdictCache
	Purger
}

// clock is a settable clock for the TTL.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func entry(key, rule string, judged time.Time) engine.CachedVerdict {
	pass := true
	start, end := 4, 9
	return engine.CachedVerdict{Key: key, RuleID: rule, Model: "m", JudgedAt: judged, RequestID: "req-1", Tokens: 120,
		Verdict: engine.Verdict{RuleID: rule, Type: verdict.Boolean, DataSufficiency: true, Rationale: "The clause caps it.", BooleanOutput: &pass,
			Evidences: []verdict.Evidence{{Text: "capped", SourceOrigin: "msa.pdf", SourcePageNumber: 2, Anchored: true, Match: verdict.MatchPassage,
				StartOffset: &start, EndOffset: &end, PassageID: "d1p2s1", CitedPageNumber: 2}}}}
}

// testContract is the behaviour both stores share: entries come back as
// stored, within their scope only, until their TTL; oversized ones are not
// stored; purges remove a tenant's or a ruleset's entries and nothing else.
func testContract(t *testing.T, newStore func(t *testing.T, p Policy) store) {
	ctx := context.Background()
	judged := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	c := &clock{now: judged.Add(time.Minute)}
	s := newStore(t, Policy{TTL: 24 * time.Hour, MaxEntryBytes: 4096, Now: c.Now})
	contoso := engine.CacheScope{Tenant: "contoso", RulesetID: "msa"}
	other := engine.CacheScope{Tenant: "contoso", RulesetID: "nda"}
	fabrikam := engine.CacheScope{Tenant: "fabrikam", RulesetID: "msa"}

	big := entry("k-big", "big", judged)
	big.Verdict.Rationale = strings.Repeat("long ", 2000)
	if err := s.Put(ctx, contoso, []engine.CachedVerdict{entry("k1", "cap", judged), entry("k2", "term", judged), big}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, other, []engine.CachedVerdict{entry("k1", "cap", judged)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, contoso, []string{"k1", "k2", "k3", "k-big"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["k1"].RuleID != "cap" || got["k2"].RuleID != "term" {
		t.Fatalf("Get = %v, want k1 and k2 (k3 was never stored, k-big is over the bound)", got)
	}
	want := entry("k1", "cap", judged)
	if a, b := jsonString(t, got["k1"]), jsonString(t, want); a != b {
		t.Errorf("entry came back as\n%s\nwant\n%s", a, b)
	}
	if got, err := s.Get(ctx, fabrikam, []string{"k1", "k2"}); err != nil || len(got) != 0 {
		t.Errorf("another tenant's Get = %v, %v; want nothing", got, err)
	}

	c.now = judged.Add(25 * time.Hour)
	if got, err := s.Get(ctx, contoso, []string{"k1"}); err != nil || len(got) != 0 {
		t.Errorf("Get past the TTL = %v, %v; want a miss", got, err)
	}
	c.now = judged.Add(time.Minute)

	if n, err := s.Purge(ctx, "contoso", "nda"); err != nil || n != 1 {
		t.Errorf("Purge(contoso, nda) = %d, %v; want 1", n, err)
	}
	if got, _ := s.Get(ctx, other, []string{"k1"}); len(got) != 0 {
		t.Errorf("the purged ruleset's entry is still there")
	}
	if got, _ := s.Get(ctx, contoso, []string{"k1", "k2"}); len(got) != 2 {
		t.Errorf("purging a ruleset removed another's entries: %v", got)
	}
	if err := s.Put(ctx, fabrikam, []engine.CachedVerdict{entry("k1", "cap", judged)}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Purge(ctx, "contoso", ""); err != nil || n != 2 {
		t.Errorf("Purge(contoso) = %d, %v; want 2", n, err)
	}
	if got, _ := s.Get(ctx, fabrikam, []string{"k1"}); len(got) != 1 {
		t.Errorf("purging a tenant removed another tenant's entry")
	}
	if _, err := s.Get(ctx, engine.CacheScope{RulesetID: "msa"}, []string{"k1"}); err == nil {
		t.Error("Get without a tenant succeeded")
	}
}

func TestMemory(t *testing.T) {
	testContract(t, func(t *testing.T, p Policy) store {
		m, err := NewMemory(MemoryConfig{Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

// TestObjectStore runs the contract against the real S3 server.
func TestObjectStore(t *testing.T) {
	testContract(t, func(t *testing.T, p Policy) store {
		s, err := NewObjectStore(s3test.Store(t), ObjectStoreConfig{Policy: p, Prefix: "cache/verdicts"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// recordingObjects is object storage that records the keys it is asked for
// and fails with err when set; the cache calls no other method than those
// defined here.
type recordingObjects struct {
	bucket.Objects
	mu   sync.Mutex
	keys []string
	err  error
}

func (o *recordingObjects) GetBytes(_ context.Context, key string) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.keys = append(o.keys, key)
	if o.err != nil {
		return nil, o.err
	}
	return nil, &objstore.OpError{Op: "get", URI: key, Err: bucket.ErrNotFound}
}

func (o *recordingObjects) Put(context.Context, string, []byte, string, map[string]string) (bucket.ObjectInfo, error) {
	return bucket.ObjectInfo{}, o.err
}
func (o *recordingObjects) Delete(context.Context, string) error { return o.err }
func (o *recordingObjects) List(context.Context, string, func(string) error) error {
	return o.err
}

// TestObjectStoreKeys: entries are stored under the tenant's and the
// ruleset's escaped segments (bucket.TenantKey), so no tenant or ruleset id
// reaches another's prefix.
func TestObjectStoreKeys(t *testing.T) {
	objects := &recordingObjects{}
	s, err := NewObjectStore(objects, ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		scope engine.CacheScope
		want  string
	}{
		{engine.CacheScope{Tenant: "contoso", RulesetID: "msa"}, "verdicts/contoso/msa/abc.json"},
		{engine.CacheScope{Tenant: "acme/eu", RulesetID: "../globex"}, "verdicts/acme%2Feu/%2E.%2Fglobex/abc.json"},
		{engine.CacheScope{Tenant: "acme", RulesetID: ""}, "verdicts/acme/%/abc.json"},
	} {
		objects.keys = nil
		if _, err := s.Get(context.Background(), tc.scope, []string{"abc"}); err != nil {
			t.Fatal(err)
		}
		if len(objects.keys) != 1 || objects.keys[0] != tc.want {
			t.Errorf("scope %+v: asked for %v, want %s", tc.scope, objects.keys, tc.want)
		}
	}
	if _, err := NewObjectStore(objects, ObjectStoreConfig{Prefix: "a/../b"}); err == nil {
		t.Error("a prefix with a .. segment was accepted")
	}
}

// TestObjectStoreFailureIsAnError: a store that cannot be read is an error
// (the engine's ErrCacheUnavailable), not a miss.
func TestObjectStoreFailureIsAnError(t *testing.T) {
	down := &objstore.OpError{Op: "get", URI: "s3://b/k", Err: errors.New("connection refused")}
	s, err := NewObjectStore(&recordingObjects{err: down}, ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(context.Background(), engine.CacheScope{Tenant: "t", RulesetID: "r"}, []string{"a", "b"}); !errors.Is(err, down) {
		t.Errorf("Get = %v, want the store's error", err)
	}
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
