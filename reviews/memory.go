package reviews

import (
	"context"
	"slices"
	"sync"
)

// DefaultMaxValidations is MemoryStoreConfig.MaxValidations' default.
const DefaultMaxValidations = 10000

// MemoryStoreConfig configures a MemoryStore.
type MemoryStoreConfig struct {
	// MaxValidations bounds the validations kept (default
	// DefaultMaxValidations); past it the oldest is forgotten.
	MaxValidations int
}

// MemoryStore keeps reviews in this process: lost on restart and not
// shared with other replicas, for a service without object storage.
type MemoryStore struct {
	mu    sync.Mutex
	max   int
	byKey map[memKey]*validation
	order []memKey // oldest first
}

type memKey struct{ tenant, requestID string }

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(cfg MemoryStoreConfig) *MemoryStore {
	if cfg.MaxValidations <= 0 {
		cfg.MaxValidations = DefaultMaxValidations
	}
	return &MemoryStore{max: cfg.MaxValidations, byKey: map[memKey]*validation{}}
}

func (s *MemoryStore) entry(tenant, requestID string) *validation {
	k := memKey{tenant, requestID}
	if v, ok := s.byKey[k]; ok {
		return v
	}
	if len(s.order) >= s.max {
		delete(s.byKey, s.order[0])
		s.order = s.order[1:]
	}
	v := &validation{TenantID: tenant, RequestID: requestID}
	s.byKey[k] = v
	s.order = append(s.order, k)
	return v
}

// Add records r (see Store).
func (s *MemoryStore) Add(_ context.Context, tenant string, r Review) (Review, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entry(tenant, r.RequestID).add(cloneReview(r))
}

// List returns the validation's reviews (see Store).
func (s *MemoryStore) List(_ context.Context, tenant, requestID string) ([]Review, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byKey[memKey{tenant, requestID}]
	if !ok {
		return nil, nil
	}
	out := make([]Review, len(v.Reviews))
	for i, r := range v.Reviews {
		out[i] = cloneReview(r)
	}
	return out, nil
}

// Route records items (see Store).
func (s *MemoryStore) Route(_ context.Context, tenant, requestID string, items []Item) error {
	if len(items) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entry(tenant, requestID).route(slices.Clone(items))
	return nil
}

// Pending lists the tenant's items without a review (see Store).
func (s *MemoryStore) Pending(_ context.Context, tenant string) ([]Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Item
	for _, k := range s.order {
		if k.tenant == tenant {
			out = append(out, s.byKey[k].pending()...)
		}
	}
	return out, nil
}

// Reviewed calls fn with the tenant's reviewed validations (see Store).
func (s *MemoryStore) Reviewed(ctx context.Context, tenant string, fn func(string, []Review) error) error {
	s.mu.Lock()
	var ids []string
	for _, k := range s.order {
		if k.tenant == tenant && len(s.byKey[k].Reviews) > 0 {
			ids = append(ids, k.requestID)
		}
	}
	s.mu.Unlock()
	for _, id := range ids {
		all, err := s.List(ctx, tenant, id)
		if err != nil {
			return err
		}
		if err := fn(id, all); err != nil {
			return err
		}
	}
	return nil
}

// SaveMaterial keeps in (see Store); it is not copied, and must not be
// changed after.
func (s *MemoryStore) SaveMaterial(_ context.Context, tenant, requestID string, m Material) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entry(tenant, requestID).material = &m
	return nil
}

// Material returns what SaveMaterial kept (see Store).
func (s *MemoryStore) Material(_ context.Context, tenant, requestID string) (Material, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byKey[memKey{tenant, requestID}]
	if !ok || v.material == nil {
		return Material{}, false, nil
	}
	return *v.material, true, nil
}

func cloneReview(r Review) Review {
	r.PassageIDs = slices.Clone(r.PassageIDs)
	if r.BooleanOutput != nil {
		b := *r.BooleanOutput
		r.BooleanOutput = &b
	}
	if r.NumericalOutput != nil {
		n := *r.NumericalOutput
		r.NumericalOutput = &n
	}
	return r
}
