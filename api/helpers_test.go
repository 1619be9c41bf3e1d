package api

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"rulevalidator/auth"
	"rulevalidator/callback"
	"rulevalidator/engine"
	"rulevalidator/jobs"
	"rulevalidator/judging"
	"rulevalidator/metrics"
	"rulevalidator/objstore"
	"rulevalidator/report"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

const (
	testIssuer   = "https://idp.example.test"
	testAudience = "rulevalidator-api"
	// internalToken is the internal callers' shared token in these tests.
	internalToken = "internal-callers-token-0123456789abcdef"
)

// The production types satisfy the interfaces the server declares.
var (
	_ TokenVerifier    = (*auth.Verifier)(nil)
	_ InternalVerifier = (*auth.StaticToken)(nil)
	_ CallbackChecker  = (*callback.Notifier)(nil)
	_ Instrumenter     = (*metrics.Metrics)(nil)
	_ ReportSource     = StoredReports{}
	_ report.Getter    = (*objstore.Store)(nil)
)

// identity mints tokens with an Ed25519 key made for the test run, and
// verifies them with the real auth.Verifier reading its public key from a
// PEM file.
type identity struct {
	priv     ed25519.PrivateKey
	kid      string
	verifier *auth.Verifier
}

func newIdentity(t *testing.T) *identity {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "api-test-signer.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(context.Background(), auth.Config{
		PEMFiles: []string{path},
		Issuer:   testIssuer,
		Audience: testAudience,
		Logger:   quietLogger(),
	})
	if err != nil {
		t.Fatalf("auth.NewVerifier: %v", err)
	}
	return &identity{priv: priv, kid: "api-test-signer", verifier: v}
}

// token mints a valid token for tenant; edit changes the claims first.
func (id *identity) token(t *testing.T, tenant string, edit ...func(jwt.MapClaims)) string {
	t.Helper()
	now := time.Now()
	claims := jwt.MapClaims{
		"iss":       testIssuer,
		"aud":       testAudience,
		"sub":       "user-of-" + tenant,
		"tenant_id": tenant,
		"iat":       now.Unix(),
		"exp":       now.Add(10 * time.Minute).Unix(),
	}
	for _, e := range edit {
		e(claims)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	tok.Header["kid"] = id.kid
	signed, err := tok.SignedString(id.priv)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

func internalVerifier(t *testing.T) *auth.StaticToken {
	t.Helper()
	st, err := auth.NewStaticToken(internalToken)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// serve starts the server's public handler on a test listener.
func serve(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

// serveWithPipeline serves cfg with a stand-in serve pipeline behind it,
// feeding cfg.Jobs (a new jobs.MemoryStore when nil); edit sets the stand-in up
// before anything is submitted.
func serveWithPipeline(t *testing.T, cfg Config, edit ...func(*standIn)) (*standIn, *httptest.Server) {
	t.Helper()
	if cfg.Jobs == nil {
		cfg.Jobs = jobs.NewMemoryStore(jobs.MemoryStoreConfig{})
	}
	p := newStandIn(t, cfg.Jobs)
	for _, e := range edit {
		e(p)
	}
	cfg.Submitter = p
	_, ts := serve(t, cfg)
	return p, ts
}

// response is what a test request got back.
type response struct {
	status int
	header http.Header
	body   []byte
}

// errorCode is the code of an error body, "" when the body is not one.
func (r response) errorCode() string {
	var b errorBody
	_ = json.Unmarshal(r.body, &b)
	return b.Error.Code
}

// errorMessage is the message of an error body.
func (r response) errorMessage() string {
	var b errorBody
	_ = json.Unmarshal(r.body, &b)
	return b.Error.Message
}

func (r response) String() string {
	return http.StatusText(r.status) + " " + strings.TrimSpace(string(r.body))
}

// call sends one request; bearer is the Authorization token ("" for none),
// headers are extra header pairs.
func call(t *testing.T, method, url, bearer string, body []byte, headers ...string) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// standIn is the serve pipeline as the API meets it, without a broker.
// Submit takes requests as the requests topic does, or fails as a broker that
// is down does (refuse). Each request is then judged (judge; every
// rule passed by default) once gate opens, and its outcome reaches job
// status as it does in serve: through StoreResult for jobs in object
// storage, through the job feed's RecordVerdict and RecordSummary for jobs in
// memory. The callback of a request that asks for one is the pipeline's
// payload (jobs.CallbackPayloads), kept for the test to read.
type standIn struct {
	t       *testing.T
	results jobs.Store // a *jobs.ObjectStore or a *jobs.MemoryStore
	judge   func(ctx context.Context, req *schemas.Request, start time.Time) (judging.Events, error)
	gate    chan struct{} // nil: judge at once

	ctx context.Context // ends when the test does
	wg  sync.WaitGroup

	mu        sync.Mutex
	refuse    error
	seen      []*schemas.Request
	traces    []map[string]string
	callbacks []sentCallback
}

// sentCallback is a callback the pipeline would write to the callbacks topic.
type sentCallback struct {
	url     string
	payload []byte
}

func newStandIn(t *testing.T, results jobs.Store) *standIn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &standIn{t: t, results: results, judge: passAll, ctx: ctx}
	t.Cleanup(func() {
		cancel()
		p.wg.Wait()
	})
	return p
}

func (p *standIn) Submit(_ context.Context, s Submission) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse != nil {
		return p.refuse
	}
	p.seen = append(p.seen, s.Request)
	trace := map[string]string{}
	if s.Traceparent != "" {
		trace["traceparent"] = s.Traceparent
	}
	if s.Tracestate != "" {
		trace["tracestate"] = s.Tracestate
	}
	p.traces = append(p.traces, trace)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.handle(s.Request)
	}()
	return nil
}

// handle judges a request and records its outcome as the serve pipeline
// does. An environment fault (no outcome) would hold the request; here it
// is dropped.
func (p *standIn) handle(req *schemas.Request) {
	if p.gate != nil {
		select {
		case <-p.gate:
		case <-p.ctx.Done():
			return
		}
	}
	out, _ := p.judge(p.ctx, req, time.Now())
	if out.Summary.RequestID == "" {
		return
	}
	if cb := req.Options.CallbackURL; cb != nil {
		payload, _, err := jobs.CallbackPayloads(req, out)
		if err != nil {
			p.t.Errorf("callback payload of %s: %v", req.RequestID, err)
		}
		p.mu.Lock()
		p.callbacks = append(p.callbacks, sentCallback{url: *cb, payload: payload})
		p.mu.Unlock()
	}
	switch store := p.results.(type) {
	case *jobs.ObjectStore:
		if err := store.StoreResult(p.ctx, req, out); err != nil {
			p.t.Errorf("storing the result of %s: %v", req.RequestID, err)
		}
	case *jobs.MemoryStore:
		for _, v := range out.Verdicts {
			store.RecordVerdict(v)
		}
		store.RecordSummary(out.Summary)
	}
}

// setRefuse makes Submit fail with err (nil: accept again).
func (p *standIn) setRefuse(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = err
}

func (p *standIn) requests() []*schemas.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*schemas.Request(nil), p.seen...)
}

