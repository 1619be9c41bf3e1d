package api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"rulevalidator/engine"
	"rulevalidator/internal/s3test"
	"rulevalidator/report"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// storedReport writes a real report for tenant acme into a fresh bucket of
// the local S3 server and returns the source serving it, its descriptor and
// its bytes as stored.
func storedReport(t *testing.T) (StoredReports, *schemas.ReportDescriptor, []byte) {
	t.Helper()
	store := s3test.Store(t)
	writer := report.NewWriter(store, report.WriterOptions{})
	rs, err := engine.ParseRuleset([]byte(`{"id":"contract-check","version":"2","rules":[{"rule_id":"signed","type":"boolean","rule_text":"Is it signed?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	pass := true
	res := &engine.Result{
		RulesetID: "contract-check", RulesetVersion: "2", Model: "gemma-3-270m",
		Rules: []engine.Verdict{{RuleID: "signed", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: &pass, Rationale: "Signed on page 2."}},
	}
	req := &schemas.Request{RequestID: "req-dl-1", TenantID: "acme", RulesetRef: &schemas.RulesetRef{ID: "contract-check"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	desc, err := writer.WriteReport(ctx, req, rs, res, time.Now())
	if err != nil {
		t.Fatalf("WriteReport: %v", err)
	}
	key, err := report.KeyFor(writer.Prefix(), "acme", desc.ReferenceID)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := store.GetBytes(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return StoredReports{Store: store, Prefix: writer.Prefix()}, desc, stored
}

func TestDownloadReport(t *testing.T) {
	source, desc, stored := storedReport(t)
	id := newIdentity(t)
	_, ts := serve(t, Config{Verifier: id.verifier, Internal: internalVerifier(t), Reports: source})
	url := ts.URL + "/rule-validation-reports/" + desc.ReferenceID

	r := call(t, http.MethodGet, url, id.token(t, "acme"), nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET: %s", r)
	}
	if !bytes.Equal(r.body, stored) {
		t.Errorf("downloaded %d bytes, differing from the %d stored", len(r.body), len(stored))
	}
	for name, want := range map[string]string{
		"Content-Type":           report.MIMEType,
		"Content-Length":         strconv.Itoa(len(stored)),
		"Content-Disposition":    `attachment; filename="` + desc.FileName + `"; filename*=UTF-8''` + desc.FileName,
		"X-Content-Type-Options": "nosniff",
		"Cache-Control":          "private, no-store",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}

	head := call(t, http.MethodHead, url, id.token(t, "acme"), nil)
	if head.status != http.StatusOK || len(head.body) != 0 || head.header.Get("Content-Length") != strconv.Itoa(len(stored)) {
		t.Errorf("HEAD: %d, %d body bytes, Content-Length %q", head.status, len(head.body), head.header.Get("Content-Length"))
	}

	// The internal route serves the same report for an explicit tenant.
	internal := call(t, http.MethodGet, ts.URL+"/internal/rule-validation-reports/"+desc.ReferenceID+"?tenant_id=acme", internalToken, nil)
	if internal.status != http.StatusOK || !bytes.Equal(internal.body, stored) {
		t.Errorf("internal GET: %d, %d bytes", internal.status, len(internal.body))
	}
}

// Another tenant's report, a missing report and a malformed or traversing
// id get the very same answer: status, headers and body.
func TestReportNotFoundIsIndistinguishable(t *testing.T) {
	source, desc, _ := storedReport(t)
	id := newIdentity(t)
	_, ts := serve(t, Config{Verifier: id.verifier, Internal: internalVerifier(t), Reports: source})
	missingID, err := report.NewReferenceID()
	if err != nil {
		t.Fatal(err)
	}
	acme, globex := id.token(t, "acme"), id.token(t, "globex")
	reportURL := ts.URL + "/rule-validation-reports/"

	want := call(t, http.MethodGet, reportURL+missingID, acme, nil)
	if want.status != http.StatusNotFound || want.errorCode() != CodeNotFound {
		t.Fatalf("missing report: %s", want)
	}
	for _, tc := range []struct {
		name, url, token string
	}{
		{"another tenant's report", reportURL + desc.ReferenceID, globex},
		{"another tenant's report, internal route", ts.URL + "/internal/rule-validation-reports/" + desc.ReferenceID + "?tenant_id=globex", internalToken},
		{"missing, internal route", ts.URL + "/internal/rule-validation-reports/" + missingID + "?tenant_id=acme", internalToken},
		{"encoded traversal", reportURL + "..%2F..%2Facme%2F" + desc.ReferenceID, acme},
		{"encoded slash", reportURL + "acme%2F" + desc.ReferenceID, acme},
		{"encoded dots", reportURL + "%2e%2e", acme},
		{"upper case", reportURL + strings.ToUpper(desc.ReferenceID), acme},
		{"overlong", reportURL + desc.ReferenceID + strings.Repeat("a", 4000), acme},
		{"one short", reportURL + desc.ReferenceID[1:], acme},
		{"not base32", reportURL + strings.Repeat("1", 26), acme},
		{"NUL byte", reportURL + "%00" + desc.ReferenceID[1:], acme},
		{"file name as id", reportURL + "report.xlsx", acme},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := call(t, http.MethodGet, tc.url, tc.token, nil)
			if got.status != want.status || !bytes.Equal(got.body, want.body) {
				t.Errorf("got %s, want %s", got, want)
			}
			assertSameHeaders(t, got.header, want.header)
		})
	}
}

// assertSameHeaders compares every header but Date.
func assertSameHeaders(t *testing.T, got, want http.Header) {
	t.Helper()
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	for k := range keys {
		if k == "Date" {
			continue
		}
		if g, w := strings.Join(got.Values(k), ", "), strings.Join(want.Values(k), ", "); g != w {
			t.Errorf("header %s: %q, want %q", k, g, w)
		}
	}
}

// missingReports answers every lookup with ErrReportNotFound: the tests of
// credentials and parameters need no storage.
type missingReports struct{}

func (missingReports) Open(context.Context, string, string) (io.ReadCloser, ReportInfo, error) {
	return nil, ReportInfo{}, ErrReportNotFound
}

func TestReportCredentials(t *testing.T) {
	id := newIdentity(t)
	other := newIdentity(t) // a key the server does not trust
	_, ts := serve(t, Config{Verifier: id.verifier, Internal: internalVerifier(t), Reports: missingReports{}})
	ref, err := report.NewReferenceID()
	if err != nil {
		t.Fatal(err)
	}
	public := ts.URL + "/rule-validation-reports/" + ref
	internal := ts.URL + "/internal/rule-validation-reports/" + ref + "?tenant_id=acme"
	const bare, invalid = `Bearer realm="rulevalidator"`, `Bearer realm="rulevalidator", error="invalid_token"`
	for _, tc := range []struct {
		name      string
		url       string
		header    []string
		status    int
		challenge string
	}{
		{"public, no token", public, nil, 401, bare},
		{"public, garbage token", public, []string{"Authorization", "Bearer not.a.jwt"}, 401, invalid},
		{"public, basic auth", public, []string{"Authorization", "Basic YTpi"}, 401, invalid},
		{"public, untrusted key", public, []string{"Authorization", "Bearer " + other.token(t, "acme")}, 401, invalid},
		{"public, expired", public, []string{"Authorization", "Bearer " + id.token(t, "acme", func(c jwt.MapClaims) {
			c["exp"] = time.Now().Add(-time.Hour).Unix()
			c["iat"] = time.Now().Add(-2 * time.Hour).Unix()
		})}, 401, invalid},
		{"public, no tenant claim", public, []string{"Authorization", "Bearer " + id.token(t, "acme", func(c jwt.MapClaims) { delete(c, "tenant_id") })}, 401, invalid},
		{"public, internal token", public, []string{"Authorization", "Bearer " + internalToken}, 401, invalid},
		{"public, valid", public, []string{"Authorization", "Bearer " + id.token(t, "acme")}, 404, ""},
		{"internal, no token", internal, nil, 401, bare},
		{"internal, public JWT", internal, []string{"Authorization", "Bearer " + id.token(t, "acme")}, 401, invalid},
		{"internal, valid", internal, []string{"Authorization", "Bearer " + internalToken}, 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, http.MethodGet, tc.url, "", nil, tc.header...)
			if r.status != tc.status {
				t.Fatalf("got %s, want %d", r, tc.status)
			}
			if got := r.header.Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
			if tc.status == 401 && r.errorCode() != CodeUnauthorized {
				t.Errorf("error code %q, want %q", r.errorCode(), CodeUnauthorized)
			}
		})
	}
}

func TestContentDisposition(t *testing.T) {
	for name, want := range map[string]string{
		"contract-check_req-1.xlsx": `attachment; filename="contract-check_req-1.xlsx"; filename*=UTF-8''contract-check_req-1.xlsx`,
		"Prüfbericht März.xlsx":     `attachment; filename="Pr_fbericht M_rz.xlsx"; filename*=UTF-8''Pr%C3%BCfbericht%20M%C3%A4rz.xlsx`,
		`a"b\c;d%e.xlsx`:            `attachment; filename="c_d_e.xlsx"; filename*=UTF-8''c%3Bd%25e.xlsx`,
		"../../etc/passwd":          `attachment; filename="passwd"; filename*=UTF-8''passwd`,
		"evil\r\nSet-Cookie: x":     `attachment; filename="evilSet-Cookie: x"; filename*=UTF-8''evilSet-Cookie%3A%20x`,
		"":                          `attachment; filename="report.xlsx"; filename*=UTF-8''report.xlsx`,
		"...":                       `attachment; filename="report.xlsx"; filename*=UTF-8''report.xlsx`,
		"\xff\xfe.xlsx":             `attachment; filename="xlsx"; filename*=UTF-8''xlsx`,
	} {
		if got := contentDisposition(name); got != want {
			t.Errorf("contentDisposition(%q)\n got %s\nwant %s", name, got, want)
		}
	}
}
