package objstore

import (
	"fmt"
	"strings"

	"github.com/minio/minio-go/v7/pkg/s3utils"

	"rulevalidator/bucket"
)

// ParseURI splits s3://bucket/key into its bucket and key. The key may hold '/'; it must
// be a key Put would accept (no empty, "." or ".." segments, no control characters).
func ParseURI(uri string) (bucket, key string, err error) {
	const scheme = "s3://"
	rest, ok := strings.CutPrefix(uri, scheme)
	if !ok {
		return "", "", fmt.Errorf("objstore: URI %q: want s3://bucket/key", uri)
	}
	bucket, key, ok = strings.Cut(rest, "/")
	switch {
	case bucket == "":
		return "", "", fmt.Errorf("objstore: URI %q has no bucket", uri)
	case !ok || key == "":
		return "", "", fmt.Errorf("objstore: URI %q has no key after the bucket", uri)
	}
	if err := s3utils.CheckValidBucketNameStrict(bucket); err != nil {
		return "", "", fmt.Errorf("objstore: URI %q: bucket %q: %v", uri, bucket, err)
	}
	if err := checkKey(key); err != nil {
		return "", "", fmt.Errorf("objstore: URI %q: %w", uri, err)
	}
	return bucket, key, nil
}

// checkKey and checkPrefix are the keys and key prefixes the store accepts:
// bucket's, named here where a parameter called bucket would hide the
// package.
func checkKey(key string) error { return bucket.CheckKey(key) }

func checkPrefix(prefix string) error { return bucket.CheckPrefix(prefix) }
