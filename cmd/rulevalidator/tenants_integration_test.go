package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rulevalidator/schemas"
	tenantusage "rulevalidator/usage"
)

// writeTenantsFile writes the tenants file whole, by a rename, as the docs ask.
func writeTenantsFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestServeRateLimitsByTenantsFile: through the API of a serve on the real stack, a tenant
// limited to 10 requests a minute (a burst of 1) is answered 429 rate_limited with Retry-After
// past its first, nothing queued, while another tenant's requests go through and are judged.
// Editing the tenants file while serve runs changes the limits without a restart: the first
// tenant's is raised, the second is given one; a version that does not parse is logged, naming
// the key, and the previous one stays in force.
func TestServeRateLimitsByTenantsFile(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	tenantsFile := filepath.Join(t.TempDir(), "tenants.yaml")
	writeTenantsFile(t, tenantsFile, "default: {weight: 1}\ntenants:\n  trial: {weight: 1, max_in_flight: 1, requests_per_minute: 10}\n")
	p := e.startInProcess(t, append(e.serveArgs(), "--tenants-file", tenantsFile)...)
	public := "http://" + e.httpAddr
	waitForListener(t, public)

	example, err := os.ReadFile(exampleRequestJSON)
	if err != nil {
		t.Fatal(err)
	}
	submit := func(tenant, id string) (int, http.Header, []byte) {
		var submission map[string]any
		if err := json.Unmarshal(example, &submission); err != nil {
			t.Fatal(err)
		}
		delete(submission, "tenant_id") // the token's
		submission["request_id"] = id
		body, _ := json.Marshal(submission)
		return httpDo(t, http.MethodPost, public+"/v1/validations", e.token(t, tenant), body)
	}
	// checkLimited checks a 429 for tenant at perMinute.
	checkLimited := func(what string, code int, hdr http.Header, body []byte, tenant string, perMinute int) {
		t.Helper()
		var eb struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(body, &eb)
		if code != http.StatusTooManyRequests || eb.Error.Code != "rate_limited" {
			t.Fatalf("%s: %d %s, want 429 rate_limited", what, code, body)
		}
		wait := 60 / perMinute // a burst of 1 spent: a token every 60/perMinute seconds
		if secs, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || secs < 1 || secs > wait {
			t.Errorf("%s: Retry-After %q, want whole seconds from 1 to %d", what, hdr.Get("Retry-After"), wait)
		}
		if want := fmt.Sprintf("tenant %q is over its rate limit of %d requests per minute", tenant, perMinute); !strings.Contains(eb.Error.Message, want) {
			t.Errorf("%s: message %q, want it to say %q", what, eb.Error.Message, want)
		}
	}

	if code, _, body := submit("trial", "trial-1"); code != http.StatusAccepted {
		t.Fatalf("trial's first request: %d %s", code, body)
	}
	code, hdr, body := submit("trial", "trial-2")
	checkLimited("trial's second request", code, hdr, body, "trial", 10)
	for i := range 5 {
		if code, _, body := submit("acme", fmt.Sprint("acme-", i)); code != http.StatusAccepted {
			t.Fatalf("acme's request %d, beside trial's limit: %d %s", i+1, code, body)
		}
	}
	// The refused request was not queued; the admitted ones are judged.
	if code, _, body := httpDo(t, http.MethodGet, public+"/v1/validations/trial-2", e.token(t, "trial"), nil); code != http.StatusNotFound {
		t.Errorf("GET of the refused request: %d %s, want 404", code, body)
	}
	for _, job := range []struct{ tenant, id string }{{"trial", "trial-1"}, {"acme", "acme-4"}} {
		waitUntil(t, waitLimit, job.id+" to be judged", func() bool {
			code, _, body := httpDo(t, http.MethodGet, public+"/v1/validations/"+job.id, e.token(t, job.tenant), nil)
			return code == http.StatusOK && strings.Contains(string(body), `"status":"completed"`)
		})
	}

	// Raised for trial, given to acme, while serve runs. The reload is awaited in the log: a
	// 202 alone could be trial's token refilled at the old rate. The new rate applies from
	// trial's next request, its bucket keeping what it had: one request, then 300ms at a
	// hundred a second fill it with the burst's 20.
	reloads := strings.Count(p.log.String(), "tenants file reloaded")
	writeTenantsFile(t, tenantsFile, "default: {weight: 1}\ntenants:\n  trial: {requests_per_minute: 6000}\n  acme: {weight: 3, requests_per_minute: 12}\n")
	waitUntil(t, 30*time.Second, "the raised limits to be reloaded", func() bool {
		return strings.Count(p.log.String(), "tenants file reloaded") > reloads
	})
	submit("trial", "trial-after-reload")
	time.Sleep(300 * time.Millisecond)
	for i := range 20 {
		if code, _, body := submit("trial", fmt.Sprint("trial-burst-", i)); code != http.StatusAccepted {
			t.Fatalf("trial at 6000 a minute, request %d of a burst of 600: %d %s", i+1, code, body)
		}
	}
	if code, _, body := submit("acme", "acme-limited-1"); code != http.StatusAccepted {
		t.Fatalf("acme's first request at its new limit: %d %s", code, body)
	}
	code, hdr, body = submit("acme", "acme-limited-2")
	checkLimited("acme's second request at its new limit", code, hdr, body, "acme", 12)

	// A version that does not parse leaves the last good one in force, and says why.
	writeTenantsFile(t, tenantsFile, "tenants:\n  acme: {requests_per_minute: 6000, on_exceed: wait}\n")
	waitUntil(t, 30*time.Second, "the refused version to be logged", func() bool {
		return strings.Contains(p.log.String(), "tenants.acme.on_exceed: must be reject or delay (got wait)")
	})
	code, hdr, body = submit("acme", "acme-limited-3")
	checkLimited("acme after a version that does not parse", code, hdr, body, "acme", 12)
}

