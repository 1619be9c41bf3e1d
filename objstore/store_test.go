package objstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"rulevalidator/bucket"
	"rulevalidator/internal/s3test"
	"rulevalidator/objstore"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sameServer returns a store for bucket on the test server, with cfg's other fields.
func sameServer(t *testing.T, bucket string, edit func(*objstore.Config)) *objstore.Store {
	t.Helper()
	endpoint, access, secret := s3test.Endpoint(t)
	cfg := objstore.Config{Endpoint: endpoint, AccessKey: access, SecretKey: secret, Bucket: bucket}
	if edit != nil {
		edit(&cfg)
	}
	store, err := objstore.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return store
}

func TestPutGetRoundTrip(t *testing.T) {
	store := s3test.Store(t)
	ctx := testContext(t)
	key, err := bucket.TenantKey("reports", "acme", "req-42", "report.xlsx")
	if err != nil {
		t.Fatalf("TenantKey: %v", err)
	}
	body := []byte("PK\x03\x04 pretend this is a workbook")
	const contentType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	meta := map[string]string{"Tenant": "acme", "request-id": "req-42", "ruleset": "kyc@3"}

	put, err := store.Put(ctx, key, body, contentType, meta)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	wantURI := "s3://" + store.Bucket() + "/reports/acme/req-42/report.xlsx"
	if put.URI != wantURI || put.Key != key || put.Size != int64(len(body)) || put.ETag == "" {
		t.Fatalf("Put = %+v, want URI %s, key %s, size %d and an ETag", put, wantURI, key, len(body))
	}

	rc, got, err := store.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading %s: %v", key, err)
	}
	if !bytes.Equal(data, body) {
		t.Fatalf("Get returned %q, want %q", data, body)
	}
	if got.ContentType != contentType {
		t.Errorf("ContentType = %q, want %q", got.ContentType, contentType)
	}
	if got.Size != int64(len(body)) || got.ETag != put.ETag || got.URI != wantURI {
		t.Errorf("Get info = %+v, want size %d, ETag %s, URI %s", got, len(body), put.ETag, wantURI)
	}
	if got.LastModified.IsZero() {
		t.Errorf("LastModified is zero")
	}
	for k, v := range map[string]string{"tenant": "acme", "request-id": "req-42", "ruleset": "kyc@3"} {
		if got.Metadata[k] != v {
			t.Errorf("Metadata[%q] = %q, want %q (all: %v)", k, got.Metadata[k], v, got.Metadata)
		}
	}

	viaBytes, err := store.GetBytes(ctx, key)
	if err != nil || !bytes.Equal(viaBytes, body) {
		t.Fatalf("GetBytes = %q, %v; want %q", viaBytes, err, body)
	}
	if _, err := store.GetClaim(ctx, "acme", put.URI); !errors.Is(err, bucket.ErrClaimRefused) {
		t.Fatalf("GetClaim(%s) = %v; want the service's own key refused as a claim check", put.URI, err)
	}

	// Overwriting replaces both body and metadata.
	if _, err := store.Put(ctx, key, []byte("v2"), "text/plain", nil); err != nil {
		t.Fatalf("second Put: %v", err)
	}
	rc2, got2, err := store.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get after overwrite: %v", err)
	}
	defer rc2.Close()
	if data, _ := io.ReadAll(rc2); string(data) != "v2" || got2.ContentType != "text/plain" || got2.Metadata["tenant"] != "" {
		t.Fatalf("after overwrite: body %q, info %+v; want v2, text/plain, no tenant metadata", data, got2)
	}
}

func TestGetStreamsLargeObject(t *testing.T) {
	store := s3test.Store(t)
	ctx := testContext(t)
	body := make([]byte, 5<<20)
	if _, err := rand.Read(body); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, "big/blob.bin", body, "", nil); err != nil {
		t.Fatalf("Put 5 MiB: %v", err)
	}
	rc, info, err := store.Get(ctx, "big/blob.bin")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	defer rc.Close()
	if info.Size != int64(len(body)) || info.ContentType != "application/octet-stream" {
		t.Fatalf("Get info = %+v, want size %d and application/octet-stream", info, len(body))
	}
	// Read in small pieces, the way an HTTP handler copies to the response.
	h := sha256.New()
	n, err := io.CopyBuffer(h, rc, make([]byte, 32<<10))
	if err != nil {
		t.Fatalf("streaming after %d bytes: %v", n, err)
	}
	if want := sha256.Sum256(body); n != int64(len(body)) || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("streamed %d bytes with a different digest, want the %d bytes put", n, len(body))
	}
}

