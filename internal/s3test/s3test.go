// Package s3test gives integration tests a real S3-compatible server: the local versitygw
// that ops/s3.sh runs on 127.0.0.1, or the server named by RULEVALIDATOR_S3.
//
// When no server can be had the test is skipped with the reason, so that a plain
// `go test ./...` stays green on a machine without one; RULEVALIDATOR_REQUIRE_INTEGRATION=1
// turns those skips into failures, for CI and the full local test run.
package s3test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"rulevalidator/objstore"

	"rulevalidator/internal/opsscript"
)

const (
	// EnvEndpoint names an existing server (host:port or URL) to use instead of the local one.
	// Its credentials come from S3_ACCESS_KEY and S3_SECRET_KEY.
	EnvEndpoint = "RULEVALIDATOR_S3"
	// EnvRequire set to 1 makes a missing server fail the test instead of skipping it.
	EnvRequire = opsscript.EnvRequire

	// startTimeout covers the first run, which builds versitygw from source.
	startTimeout = 10 * time.Minute
	// callTimeout bounds each admin round (ping, create, clean up).
	callTimeout = 30 * time.Second
	// maxBucketLen is S3's limit on bucket names.
	maxBucketLen = 63
)

// Endpoint returns the address and root credentials of the S3 server for integration
// tests. With RULEVALIDATOR_S3 set it checks that server answers; otherwise it starts the
// local server through ops/s3.sh (a no-op when it already runs). When neither works, or
// with -short, the test is skipped with the reason, unless RULEVALIDATOR_REQUIRE_INTEGRATION=1.
func Endpoint(t testing.TB) (endpoint, accessKey, secretKey string) {
	t.Helper()
	if testing.Short() && !opsscript.Required() {
		t.Skip("S3 integration test skipped under -short")
	}
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		access, secret := os.Getenv("S3_ACCESS_KEY"), os.Getenv("S3_SECRET_KEY")
		if access == "" || secret == "" {
			opsscript.Unavailable(t, "S3", "%s=%s is set but S3_ACCESS_KEY or S3_SECRET_KEY is empty", EnvEndpoint, ep)
		}
		if err := ping(ep, access, secret); err != nil {
			opsscript.Unavailable(t, "S3", "%s=%s does not answer: %v", EnvEndpoint, ep, err)
		}
		return ep, access, secret
	}
	if !opsscript.Required() {
		// A plain `go test ./...` runs unit tests only; ops/test.sh sets
		// RULEVALIDATOR_REQUIRE_INTEGRATION=1 and the server is started here.
		t.Skipf("S3 integration test skipped: no server configured (run ops/test.sh, set %s=1 to start the local server from the test, or set %s)", EnvRequire, EnvEndpoint)
	}
	_, messages, err := opsscript.Run(startTimeout, "s3.sh", "start")
	if err != nil {
		opsscript.Unavailable(t, "S3", "no local S3 server: %v", err)
	}
	t.Logf("s3test: ops/s3.sh start:\n%s", strings.TrimRight(messages, "\n"))
	out, _, err := opsscript.Run(callTimeout, "s3.sh", "env")
	if err != nil {
		opsscript.Unavailable(t, "S3", "no local S3 server: %v", err)
	}
	env := parseEnv(out)
	endpoint, accessKey, secretKey = env["S3_ENDPOINT"], env["S3_ACCESS_KEY"], env["S3_SECRET_KEY"]
	if endpoint == "" || accessKey == "" || secretKey == "" {
		opsscript.Unavailable(t, "S3", "ops/s3.sh env printed no S3_ENDPOINT, S3_ACCESS_KEY or S3_SECRET_KEY:\n%s", out)
	}
	return endpoint, accessKey, secretKey
}

// Store returns a store on a new, empty bucket of its own on the test server. The bucket
// and its objects are removed when the test ends, unless the test failed, in which case
// they are kept for inspection.
func Store(t testing.TB) *objstore.Store {
	t.Helper()
	endpoint, accessKey, secretKey := Endpoint(t)
	bucket := UniqueBucket(t)
	store, err := objstore.New(objstore.Config{
		Endpoint:  endpoint,
		AccessKey: accessKey,
		SecretKey: secretKey,
		Bucket:    bucket,
	})
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := store.EnsureBucket(ctx); err != nil {
		t.Fatalf("s3test: creating bucket %s on %s: %v", bucket, endpoint, err)
	}
	t.Cleanup(func() { removeBucket(t, endpoint, accessKey, secretKey, bucket) })
	return store
}

// UniqueBucket returns a valid bucket name made of the test's name and a random suffix.
func UniqueBucket(t testing.TB) string {
	t.Helper()
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatalf("s3test: random bucket suffix: %v", err)
	}
	tail := "-" + hex.EncodeToString(suffix)
	name := "rvtest-" + sanitize(t.Name())
	if len(name) > maxBucketLen-len(tail) {
		name = name[:maxBucketLen-len(tail)]
	}
	return strings.TrimRight(name, "-") + tail
}

// sanitize keeps what bucket names allow (lower-case letters, digits, single '-').
func sanitize(s string) string {
	mapped := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		default:
			return '-'
		}
	}, s)
	for strings.Contains(mapped, "--") {
		mapped = strings.ReplaceAll(mapped, "--", "-")
	}
	return strings.Trim(mapped, "-")
}

func newClient(endpoint, accessKey, secretKey string) (*minio.Client, error) {
	host, secure := endpoint, false
	if rest, ok := strings.CutPrefix(endpoint, "https://"); ok {
		host, secure = rest, true
	} else if rest, ok := strings.CutPrefix(endpoint, "http://"); ok {
		host = rest
	}
	return minio.New(strings.TrimSuffix(host, "/"), &minio.Options{
		Creds:  credentials.NewStaticV4(accessKey, secretKey, ""),
		Secure: secure,
		Region: objstore.DefaultRegion,
	})
}

// ping lists the buckets, which only a working server with valid credentials answers.
func ping(endpoint, accessKey, secretKey string) error {
	client, err := newClient(endpoint, accessKey, secretKey)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, err = client.ListBuckets(ctx)
	return err
}

// RemoveOnCleanup removes bucket and its objects when the test ends (unless it failed), for a
// bucket the test created itself.
func RemoveOnCleanup(t testing.TB, bucket string) {
	t.Helper()
	endpoint, accessKey, secretKey := Endpoint(t)
	t.Cleanup(func() { removeBucket(t, endpoint, accessKey, secretKey, bucket) })
}

func removeBucket(t testing.TB, endpoint, accessKey, secretKey, bucket string) {
	if t.Failed() {
		t.Logf("s3test: keeping bucket %s on %s for inspection", bucket, endpoint)
		return
	}
	client, err := newClient(endpoint, accessKey, secretKey)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		for obj := range client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
			if obj.Err != nil {
				err = obj.Err
				break
			}
			if err = client.RemoveObject(ctx, bucket, obj.Key, minio.RemoveObjectOptions{}); err != nil {
				break
			}
		}
		if err == nil {
			err = client.RemoveBucket(ctx, bucket)
		}
	}
	if err != nil {
		// Leftover test buckets are harmless; say so and move on.
		t.Logf("s3test: removing bucket %s on %s: %v", bucket, endpoint, err)
	}
}

// parseEnv reads KEY=VALUE lines.
func parseEnv(s string) map[string]string {
	env := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			env[k] = v
		}
	}
	return env
}
