package report

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"rulevalidator/bucket"
	"rulevalidator/engine"
	"rulevalidator/schemas"
)

// MIMEType is the content type of an xlsx workbook.
const MIMEType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

// Storage layout. A report is stored at
//
//	<prefix>/<tenant>/<reference id>/report.xlsx
//
// the tenant escaped by bucket.TenantKey (as job documents are), so that
// (tenant, reference id) alone locate it: KeyFor computes the key, with no
// listing and no way to reach another tenant's prefix. Reports stored
// before the tenant was escaped, under the tenant as given, are still found
// (Open). The download name (FileName) is kept in the object's metadata and
// in the descriptor, not in the key, since the key must be computable from
// the id alone.
const (
	DefaultPrefix = "reports"
	ObjectName    = "report.xlsx"
)

// Metadata keys of a stored report, lower case as objstore returns them.
// Values are percent-encoded (url.PathEscape) so that any tenant or request
// id survives HTTP headers; Open decodes them.
const (
	MetaTenantID       = "tenant-id"
	MetaRequestID      = "request-id"
	MetaRulesetID      = "ruleset-id"
	MetaRulesetVersion = "ruleset-version"
	MetaReferenceID    = "reference-id"
	MetaFileName       = "file-name"
)

// ErrInvalidReferenceID marks a reference id that is not one NewReferenceID
// could have made; no key is built from such an id.
var ErrInvalidReferenceID = errors.New("invalid report reference id")

// referenceIDLen is the length of 128 bits in unpadded base32.
const referenceIDLen = 26

var referenceEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewReferenceID returns an unguessable report id: 128 bits from
// crypto/rand in lower-case unpadded base32 (26 characters, [a-z2-7]).
func NewReferenceID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("report: reading random bytes for a reference id: %w", err)
	}
	return strings.ToLower(referenceEncoding.EncodeToString(b[:])), nil
}

// ValidReferenceID reports whether s is exactly what NewReferenceID makes:
// 26 characters of lower-case base32 in canonical form. Check ids from
// callers with it before building any key from them.
func ValidReferenceID(s string) bool {
	if len(s) != referenceIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	b, err := referenceEncoding.DecodeString(strings.ToUpper(s))
	// Re-encoding catches non-canonical ids whose last character carries stray bits.
	return err == nil && len(b) == 16 && strings.ToLower(referenceEncoding.EncodeToString(b)) == s
}

// KeyFor is the object key of the report referenceID of tenant under prefix
// (see the storage layout above). It fails, wrapping ErrInvalidReferenceID,
// for an id ValidReferenceID refuses, and for a prefix that
// bucket.TenantKey refuses.
func KeyFor(prefix, tenant, referenceID string) (string, error) {
	key, err := keyFor(prefix, tenant, referenceID)
	if err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	return key, nil
}

func keyFor(prefix, tenant, referenceID string) (string, error) {
	if !ValidReferenceID(referenceID) {
		return "", fmt.Errorf("%w: %q (want %d characters of [a-z2-7])", ErrInvalidReferenceID, referenceID, referenceIDLen)
	}
	key, err := bucket.TenantKey(prefix, tenant, referenceID, ObjectName)
	if err != nil {
		return "", fmt.Errorf("key for tenant %q, reference id %s: %w", tenant, referenceID, err)
	}
	return key, nil
}

// Store keeps objects (an *objstore.Store, which retries transient failures).
type Store interface {
	Put(ctx context.Context, key string, body []byte, contentType string, meta map[string]string) (bucket.ObjectInfo, error)
}

// WriterOptions configures a Writer; zero fields take the documented defaults.
type WriterOptions struct {
	// Prefix is the first part of every key (default "reports"); it may hold
	// several segments ("reports/v1").
	Prefix string
	// Now stamps reports written without a time (default time.Now).
	Now func() time.Time
	// NewID makes reference ids (default NewReferenceID). Ids it returns are
	// checked with ValidReferenceID.
	NewID func() (string, error)
}

// Writer renders reports and stores them; it implements the pipeline's
// ReportWriter and is safe for concurrent use when its Store is.
type Writer struct {
	store Store
	opts  WriterOptions
}

// NewWriter returns a Writer storing into store.
func NewWriter(store Store, opts WriterOptions) *Writer {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewID == nil {
		opts.NewID = NewReferenceID
	}
	return &Writer{store: store, opts: opts}
}

// Prefix is the key prefix the writer stores under, for Open.
func (w *Writer) Prefix() string { return w.opts.Prefix }

