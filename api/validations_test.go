package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rulevalidator/auth"
	"rulevalidator/callback"
	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
	"rulevalidator/internal/logbuf"
	"rulevalidator/judging"
	"rulevalidator/metrics"
	"rulevalidator/objstore"
	"rulevalidator/registry"
	"rulevalidator/schemas"
)

func TestSubmitPollResult(t *testing.T) {
	id := newIdentity(t)
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier})
	token := id.token(t, "acme")

	r := call(t, http.MethodPost, ts.URL+"/v1/validations", token, validationBody("req-42"))
	if r.status != http.StatusAccepted {
		t.Fatalf("POST: %s", r)
	}
	accepted := decodeJob(t, r)
	if accepted.RequestID != "req-42" || accepted.StatusURL != "/v1/validations/req-42" || accepted.SubmittedAt == nil {
		t.Errorf("202 body %s", r.body)
	}
	if accepted.Status != "pending" && accepted.Status != "running" {
		t.Errorf("status %q right after submission", accepted.Status)
	}
	if loc := r.header.Get("Location"); loc != "/v1/validations/req-42" {
		t.Errorf("Location %q", loc)
	}

	done := pollDone(t, ts.URL+accepted.StatusURL, token)
	if done.Status != "completed" || done.Result == nil {
		t.Fatalf("final job %+v", done)
	}
	s := done.Result.Summary
	if s.RequestID != "req-42" || s.TenantID != "acme" || s.Status != schemas.StatusCompleted || s.Counts.Rules != 2 || s.Counts.Passed != 2 {
		t.Errorf("summary %+v", s)
	}
	if len(done.Result.Verdicts) != 2 || done.Result.Verdicts[0].RuleID != "signed" || done.Result.Verdicts[1].RuleID != "dated" {
		t.Errorf("verdicts %+v", done.Result.Verdicts)
	}

	seen := runner.requests()
	if len(seen) != 1 {
		t.Fatalf("%d requests submitted, want 1", len(seen))
	}
	if seen[0].TenantID != "acme" || seen[0].SubmittedAt.IsZero() || seen[0].SubmittedAt.Format(schemas.TimeLayout) != *accepted.SubmittedAt {
		t.Errorf("submitted tenant %q, submitted_at %v (202 said %s)", seen[0].TenantID, seen[0].SubmittedAt, *accepted.SubmittedAt)
	}
}

// TestSubmitCarriesTraceContext: a well-formed W3C traceparent (with its
// tracestate) of the HTTP request goes along with the request; a malformed
// one, or an overlong tracestate, does not.
func TestSubmitCarriesTraceContext(t *testing.T) {
	id := newIdentity(t)
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier})
	token := id.token(t, "acme")
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for i, tc := range []struct {
		headers []string
		want    map[string]string
	}{
		{[]string{"traceparent", tp, "tracestate", "vendor=1"}, map[string]string{"traceparent": tp, "tracestate": "vendor=1"}},
		{[]string{"traceparent", tp, "tracestate", strings.Repeat("x", 513)}, map[string]string{"traceparent": tp}},
		{[]string{"traceparent", "00-not-a-trace-01", "tracestate", "vendor=1"}, map[string]string{}},
		{nil, map[string]string{}},
	} {
		r := call(t, http.MethodPost, ts.URL+"/v1/validations", token, validationBody(fmt.Sprint("req-tc-", i)), tc.headers...)
		if r.status != http.StatusAccepted {
			t.Fatalf("POST %d: %s", i, r)
		}
		if got := runner.trace(i); !maps.Equal(got, tc.want) {
			t.Errorf("headers %q: the request carries %v, want %v", tc.headers, got, tc.want)
		}
	}
}

func TestSubmitGeneratesRequestID(t *testing.T) {
	id := newIdentity(t)
	_, ts := serveWithPipeline(t, Config{Verifier: id.verifier})
	r := call(t, http.MethodPost, ts.URL+"/v1/validations", id.token(t, "acme"), validationBody(""))
	if r.status != http.StatusAccepted {
		t.Fatalf("POST: %s", r)
	}
	j := decodeJob(t, r)
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(j.RequestID) {
		t.Errorf("generated request id %q is not a UUID v4", j.RequestID)
	}
	if j.StatusURL != "/v1/validations/"+j.RequestID {
		t.Errorf("status_url %q", j.StatusURL)
	}
}