func TestGetBytesRefusesObjectsOverTheCap(t *testing.T) {
	store := s3test.Store(t)
	ctx := testContext(t)
	if _, err := store.Put(ctx, "claims/acme/doc.json", bytes.Repeat([]byte("x"), 2048), "application/json", nil); err != nil {
		t.Fatalf("Put: %v", err)
	}
	capped := sameServer(t, store.Bucket(), func(c *objstore.Config) { c.MaxObjectBytes = 1024 })

	data, err := capped.GetBytes(ctx, "claims/acme/doc.json")
	if !errors.Is(err, bucket.ErrTooLarge) {
		t.Fatalf("GetBytes = %d bytes, %v; want an error wrapping ErrTooLarge", len(data), err)
	}
	for _, want := range []string{"2048 bytes", "cap of 1024 bytes", "s3://" + store.Bucket() + "/claims/acme/doc.json"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want it to name %q", err, want)
		}
	}
	if _, err := capped.GetClaim(ctx, "acme", store.URI("claims/acme/doc.json")); !errors.Is(err, bucket.ErrTooLarge) {
		t.Errorf("GetClaim error %v, want one wrapping ErrTooLarge", err)
	}
	// At the cap exactly is fine.
	if _, err := store.Put(ctx, "claims/small.json", bytes.Repeat([]byte("y"), 1024), "application/json", nil); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if data, err := capped.GetBytes(ctx, "claims/small.json"); err != nil || len(data) != 1024 {
		t.Fatalf("GetBytes at the cap = %d bytes, %v; want 1024 bytes", len(data), err)
	}
}

// StatClaim tells a claim-checked object's size without reading it, and refuses what
// GetClaim refuses.
func TestStatClaim(t *testing.T) {
	store := s3test.Store(t)
	ctx := testContext(t)
	put, err := store.Put(ctx, "claims/acme/doc.pdf", bytes.Repeat([]byte("x"), 2048), "application/pdf", nil)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	info, err := store.StatClaim(ctx, "acme", put.URI)
	if err != nil {
		t.Fatalf("StatClaim(%s) = %v", put.URI, err)
	}
	if info.Size != 2048 || info.ContentType != "application/pdf" || info.URI != put.URI || info.ETag != put.ETag {
		t.Errorf("StatClaim = %+v, want size 2048, application/pdf, %s and ETag %s", info, put.URI, put.ETag)
	}
	if size, err := store.ClaimSize(ctx, "acme", put.URI); err != nil || size != 2048 {
		t.Errorf("ClaimSize(%s) = %d, %v; want 2048", put.URI, size, err)
	}
	if _, err := store.ClaimSize(ctx, "bob", put.URI); !errors.Is(err, bucket.ErrClaimRefused) {
		t.Errorf("ClaimSize of another tenant's claim = %v, want ErrClaimRefused", err)
	}

	capped := sameServer(t, store.Bucket(), func(c *objstore.Config) { c.MaxObjectBytes = 1024 })
	for _, tc := range []struct {
		name  string
		store *objstore.Store
		uri   string
		want  error // a sentinel, or nil for an address refused as malformed
	}{
		{"over the cap", capped, put.URI, bucket.ErrTooLarge},
		{"missing", store, store.URI("claims/acme/nope.pdf"), bucket.ErrNotFound},
		{"a bucket not read", store, "s3://someone-elses/claims/acme/doc.pdf", bucket.ErrClaimRefused},
		{"another tenant's", store, store.URI("claims/bob/doc.pdf"), bucket.ErrClaimRefused},
		{"the service's own", store, store.URI("reviews-material/bob/r-1.json"), bucket.ErrClaimRefused},
		{"a bad address", store, "s3://" + store.Bucket() + "/claims/acme/../bob/doc.pdf", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.store.StatClaim(ctx, "acme", tc.uri)
			var opErr *objstore.OpError
			if !errors.As(err, &opErr) || !opErr.MessageFault() {
				t.Fatalf("StatClaim(%s) = %v, want an *OpError that is the caller's fault", tc.uri, err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("StatClaim(%s) = %v, want an error wrapping %v", tc.uri, err, tc.want)
			}
			refused := tc.want == nil || errors.Is(tc.want, bucket.ErrClaimRefused)
			if refused && opErr.Attempts != 0 {
				t.Errorf("StatClaim(%s) made %d attempts, want a refusal before any request", tc.uri, opErr.Attempts)
			}
		})
	}
}

