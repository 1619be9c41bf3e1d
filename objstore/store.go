// Package objstore keeps reports and claim-check documents in S3-compatible object storage
// (AWS S3, MinIO, versitygw) through minio-go. Calls retry transient failures with backoff
// and fail fast on permanent ones; reads into memory are capped.
package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"go.opentelemetry.io/otel/trace"

	"rulevalidator/bucket"
	"rulevalidator/internal/tracing"
)

// Store reads and writes objects in one bucket. It is safe for concurrent use.
type Store struct {
	cfg    Config
	client *minio.Client
	log    *slog.Logger
	tracer trace.Tracer
}

// ObjectInfo describes a stored object (bucket.ObjectInfo).
type ObjectInfo = bucket.ObjectInfo

// Store is the object storage the stores built on package bucket take.
var _ bucket.Objects = (*Store)(nil)

// New checks cfg (after filling in defaults) and returns a Store. It makes no request; call
// EnsureBucket or Ping to find out whether the store answers.
func New(cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	host, secure, _ := cfg.endpoint()
	client, err := minio.New(host, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:    secure,
		Region:    cfg.Region,
		Transport: cfg.Transport,
		// One attempt per call: retries happen here, where failures are classified and logged.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: client for %s: %w", cfg.Endpoint, err)
	}
	cfg.AllowedBuckets = slices.Clone(cfg.AllowedBuckets)
	return &Store{cfg: cfg, client: client, log: cfg.Logger, tracer: tracing.OrNoop(cfg.TracerProvider).Tracer(tracerName)}, nil
}

// Bucket is the bucket the store writes to.
func (s *Store) Bucket() string { return s.cfg.Bucket }

// URI is the s3:// address of key in the store's bucket.
func (s *Store) URI(key string) string { return "s3://" + s.cfg.Bucket + "/" + key }

// EnsureBucket creates the bucket unless it exists already.
func (s *Store) EnsureBucket(ctx context.Context) error {
	uri := "s3://" + s.cfg.Bucket
	var exists bool
	err := s.retry(ctx, "ensure-bucket", uri, func() (err error) {
		exists, err = s.client.BucketExists(ctx, s.cfg.Bucket)
		return err
	})
	if err != nil || exists {
		return err
	}
	return s.retry(ctx, "ensure-bucket", uri, func() error {
		err := s.client.MakeBucket(ctx, s.cfg.Bucket, minio.MakeBucketOptions{Region: s.cfg.Region})
		if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
			// Created meanwhile by another process (or an earlier attempt whose answer was lost).
			return nil
		}
		return err
	})
}

// Ping checks that the credentials work and the bucket exists, for readiness probes.
func (s *Store) Ping(ctx context.Context) (err error) {
	ctx, span := s.startSpan(ctx, "ping", s.cfg.Bucket, "")
	defer func() { endSpan(span, -1, err) }()
	uri := "s3://" + s.cfg.Bucket
	var exists bool
	err = s.retry(ctx, "ping", uri, func() (err error) {
		exists, err = s.client.BucketExists(ctx, s.cfg.Bucket)
		return err
	})
	if err != nil {
		return err
	}
	if !exists {
		return &OpError{Op: "ping", URI: uri, Attempts: 1, Err: errNoSuchBucket}
	}
	return nil
}

// Put stores body under key, replacing any object there. Transient failures are retried
// with backoff; permanent ones (AccessDenied, NoSuchBucket, InvalidArgument) return at once.
// meta becomes the object's user metadata.
func (s *Store) Put(ctx context.Context, key string, body []byte, contentType string, meta map[string]string) (ObjectInfo, error) {
	return s.put(ctx, "put", key, body, contentType, meta, nil)
}

// put stores body under key; condition, when not nil, adds its precondition header to the
// request options.
func (s *Store) put(ctx context.Context, op, key string, body []byte, contentType string, meta map[string]string, condition func(*minio.PutObjectOptions)) (_ ObjectInfo, err error) {
	ctx, span := s.startSpan(ctx, op, s.cfg.Bucket, key)
	defer func() { endSpan(span, int64(len(body)), err) }()
	uri := s.URI(key)
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, &OpError{Op: op, URI: uri, Err: err}
	}
	if err := checkMetadata(meta); err != nil {
		return ObjectInfo{}, &OpError{Op: op, URI: uri, Err: err}
	}
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	var info minio.UploadInfo
	err = s.retry(ctx, op, uri, func() (err error) {
		opts := minio.PutObjectOptions{ContentType: contentType, UserMetadata: meta}
		if condition != nil {
			condition(&opts)
		}
		info, err = s.client.PutObject(ctx, s.cfg.Bucket, key, bytes.NewReader(body), int64(len(body)), opts)
		return err
	})
	if err != nil {
		return ObjectInfo{}, err
	}
	return ObjectInfo{
		Bucket:      s.cfg.Bucket,
		Key:         key,
		URI:         uri,
		Size:        int64(len(body)),
		ETag:        info.ETag,
		ContentType: contentType,
		Metadata:    lowerKeys(meta),
	}, nil
}