func TestSubmitIsIdempotent(t *testing.T) {
	id := newIdentity(t)
	gate := make(chan struct{})
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier}, func(p *standIn) { p.gate = gate })
	acme := id.token(t, "acme")
	url := ts.URL + "/v1/validations"

	first := call(t, http.MethodPost, url, acme, validationBody("req-7"))
	again := call(t, http.MethodPost, url, acme, validationBody("req-7"))
	if first.status != http.StatusAccepted || again.status != http.StatusAccepted {
		t.Fatalf("POST twice: %s / %s", first, again)
	}
	if a, b := decodeJob(t, first), decodeJob(t, again); *a.SubmittedAt != *b.SubmittedAt {
		t.Errorf("the second POST made a new job: submitted_at %s then %s", *a.SubmittedAt, *b.SubmittedAt)
	}
	// Another tenant's request id of the same name is another job.
	globex := id.token(t, "globex")
	if r := call(t, http.MethodPost, url, globex, validationBody("req-7")); r.status != http.StatusAccepted {
		t.Fatalf("POST by another tenant: %s", r)
	}
	close(gate)
	pollDone(t, ts.URL+"/v1/validations/req-7", acme)
	pollDone(t, ts.URL+"/v1/validations/req-7", globex)

	late := call(t, http.MethodPost, url, acme, validationBody("req-7"))
	if late.status != http.StatusAccepted || decodeJob(t, late).Status != "completed" {
		t.Errorf("POST after completion: %s, want 202 with the completed job", late)
	}
	if n := len(runner.requests()); n != 2 {
		t.Errorf("%d requests submitted, want 2 (once per tenant)", n)
	}
}

func TestSubmitTenantFromToken(t *testing.T) {
	id := newIdentity(t)
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier})
	url := ts.URL + "/v1/validations"

	r := call(t, http.MethodPost, url, id.token(t, "acme"), validationBody("req-1", `"tenant_id":"globex"`))
	if r.status != http.StatusForbidden || r.errorCode() != CodeForbidden || !strings.Contains(r.errorMessage(), `tenant_id "globex" is not the tenant of your token`) {
		t.Errorf("body tenant of another tenant: %s", r)
	}
	r = call(t, http.MethodPost, url, id.token(t, "acme"), validationBody("req-2", `"tenant_id":"acme"`))
	if r.status != http.StatusAccepted {
		t.Errorf("body tenant equal to the token's: %s", r)
	}
	pollDone(t, ts.URL+"/v1/validations/req-2", id.token(t, "acme"))
	for _, req := range runner.requests() {
		if req.TenantID != "acme" {
			t.Errorf("submitted tenant %q", req.TenantID)
		}
	}

	// GET is tenant-scoped: another tenant's job is answered as a missing one.
	other := call(t, http.MethodGet, ts.URL+"/v1/validations/req-2", id.token(t, "globex"), nil)
	missing := call(t, http.MethodGet, ts.URL+"/v1/validations/req-none", id.token(t, "globex"), nil)
	if other.status != http.StatusNotFound || !bytes.Equal(other.body, missing.body) {
		t.Errorf("another tenant's job: %s; missing job: %s", other, missing)
	}
	assertSameHeaders(t, other.header, missing.header)
}

