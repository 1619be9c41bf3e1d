package objstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"rulevalidator/internal/s3test"
	"rulevalidator/objstore"
)

// TestOperationSpans: a put and a get are CLIENT spans with the bucket, the
// key's length and the size, never the content; a missing object's get is
// an error span; a ping and a listing (with the keys it listed) are spans
// too.
func TestOperationSpans(t *testing.T) {
	endpoint, access, secret := s3test.Endpoint(t)
	bucket := s3test.UniqueBucket(t)
	rec := tracetest.NewSpanRecorder()
	store, err := objstore.New(objstore.Config{Endpoint: endpoint, AccessKey: access, SecretKey: secret, Bucket: bucket,
		MaxAttempts: 1, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := store.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	s3test.RemoveOnCleanup(t, bucket)
	const body = "SECRETBODY of the object"
	if _, err := store.Put(ctx, "docs/a.txt", []byte(body), "text/plain", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := store.GetBytes(ctx, "docs/a.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.GetBytes(ctx, "docs/missing.txt"); err == nil {
		t.Fatal("a missing object was read")
	}
	if err := store.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.List(ctx, "docs/", func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range tracetest.SpanStubsFromReadOnlySpans(rec.Ended()) {
		a := map[string]string{}
		for _, kv := range s.Attributes {
			a[string(kv.Key)] = kv.Value.String()
			if strings.Contains(kv.Value.String(), "SECRETBODY") {
				t.Errorf("span %s attribute %s holds the content", s.Name, kv.Key)
			}
		}
		if s.SpanKind != trace.SpanKindClient || a["aws.s3.bucket"] != bucket || a["rulevalidator.object.key_length"] == "" {
			t.Errorf("span %s: kind %v attributes %v", s.Name, s.SpanKind, a)
		}
		got = append(got, s.Name+" "+a["rulevalidator.object.size"]+a["rulevalidator.object.listed"]+" "+s.Status.Code.String())
	}
	want := []string{"S3.PutObject 24 Unset", "S3.GetObject 24 Unset", "S3.GetObject  Error", "S3.HeadBucket  Unset", "S3.ListObjectsV2 1 Unset"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("spans %q, want %q", got, want)
	}
}