// TestServeTokenBudgetHoldsAcrossTwoReplicas: two serve replicas on the real stack share a
// requests topic of two partitions and a tenants file giving trial a budget of 3000 tokens an
// hour (on_exceed: reject). Of trial's requests, posted to both replicas' APIs, the first are
// judged and the later ones fail naming the quota (dead-lettered, reason quota_exceeded);
// what the replicas together admitted stays within the budget plus one request. Another
// tenant's requests, interleaved, are all judged.
func TestServeTokenBudgetHoldsAcrossTwoReplicas(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	tenantsFile := filepath.Join(t.TempDir(), "tenants.yaml")
	writeTenantsFile(t, tenantsFile, "tenants:\n  trial: {tokens_per_hour: 3000, on_exceed: reject}\n")
	deadLetters := e.watch(t, e.deadLetters, 1)
	secondHTTP := freeAddr(t)
	// Without the verdict cache, every request of the same example calls the model.
	args := append(e.serveArgs(), "--tenants-file", tenantsFile, "--verdict-cache=false")
	e.startInProcess(t, args...)
	e.startInProcess(t, append(args, "--http-addr", secondHTTP, "--ops-addr", freeAddr(t))...)
	replicas := []string{"http://" + e.httpAddr, "http://" + secondHTTP}
	for _, base := range replicas {
		waitForListener(t, base)
	}

	example, err := os.ReadFile(exampleRequestJSON)
	if err != nil {
		t.Fatal(err)
	}
	var trial, acme []string
	for i := range 8 {
		for _, tenant := range []string{"trial", "acme"} {
			if tenant == "acme" && i >= 4 {
				continue
			}
			var submission map[string]any
			if err := json.Unmarshal(example, &submission); err != nil {
				t.Fatal(err)
			}
			delete(submission, "tenant_id")
			id := fmt.Sprintf("%s-%d", tenant, i)
			submission["request_id"] = id
			body, _ := json.Marshal(submission)
			if code, _, body := httpDo(t, http.MethodPost, replicas[i%2]+"/v1/validations", e.token(t, tenant), body); code != http.StatusAccepted {
				t.Fatalf("POST %s: %d %s", id, code, body)
			}
			if tenant == "trial" {
				trial = append(trial, id)
			} else {
				acme = append(acme, id)
			}
		}
	}

	// final waits for a request's final status and returns its job body.
	final := func(tenant, id string) string {
		var job string
		waitUntil(t, waitLimit, id+" to end", func() bool {
			code, _, body := httpDo(t, http.MethodGet, replicas[0]+"/v1/validations/"+id, e.token(t, tenant), nil)
			job = string(body)
			return code == http.StatusOK && (strings.Contains(job, `"status":"completed"`) || strings.Contains(job, `"status":"failed"`))
		})
		return job
	}
	judged, refused := 0, 0
	for _, id := range trial {
		job := final("trial", id)
		switch {
		case strings.Contains(job, `"status":"completed"`):
			judged++
		case strings.Contains(job, "quota_exceeded") && strings.Contains(job, "tokens_per_hour is 3000"):
			refused++
		default:
			t.Errorf("%s ended neither judged nor refused by its quota: %s", id, job)
		}
	}
	for _, id := range acme {
		if job := final("acme", id); !strings.Contains(job, `"status":"completed"`) {
			t.Errorf("acme's %s, beside trial's budget: %s", id, job)
		}
	}
	if judged == 0 || refused == 0 {
		t.Fatalf("trial: %d judged, %d refused; want its first requests judged and its later ones refused", judged, refused)
	}
	waitUntil(t, waitLimit, "the refused requests to be dead-lettered", func() bool {
		n := 0
		for _, m := range deadLetters.snapshot() {
			if d := e.deadLetter(t, m); d.Reason == schemas.ReasonQuotaExceeded {
				n++
			}
		}
		return n == refused
	})

	// What the replicas admitted: within the budget plus one request.
	now := time.Now().UTC()
	q := "?from=" + now.Add(-2*time.Hour).Format(time.RFC3339) + "&to=" + now.Add(time.Hour).Format(time.RFC3339)
	code, _, body := httpDo(t, http.MethodGet, replicas[1]+"/v1/usage"+q, e.token(t, "trial"), nil)
	var report tenantusage.Report
	if code != http.StatusOK || json.Unmarshal(body, &report) != nil {
		t.Fatalf("GET /v1/usage: %d %s", code, body)
	}
	perRequest := report.Total.Tokens() / report.Total.Requests
	if report.Total.Requests != int64(judged) || report.Total.Tokens() >= 3000+perRequest {
		t.Errorf("trial's usage %+v: want %d requests judged, under %d tokens (the budget plus one request)", report.Total, judged, 3000+perRequest)
	}
	t.Logf("trial: %d judged (%d tokens, %d a request), %d refused by its budget of 3000", judged, report.Total.Tokens(), perRequest, refused)
}

