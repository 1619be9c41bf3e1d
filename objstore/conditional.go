package objstore

import (
	"context"
	"errors"

	"github.com/minio/minio-go/v7"
)

// PutNew stores body under key only if no object is there (If-None-Match: *), so that of
// two writers creating one key exactly one succeeds. When an object exists the error wraps
// ErrConditionFailed. A retried attempt can meet the object its own earlier attempt wrote
// (the answer was lost): callers that must tell the two apart put a token of their own in
// body and read the object back.
func (s *Store) PutNew(ctx context.Context, key string, body []byte, contentType string, meta map[string]string) (ObjectInfo, error) {
	return s.put(ctx, "put-new", key, body, contentType, meta, func(o *minio.PutObjectOptions) { o.SetMatchETagExcept("*") })
}

// PutIfMatch replaces the object under key only if its ETag is still etag (If-Match), so
// that a read-modify-write loses no concurrent change. When the object changed the error
// wraps ErrConditionFailed; when it is gone, ErrNotFound (as S3 answers).
func (s *Store) PutIfMatch(ctx context.Context, key, etag string, body []byte, contentType string, meta map[string]string) (ObjectInfo, error) {
	if etag == "" {
		return ObjectInfo{}, &OpError{Op: "put-if-match", URI: s.URI(key), Err: errors.New("no ETag to match")}
	}
	return s.put(ctx, "put-if-match", key, body, contentType, meta, func(o *minio.PutObjectOptions) { o.SetMatchETag(etag) })
}

// Delete removes the object under key; a missing object is not an error.
func (s *Store) Delete(ctx context.Context, key string) (err error) {
	ctx, span := s.startSpan(ctx, "delete", s.cfg.Bucket, key)
	defer func() { endSpan(span, -1, err) }()
	uri := s.URI(key)
	if err := checkKey(key); err != nil {
		return &OpError{Op: "delete", URI: uri, Err: err}
	}
	return s.retry(ctx, "delete", uri, func() error {
		return s.client.RemoveObject(ctx, s.cfg.Bucket, key, minio.RemoveObjectOptions{})
	})
}
