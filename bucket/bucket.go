// Package bucket is the object storage contract the stores built on it take:
// Objects, the port they keep their documents through, the errors its calls
// report, and the one key scheme of tenant-scoped objects (TenantKey). It
// holds no client: *objstore.Store implements Objects on S3-compatible
// storage, so that a store of jobs, reviews or cached verdicts depends on
// this package and not on the S3 client.
package bucket

import (
	"context"
	"errors"
	"time"
)

// Objects is the object storage a store keeps its documents in (an
// *objstore.Store). Keys are the ones CheckKey accepts; a store makes them
// with TenantKey.
type Objects interface {
	// GetBytes reads the object under key; an error wrapping ErrNotFound
	// when there is none, ErrTooLarge when it is too large to read into
	// memory.
	GetBytes(ctx context.Context, key string) ([]byte, error)
	// GetBytesInfo is GetBytes with the object's description (its ETag for
	// PutIfMatch).
	GetBytesInfo(ctx context.Context, key string) ([]byte, ObjectInfo, error)
	// Put stores body under key, replacing what is there.
	Put(ctx context.Context, key string, body []byte, contentType string, meta map[string]string) (ObjectInfo, error)
	// PutNew stores body under key only if no object is there; otherwise
	// the error wraps ErrConditionFailed.
	PutNew(ctx context.Context, key string, body []byte, contentType string, meta map[string]string) (ObjectInfo, error)
	// PutIfMatch replaces the object under key only if its ETag is still
	// etag; otherwise the error wraps ErrConditionFailed, or ErrNotFound
	// when the object is gone.
	PutIfMatch(ctx context.Context, key, etag string, body []byte, contentType string, meta map[string]string) (ObjectInfo, error)
	// Delete removes the object under key; a missing object is not an
	// error.
	Delete(ctx context.Context, key string) error
	// List calls fn with the key of every object whose key starts with
	// prefix, in key order, until fn returns an error (which List returns).
	List(ctx context.Context, prefix string, fn func(key string) error) error
}

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Bucket       string
	Key          string
	URI          string // s3://bucket/key
	Size         int64
	ETag         string
	ContentType  string
	LastModified time.Time
	// Metadata is the user metadata (x-amz-meta-*), keys in lower case.
	Metadata map[string]string
}

var (
	// ErrNotFound: the object does not exist (S3's NoSuchKey).
	ErrNotFound = errors.New("object not found")
	// ErrTooLarge: the object is bigger than the store allows to read into memory.
	ErrTooLarge = errors.New("object too large")
	// ErrConditionFailed: a conditional write found the object not as required (PutNew: it
	// exists; PutIfMatch: it changed). S3's PreconditionFailed.
	ErrConditionFailed = errors.New("the object is not as the write's condition requires")
	// ErrClaimRefused: a claim check names an object its tenant may not read: outside the
	// buckets claim checks are read from, or outside the tenant's own claims prefix.
	ErrClaimRefused = errors.New("claim check refused")
)
