package reviews

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"rulevalidator/bucket"
)

// DefaultPrefix is ObjectStoreConfig.Prefix's default.
const DefaultPrefix = "reviews"

// ObjectStoreConfig configures an ObjectStore.
type ObjectStoreConfig struct {
	// Prefix is the key prefix of review documents (default DefaultPrefix).
	// The queue's markers are kept under Prefix + "-pending", what each
	// validation judged under Prefix + "-material".
	Prefix string
}

// ObjectStore keeps one JSON document per validation at
// <prefix>/<tenant>/<request id>.json with its routed verdicts and its
// reviews, changed only by conditional writes (If-Match, If-None-Match), so
// that replicas adding reviews at once lose none. A validation with
// verdicts still waiting for a review also has an empty marker at
// <prefix>-pending/<tenant>/<request id>: the queue lists a tenant's
// markers, not every validation it ever had. The marker is written before
// the document that needs it and removed after the document that no
// longer does, so a crash between the two leaves at worst a stale marker,
// which the queue reads past. What a validation judged (its documents'
// text) is kept at <prefix>-material/<tenant>/<request id>.json.
type ObjectStore struct {
	objects        bucket.Objects
	prefix         string
	pendingPrefix  string
	materialPrefix string
}

// NewObjectStore returns a review store on objects.
func NewObjectStore(objects bucket.Objects, cfg ObjectStoreConfig) (*ObjectStore, error) {
	if objects == nil {
		return nil, errors.New("reviews: NewObjectStore needs object storage")
	}
	prefix := strings.TrimSuffix(cfg.Prefix, "/")
	if prefix == "" {
		prefix = DefaultPrefix
	}
	s := &ObjectStore{objects: objects, prefix: prefix, pendingPrefix: prefix + "-pending", materialPrefix: prefix + "-material"}
	longest := strings.Repeat("x", bucket.MaxSegmentBytes)
	key, err := bucket.TenantKey(s.pendingPrefix, longest, longest)
	if err != nil {
		return nil, fmt.Errorf("reviews: prefix %q: %w", prefix, err)
	}
	if len(key)+len(docSuffix) > bucket.MaxKeyBytes {
		return nil, fmt.Errorf("reviews: prefix %q is too long: the longest key would be over S3's %d bytes", prefix, bucket.MaxKeyBytes)
	}
	return s, nil
}

const (
	docSuffix   = ".json"
	contentType = "application/json"
	// casRounds bounds the conditional writes one change tries: each round
	// loses only to another writer's change.
	casRounds = 8
)

// Key is the object key of the tenant's validation's document.
func (s *ObjectStore) Key(tenant, requestID string) (string, error) {
	key, err := bucket.TenantKey(s.prefix, tenant, requestID)
	if err != nil {
		return "", fmt.Errorf("reviews: validation %q of tenant %q: %w", requestID, tenant, err)
	}
	return key + docSuffix, nil
}

func (s *ObjectStore) markerKey(tenant, requestID string) (string, error) {
	return bucket.TenantKey(s.pendingPrefix, tenant, requestID)
}

// read fetches the validation's document and its ETag; found is false when
// there is none.
func (s *ObjectStore) read(ctx context.Context, key, tenant, requestID string) (v validation, etag string, found bool, err error) {
	data, info, err := s.objects.GetBytesInfo(ctx, key)
	if errors.Is(err, bucket.ErrNotFound) {
		return validation{TenantID: tenant, RequestID: requestID}, "", false, nil
	}
	if err != nil {
		return validation{}, "", false, fmt.Errorf("reviews: reading the reviews of validation %q of tenant %q: %w", requestID, tenant, err)
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return validation{}, "", false, fmt.Errorf("reviews: document %s: %w", info.URI, err)
	}
	if v.TenantID != tenant || v.RequestID != requestID {
		return validation{}, "", false, fmt.Errorf("reviews: document %s holds validation %q of tenant %q, not %q of %q", info.URI, v.RequestID, v.TenantID, requestID, tenant)
	}
	return v, info.ETag, true, nil
}