// WriteReport builds the report of res for req and stores it under a new
// reference id in req's tenant's prefix. at is the generation time shown in
// the report (the writer's clock when zero). Every write gets a new id, so a
// redelivered request stores a second report rather than overwriting one a
// client may already hold a link to.
func (w *Writer) WriteReport(ctx context.Context, req *schemas.Request, rs *engine.Ruleset, res *engine.Result, at time.Time) (*schemas.ReportDescriptor, error) {
	switch {
	case w.store == nil:
		return nil, errors.New("report: writer has no store")
	case req == nil:
		return nil, errors.New("report: no request to write a report for")
	case res == nil:
		return nil, fmt.Errorf("report: request %q: no result to report", req.RequestID)
	case req.TenantID == "":
		return nil, fmt.Errorf("report: request %q: tenant_id is empty", req.RequestID)
	}
	if at.IsZero() {
		at = w.opts.Now()
	}
	meta := fillMeta(Meta{
		RequestID:   req.RequestID,
		TenantID:    req.TenantID,
		GeneratedAt: at.UTC(),
	}, rs, res)
	if meta.Model == "" && req.Options.Model != nil {
		meta.Model = *req.Options.Model
	}

	id, err := w.opts.NewID()
	if err != nil {
		return nil, fmt.Errorf("report: request %q: %w", req.RequestID, err)
	}
	key, err := keyFor(w.opts.Prefix, req.TenantID, id)
	if err != nil {
		return nil, fmt.Errorf("report: request %q: %w", req.RequestID, err)
	}
	body, err := Build(meta, rs, res)
	if err != nil {
		return nil, err
	}
	fileName := FileName(meta)
	info, err := w.store.Put(ctx, key, body, MIMEType, encodeMeta(map[string]string{
		MetaTenantID:       meta.TenantID,
		MetaRequestID:      meta.RequestID,
		MetaRulesetID:      meta.RulesetID,
		MetaRulesetVersion: meta.RulesetVersion,
		MetaReferenceID:    id,
		MetaFileName:       fileName,
	}))
	if err != nil {
		return nil, fmt.Errorf("report: request %q, tenant %q: storing %s: %w", req.RequestID, req.TenantID, key, err)
	}
	return &schemas.ReportDescriptor{
		FileName:    fileName,
		URI:         info.URI,
		MIMEType:    MIMEType,
		ReferenceID: id,
	}, nil
}

func encodeMeta(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if v != "" {
			out[k] = url.PathEscape(v)
		}
	}
	return out
}

// Getter reads objects (an *objstore.Store).
type Getter interface {
	Get(ctx context.Context, key string) (io.ReadCloser, bucket.ObjectInfo, error)
}

// Stored describes a stored report, from its object's metadata.
type Stored struct {
	FileName       string
	ContentType    string
	Size           int64
	TenantID       string
	RequestID      string
	RulesetID      string
	RulesetVersion string
	ReferenceID    string
	Object         bucket.ObjectInfo
}

// Open finds the report referenceID of tenant under prefix and opens it for
// reading; the caller closes the body. The id is checked first (an error
// wrapping ErrInvalidReferenceID); a missing report, or one whose metadata
// names another tenant, gives an error wrapping bucket.ErrNotFound, so a
// caller cannot tell another tenant's report from no report. A report not
// at its key is looked for where reports were stored before tenants were
// escaped (bucket.UnescapedTenantKey); the tenant check applies there too.
func Open(ctx context.Context, g Getter, prefix, tenant, referenceID string) (io.ReadCloser, *Stored, error) {
	key, err := KeyFor(prefix, tenant, referenceID)
	if err != nil {
		return nil, nil, err
	}
	body, info, err := g.Get(ctx, key)
	if errors.Is(err, bucket.ErrNotFound) {
		if old, oldErr := bucket.UnescapedTenantKey(prefix, tenant, referenceID, ObjectName); oldErr == nil && old != key {
			body, info, err = g.Get(ctx, old)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("report: tenant %q, reference id %s: %w", tenant, referenceID, err)
	}
	meta := func(k string) string {
		v, err := url.PathUnescape(info.Metadata[k])
		if err != nil {
			return info.Metadata[k]
		}
		return v
	}
	if meta(MetaTenantID) != tenant {
		body.Close()
		return nil, nil, fmt.Errorf("report: tenant %q, reference id %s: %w (the object at %s names another tenant)",
			tenant, referenceID, bucket.ErrNotFound, info.URI)
	}
	stored := &Stored{
		FileName:       meta(MetaFileName),
		ContentType:    info.ContentType,
		Size:           info.Size,
		TenantID:       tenant,
		RequestID:      meta(MetaRequestID),
		RulesetID:      meta(MetaRulesetID),
		RulesetVersion: meta(MetaRulesetVersion),
		ReferenceID:    referenceID,
		Object:         info,
	}
	if !safeFileName(stored.FileName) {
		// Only this package writes the metadata, but the name goes into a
		// Content-Disposition header: never pass on one that needs quoting.
		stored.FileName = ObjectName
	}
	return body, stored, nil
}

// safeFileName reports whether name is a FileName-style name: [A-Za-z0-9._-],
// no "..", not starting with '.' or '-'.
func safeFileName(name string) bool {
	if name == "" || len(name) > 200 || strings.Contains(name, "..") || strings.IndexAny(name[:1], ".-") == 0 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