func TestSubmitInvalid(t *testing.T) {
	id := newIdentity(t)
	notifier, err := callback.New(callback.Config{Secret: bytes.Repeat([]byte("k"), 32), AllowHosts: []string{"hooks.example.com"}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	_, withCallbacks := serveWithPipeline(t, Config{Verifier: id.verifier, Callbacks: notifier})
	_, without := serveWithPipeline(t, Config{Verifier: id.verifier})
	for _, tc := range []struct {
		name    string
		server  *httptest.Server
		body    string
		message string
		details []string
	}{
		{"not JSON", withCallbacks, `{"request_id":`, "not a request in JSON form: invalid JSON", nil},
		{"YAML", withCallbacks, "request_id: r\n", "not a request in JSON form: the body must be a JSON object", nil},
		{"an array", withCallbacks, `[{"request_id":"r"}]`, "not a request in JSON form: the body must be a JSON object", nil},
		{"unknown field", withCallbacks, `{"ruleset":"x"}`, `unknown field "ruleset"`, nil},
		{"no ruleset, an ambiguous document", withCallbacks, `{"request_id":"r1","primary_docs":[{"content":"x"},{"name":"a","title":"b","text":"y"}]}`, `invalid request "r1"`,
			[]string{"primary_docs[1]: ambiguous: the document's name is given as both name and title; give one of file_name, name, title",
				"neither ruleset_ref nor inline_ruleset is set; set exactly one"}},
		{"ambiguous document", withCallbacks, string(validationBody("r8", `"auxiliary_docs":[{"file_name":"a","content":"x","text":"y"}],"text_input":{"text":1}`)), `invalid request "r8"`,
			[]string{"auxiliary_docs[0]: ambiguous: the document's text is given as both content and text; give one of content, text, markdown",
				"text_input.text: must be a string (got a number)"}},
		{"bad request id", withCallbacks, string(validationBody("has space")), `request_id "has space": want 1 to 128 characters`, nil},
		{"request id with a slash", withCallbacks, string(validationBody("a/b")), `request_id "a/b"`, nil},
		{"callback to a private address", withCallbacks, string(validationBody("r2", `"options":{"callback_url":"http://10.0.0.1/hook"}`)), "options.callback_url: callback: target refused", nil},
		{"callback to a host off the list", withCallbacks, string(validationBody("r3", `"options":{"callback_url":"https://evil.example.net/hook"}`)), `host "evil.example.net" is not in the allowed hosts`, nil},
		{"callback not http", withCallbacks, string(validationBody("r4", `"options":{"callback_url":"file:///etc/passwd"}`)), `scheme "file"`, nil},
		{"callback empty", withCallbacks, string(validationBody("r5", `"options":{"callback_url":""}`)), "options.callback_url: is empty", nil},
		{"callbacks disabled", without, string(validationBody("r6", `"options":{"callback_url":"https://hooks.example.com/x"}`)), "options.callback_url: callbacks are not enabled on this server", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, http.MethodPost, tc.server.URL+"/v1/validations", id.token(t, "acme"), []byte(tc.body))
			if r.status != http.StatusBadRequest || r.errorCode() != CodeInvalidRequest || !strings.Contains(r.errorMessage(), tc.message) {
				t.Fatalf("got %s, want 400 saying %q", r, tc.message)
			}
			if tc.details != nil {
				var b errorBody
				if err := json.Unmarshal(r.body, &b); err != nil {
					t.Fatal(err)
				}
				if strings.Join(b.Error.Details, "|") != strings.Join(tc.details, "|") {
					t.Errorf("details %q, want %q", b.Error.Details, tc.details)
				}
			}
		})
	}
	if r := call(t, http.MethodPost, withCallbacks.URL+"/v1/validations", id.token(t, "acme"),
		validationBody("r7", `"options":{"callback_url":"https://hooks.example.com/rv?k=1"}`)); r.status != http.StatusAccepted {
		t.Errorf("an allowed callback URL: %s", r)
	}
}

func TestSubmitTooLarge(t *testing.T) {
	id := newIdentity(t)
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier, MaxBodyBytes: 1024})
	big := validationBody("req-big", `"text_input":"`+strings.Repeat("x", 2000)+`"`)
	r := call(t, http.MethodPost, ts.URL+"/v1/validations", id.token(t, "acme"), big)
	if r.status != http.StatusRequestEntityTooLarge || r.errorCode() != CodeTooLarge || r.errorMessage() != "the request body is over the limit of 1024 bytes" {
		t.Errorf("got %s, want 413 too_large", r)
	}
	if len(runner.requests()) != 0 {
		t.Error("an oversized request was submitted")
	}
}

