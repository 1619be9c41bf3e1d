package objstore

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// maxKeyBytes is S3's limit on the length of an object key.
const maxKeyBytes = 1024

// TenantKey builds the key prefix/tenant/id/fileName for a tenant's object, such as a report.
// tenant, id and fileName are single path segments: empty ones and ones holding '/', '\',
// "..", "." alone or control characters are refused, so that no caller-supplied value can
// reach outside its tenant's prefix. prefix may be empty or hold several segments
// ("reports/v1"); a trailing '/' is dropped.
func TenantKey(prefix, tenant, id, fileName string) (string, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix != "" {
		for i, seg := range strings.Split(prefix, "/") {
			if err := checkSegment(seg); err != nil {
				return "", fmt.Errorf("objstore: key prefix %q, segment %d: %w", prefix, i+1, err)
			}
		}
	}
	for _, part := range []struct{ name, value string }{
		{"tenant", tenant}, {"id", id}, {"file name", fileName},
	} {
		if err := checkComponent(part.value); err != nil {
			return "", fmt.Errorf("objstore: %s %q: %w", part.name, part.value, err)
		}
	}
	key := tenant + "/" + id + "/" + fileName
	if prefix != "" {
		key = prefix + "/" + key
	}
	if len(key) > maxKeyBytes {
		return "", fmt.Errorf("objstore: key %q is %d bytes, over S3's limit of %d", key, len(key), maxKeyBytes)
	}
	return key, nil
}

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

// checkKey accepts keys whose '/'-separated segments are all real names. Such keys map
// one to one onto files in a posix-backed store and can't climb out of a prefix.
func checkKey(key string) error {
	if key == "" {
		return errors.New("key is empty")
	}
	if len(key) > maxKeyBytes {
		return fmt.Errorf("key is %d bytes, over S3's limit of %d", len(key), maxKeyBytes)
	}
	for i, seg := range strings.Split(key, "/") {
		if err := checkSegment(seg); err != nil {
			return fmt.Errorf("key %q, segment %d: %w", key, i+1, err)
		}
	}
	return nil
}

func checkSegment(seg string) error {
	switch seg {
	case "":
		return errors.New("empty segment (leading, trailing or doubled '/')")
	case ".", "..":
		return fmt.Errorf("%q is not allowed as a segment", seg)
	}
	return checkText(seg)
}

func checkComponent(s string) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case s == ".":
		return errors.New(`"." is not a name`)
	case strings.Contains(s, ".."):
		return errors.New(`holds ".."`)
	case strings.Contains(s, "/"):
		return errors.New("holds '/'")
	}
	return checkText(s)
}

// checkText refuses invalid UTF-8, control characters and '\', which some tools treat as
// a path separator when an object is saved to disk.
func checkText(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	for i, r := range s {
		switch {
		case unicode.IsControl(r):
			return fmt.Errorf("control character %U at byte %d", r, i)
		case r == '\\':
			return fmt.Errorf("'\\' at byte %d", i)
		}
	}
	return nil
}