func TestMissingKeyIsNotFound(t *testing.T) {
	store := s3test.Store(t)
	ctx := testContext(t)
	if _, _, err := store.Get(ctx, "acme/nope/report.xlsx"); !errors.Is(err, bucket.ErrNotFound) {
		t.Errorf("Get error %v, want one wrapping ErrNotFound", err)
	}
	_, err := store.GetBytes(ctx, "acme/nope/report.xlsx")
	if !errors.Is(err, bucket.ErrNotFound) {
		t.Fatalf("GetBytes error %v, want one wrapping ErrNotFound", err)
	}
	var opErr *objstore.OpError
	if !errors.As(err, &opErr) || opErr.Attempts != 1 {
		t.Errorf("error %v, want an *OpError after 1 attempt (a missing key is not retried)", err)
	}
	if !strings.Contains(err.Error(), "s3://"+store.Bucket()+"/acme/nope/report.xlsx") {
		t.Errorf("error %q does not name the object", err)
	}
	if _, err := store.GetClaim(ctx, "acme", store.URI("claims/acme/nope.pdf")); !errors.Is(err, bucket.ErrNotFound) {
		t.Errorf("GetClaim error %v, want one wrapping ErrNotFound", err)
	}
	if !opErr.MessageFault() || opErr.FaultCause() != "" {
		t.Errorf("a missing key: MessageFault %v, cause %q; want the caller's fault", opErr.MessageFault(), opErr.FaultCause())
	}
}

// countingTransport counts the HTTP requests a store sends.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestWrongCredentialsFailAfterOneAttempt(t *testing.T) {
	store := s3test.Store(t)
	ctx := testContext(t)
	transport := &countingTransport{}
	wrong := sameServer(t, store.Bucket(), func(c *objstore.Config) {
		c.SecretKey = "not-the-secret"
		c.BaseDelay = time.Second // a retry would show in the request count, and in the time taken
		c.Transport = transport
	})

	_, err := wrong.Put(ctx, "acme/1/r.xlsx", []byte("x"), "", nil)
	if err == nil {
		t.Fatal("Put with a wrong secret succeeded")
	}
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("error %v, want the server's 403", err)
	}
	var opErr *objstore.OpError
	if !errors.As(err, &opErr) || opErr.Attempts != 1 {
		t.Fatalf("error %v, want an *OpError after 1 attempt", err)
	}
	if n := transport.n.Load(); n != 1 {
		t.Fatalf("sent %d requests, want 1", n)
	}
	if opErr.MessageFault() || opErr.FaultCause() != objstore.CauseStorageAuth {
		t.Errorf("a wrong secret: MessageFault %v, cause %q; want %s", opErr.MessageFault(), opErr.FaultCause(), objstore.CauseStorageAuth)
	}
	if _, err := wrong.GetClaim(ctx, "acme", store.URI("claims/acme/r.pdf")); !errors.As(err, &opErr) || opErr.FaultCause() != objstore.CauseStorageAuth {
		t.Errorf("GetClaim with a wrong secret = %v, want cause %s", err, objstore.CauseStorageAuth)
	}

	if err := wrong.Ping(ctx); err == nil {
		t.Fatal("Ping with a wrong secret succeeded")
	}
	if err := store.Ping(ctx); err != nil {
		t.Fatalf("Ping with the right secret: %v", err)
	}
}

