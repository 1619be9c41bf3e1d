package report

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"rulevalidator/bucket"
	"rulevalidator/engine"
	"rulevalidator/internal/s3test"
	"rulevalidator/objstore"
	"rulevalidator/schemas"
)

func TestNewReferenceID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id, err := NewReferenceID()
		if err != nil {
			t.Fatal(err)
		}
		if !ValidReferenceID(id) {
			t.Fatalf("NewReferenceID gave %q, which ValidReferenceID refuses", id)
		}
		if seen[id] {
			t.Fatalf("NewReferenceID repeated %q", id)
		}
		seen[id] = true
	}
}

func TestValidReferenceID(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want bool
	}{
		{"canonical", "mfrggzdfmztwq2lknnwg23tpoa", true},
		{"all zero bits", "aaaaaaaaaaaaaaaaaaaaaaaaaa", true},
		{"empty", "", false},
		{"upper case", "MFRGGZDFMZTWQ2LKNNWG23TPOA", false},
		{"padded", "mfrggzdfmztwq2lknnwg23tpoa======", false},
		{"one short", "mfrggzdfmztwq2lknnwg23tpo", false},
		{"one long", "mfrggzdfmztwq2lknnwg23tpoaa", false},
		{"not base32 (0, 1, 8, 9)", "mfrggzdfmztwq2lknnwg23tp01", false},
		{"hex", "0123456789abcdef0123456789", false},
		// The last character holds 3 data bits and 2 zero bits; stray bits mean
		// the id was not made by NewReferenceID.
		{"non-canonical last character", "mfrggzdfmztwq2lknnwg23tpob", false},
		{"path traversal", "../../../../other-tenant/x", false},
		{"slash", "mfrggzdfmztwq2lknnwg23tp/a", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidReferenceID(tt.id); got != tt.want {
				t.Errorf("ValidReferenceID(%q) = %v, want %v", tt.id, got, tt.want)
			}
		})
	}
}

func TestKeyFor(t *testing.T) {
	const id = "mfrggzdfmztwq2lknnwg23tpoa"
	tests := []struct {
		name, prefix, tenant, id string
		want                     string
		wantErr                  error // nil: any error
		ok                       bool
	}{
		{name: "plain", prefix: "reports", tenant: "acme", id: id, want: "reports/acme/" + id + "/report.xlsx", ok: true},
		{name: "nested prefix", prefix: "reports/v1/", tenant: "acme", id: id, want: "reports/v1/acme/" + id + "/report.xlsx", ok: true},
		{name: "bad id", prefix: "reports", tenant: "acme", id: "../x", wantErr: ErrInvalidReferenceID},
		{name: "tenant escaped", prefix: "reports", tenant: "acme corp", id: id, want: "reports/acme%20corp/" + id + "/report.xlsx", ok: true},
		{name: "tenant with a slash stays in its place", prefix: "reports", tenant: "acme/../other", id: id, want: "reports/acme%2F..%2Fother/" + id + "/report.xlsx", ok: true},
		{name: "tenant dot-dot", prefix: "reports", tenant: "..", id: id, want: "reports/%2E./" + id + "/report.xlsx", ok: true},
		{name: "prefix with dot-dot", prefix: "reports/../jobs", tenant: "acme", id: id},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := KeyFor(tt.prefix, tt.tenant, tt.id)
			if tt.ok {
				if err != nil || got != tt.want {
					t.Errorf("KeyFor = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("KeyFor = %q, want an error", got)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("KeyFor error %v does not wrap %v", err, tt.wantErr)
			}
		})
	}
}

// recordingStore is a scripted Store: it records Put calls and answers with
// err, or with an ObjectInfo as objstore would.
type recordingStore struct {
	puts []string
	err  error
}

func (s *recordingStore) Put(_ context.Context, key string, body []byte, contentType string, meta map[string]string) (bucket.ObjectInfo, error) {
	s.puts = append(s.puts, key)
	if s.err != nil {
		return bucket.ObjectInfo{}, s.err
	}
	return bucket.ObjectInfo{Bucket: "b", Key: key, URI: "s3://b/" + key, Size: int64(len(body)), ContentType: contentType, Metadata: meta}, nil
}

func testRequest() *schemas.Request {
	model := "gemma-3-270m"
	return &schemas.Request{RequestID: "req 42/ü", TenantID: "acme", Options: schemas.Options{Model: &model}}
}