// change applies edit to the validation's document with a conditional
// write, reading again when another writer changed it meanwhile. edit
// reports whether there is anything to write. before runs ahead of the
// write with the document as it will be, after once it is written.
func (s *ObjectStore) change(ctx context.Context, tenant, requestID string, edit func(*validation) (bool, error), before, after func(validation) error) error {
	key, err := s.Key(tenant, requestID)
	if err != nil {
		return err
	}
	for range casRounds {
		v, etag, found, err := s.read(ctx, key, tenant, requestID)
		if err != nil {
			return err
		}
		write, err := edit(&v)
		if err != nil || !write {
			return err
		}
		body, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("reviews: encoding the reviews of validation %q: %w", requestID, err)
		}
		if before != nil {
			if err := before(v); err != nil {
				return err
			}
		}
		if found {
			_, err = s.objects.PutIfMatch(ctx, key, etag, body, contentType, nil)
		} else {
			_, err = s.objects.PutNew(ctx, key, body, contentType, nil)
		}
		switch {
		case err == nil:
			if after != nil {
				return after(v)
			}
			return nil
		case errors.Is(err, bucket.ErrConditionFailed) || errors.Is(err, bucket.ErrNotFound):
			continue
		default:
			return fmt.Errorf("reviews: storing the reviews of validation %q of tenant %q: %w", requestID, tenant, err)
		}
	}
	return fmt.Errorf("reviews: the reviews of validation %q of tenant %q changed under every attempt to change them", requestID, tenant)
}

// Add records r (see Store).
func (s *ObjectStore) Add(ctx context.Context, tenant string, r Review) (Review, bool, error) {
	var got Review
	var created bool
	err := s.change(ctx, tenant, r.RequestID, func(v *validation) (bool, error) {
		var err error
		got, created, err = v.add(r)
		return created, err
	}, nil, func(v validation) error {
		if len(v.pending()) > 0 {
			return nil
		}
		return s.unmark(ctx, tenant, r.RequestID)
	})
	if err != nil {
		return Review{}, false, err
	}
	return got, created, nil
}

// List returns the validation's reviews (see Store).
func (s *ObjectStore) List(ctx context.Context, tenant, requestID string) ([]Review, error) {
	key, err := s.Key(tenant, requestID)
	if err != nil {
		return nil, err
	}
	v, _, _, err := s.read(ctx, key, tenant, requestID)
	return v.Reviews, err
}

// Route records items (see Store).
func (s *ObjectStore) Route(ctx context.Context, tenant, requestID string, items []Item) error {
	if len(items) == 0 {
		return nil
	}
	return s.change(ctx, tenant, requestID, func(v *validation) (bool, error) {
		v.route(items)
		return true, nil
	}, func(v validation) error {
		if len(v.pending()) == 0 {
			return nil
		}
		return s.mark(ctx, tenant, requestID)
	}, nil)
}

func (s *ObjectStore) mark(ctx context.Context, tenant, requestID string) error {
	key, err := s.markerKey(tenant, requestID)
	if err != nil {
		return err
	}
	if _, err := s.objects.Put(ctx, key, nil, contentType, nil); err != nil {
		return fmt.Errorf("reviews: queueing validation %q of tenant %q: %w", requestID, tenant, err)
	}
	return nil
}

func (s *ObjectStore) unmark(ctx context.Context, tenant, requestID string) error {
	key, err := s.markerKey(tenant, requestID)
	if err != nil {
		return err
	}
	if err := s.objects.Delete(ctx, key); err != nil && !errors.Is(err, bucket.ErrNotFound) {
		return fmt.Errorf("reviews: taking validation %q of tenant %q off the queue: %w", requestID, tenant, err)
	}
	return nil
}

// Pending lists the tenant's items without a review (see Store): it reads
// the document of each validation the tenant's markers name.
func (s *ObjectStore) Pending(ctx context.Context, tenant string) ([]Item, error) {
	dir, err := bucket.TenantKey(s.pendingPrefix, tenant)
	if err != nil {
		return nil, fmt.Errorf("reviews: queue of tenant %q: %w", tenant, err)
	}
	dir += "/"
	var markers []string
	if err := s.objects.List(ctx, dir, func(key string) error {
		markers = append(markers, key)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reviews: listing the queue of tenant %q: %w", tenant, err)
	}
	var out []Item
	for _, marker := range markers {
		// The marker's key is the document's, under the other prefix.
		key := s.prefix + strings.TrimPrefix(marker, s.pendingPrefix) + docSuffix
		data, info, err := s.objects.GetBytesInfo(ctx, key)
		if errors.Is(err, bucket.ErrNotFound) {
			continue // marked ahead of a document never written
		}
		if err != nil {
			return nil, fmt.Errorf("reviews: reading the queue of tenant %q: %w", tenant, err)
		}
		var v validation
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("reviews: document %s: %w", info.URI, err)
		}
		if v.TenantID != tenant {
			return nil, fmt.Errorf("reviews: document %s holds tenant %q, not %q", info.URI, v.TenantID, tenant)
		}
		out = append(out, v.pending()...)
	}
	return out, nil
}

