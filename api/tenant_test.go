package api

import (
	"net/http"
	"strings"
	"testing"

	"rulevalidator/report"
)

// TestInternalTenantParameter: the internal routes that read, report
// downloads and execution status, take the tenant_id query parameter the
// same way.
func TestInternalTenantParameter(t *testing.T) {
	id := newIdentity(t)
	_, ts := serveWithPipeline(t, Config{Verifier: id.verifier, Internal: internalVerifier(t), Reports: missingReports{}})
	ref, err := report.NewReferenceID()
	if err != nil {
		t.Fatal(err)
	}
	for _, route := range []string{"/internal/rule-validation-reports/" + ref, "/internal/execute-async/job-1"} {
		for query, want := range map[string]string{
			"":                                       "give the tenant_id query parameter exactly once (got it 0 times)",
			"?tenant_id=a&tenant_id=b":               "exactly once (got it 2 times)",
			"?tenant_id=":                            "tenant_id is empty",
			"?tenant_id=..%2Fglobex":                 `tenant_id holds "/", "\" or ".."`,
			"?tenant_id=acme%0A":                     "tenant_id holds control characters",
			"?tenant_id=" + strings.Repeat("t", 257): "tenant_id is 257 bytes, over the limit of 256",
		} {
			r := call(t, http.MethodGet, ts.URL+route+query, internalToken, nil)
			if r.status != http.StatusBadRequest || r.errorCode() != CodeInvalidRequest || !strings.Contains(r.errorMessage(), want) {
				t.Errorf("%s%s: got %s, want 400 saying %s", route, query, r, want)
			}
		}
		if r := call(t, http.MethodGet, ts.URL+route+"?tenant_id=acme", internalToken, nil); r.status != http.StatusNotFound {
			t.Errorf("%s for a tenant with nothing there: %s, want 404", route, r)
		}
	}
}