// TestSubmitClaimChecksScopedToTenant: a document by uri must name an
// object under the token tenant's claims prefix; anything else, another
// tenant's claim or the service's own state, is answered 403 naming the
// document, and nothing is queued.
func TestSubmitClaimChecksScopedToTenant(t *testing.T) {
	id := newIdentity(t)
	store, err := objstore.New(objstore.Config{Endpoint: "127.0.0.1:1", AccessKey: "k", SecretKey: "s", Bucket: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier, Claims: store})
	body := func(requestID, uri string) []byte {
		b := validationBody("", `"request_id":"`+requestID+`"`)
		return bytes.Replace(b, []byte(`{"name":"contract.txt","content":"Signed and dated 1 March 2025."}`),
			[]byte(`{"name":"contract.txt","content":"Signed."},{"name":"annex.txt","uri":"`+uri+`"}`), 1)
	}
	for _, tc := range []struct{ name, uri, want string }{
		{"another tenant's claim", "s3://docs/claims/globex/contract.txt",
			`primary_docs[1] ("annex.txt"): uri s3://docs/claims/globex/contract.txt: the key is not under claims/acme/, where tenant "acme"'s documents are kept`},
		{"the service's own state", "s3://docs/reviews-material/globex/r-1.json", "the key is not under claims/acme/"},
		{"another bucket", "s3://elsewhere/claims/acme/contract.txt", `bucket "elsewhere" is not one this service reads`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, http.MethodPost, ts.URL+"/v1/validations", id.token(t, "acme"), body("req-claim", tc.uri))
			if r.status != http.StatusForbidden || r.errorCode() != CodeForbidden || !strings.Contains(r.errorMessage(), tc.want) {
				t.Errorf("got %s, want 403 forbidden naming %q", r, tc.want)
			}
		})
	}
	if n := len(runner.requests()); n != 0 {
		t.Fatalf("%d refused requests were queued", n)
	}
	r := call(t, http.MethodPost, ts.URL+"/v1/validations", id.token(t, "acme"), body("req-own", "s3://docs/claims/acme/contract.txt"))
	if r.status != http.StatusAccepted || len(runner.requests()) != 1 {
		t.Errorf("the tenant's own claim: %s, %d queued; want 202 and one queued", r, len(runner.requests()))
	}
}

// TestSubmitTooLargeForTheTopic: a request the requests topic cannot take
// as one message is answered 413 saying what to do, not 503: sending it
// again would not help. Nothing is left behind.
func TestSubmitTooLargeForTheTopic(t *testing.T) {
	id := newIdentity(t)
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier})
	token := id.token(t, "acme")
	runner.setRefuse(fmt.Errorf("writing request %q: %w", "req-big", ErrRequestTooLarge))
	r := call(t, http.MethodPost, ts.URL+"/v1/validations", token, validationBody("req-big"))
	if r.status != http.StatusRequestEntityTooLarge || r.errorCode() != CodeTooLarge || !strings.Contains(r.errorMessage(), "by uri") {
		t.Fatalf("POST of a request too large for the topic: %s", r)
	}
	if g := call(t, http.MethodGet, ts.URL+"/v1/validations/req-big", token, nil); g.status != http.StatusNotFound {
		t.Errorf("GET of the request not queued: %s", g)
	}
}

// TestSubmitNotQueued: a request the broker does not take is answered 503
// unavailable and leaves no job behind, so that it can be submitted again.
func TestSubmitNotQueued(t *testing.T) {
	id := newIdentity(t)
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier})
	token := id.token(t, "acme")
	url := ts.URL + "/v1/validations"

	runner.setRefuse(errors.New("kafka: no leader for partition 0"))
	r := call(t, http.MethodPost, url, token, validationBody("req-b"))
	if r.status != http.StatusServiceUnavailable || r.errorCode() != CodeUnavailable || r.header.Get("Retry-After") != "5" {
		t.Fatalf("POST with the broker refusing: %s (Retry-After %q)", r, r.header.Get("Retry-After"))
	}
	if g := call(t, http.MethodGet, url+"/req-b", token, nil); g.status != http.StatusNotFound {
		t.Errorf("GET of the request not queued: %s", g)
	}
	runner.setRefuse(nil)
	if r := call(t, http.MethodPost, url, token, validationBody("req-b")); r.status != http.StatusAccepted {
		t.Errorf("POST once the broker takes it: %s", r)
	}
	if j := pollDone(t, url+"/req-b", token); j.Status != "completed" {
		t.Errorf("job %+v", j)
	}
}