func TestWriteReportRefusesBadInput(t *testing.T) {
	badID := func() (string, error) { return "../../other-tenant/x", nil }
	failingID := func() (string, error) { return "", errors.New("entropy ran out") }
	tests := []struct {
		name  string
		store Store
		req   *schemas.Request
		res   *engine.Result
		newID func() (string, error)
		want  string
	}{
		{"an id that is not a reference id", &recordingStore{}, testRequest(), mixedResult(), badID, "invalid report reference id"},
		{"an id source that fails", &recordingStore{}, testRequest(), mixedResult(), failingID, "entropy ran out"},
		{"no tenant", &recordingStore{}, &schemas.Request{RequestID: "r"}, mixedResult(), nil, "tenant_id is empty"},
		{"no result", &recordingStore{}, testRequest(), nil, nil, "no result"},
		{"no request", &recordingStore{}, nil, mixedResult(), nil, "no request"},
		{"no store", nil, testRequest(), mixedResult(), nil, "no store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWriter(tt.store, WriterOptions{NewID: tt.newID})
			desc, err := w.WriteReport(context.Background(), tt.req, nil, tt.res, generatedAt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("WriteReport = %+v, %v; want an error mentioning %q", desc, err, tt.want)
			}
			if rec, ok := tt.store.(*recordingStore); ok && len(rec.puts) > 0 {
				t.Errorf("stored %q despite the error", rec.puts)
			}
		})
	}
}

func TestWriteReportDescriptor(t *testing.T) {
	store := &recordingStore{}
	w := NewWriter(store, WriterOptions{NewID: func() (string, error) { return "mfrggzdfmztwq2lknnwg23tpoa", nil }})
	desc, err := w.WriteReport(context.Background(), testRequest(), mustRuleset(t, mixedRuleset), mixedResult(), generatedAt)
	if err != nil {
		t.Fatal(err)
	}
	want := schemas.ReportDescriptor{
		FileName:    "validation-report-loan-policy-req-42.xlsx",
		URI:         "s3://b/reports/acme/mfrggzdfmztwq2lknnwg23tpoa/report.xlsx",
		MIMEType:    MIMEType,
		ReferenceID: "mfrggzdfmztwq2lknnwg23tpoa",
	}
	if *desc != want {
		t.Errorf("descriptor = %+v, want %+v", *desc, want)
	}
}

func TestWriteReportPutFailure(t *testing.T) {
	store := &recordingStore{err: errors.New("AccessDenied")}
	w := NewWriter(store, WriterOptions{})
	_, err := w.WriteReport(context.Background(), testRequest(), nil, mixedResult(), generatedAt)
	if err == nil || !strings.Contains(err.Error(), "AccessDenied") || !strings.Contains(err.Error(), "reports/acme/") {
		t.Fatalf("WriteReport = %v, want the store's error with the key", err)
	}
}

// The report is written to a real S3 server and found again by (tenant,
// reference id) alone, as the download endpoint will find it.
func TestWriteReportToS3(t *testing.T) {
	store := s3test.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	w := NewWriter(store, WriterOptions{Prefix: "reports/v1"})
	req := testRequest()
	desc, err := w.WriteReport(ctx, req, mustRuleset(t, mixedRuleset), mixedResult(), generatedAt)
	if err != nil {
		t.Fatalf("WriteReport: %v", err)
	}
	if !ValidReferenceID(desc.ReferenceID) {
		t.Errorf("reference id %q is not valid", desc.ReferenceID)
	}
	wantURI := "s3://" + store.Bucket() + "/reports/v1/acme/" + desc.ReferenceID + "/report.xlsx"
	if desc.URI != wantURI || desc.MIMEType != MIMEType || desc.FileName != "validation-report-loan-policy-req-42.xlsx" {
		t.Errorf("descriptor = %+v, want uri %s", *desc, wantURI)
	}

	body, stored, err := Open(ctx, store, w.Prefix(), "acme", desc.ReferenceID)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	data, err := io.ReadAll(body)
	body.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := Stored{
		FileName:       desc.FileName,
		ContentType:    MIMEType,
		Size:           int64(len(data)),
		TenantID:       "acme",
		RequestID:      "req 42/ü", // percent-encoded in the metadata, decoded by Open
		RulesetID:      "loan-policy",
		RulesetVersion: "3",
		ReferenceID:    desc.ReferenceID,
	}
	got := *stored
	got.Object = bucket.ObjectInfo{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stored = %+v\nwant %+v", got, want)
	}
	if stored.Object.Metadata[MetaRequestID] != "req%2042%2F%C3%BC" {
		t.Errorf("raw request-id metadata = %q", stored.Object.Metadata[MetaRequestID])
	}
	f, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("stored report does not open: %v", err)
	}
	defer f.Close()
	if got := value(t, f, SheetReport, 1, TitleRow); got != "Validation report: ruleset loan-policy version 3" {
		t.Errorf("stored report title = %q", got)
	}

	// Another tenant, or an id nobody was given, finds nothing.
	other, err := NewReferenceID()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ tenant, id string }{{"globex", desc.ReferenceID}, {"acme", other}} {
		if _, _, err := Open(ctx, store, w.Prefix(), tt.tenant, tt.id); !errors.Is(err, bucket.ErrNotFound) {
			t.Errorf("Open(%s, %s) = %v, want not found", tt.tenant, tt.id, err)
		}
	}
	if _, _, err := Open(ctx, store, w.Prefix(), "acme", strings.ToUpper(desc.ReferenceID)); !errors.Is(err, ErrInvalidReferenceID) {
		t.Errorf("Open with an upper-case id = %v, want ErrInvalidReferenceID", err)
	}
}

