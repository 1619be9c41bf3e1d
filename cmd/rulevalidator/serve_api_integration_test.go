package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/xuri/excelize/v2"

	"rulevalidator/callback"
	"rulevalidator/internal/s3test"
	"rulevalidator/report"
	"rulevalidator/schemas"
)

// apiEnv adds what the HTTP side needs to a serveEnv: token keys, object
// storage, free ports, a callback receiver.
type apiEnv struct {
	*serveEnv
	key               ed25519.PrivateKey
	pemFile           string
	httpAddr, opsAddr string
	s3, s3Key, s3Sec  string
	bucket            string
	callbackSecret    string
	callbacks         chan receivedCallback
	callbackURL       string
}

type receivedCallback struct {
	header http.Header
	body   []byte
}

const (
	exampleRequestJSON = "../../examples/contract-review/request.json"
	testIssuer         = "https://issuer.test"
	testAudience       = "rulevalidator"
)

func newAPIEnv(t *testing.T) *apiEnv {
	t.Helper()
	e := &apiEnv{serveEnv: newServeEnv(t, 2), callbacks: make(chan receivedCallback, 4)}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	e.key = priv
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	e.pemFile = filepath.Join(t.TempDir(), "test-key.pem")
	if err := os.WriteFile(e.pemFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	e.httpAddr, e.opsAddr = freeAddr(t), freeAddr(t)
	e.s3, e.s3Key, e.s3Sec = s3test.Endpoint(t)
	store := s3test.Store(t)
	e.bucket = store.Bucket()
	e.callbackSecret = strings.Repeat("k", 40)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.callbacks <- receivedCallback{header: r.Header.Clone(), body: body}
	}))
	t.Cleanup(receiver.Close)
	e.callbackURL = receiver.URL + "/hook"
	return e
}

func (e *apiEnv) serveArgs() []string {
	return []string{
		"--http-addr", e.httpAddr,
		"--ops-addr", e.opsAddr,
		"--jwt-pem-files", e.pemFile,
		"--jwt-issuer", testIssuer,
		"--jwt-audience", testAudience,
		"--internal-token", strings.Repeat("i", 40),
		"--s3-endpoint", e.s3,
		"--s3-access-key", e.s3Key,
		"--s3-secret-key", e.s3Sec,
		"--s3-bucket", e.bucket,
		"--callback-secret", e.callbackSecret,
		"--callback-allow-private",
	}
}

