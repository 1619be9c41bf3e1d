package objstore

import (
	"context"
	"strings"

	"github.com/minio/minio-go/v7"
	"go.opentelemetry.io/otel/attribute"
)

// List calls fn with the key of every object whose key starts with prefix, in key order,
// until fn returns an error (which List returns). A listing that fails part way is not
// retried from the start: its error says how far it got by what fn has seen.
func (s *Store) List(ctx context.Context, prefix string, fn func(key string) error) (err error) {
	ctx, span := s.startSpan(ctx, "list", s.cfg.Bucket, prefix)
	listed := 0
	defer func() {
		span.SetAttributes(attribute.Int(attrListed, listed))
		endSpan(span, -1, err)
	}()
	uri := s.URI(prefix)
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		if err := checkKey(prefix); err != nil {
			return &OpError{Op: "list", URI: uri, Err: err}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing's goroutine when fn ends it early
	for obj := range s.client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return permanentError("list", uri, 1, obj.Err)
		}
		listed++
		if err := fn(obj.Key); err != nil {
			return err
		}
	}
	return ctx.Err()
}