// Open also checks the tenant written in the metadata, so an object copied
// or misfiled under another tenant's prefix is not served to that tenant.
func TestOpenChecksTenantMetadata(t *testing.T) {
	store := s3test.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := NewReferenceID()
	if err != nil {
		t.Fatal(err)
	}
	key, err := KeyFor(DefaultPrefix, "globex", id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, key, []byte("x"), MIMEType, map[string]string{MetaTenantID: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(ctx, store, DefaultPrefix, "globex", id); !errors.Is(err, bucket.ErrNotFound) {
		t.Errorf("Open of an object naming another tenant = %v, want not found", err)
	}
}

// A report stored before tenants were escaped in keys, under the tenant as
// given, is still found; the tenant check keeps another tenant whose escaped
// key it happens to be from reading it.
func TestOpenFindsReportsUnderUnescapedKeys(t *testing.T) {
	store := s3test.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := NewReferenceID()
	if err != nil {
		t.Fatal(err)
	}
	const tenant = "acme corp"
	old, err := bucket.UnescapedTenantKey(DefaultPrefix, tenant, id, ObjectName)
	if err != nil {
		t.Fatal(err)
	}
	if current, _ := KeyFor(DefaultPrefix, tenant, id); current == old {
		t.Fatalf("the tenant %q has the same key in both schemes: %s", tenant, old)
	}
	if _, err := store.Put(ctx, old, []byte("xlsx"), MIMEType, encodeMeta(map[string]string{MetaTenantID: tenant, MetaFileName: "r.xlsx"})); err != nil {
		t.Fatal(err)
	}
	body, stored, err := Open(ctx, store, DefaultPrefix, tenant, id)
	if err != nil {
		t.Fatalf("Open of a report under its unescaped key: %v", err)
	}
	body.Close()
	if stored.TenantID != tenant || stored.FileName != "r.xlsx" {
		t.Errorf("stored %+v", stored)
	}
	// The unescaped key of "acme%20corp" is the escaped key of acme corp:
	// acme corp's report there names acme corp, so it is not found.
	id2, err := NewReferenceID()
	if err != nil {
		t.Fatal(err)
	}
	current, err := KeyFor(DefaultPrefix, tenant, id2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, current, []byte("xlsx"), MIMEType, encodeMeta(map[string]string{MetaTenantID: tenant})); err != nil {
		t.Fatal(err)
	}
	if other, _ := bucket.UnescapedTenantKey(DefaultPrefix, "acme%20corp", id2, ObjectName); other != current {
		t.Fatalf("unescaped key %s, want %s", other, current)
	}
	if _, _, err := Open(ctx, store, DefaultPrefix, "acme%20corp", id2); !errors.Is(err, bucket.ErrNotFound) {
		t.Errorf("Open by the tenant whose unescaped key it is = %v, want not found", err)
	}
}

func TestWriteReportToMissingBucket(t *testing.T) {
	endpoint, accessKey, secretKey := s3test.Endpoint(t)
	store, err := objstore.New(objstore.Config{
		Endpoint: endpoint, AccessKey: accessKey, SecretKey: secretKey,
		Bucket: s3test.UniqueBucket(t), // never created
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	desc, err := NewWriter(store, WriterOptions{}).WriteReport(ctx, testRequest(), nil, mixedResult(), generatedAt)
	if err == nil {
		t.Fatalf("WriteReport into a missing bucket = %+v, want an error", desc)
	}
	var opErr *objstore.OpError
	if !errors.As(err, &opErr) || opErr.Op != "put" {
		t.Errorf("error %v is not the store's put error", err)
	}
	if objstore.Temporary(err) {
		t.Errorf("a missing bucket counts as temporary: %v", err)
	}
	t.Logf("error: %v", err)
}