// trace is the trace context the i-th request was submitted with.
func (p *standIn) trace(i int) map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.traces[i]
}

func (p *standIn) sentCallbacks() []sentCallback {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]sentCallback(nil), p.callbacks...)
}

// passAll judges every rule of an inline ruleset as passed; a request by
// reference fails, its ruleset unknown.
func passAll(_ context.Context, req *schemas.Request, start time.Time) (judging.Events, error) {
	if req.InlineRuleset == nil {
		err := fmt.Errorf("no ruleset %q", req.RulesetRef.ID)
		return judging.Events{Summary: schemas.NewFailedSummary(req, schemas.ReasonUnknownRuleset, err.Error(), start, start)}, err
	}
	rs, err := engine.ParseRuleset([]byte(*req.InlineRuleset))
	if err != nil {
		return judging.Events{}, err
	}
	pass := true
	res := &engine.Result{RulesetID: rs.ID, Model: "scripted"}
	for _, rule := range rs.Rules {
		res.Rules = append(res.Rules, engine.Verdict{
			RuleID: rule.RuleID, Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: &pass,
			Rationale: "Scripted pass.",
			Evidences: []verdict.Evidence{{Text: "signed", SourceOrigin: "contract.txt", SourcePageNumber: 1, Match: verdict.MatchNone}},
		})
	}
	res.Aggregate.Boolean = &verdict.BooleanAggregate{Mode: verdict.AggregateAll, Passed: true, Applicable: len(rs.Rules), PassedCount: len(rs.Rules)}
	done := start.Add(time.Second)
	return judging.Events{
		Verdicts: judging.NewVerdictEvents(req, rs, res, "", start, done),
		Summary:  judging.NewSummary(req, rs, res, "", nil, start, done),
	}, nil
}

// validationBody is a request in JSON form with an inline two-rule ruleset.
func validationBody(requestID string, extra ...string) []byte {
	fields := []string{
		`"inline_ruleset":{"id":"contract-check","rules":[` +
			`{"rule_id":"signed","type":"boolean","rule_text":"Is the contract signed?"},` +
			`{"rule_id":"dated","type":"boolean","rule_text":"Is the contract dated?"}]}`,
		`"primary_docs":[{"name":"contract.txt","content":"Signed and dated 1 March 2025."}]`,
	}
	if requestID != "" {
		fields = append(fields, `"request_id":"`+requestID+`"`)
	}
	fields = append(fields, extra...)
	return []byte("{" + strings.Join(fields, ",") + "}")
}

// jobResponse is the body of POST and GET /v1/validations.
type jobResponse struct {
	RequestID   string  `json:"request_id"`
	Status      string  `json:"status"`
	SubmittedAt *string `json:"submitted_at"`
	StatusURL   string  `json:"status_url"`
	Result      *struct {
		Summary  schemas.SummaryEvent   `json:"summary"`
		Verdicts []schemas.VerdictEvent `json:"verdicts"`
	} `json:"result"`
}

func decodeJob(t *testing.T, r response) jobResponse {
	t.Helper()
	var j jobResponse
	if err := json.Unmarshal(r.body, &j); err != nil {
		t.Fatalf("decoding job %s: %v", r.body, err)
	}
	return j
}

// pollDone polls a validation until it is completed or failed.
func pollDone(t *testing.T, url, token string) jobResponse {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := call(t, http.MethodGet, url, token, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %s", url, r)
		}
		j := decodeJob(t, r)
		if j.Status == "completed" || j.Status == "failed" {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: still %s after 15s", url, j.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