// TestFailedValidation: a request the pipeline fails (here, an unknown
// ruleset) is answered failed with the summary's reason, and submitting its
// id again answers that job and queues nothing.
func TestFailedValidation(t *testing.T) {
	id := newIdentity(t)
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier})
	token := id.token(t, "acme")
	url := ts.URL + "/v1/validations"
	body := []byte(`{"request_id":"req-f","ruleset_ref":{"id":"nope"},"text_input":"hello"}`)
	if r := call(t, http.MethodPost, url, token, body); r.status != http.StatusAccepted {
		t.Fatalf("POST: %s", r)
	}
	j := pollDone(t, url+"/req-f", token)
	if j.Status != "failed" || j.Result == nil || j.Result.Summary.Error == nil || j.Result.Summary.Error.Code != schemas.ReasonUnknownRuleset {
		t.Fatalf("failed job %+v", j)
	}
	again := call(t, http.MethodPost, url, token, body)
	if again.status != http.StatusAccepted || decodeJob(t, again).Status != "failed" || len(runner.requests()) != 1 {
		t.Errorf("POST again: %s (%d submitted), want 202 with the failed job, nothing queued", again, len(runner.requests()))
	}
}

// TestCallbackCarriesWhatGetAnswers: the callback the pipeline writes for a
// request is, byte for byte, what GET answers once the job is done.
func TestCallbackCarriesWhatGetAnswers(t *testing.T) {
	notifier, err := callback.New(callback.Config{Secret: []byte("callback-secret-for-tests-0123456789"), AllowPrivate: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	id := newIdentity(t)
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier, Callbacks: notifier})
	token := id.token(t, "acme")
	body := validationBody("req-cb", `"options":{"callback_url":"http://127.0.0.1:9/rv/done"}`)
	if r := call(t, http.MethodPost, ts.URL+"/v1/validations", token, body); r.status != http.StatusAccepted {
		t.Fatalf("POST: %s", r)
	}
	if j := pollDone(t, ts.URL+"/v1/validations/req-cb", token); j.Status != "completed" {
		t.Fatalf("job %+v", j)
	}
	sent := runner.sentCallbacks()
	if len(sent) != 1 || sent[0].url != "http://127.0.0.1:9/rv/done" {
		t.Fatalf("callbacks %+v, want one to the request's callback_url", sent)
	}
	get := call(t, http.MethodGet, ts.URL+"/v1/validations/req-cb", token, nil)
	if strings.TrimSpace(string(get.body)) != string(sent[0].payload) {
		t.Errorf("callback body differs from GET:\ncallback %s\n     GET %s", sent[0].payload, get.body)
	}
}

func TestRouting(t *testing.T) {
	id := newIdentity(t)
	_, ts := serveWithPipeline(t, Config{Verifier: id.verifier, Reports: missingReports{}})
	token := id.token(t, "acme")
	for _, tc := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{http.MethodDelete, "/v1/validations", 405, CodeMethodNotAllowed, "POST"},
		{http.MethodGet, "/v1/validations", 405, CodeMethodNotAllowed, "POST"},
		{http.MethodPut, "/v1/validations/req-1", 405, CodeMethodNotAllowed, "GET, HEAD"},
		{http.MethodPost, "/rule-validation-reports/abc", 405, CodeMethodNotAllowed, "GET, HEAD"},
		{http.MethodGet, "/nope", 404, CodeNotFound, ""},
		{http.MethodGet, "/v1/validations/", 404, CodeNotFound, ""},
		{http.MethodGet, "/v1//validations/req-1", 404, CodeNotFound, ""},
		{http.MethodGet, "/v1/validations/../validations/req-1", 404, CodeNotFound, ""},
		{http.MethodGet, "/healthz", 404, CodeNotFound, ""}, // ops routes live on their own handler
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, ts.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Opaque = tc.path // sent as written, not cleaned by the client
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			r := response{status: resp.StatusCode, header: resp.Header, body: body}
			if r.status != tc.status || r.errorCode() != tc.code || r.header.Get("Allow") != tc.allow {
				t.Errorf("got %s (Allow %q), want %d %s (Allow %q)", r, r.header.Get("Allow"), tc.status, tc.code, tc.allow)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			for name, want := range securityHeaders {
				if got := r.header.Get(name); got != want {
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
		})
	}
}

// panickyVerifier stands for a dependency with a bug.
type panickyVerifier struct{}