// waitForListener waits until the public API at base answers.
func waitForListener(t *testing.T, base string) {
	t.Helper()
	waitUntil(t, waitLimit, "the public listener", func() bool {
		resp, err := http.Get(base + "/v1/validations/x")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
}

// token mints an API token for tenant, signed with the key serve trusts.
func (e *apiEnv) token(t *testing.T, tenant string) string {
	t.Helper()
	claims := jwt.MapClaims{"iss": testIssuer, "aud": testAudience, "sub": "tester", "tenant_id": tenant,
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	tok.Header["kid"] = "test-key"
	s, err := tok.SignedString(e.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func httpDo(t *testing.T, method, url, token string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, data
}

// The service end to end over HTTP: submit through the API, judged from
// Kafka, polled to completion, report stored in S3 and downloaded through the
// API (and refused to another tenant), callback signed, metrics moving.
func TestServeHTTPSubmitPollReportCallbackMetrics(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.startInProcess(t, e.serveArgs()...)
	ops := "http://" + e.opsAddr
	public := "http://" + e.httpAddr
	waitUntil(t, waitLimit, "the ops listener", func() bool {
		resp, err := http.Get(ops + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	if code, _, body := httpDo(t, http.MethodGet, ops+"/readyz", "", nil); code != http.StatusOK {
		t.Fatalf("/readyz = %d %s", code, body)
	}

	example, err := os.ReadFile(exampleRequestJSON)
	if err != nil {
		t.Fatal(err)
	}
	var submission map[string]any
	if err := json.Unmarshal(example, &submission); err != nil {
		t.Fatal(err)
	}
	delete(submission, "tenant_id") // the token says who the caller is
	submission["request_id"] = "http-req-1"
	submission["options"] = map[string]any{"generate_report": true, "callback_url": e.callbackURL}
	body, _ := json.Marshal(submission)

	acme := e.token(t, "acme")
	if code, _, _ := httpDo(t, http.MethodPost, public+"/v1/validations", "", body); code != http.StatusUnauthorized {
		t.Errorf("POST without a token = %d, want 401", code)
	}
	code, hdr, resp := httpDo(t, http.MethodPost, public+"/v1/validations", acme, body)
	if code != http.StatusAccepted || hdr.Get("Location") != "/v1/validations/http-req-1" {
		t.Fatalf("POST = %d %s (Location %q)", code, resp, hdr.Get("Location"))
	}

	var job struct {
		Status string `json:"status"`
		Result *struct {
			Summary struct {
				Status           string `json:"status"`
				TenantID         string `json:"tenant_id"`
				ValidationReport *struct {
					FileName    string `json:"file_name"`
					URI         string `json:"uri"`
					MimeType    string `json:"mime_type"`
					ReferenceID string `json:"reference_id"`
				} `json:"validation_report"`
			} `json:"summary"`
			Verdicts []json.RawMessage `json:"verdicts"`
		} `json:"result"`
	}
	waitUntil(t, waitLimit, "the validation to complete", func() bool {
		code, _, resp := httpDo(t, http.MethodGet, public+"/v1/validations/http-req-1", acme, nil)
		if code != http.StatusOK {
			return false
		}
		if err := json.Unmarshal(resp, &job); err != nil {
			t.Fatalf("GET body: %v\n%s", err, resp)
		}
		return job.Status == "completed" || job.Status == "failed"
	})
	if job.Status != "completed" || job.Result == nil || len(job.Result.Verdicts) != len(exampleRuleIDs) || job.Result.Summary.TenantID != "acme" {
		t.Fatalf("job = %+v", job)
	}
	if code, _, _ := httpDo(t, http.MethodGet, public+"/v1/validations/http-req-1", e.token(t, "globex"), nil); code != http.StatusNotFound {
		t.Errorf("another tenant's GET of the job = %d, want 404", code)
	}

	rep := job.Result.Summary.ValidationReport
	if rep == nil || rep.MimeType != report.MIMEType || !report.ValidReferenceID(rep.ReferenceID) || !strings.HasPrefix(rep.URI, "s3://"+e.bucket+"/") {
		t.Fatalf("report descriptor = %+v", rep)
	}
	code, hdr, xlsx := httpDo(t, http.MethodGet, public+"/rule-validation-reports/"+rep.ReferenceID, acme, nil)
	if code != http.StatusOK || hdr.Get("Content-Type") != report.MIMEType || !strings.Contains(hdr.Get("Content-Disposition"), rep.FileName) {
		t.Fatalf("download = %d, headers %v", code, hdr)
	}
	f, err := excelize.OpenReader(bytes.NewReader(xlsx))
	if err != nil {
		t.Fatalf("downloaded report does not open: %v", err)
	}
	if title, _ := f.GetCellValue(report.SheetReport, "A1"); !strings.Contains(title, "contract-review") {
		t.Errorf("report title = %q", title)
	}
	f.Close()
	missingCode, _, missingBody := httpDo(t, http.MethodGet, public+"/rule-validation-reports/"+strings.Repeat("a", 26), acme, nil)
	otherCode, _, otherBody := httpDo(t, http.MethodGet, public+"/rule-validation-reports/"+rep.ReferenceID, e.token(t, "globex"), nil)
	if otherCode != http.StatusNotFound || otherCode != missingCode || !bytes.Equal(otherBody, missingBody) {
		t.Errorf("another tenant's download = %d %s; a missing one = %d %s; want identical 404s", otherCode, otherBody, missingCode, missingBody)
	}

	select {
	case cb := <-e.callbacks:
		err := callback.Verify([]byte(e.callbackSecret), cb.header.Get(callback.HeaderTimestamp), cb.header.Get(callback.HeaderSignature), cb.body, time.Now(), 5*time.Minute)
		if err != nil || !bytes.Contains(cb.body, []byte(`"request_id":"http-req-1"`)) || !bytes.Contains(cb.body, []byte(`"status":"completed"`)) {
			t.Errorf("callback: verify %v, body %s", err, cb.body)
		}
	case <-time.After(waitLimit):
		t.Error("no callback arrived")
	}

	// The verdicts routed to review wait in the queue; a review of one is
	// recorded, and the verdict leaves the queue.
	var queue struct {
		Items []struct {
			RequestID  string   `json:"request_id"`
			RuleID     string   `json:"rule_id"`
			Confidence *float64 `json:"confidence"`
		} `json:"items"`
	}
	code, _, resp = httpDo(t, http.MethodGet, public+"/v1/reviews?status=pending", acme, nil)
	if err := json.Unmarshal(resp, &queue); code != http.StatusOK || err != nil || len(queue.Items) == 0 || queue.Items[0].RequestID != "http-req-1" {
		t.Fatalf("GET /v1/reviews = %d %s", code, resp)
	}
	// The confidences come from the scripted model's log-probabilities: the
	// queue holds the verdicts under the threshold and the corrected page,
	// least confident first.
	var order []string
	for _, it := range queue.Items {
		order = append(order, fmt.Sprintf("%s:%v", it.RuleID, ptrString(it.Confidence)))
	}
	if want := "[contract-value:0.55 liability-cap:0.62 termination:0.74 governing-law:0.97]"; fmt.Sprint(order) != want {
		t.Errorf("queue %v, want %s", order, want)
	}
	first := queue.Items[0].RuleID
	review := []byte(`{"review_id": "rv-1", "rule_id": "` + first + `", "decision": "confirm", "note": "Checked against the contract."}`)
	if code, _, resp := httpDo(t, http.MethodPost, public+"/v1/validations/http-req-1/reviews", acme, review); code != http.StatusCreated {
		t.Fatalf("POST review = %d %s", code, resp)
	}
	if code, _, resp := httpDo(t, http.MethodPost, public+"/v1/validations/http-req-1/reviews", e.token(t, "globex"), review); code != http.StatusNotFound {
		t.Errorf("another tenant's review = %d %s, want 404", code, resp)
	}
	_, _, resp = httpDo(t, http.MethodGet, public+"/v1/reviews?status=pending", acme, nil)
	if strings.Contains(string(resp), `"rule_id":"`+first+`"`) {
		t.Errorf("the reviewed verdict is still queued: %s", resp)
	}

	_, _, metricsText := httpDo(t, http.MethodGet, ops+"/metrics", "", nil)
	for _, want := range []string{
		`rulevalidator_review_agreements_total{rule_type="boolean"}`,
		`rulevalidator_requests_consumed_total{outcome="completed"} 1`,
		`rulevalidator_verdicts_published_total{outcome="score"} 2`,
		`rulevalidator_llm_tokens_total{kind="prompt",model="fake-model"} 900`,
		`rulevalidator_report_upload_duration_seconds_count 1`,
		`rulevalidator_http_requests_total{code="202",route="POST /v1/validations"} 1`,
	} {
		if !strings.Contains(string(metricsText), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// A broken dependency shows on /readyz while /healthz stays up.
func TestServeReadinessReportsBrokenModel(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.startInProcess(t, append(e.serveArgs(), "--llm-base-url", "http://127.0.0.1:1/v1")...)
	ops := "http://" + e.opsAddr
	waitUntil(t, waitLimit, "the ops listener", func() bool {
		resp, err := http.Get(ops + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	code, _, body := httpDo(t, http.MethodGet, ops+"/readyz", "", nil)
	if code != http.StatusServiceUnavailable || !bytes.Contains(body, []byte(`"name":"model"`)) {
		t.Errorf("/readyz = %d %s, want 503 naming the model", code, body)
	}
}

// Claim check: a document given by s3:// uri is read from object storage
// (pages split at form feeds) and judged like an inline one; a missing object
// of the tenant's dead-letters the request as invalid input; another bucket,
// another tenant's claims and the service's own keys are refused unread
// (claim_refused), their text never judged.
func TestServeClaimCheckedDocuments(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	ctx := t.Context()
	store := s3test.Store(t)
	msa := exampleInputs(t).PrimaryDocs[0]
	put, err := store.Put(ctx, "claims/"+tenant+"/msa.txt", []byte(strings.Join(msa.Pages, "\f")), "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "The other tenant's secret clause."
	for _, key := range []string{"claims/fabrikam/secret.txt", "reviews-material/fabrikam/r-1.json"} {
		if _, err := store.Put(ctx, key, []byte(secret), "text/plain", nil); err != nil {
			t.Fatal(err)
		}
	}
	args := e.serveArgs()
	for i, a := range args {
		if a == "--s3-bucket" {
			args[i+1] = store.Bucket()
		}
	}
	summaries := e.watch(t, e.summaries, e.partitions)
	dead := e.watch(t, e.deadLetters, 1)
	e.startInProcess(t, args...)

	byURI := func(id, uri string) *schemas.Request {
		req := exampleRequest(t, id)
		req.PrimaryDocs[0] = schemas.Document{Name: msa.Name, URI: ptr(uri), ContentType: ptr("text/plain")}
		return req
	}
	want := map[string]schemas.Reason{
		"claim-missing":         schemas.ReasonInvalidInput,
		"claim-other-bucket":    schemas.ReasonClaimRefused,
		"claim-other-tenant":    schemas.ReasonClaimRefused,
		"claim-service-own-key": schemas.ReasonClaimRefused,
	}
	e.produceRequests(t,
		byURI("claim-ok", put.URI),
		byURI("claim-missing", store.URI("claims/"+tenant+"/nope.txt")),
		byURI("claim-other-bucket", "s3://somebody-elses-bucket/claims/"+tenant+"/secret.txt"),
		byURI("claim-other-tenant", store.URI("claims/fabrikam/secret.txt")),
		byURI("claim-service-own-key", store.URI("reviews-material/fabrikam/r-1.json")),
	)
	waitUntil(t, waitLimit, "five summaries and four dead letters", func() bool {
		return summaries.len() >= 5 && dead.len() >= 4
	})
	for _, m := range summaries.snapshot() {
		s := decodeAs[*schemas.SummaryEvent](t, e.serveEnv, m)
		switch s.RequestID {
		case "claim-ok":
			if s.Status != schemas.StatusCompleted || s.Counts.Rules != len(exampleRuleIDs) {
				t.Errorf("claim-ok summary = %+v", s)
			}
		default:
			if s.Status != schemas.StatusFailed || s.Error == nil || s.Error.Code != want[s.RequestID] {
				t.Errorf("%s summary = %+v, want failed with %s", s.RequestID, s, want[s.RequestID])
			}
			if s.Error != nil && strings.Contains(s.Error.Message, secret) {
				t.Errorf("%s summary quotes the object it refused: %s", s.RequestID, s.Error.Message)
			}
		}
	}
	for _, m := range dead.snapshot() {
		d := decodeAs[*schemas.DeadLetter](t, e.serveEnv, m)
		if d.Reason != want[string(m.Key)] {
			t.Errorf("dead letter %s: reason %s (%s), want %s", m.Key, d.Reason, d.Message, want[string(m.Key)])
		}
	}
	for _, call := range e.llm.Requests() {
		for _, m := range call.Messages {
			if strings.Contains(m.Content, secret) {
				t.Fatalf("the model was shown the other tenant's secret: %.200s", m.Content)
			}
		}
	}
}
