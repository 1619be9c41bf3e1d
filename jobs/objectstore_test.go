package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"rulevalidator/bucket"
	"rulevalidator/internal/s3test"
	"rulevalidator/judging"
	"rulevalidator/objstore"
	"rulevalidator/schemas"
)

// TestJobKeys: job documents keep the keys they were stored under, escaped
// by bucket.TenantKey (see TestTenantKey there for why no value leaves its
// tenant's prefix); a prefix that cannot hold keys is refused.
func TestJobKeys(t *testing.T) {
	jobs, err := NewObjectStore(noObjects{}, ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tenant, id, want string }{
		{"acme", "r1", "jobs/acme/r1.json"},
		{"acme", "req-1.v2:a~b_c", "jobs/acme/req-1.v2:a~b_c.json"},
		{"acme corp", "r1", "jobs/acme%20corp/r1.json"},
		{"acme/eu", "../globex/r1", "jobs/acme%2Feu/%2E.%2Fglobex%2Fr1.json"},
		{".", "..", "jobs/%2E/%2E..json"},
		{"é", "", "jobs/%C3%A9/%.json"},
		{"acme", strings.Repeat("r", 201), "jobs/acme/%%" + sha256Hex(strings.Repeat("r", 201)) + ".json"},
	} {
		key, err := jobs.Key(tc.tenant, tc.id)
		if err != nil || key != tc.want {
			t.Errorf("Key(%q, %q) = %q, %v; want %q", tc.tenant, tc.id, key, err, tc.want)
		}
		if _, _, err := objstore.ParseURI("s3://bucket/" + key); err != nil {
			t.Errorf("key %q is not a valid key: %v", key, err)
		}
	}
	for _, prefix := range []string{"jobs/../reports", strings.Repeat("p", 700)} {
		if _, err := NewObjectStore(noObjects{}, ObjectStoreConfig{Prefix: prefix}); err == nil {
			t.Errorf("prefix %.40q was accepted", prefix)
		}
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// noObjects is object storage that is never called (keys only).
type noObjects struct{ bucket.Objects }

func objectStore(t *testing.T) (*ObjectStore, *objstore.Store) {
	t.Helper()
	store := s3test.Store(t)
	jobs, err := NewObjectStore(store, ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return jobs, store
}

func TestObjectStoreCreateIsIdempotent(t *testing.T) {
	jobs, _ := objectStore(t)
	testCreateIsIdempotent(t, jobs, func(req *schemas.Request, out judging.Events) {
		if err := jobs.StoreResult(t.Context(), req, out); err != nil {
			t.Fatal(err)
		}
	})
}

// TestObjectStoreTenantIsolation: tenant B, and ids that try to reach A's
// document through the key, never read or replace A's job.
func TestObjectStoreTenantIsolation(t *testing.T) {
	jobs, store := objectStore(t)
	ctx := t.Context()
	out := judging.Events{Summary: summary("acme", "r1", schemas.StatusCompleted, 1), Verdicts: []schemas.VerdictEvent{verdictEvent("acme", "r1", "a", 0)}}
	if err := jobs.StoreResult(ctx, &schemas.Request{TenantID: "acme", RequestID: "r1"}, out); err != nil {
		t.Fatal(err)
	}
	probes := [][2]string{
		{"globex", "r1"},
		{"globex", "../acme/r1"},
		{"globex/../acme", "r1"},
		{"..", "acme/r1"},
		{".", "acme/r1"},
		{"acme/r1", ""},
		{"globex", "..%2Facme%2Fr1"},
		{"acme%2F", "r1"},
		{"ACME", "r1"},
		{"acme", "r1.json"},
		{"acme", "R1"},
		{"acme", "r1/"},
		{"acme ", "r1"},
		{"globex", strings.Repeat("r", 600)},
		{"globex", strings.Repeat("é", 66)},
		{strings.Repeat("g", bucket.MaxSegmentBytes), strings.Repeat("a", bucket.MaxSegmentBytes)},
	}
	for _, p := range probes {
		if j, ok, err := jobs.Get(ctx, p[0], p[1]); ok || err != nil {
			t.Errorf("Get(%q, %q) = %+v, ok %v, %v; want not found", p[0], p[1], j, ok, err)
		}
		if _, created, err := jobs.Create(ctx, Job{TenantID: p[0], RequestID: p[1], Status: Pending}); err != nil || !created {
			t.Errorf("Create(%q, %q): created=%v, %v; want a job of its own", p[0], p[1], created, err)
		}
	}
	got, ok, err := jobs.Get(ctx, "acme", "r1")
	if err != nil || !ok || got.Status != Completed || len(got.Verdicts) != 1 {
		t.Fatalf("acme's job after the probes: %+v, ok %v, %v", got, ok, err)
	}

	// A document at a tenant's key that names another job (tampering) is
	// refused, not answered.
	forged, _ := json.Marshal(newJobDocument(Job{TenantID: "acme", RequestID: "r1", Status: Completed}))
	key, err := jobs.Key("globex", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, key, forged, jobContentType, nil); err != nil {
		t.Fatal(err)
	}
	if j, ok, err := jobs.Get(ctx, "globex", "r1"); ok || err == nil {
		t.Errorf("a document of acme's at globex's key: %+v, ok %v, %v; want an error", j, ok, err)
	}
}

// TestObjectStoreCreateRace: replicas creating one job at once agree on one
// winner, whose job every replica then answers.
func TestObjectStoreCreateRace(t *testing.T) {
	jobs, store := objectStore(t)
	replicas := make([]*ObjectStore, 6)
	for i := range replicas {
		var err error
		if replicas[i], err = NewObjectStore(store, ObjectStoreConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	created := make([]bool, len(replicas))
	errs := make([]error, len(replicas))
	for i, r := range replicas {
		wg.Go(func() {
			_, created[i], errs[i] = r.Create(ctx, Job{TenantID: "acme", RequestID: "race", Status: Pending,
				CallbackURL: "https://hooks.example/" + string(rune('a'+i))})
		})
	}
	wg.Wait()
	winner := -1
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if created[i] {
			if winner >= 0 {
				t.Fatalf("replicas %d and %d both created the job", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no replica created the job")
	}
	j, ok, err := jobs.Get(ctx, "acme", "race")
	if err != nil || !ok || j.CallbackURL != "https://hooks.example/"+string(rune('a'+winner)) {
		t.Errorf("stored job %+v (ok %v, %v), want replica %d's", j, ok, err, winner)
	}
}

// TestObjectStoreStoreResult: the pipeline's result replaces the pending
// document; GET's body is then the callback's.
func TestObjectStoreStoreResult(t *testing.T) {
	jobs, _ := objectStore(t)
	ctx := t.Context()
	at := time.Date(2026, 3, 1, 9, 0, 0, 123e6, time.UTC)
	cb := "https://hooks.example/rv"
	req := &schemas.Request{RequestID: "r1", TenantID: "acme", SubmittedAt: at, Options: schemas.Options{CallbackURL: &cb}}
	if _, created, err := jobs.Create(ctx, Job{TenantID: "acme", RequestID: "r1", Status: Pending, SubmittedAt: at, CallbackURL: cb}); err != nil || !created {
		t.Fatalf("Create: %v, %v", created, err)
	}
	pending, _, err := jobs.Get(ctx, "acme", "r1")
	if err != nil || pending.Status != Pending || pending.Summary != nil {
		t.Fatalf("pending job %+v, %v", pending, err)
	}
	out := judging.Events{
		Summary:  summary("acme", "r1", schemas.StatusCompleted, 2),
		Verdicts: []schemas.VerdictEvent{verdictEvent("acme", "r1", "a", 0), verdictEvent("acme", "r1", "b", 1)},
	}
	if err := jobs.StoreResult(ctx, req, out); err != nil {
		t.Fatal(err)
	}
	j, ok, err := jobs.Get(ctx, "acme", "r1")
	if err != nil || !ok {
		t.Fatalf("Get: ok %v, %v", ok, err)
	}
	if j.Status != Completed || !j.SubmittedAt.Equal(at) || j.CallbackURL != cb || len(j.Verdicts) != 2 {
		t.Errorf("stored result %+v", j)
	}
	body, _ := json.Marshal(NewBody(j))
	payload, err := ResultPayload(req, out)
	if err != nil || string(body) != string(payload) {
		t.Errorf("GET body\n%s\nis not the callback payload\n%s (%v)", body, payload, err)
	}
}

// TestObjectStoreStorageDown: a store that does not answer is an error (503 at
// the API), never "not found".
func TestObjectStoreStorageDown(t *testing.T) {
	endpoint, access, secret := s3test.Endpoint(t)
	store, err := objstore.New(objstore.Config{Endpoint: endpoint, AccessKey: access, SecretKey: secret + "-wrong", Bucket: s3test.UniqueBucket(t), MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := NewObjectStore(store, ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, ok, err := jobs.Get(ctx, "acme", "r1"); ok || err == nil {
		t.Errorf("Get with refused credentials: ok %v, %v; want an error", ok, err)
	}
	_, created, err := jobs.Create(ctx, Job{TenantID: "acme", RequestID: "r1", Status: Pending})
	var op *objstore.OpError
	if created || !errors.As(err, &op) || op.FaultCause() != objstore.CauseStorageAuth {
		t.Errorf("Create with refused credentials: created=%v, %v; want a storage_auth error", created, err)
	}
	if f := judging.Classify(jobs.StoreResult(ctx, &schemas.Request{RequestID: "r1", TenantID: "acme"}, judging.Events{})); f.Message {
		t.Errorf("StoreResult with refused credentials is classified %+v, want an environment fault", f)
	}
}

// TestObjectStoreAbandonedPendingJob: a pending job whose replica stopped
// before publishing it (never marked queued) blocks its request id only
// until UnqueuedAfter; a queued one, or a young one, keeps it.
func TestObjectStoreAbandonedPendingJob(t *testing.T) {
	store := s3test.Store(t)
	c := &clock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	jobs, err := NewObjectStore(store, ObjectStoreConfig{UnqueuedAfter: time.Minute, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	create := func(id string) (Job, bool) {
		t.Helper()
		j, created, err := jobs.Create(ctx, Job{TenantID: "acme", RequestID: id, Status: Pending, SubmittedAt: c.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return j, created
	}
	abandoned, _ := create("abandoned")
	queued, _ := create("queued")
	if err := jobs.Queued(ctx, queued); err != nil {
		t.Fatal(err)
	}
	if j, _, _ := jobs.Get(ctx, "acme", "queued"); j.Status != Pending {
		t.Fatalf("queued job %+v, want pending", j)
	}
	if _, created := create("abandoned"); created {
		t.Error("a young unqueued job was replaced")
	}
	c.Advance(time.Minute + time.Second)
	if j, created := create("abandoned"); !created || !j.SubmittedAt.After(abandoned.SubmittedAt) {
		t.Errorf("an unqueued job past UnqueuedAfter: created=%v %+v, want replaced", created, j)
	}
	if _, created := create("queued"); created {
		t.Error("a queued job was replaced")
	}

	// Queued after the pipeline stored the result leaves the result.
	fresh, _ := create("quick")
	done := summary("acme", "quick", schemas.StatusCompleted, 0)
	if err := jobs.StoreResult(ctx, &schemas.Request{RequestID: "quick", TenantID: "acme"}, judging.Events{Summary: done}); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Queued(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if j, _, _ := jobs.Get(ctx, "acme", "quick"); j.Status != Completed {
		t.Errorf("Queued after the result: %s, want completed", j.Status)
	}
}