// Get opens key in the store's bucket for streaming. The caller must close the reader.
// A missing object gives an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error) {
	return s.get(ctx, s.cfg.Bucket, key)
}

func (s *Store) get(ctx context.Context, bucket, key string) (_ io.ReadCloser, info ObjectInfo, err error) {
	ctx, span := s.startSpan(ctx, "get", bucket, key)
	defer func() { endSpan(span, info.Size, err) }()
	uri := "s3://" + bucket + "/" + key
	if err := checkKey(key); err != nil {
		return nil, ObjectInfo{}, &OpError{Op: "get", URI: uri, Err: err}
	}
	// One GET whose headers and body are the same version: minio.Object would ask for the
	// headers with a HEAD and then the body with a GET conditional on the HEAD's ETag, which
	// fails (412) when the object is replaced between the two, before its first byte.
	core := minio.Core{Client: s.client}
	var body io.ReadCloser
	var stat minio.ObjectInfo
	err = s.retry(ctx, "get", uri, func() error {
		b, st, _, err := core.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		body, stat = b, st
		return nil
	})
	if errors.Is(err, ErrNotFound) && !s.bucketExists(ctx, bucket) {
		// Some S3 servers answer NoSuchKey for a key in a bucket that does not exist; a
		// missing bucket is the configuration's fault, not the caller's.
		return nil, ObjectInfo{}, &OpError{Op: "get", URI: uri, Attempts: 1, Err: errNoSuchBucket}
	}
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	return body, objectInfo(bucket, key, uri, stat), nil
}

// objectInfo is what a get or a stat learned of the object at uri.
func objectInfo(bucket, key, uri string, stat minio.ObjectInfo) ObjectInfo {
	return ObjectInfo{
		Bucket:       bucket,
		Key:          key,
		URI:          uri,
		Size:         stat.Size,
		ETag:         stat.ETag,
		ContentType:  stat.ContentType,
		LastModified: stat.LastModified,
		Metadata:     lowerKeys(stat.UserMetadata),
	}
}

// bucketExists reports whether bucket is known to exist; it answers true when the store
// cannot tell, so that only a definite answer changes an error.
func (s *Store) bucketExists(ctx context.Context, bucket string) bool {
	exists, err := s.client.BucketExists(ctx, bucket)
	return err != nil || exists
}

// GetBytes reads key from the store's bucket into memory. An object bigger than
// MaxObjectBytes gives an error wrapping ErrTooLarge, without reading it.
func (s *Store) GetBytes(ctx context.Context, key string) ([]byte, error) {
	data, _, err := s.getBytes(ctx, s.cfg.Bucket, key)
	return data, err
}

// GetBytesInfo is GetBytes with the object's info, its ETag for PutIfMatch included.
func (s *Store) GetBytesInfo(ctx context.Context, key string) ([]byte, ObjectInfo, error) {
	return s.getBytes(ctx, s.cfg.Bucket, key)
}

// getBytes reads an object whole, from one response: the bytes are one version's, the
// version current when the read began, even while the object is being replaced.
func (s *Store) getBytes(ctx context.Context, bucket, key string) ([]byte, ObjectInfo, error) {
	body, info, err := s.get(ctx, bucket, key)
	if err != nil {
		return nil, info, err
	}
	defer body.Close()
	limit := s.cfg.MaxObjectBytes
	if info.Size > limit {
		return nil, info, s.tooLarge(info.URI, fmt.Sprintf("%d bytes", info.Size))
	}
	// The size header could be wrong; never read past the cap whatever it said.
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, info, &OpError{Op: "get", URI: info.URI, Attempts: 1, Err: fmt.Errorf("reading the body after %d bytes: %w", len(data), err)}
	}
	if int64(len(data)) > limit {
		// The server announced a smaller size than it sent.
		return nil, info, s.tooLarge(info.URI, fmt.Sprintf("more than %d bytes", limit))
	}
	return data, info, nil
}

func (s *Store) tooLarge(uri, size string) *OpError {
	return &OpError{Op: "get", URI: uri, Attempts: 1, kind: ErrTooLarge,
		Err: fmt.Errorf("the object is %s, over the cap of %d bytes (MaxObjectBytes)", size, s.cfg.MaxObjectBytes)}
}

// GetClaim fetches a claim-check document of tenant by its s3://bucket/key address. It
// reads only what CheckClaim accepts: a request must not make the service read its own
// state, another tenant's documents or any bucket its credentials reach.
func (s *Store) GetClaim(ctx context.Context, tenant, uri string) ([]byte, error) {
	bucket, key, err := s.claim("get", tenant, uri)
	if err != nil {
		return nil, err
	}
	data, _, err := s.getBytes(ctx, bucket, key)
	return data, err
}