// TestServeDelaysRequestsPastATokenBudget: a tenant with a budget of 1000 tokens an hour and
// on_exceed: delay, on the real stack, gets its first request judged (1200 tokens) and its
// later ones held: their status says delayed, until the hour's end and why, none is
// dead-lettered, and another tenant's requests, posted after them, are all judged
// meanwhile. Raising the budget in the tenants file lets the held ones through within
// --delay-recheck, without a restart.
func TestServeDelaysRequestsPastATokenBudget(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	tenantsFile := filepath.Join(t.TempDir(), "tenants.yaml")
	writeTenantsFile(t, tenantsFile, "tenants:\n  steady: {tokens_per_hour: 1000, on_exceed: delay}\n")
	deadLetters := e.watch(t, e.deadLetters, 1)
	e.startInProcess(t, append(e.serveArgs(), "--tenants-file", tenantsFile, "--verdict-cache=false", "--delay-recheck", "1s")...)
	public := "http://" + e.httpAddr
	waitForListener(t, public)
	example, err := os.ReadFile(exampleRequestJSON)
	if err != nil {
		t.Fatal(err)
	}
	submit := func(tenant, id string) {
		var submission map[string]any
		if err := json.Unmarshal(example, &submission); err != nil {
			t.Fatal(err)
		}
		delete(submission, "tenant_id")
		submission["request_id"] = id
		body, _ := json.Marshal(submission)
		if code, _, body := httpDo(t, http.MethodPost, public+"/v1/validations", e.token(t, tenant), body); code != http.StatusAccepted {
			t.Fatalf("POST %s: %d %s", id, code, body)
		}
	}
	status := func(tenant, id string) (string, []byte) {
		code, _, body := httpDo(t, http.MethodGet, public+"/v1/validations/"+id, e.token(t, tenant), nil)
		var job struct{ Status string }
		if code != http.StatusOK || json.Unmarshal(body, &job) != nil {
			return "", body
		}
		return job.Status, body
	}
	waitFor := func(tenant, id, want string) []byte {
		var body []byte
		waitUntil(t, waitLimit, id+" to be "+want, func() bool {
			var got string
			got, body = status(tenant, id)
			return got == want
		})
		return body
	}

	submit("steady", "steady-0")
	waitFor("steady", "steady-0", "completed")
	for i := 1; i <= 3; i++ {
		submit("steady", fmt.Sprint("steady-", i))
	}
	for i := range 4 {
		submit("acme", fmt.Sprint("acme-", i))
	}
	windowEnd := time.Now().UTC().Truncate(time.Hour).Add(time.Hour).Format(time.RFC3339)
	for i := 1; i <= 3; i++ {
		body := waitFor("steady", fmt.Sprint("steady-", i), "delayed")
		var job struct {
			Delay struct{ Until, Reason string }
		}
		if err := json.Unmarshal(body, &job); err != nil || !strings.HasPrefix(job.Delay.Until, windowEnd[:13]) ||
			!strings.Contains(job.Delay.Reason, "its budget tokens_per_hour is 1000") {
			t.Errorf("steady-%d's status should say until when (%s) and why: %s", i, windowEnd, body)
		}
	}
	for i := range 4 {
		waitFor("acme", fmt.Sprint("acme-", i), "completed")
	}
	if got, body := status("steady", "steady-3"); got != "delayed" {
		t.Fatalf("steady-3 after the other tenant's requests: %s", body)
	}

	writeTenantsFile(t, tenantsFile, "tenants:\n  steady: {tokens_per_hour: 100000, on_exceed: delay}\n")
	for i := 1; i <= 3; i++ {
		waitFor("steady", fmt.Sprint("steady-", i), "completed")
	}
	if n := len(deadLetters.snapshot()); n != 0 {
		t.Errorf("%d dead letters, want none: delayed requests wait", n)
	}
}