func (panickyVerifier) Verify(context.Context, string) (auth.Principal, error) {
	panic("verifier bug")
}

func TestPanicIsRecovered(t *testing.T) {
	var logs logbuf.Buffer
	s, err := New(Config{Verifier: panickyVerifier{}, Submitter: newStandIn(t, nil), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	r := call(t, http.MethodGet, ts.URL+"/v1/validations/req-1", "some-token", nil)
	if r.status != http.StatusInternalServerError || r.errorCode() != CodeInternal || r.errorMessage() != "internal error" {
		t.Errorf("got %s, want 500 internal", r)
	}
	if !strings.Contains(logs.String(), "verifier bug") || !strings.Contains(logs.String(), "stack=") {
		t.Errorf("the panic was not logged with its stack:\n%s", logs.String())
	}
}

func TestRoutesAreInstrumented(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	id := newIdentity(t)
	_, ts := serveWithPipeline(t, Config{Verifier: id.verifier, Metrics: m})
	call(t, http.MethodGet, ts.URL+"/v1/validations/secret-request-id", id.token(t, "acme"), nil)
	call(t, http.MethodGet, ts.URL+"/no/such/route", "", nil)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "rulevalidator_http_requests_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "route" {
					routes[l.GetValue()] = true
				}
				if strings.Contains(l.GetValue(), "secret-request-id") {
					t.Errorf("a label carries the request path: %s=%s", l.GetName(), l.GetValue())
				}
			}
		}
	}
	for _, want := range []string{RouteValidation, "unmatched"} {
		if !routes[want] {
			t.Errorf("no requests counted under route %q; routes: %v", want, routes)
		}
	}
}

// TestSubmitWithRealPipeline: a validation posted in its JSON form is judged
// by the real pipeline, engine and OpenAI adapter (against the scripted model
// server), and GET answers with their result.
func TestSubmitWithRealPipeline(t *testing.T) {
	fake := llmfake.New()
	t.Cleanup(fake.Close)
	fake.SetDefault(llmfake.Reply{
		Content: `{"rules":[` +
			`{"rule_id":"signed","data_sufficiency":true,"rationale":"The contract says it is signed.","boolean_output":true,"not_applicable":false,"evidences":[{"text":"Signed and dated","source_origin":"contract.txt","source_page_number":1}]},` +
			`{"rule_id":"dated","data_sufficiency":true,"rationale":"No date is given.","boolean_output":false,"not_applicable":false,"evidences":[]}]}`,
		PromptTokens: 120, CompletionTokens: 40,
	})
	llm, err := openai.New(openai.Config{BaseURL: fake.URL(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(llm, engine.Config{Model: "gemma-3-270m"})
	if err != nil {
		t.Fatal(err)
	}
	rulesets, err := registry.NewDir(t.TempDir(), registry.DirOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	judge, err := judging.New(judging.Config{Engine: eng, Rulesets: rulesets, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}

	id := newIdentity(t)
	_, ts := serveWithPipeline(t, Config{Verifier: id.verifier}, func(s *standIn) {
		s.judge = func(ctx context.Context, req *schemas.Request, start time.Time) (judging.Events, error) {
			out, release, err := judge.Judge(ctx, req, start)
			release()
			return out, err
		}
	})
	token := id.token(t, "acme")
	if r := call(t, http.MethodPost, ts.URL+"/v1/validations", token, validationBody("req-real")); r.status != http.StatusAccepted {
		t.Fatalf("POST: %s", r)
	}
	done := pollDone(t, ts.URL+"/v1/validations/req-real", token)
	if done.Status != "completed" || done.Result == nil {
		t.Fatalf("job %+v", done)
	}
	s := done.Result.Summary
	if s.Counts.Rules != 2 || s.Counts.Passed != 1 || s.Counts.Failed != 1 || s.Model != "gemma-3-270m" || s.Usage.LLMCalls != 1 || s.RulesetID != "contract-check" {
		t.Errorf("summary %+v", s)
	}
	if v := done.Result.Verdicts; len(v) != 2 || v[1].RuleID != "dated" || v[1].BooleanOutput == nil || *v[1].BooleanOutput {
		t.Errorf("verdicts %+v", v)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want 1", n)
	}
}