// StatClaim describes a claim-check document of tenant by its s3://bucket/key address
// without reading it (a HEAD), so that a caller can make room for it first. It refuses what
// GetClaim refuses (ErrClaimRefused, before any request), a missing object (ErrNotFound) and
// one bigger than MaxObjectBytes (ErrTooLarge).
func (s *Store) StatClaim(ctx context.Context, tenant, uri string) (info ObjectInfo, err error) {
	bucket, key, err := s.claim("stat", tenant, uri)
	if err != nil {
		return ObjectInfo{}, err
	}
	ctx, span := s.startSpan(ctx, "stat", bucket, key)
	defer func() { endSpan(span, info.Size, err) }()
	var stat minio.ObjectInfo
	err = s.retry(ctx, "stat", uri, func() (err error) {
		stat, err = s.client.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
		return err
	})
	if errors.Is(err, ErrNotFound) && !s.bucketExists(ctx, bucket) {
		// As for get: a missing bucket is the configuration's fault, not the caller's.
		return ObjectInfo{}, &OpError{Op: "stat", URI: uri, Attempts: 1, Err: errNoSuchBucket}
	}
	if err != nil {
		return ObjectInfo{}, err
	}
	info = objectInfo(bucket, key, uri, stat)
	if info.Size > s.cfg.MaxObjectBytes {
		err := s.tooLarge(uri, fmt.Sprintf("%d bytes", info.Size))
		err.Op = "stat"
		return info, err
	}
	return info, nil
}

// ClaimSize is the size StatClaim finds of a claim-check document of tenant, with its
// refusals: what the judging of a request asks before it reads a claim check
// (judging.ObjectReader).
func (s *Store) ClaimSize(ctx context.Context, tenant, uri string) (int64, error) {
	info, err := s.StatClaim(ctx, tenant, uri)
	return info.Size, err
}

// CheckClaim says whether tenant may name uri as a claim check, without any request: the
// bucket must be the store's or one of Config.AllowedBuckets, and the key must lie under
// the tenant's claims prefix (ClaimPrefix). Its refusals wrap ErrClaimRefused.
func (s *Store) CheckClaim(tenant, uri string) error {
	_, _, err := s.claim("check", tenant, uri)
	return err
}

// ClaimPrefix is the key prefix, ending in '/', under which tenant's claim-checked documents
// are kept in every bucket claim checks are read from.
func (s *Store) ClaimPrefix(tenant string) string {
	return s.cfg.ClaimsPrefix + "/" + bucket.KeySegment(tenant) + "/"
}

// claim parses a claim-check address and checks that tenant may read it. Its refusals,
// made before any request (Attempts 0), are the caller's fault; they say where the
// tenant's documents belong and nothing of what else the store holds.
func (s *Store) claim(op, tenant, uri string) (bucket, key string, err error) {
	bucket, key, err = ParseURI(uri)
	if err != nil {
		return "", "", &OpError{Op: op, URI: uri, Err: err}
	}
	if bucket != s.cfg.Bucket && !slices.Contains(s.cfg.AllowedBuckets, bucket) {
		allowed := append([]string{s.cfg.Bucket}, s.cfg.AllowedBuckets...)
		return "", "", &OpError{Op: op, URI: uri, kind: ErrClaimRefused, Err: fmt.Errorf("bucket %q is not one this service reads (allowed: %s)",
			bucket, strings.Join(allowed, ", "))}
	}
	prefix := s.ClaimPrefix(tenant)
	if !strings.HasPrefix(key, prefix) || len(key) == len(prefix) {
		return "", "", &OpError{Op: op, URI: uri, kind: ErrClaimRefused, Err: fmt.Errorf("the key is not under %s, where tenant %q's documents are kept: store the document at s3://%s/%s<name> and name that",
			prefix, tenant, bucket, prefix)}
	}
	return bucket, key, nil
}

// checkMetadata rejects keys that are not HTTP header tokens and values with control
// characters, which would be dropped or would split the header.
func checkMetadata(meta map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		if k == "" || strings.IndexFunc(k, func(r rune) bool { return !isTokenChar(r) }) >= 0 {
			return fmt.Errorf("metadata key %q: want letters, digits and !#$%%&'*+-.^_`|~ only", k)
		}
		if i := strings.IndexFunc(meta[k], unicode.IsControl); i >= 0 {
			return fmt.Errorf("metadata %q: control character at byte %d of the value", k, i)
		}
	}
	return nil
}

func isTokenChar(r rune) bool {
	return r < 0x7f && r > ' ' && !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
}

func lowerKeys(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.ToLower(k)] = v
	}
	return out
}
