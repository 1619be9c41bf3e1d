package s3test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/s3utils"
)

func TestUniqueBucketIsAValidName(t *testing.T) {
	for _, name := range []string{
		"TestPlain",
		"TestWith/Sub_Test#01",
		"Test..Dots--And__Underscores",
		"Test" + strings.Repeat("VeryLong", 20),
	} {
		t.Run(name, func(t *testing.T) {
			a, b := UniqueBucket(t), UniqueBucket(t)
			for _, bucket := range []string{a, b} {
				if err := s3utils.CheckValidBucketNameStrict(bucket); err != nil {
					t.Errorf("UniqueBucket = %q: %v", bucket, err)
				}
				if len(bucket) > maxBucketLen || !strings.HasPrefix(bucket, "rvtest-test") {
					t.Errorf("UniqueBucket = %q, want at most %d characters starting rvtest-test", bucket, maxBucketLen)
				}
			}
			if a == b {
				t.Errorf("two calls gave the same bucket %q", a)
			}
		})
	}
}

func TestParseEnv(t *testing.T) {
	got := parseEnv("S3_ENDPOINT=127.0.0.1:7070\nS3_SECRET_KEY=a=b\n\nnoise\n")
	if got["S3_ENDPOINT"] != "127.0.0.1:7070" || got["S3_SECRET_KEY"] != "a=b" || len(got) != 2 {
		t.Fatalf("parseEnv = %v", got)
	}
}

func TestStoreGivesAnEmptyBucketOfItsOwn(t *testing.T) {
	a, b := Store(t), Store(t)
	if a.Bucket() == b.Bucket() {
		t.Fatalf("two stores share bucket %s", a.Bucket())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, s := range []interface{ Ping(context.Context) error }{a, b} {
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	}
	if _, err := a.Put(ctx, "k", []byte("x"), "text/plain", nil); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, err := b.GetBytes(ctx, "k"); err == nil {
		t.Fatal("an object put in one test bucket shows in the other")
	}
}