func TestPingNeedsTheBucket(t *testing.T) {
	store := s3test.Store(t)
	ctx := testContext(t)
	missing := sameServer(t, s3test.UniqueBucket(t), nil)
	err := missing.Ping(ctx)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Ping on a missing bucket = %v, want an error saying it does not exist", err)
	}
	var opErr *objstore.OpError
	if !errors.As(err, &opErr) || opErr.FaultCause() != objstore.CauseStorageBucket {
		t.Errorf("Ping on a missing bucket: cause of %v, want %s", err, objstore.CauseStorageBucket)
	}
	_, err = missing.Put(ctx, "k", []byte("x"), "", nil)
	if err == nil || !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Fatalf("Put into a missing bucket = %v, want NoSuchBucket", err)
	}
	if !errors.As(err, &opErr) || opErr.MessageFault() || opErr.FaultCause() != objstore.CauseStorageBucket {
		t.Errorf("Put into a missing bucket: cause of %v, want %s", err, objstore.CauseStorageBucket)
	}
	// Some servers answer NoSuchKey for any key of a missing bucket; it is still the bucket.
	_, err = missing.GetBytes(ctx, "k")
	if !errors.As(err, &opErr) || opErr.MessageFault() || opErr.FaultCause() != objstore.CauseStorageBucket || errors.Is(err, bucket.ErrNotFound) {
		t.Errorf("GetBytes from a missing bucket = %v, want cause %s, not ErrNotFound", err, objstore.CauseStorageBucket)
	}
	// EnsureBucket is idempotent.
	if err := store.EnsureBucket(ctx); err != nil {
		t.Fatalf("EnsureBucket on an existing bucket: %v", err)
	}
}

func TestGetClaimReadsOnlyTheTenantsClaims(t *testing.T) {
	mine := s3test.Store(t)
	other := s3test.Store(t)
	ctx := testContext(t)
	doc, err := other.Put(ctx, "claims/acme/doc.json", []byte(`{"secret":true}`), "application/json", nil)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	for _, key := range []string{"claims/bob/doc.json", "reviews-material/bob/r-1.json", "claims/acmeco/doc.json", "claims/acme.json"} {
		if _, err := mine.Put(ctx, key, []byte(`{"secret":true}`), "application/json", nil); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}

	for _, tc := range []struct{ name, uri, want string }{
		{"another bucket", doc.URI, `bucket "` + other.Bucket() + `" is not one this service reads`},
		{"a traversal into another bucket", "s3://" + mine.Bucket() + "/../" + other.Bucket() + "/claims/acme/doc.json", `".." is not allowed`},
		{"another tenant's claim", mine.URI("claims/bob/doc.json"), "the key is not under claims/acme/"},
		{"the service's own state", mine.URI("reviews-material/bob/r-1.json"), "the key is not under claims/acme/"},
		{"a tenant whose name starts alike", mine.URI("claims/acmeco/doc.json"), "the key is not under claims/acme/"},
		{"beside the prefix", mine.URI("claims/acme.json"), "the key is not under claims/acme/"},
		{"a traversal out of the prefix", mine.URI("claims/acme/../bob/doc.json"), `".." is not allowed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := mine.GetClaim(ctx, "acme", tc.uri)
			if err == nil {
				t.Fatalf("GetClaim(%s) read %q", tc.uri, data)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
			if err := mine.CheckClaim("acme", tc.uri); err == nil {
				t.Errorf("CheckClaim(%s) accepted what GetClaim refused", tc.uri)
			}
		})
	}

	allowing := sameServer(t, mine.Bucket(), func(c *objstore.Config) { c.AllowedBuckets = []string{other.Bucket()} })
	data, err := allowing.GetClaim(ctx, "acme", doc.URI)
	if err != nil || string(data) != `{"secret":true}` {
		t.Fatalf("GetClaim with the bucket allowed = %q, %v", data, err)
	}
	if _, err := allowing.GetClaim(ctx, "bob", doc.URI); !errors.Is(err, bucket.ErrClaimRefused) {
		t.Fatalf("GetClaim of acme's claim for bob = %v, want ErrClaimRefused", err)
	}
	// A tenant id is escaped as every key segment is: it cannot reach outside its prefix.
	if got, want := mine.ClaimPrefix("a/b"), "claims/a%2Fb/"; got != want {
		t.Errorf("ClaimPrefix(a/b) = %q, want %q", got, want)
	}
}
