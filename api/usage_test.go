package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"rulevalidator/internal/s3test"
	"rulevalidator/usage"
)

var _ UsageSource = (*usage.Store)(nil)

// TestUsageServesTheTokensTenantOnly: GET /v1/usage answers the token's tenant's hourly rows
// and total, never another tenant's, and refuses a missing, malformed, reversed or too long
// range naming the limit.
func TestUsageServesTheTokensTenantOnly(t *testing.T) {
	store, err := usage.New(s3test.Store(t), usage.Options{Prices: usage.PriceTable{"m": {Input: 1, Output: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Date(2026, 3, 4, 10, 15, 0, 0, time.UTC)
	for i, rec := range []struct {
		tenant string
		at     time.Time
	}{{"acme", at}, {"acme", at.Add(time.Minute)}, {"acme", at.Add(2 * time.Hour)}, {"globex", at}} {
		c := usage.Counts{InputTokens: 1000, OutputTokens: 100, ModelCalls: 2, Requests: 1}
		if err := store.Record(ctx, rec.tenant, "req-"+string(rune('a'+i)), "m", rec.at, c); err != nil {
			t.Fatal(err)
		}
	}
	id := newIdentity(t)
	_, ts := serve(t, Config{Verifier: id.verifier, Usage: store})
	get := func(tenant, query string) response {
		return call(t, http.MethodGet, ts.URL+"/v1/usage?"+query, id.token(t, tenant), nil)
	}
	rng := func(from, to time.Time) string {
		return url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}}.Encode()
	}

	r := get("acme", rng(at.Add(-time.Hour), at.Add(24*time.Hour)))
	if r.status != http.StatusOK {
		t.Fatalf("acme's usage: %s", r)
	}
	var rep usage.Report
	if err := json.Unmarshal(r.body, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Hours) != 2 || rep.Hours[0].Requests != 2 || rep.Hours[1].Requests != 1 || rep.Total.Requests != 3 ||
		rep.Total.InputTokens != 3000 || rep.Total.Cost == nil || *rep.Total.Cost != 0.0036 {
		t.Errorf("acme's usage = %s, want two hours, three requests costing 0.0036", r.body)
	}
	for _, want := range []string{`"hour":"2026-03-04T10:00:00Z"`, `"input_tokens":2000`, `"model_calls":4`, `"cost":`} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("the body should hold %s: %s", want, r.body)
		}
	}
	if r := get("globex", rng(at.Add(-time.Hour), at.Add(24*time.Hour))); r.status != http.StatusOK || !strings.Contains(string(r.body), `"requests":1,`) || strings.Contains(string(r.body), "12:00") {
		t.Errorf("globex sees its own usage only: %s", r)
	}
	if r := get("initech", rng(at.Add(-time.Hour), at.Add(24*time.Hour))); r.status != http.StatusOK || !strings.Contains(string(r.body), `"hours":[]`) {
		t.Errorf("a tenant without usage: %s", r)
	}

	for _, bad := range []struct{ query, want string }{
		{"", "from is required"},
		{"from=yesterday&to=2026-03-04T00:00:00Z", "not an RFC 3339 time"},
		{rng(at, at.Add(-time.Hour)), "must be after from"},
		{rng(at, at.Add(32*24*time.Hour)), "over the limit of 31 days"},
	} {
		r := get("acme", bad.query)
		if r.status != http.StatusBadRequest || r.errorCode() != CodeInvalidRequest || !strings.Contains(r.errorMessage(), bad.want) {
			t.Errorf("GET /v1/usage?%s = %s, want 400 invalid_request naming %q", bad.query, r, bad.want)
		}
	}
	if r := call(t, http.MethodGet, ts.URL+"/v1/usage?"+rng(at, at.Add(time.Hour)), "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("without a token: %s", r)
	}
}