// Reviewed calls fn with the tenant's reviewed validations (see Store): it
// reads every review document of the tenant.
func (s *ObjectStore) Reviewed(ctx context.Context, tenant string, fn func(string, []Review) error) error {
	dir, err := bucket.TenantKey(s.prefix, tenant)
	if err != nil {
		return fmt.Errorf("reviews: reviews of tenant %q: %w", tenant, err)
	}
	var keys []string
	if err := s.objects.List(ctx, dir+"/", func(key string) error {
		if strings.HasSuffix(key, docSuffix) {
			keys = append(keys, key)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("reviews: listing the reviews of tenant %q: %w", tenant, err)
	}
	for _, key := range keys {
		data, info, err := s.objects.GetBytesInfo(ctx, key)
		if errors.Is(err, bucket.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reviews: reading the reviews of tenant %q: %w", tenant, err)
		}
		var v validation
		if err := json.Unmarshal(data, &v); err != nil {
			return fmt.Errorf("reviews: document %s: %w", info.URI, err)
		}
		if v.TenantID != tenant {
			return fmt.Errorf("reviews: document %s holds tenant %q, not %q", info.URI, v.TenantID, tenant)
		}
		if len(v.Reviews) == 0 {
			continue
		}
		if err := fn(v.RequestID, v.Reviews); err != nil {
			return err
		}
	}
	return nil
}

// materialDocument is what SaveMaterial stores.
type materialDocument struct {
	TenantID  string `json:"tenant_id"`
	RequestID string `json:"request_id"`
	Material
}

func (s *ObjectStore) materialKey(tenant, requestID string) (string, error) {
	key, err := bucket.TenantKey(s.materialPrefix, tenant, requestID)
	if err != nil {
		return "", fmt.Errorf("reviews: material of validation %q of tenant %q: %w", requestID, tenant, err)
	}
	return key + docSuffix, nil
}

// SaveMaterial stores in (see Store).
func (s *ObjectStore) SaveMaterial(ctx context.Context, tenant, requestID string, m Material) error {
	key, err := s.materialKey(tenant, requestID)
	if err != nil {
		return err
	}
	body, err := json.Marshal(materialDocument{TenantID: tenant, RequestID: requestID, Material: m})
	if err != nil {
		return fmt.Errorf("reviews: encoding the material of validation %q: %w", requestID, err)
	}
	if _, err := s.objects.Put(ctx, key, body, contentType, nil); err != nil {
		return fmt.Errorf("reviews: storing the material of validation %q of tenant %q: %w", requestID, tenant, err)
	}
	return nil
}

// Material reads what SaveMaterial stored (see Store).
func (s *ObjectStore) Material(ctx context.Context, tenant, requestID string) (Material, bool, error) {
	key, err := s.materialKey(tenant, requestID)
	if err != nil {
		return Material{}, false, err
	}
	data, info, err := s.objects.GetBytesInfo(ctx, key)
	if errors.Is(err, bucket.ErrNotFound) {
		return Material{}, false, nil
	}
	if err != nil {
		return Material{}, false, fmt.Errorf("reviews: reading the material of validation %q of tenant %q: %w", requestID, tenant, err)
	}
	var d materialDocument
	if err := json.Unmarshal(data, &d); err != nil {
		return Material{}, false, fmt.Errorf("reviews: document %s: %w", info.URI, err)
	}
	if d.TenantID != tenant || d.RequestID != requestID || d.Inputs == nil {
		return Material{}, false, fmt.Errorf("reviews: document %s holds validation %q of tenant %q, not %q of %q", info.URI, d.RequestID, d.TenantID, requestID, tenant)
	}
	return d.Material, true, nil
}
