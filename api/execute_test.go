package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"rulevalidator/callback"
	"rulevalidator/schemas"
)

// specRuleset is a ruleset as the specification configures it (type_config).
const specRuleset = `{"id":"contract_review","type":"boolean","rules":[` +
	`{"rule_id":"R1","rule_text":"The contract is signed on the final page.","type":"boolean"},` +
	`{"rule_id":"R2","rule_text":"The contract is dated.","type":"boolean"}]}`

// specInputs is the specification's input example.
const specInputs = `{"primary_docs":[{"file_name":"MSA-Acme.pdf","content":"Master Services Agreement..."}],"named_inputs":[{"name":"contract_value","value":250000}]}`

type executeResponse struct {
	JobID       string `json:"job_id"`
	TenantID    string `json:"tenant_id"`
	Status      string `json:"status"`
	SubmittedAt string `json:"submitted_at"`
	StatusURL   string `json:"status_url"`
	Result      *struct {
		Summary  schemas.SummaryEvent   `json:"summary"`
		Verdicts []schemas.VerdictEvent `json:"verdicts"`
	} `json:"result"`
}

func decodeExecute(t *testing.T, r response) executeResponse {
	t.Helper()
	var b executeResponse
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("not an execution body: %v\n%s", err, r.body)
	}
	return b
}

// TestExecuteAsync: an internal caller posts the specification's execution
// request and gets a job handle at once; the pipeline's callback for it goes
// to its callback URL, and the status route agrees with it. (That the
// callback is signed and carries the event id is the outbox's, tested in
// cmd/rulevalidator's request paths.)
func TestExecuteAsync(t *testing.T) {
	notifier, err := callback.New(callback.Config{Secret: []byte("callback-secret-for-tests-0123456789"), AllowPrivate: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	runner, ts := serveWithPipeline(t, Config{Internal: internalVerifier(t), Callbacks: notifier})

	const hook = "http://127.0.0.1:9/jobs/done"
	body := `{"job_id":"job-1","tenant_id":"acme","agent_config":{"type_config":` + specRuleset + `},"inputs":` + specInputs +
		`,"callback_url":"` + hook + `"}`
	r := call(t, http.MethodPost, ts.URL+"/internal/execute-async", internalToken, []byte(body))
	if r.status != http.StatusAccepted {
		t.Fatalf("POST: %s", r)
	}
	handle := decodeExecute(t, r)
	if handle.JobID != "job-1" || handle.TenantID != "acme" || handle.StatusURL != "/internal/execute-async/job-1?tenant_id=acme" ||
		r.header.Get("Location") != handle.StatusURL || (handle.Status != "pending" && handle.Status != "running") || handle.SubmittedAt == "" {
		t.Fatalf("handle %+v, Location %q", handle, r.header.Get("Location"))
	}

	pollExecution(t, ts.URL+handle.StatusURL)
	sent := runner.sentCallbacks()
	if len(sent) != 1 || sent[0].url != hook {
		t.Fatalf("callbacks %+v, want one to %s", sent, hook)
	}
	payload := sent[0].payload
	var cb jobResponse
	if err := json.Unmarshal(payload, &cb); err != nil || cb.RequestID != "job-1" || cb.Status != "completed" {
		t.Fatalf("callback body %s (%v)", payload, err)
	}

	status := call(t, http.MethodGet, ts.URL+handle.StatusURL, internalToken, nil)
	done := decodeExecute(t, status)
	if status.status != http.StatusOK || done.Status != cb.Status || done.Result == nil || len(done.Result.Verdicts) != 2 ||
		done.Result.Summary.TenantID != "acme" || done.SubmittedAt != handle.SubmittedAt {
		t.Fatalf("status %s", status)
	}
	var cbResult struct {
		Result json.RawMessage `json:"result"`
	}
	var stResult struct {
		Result json.RawMessage `json:"result"`
	}
	_ = json.Unmarshal(payload, &cbResult)
	_ = json.Unmarshal(status.body, &stResult)
	if string(cbResult.Result) != string(stResult.Result) {
		t.Errorf("the status route and the callback disagree:\ncallback %s\n  status %s", cbResult.Result, stResult.Result)
	}

	// What was submitted: the ruleset inline, the inputs mapped as the JSON form maps them.
	seen := runner.requests()[0]
	if seen.TenantID != "acme" || seen.RequestID != "job-1" || seen.InlineRuleset == nil || !strings.Contains(*seen.InlineRuleset, `"rule_id":"R1"`) ||
		len(seen.PrimaryDocs) != 1 || seen.PrimaryDocs[0].Name != "MSA-Acme.pdf" || len(seen.NamedInputs) != 1 || seen.NamedInputs[0].ValueJSON != "250000" {
		t.Errorf("judged %+v", seen)
	}

	// Another tenant's view of the job is a missing job; so is an unknown id.
	for _, u := range []string{"/internal/execute-async/job-1?tenant_id=globex", "/internal/execute-async/nope?tenant_id=acme"} {
		if r := call(t, http.MethodGet, ts.URL+u, internalToken, nil); r.status != http.StatusNotFound {
			t.Errorf("GET %s = %s, want 404", u, r)
		}
	}
	// Posting the same job again answers with it and runs nothing.
	again := call(t, http.MethodPost, ts.URL+"/internal/execute-async", internalToken, []byte(body))
	if again.status != http.StatusAccepted || decodeExecute(t, again).Status != "completed" || len(runner.requests()) != 1 {
		t.Errorf("POST again: %s (submitted %d times)", again, len(runner.requests()))
	}
}

func TestExecuteAsyncByReferenceAndGeneratedID(t *testing.T) {
	runner, ts := serveWithPipeline(t, Config{Internal: internalVerifier(t)})
	body := `{"tenant_id":"acme","ruleset_ref":{"id":"contract-review","version":"1.0.0"},"inputs":{"text_input":{"text":"hello"},"deal_size":12},"options":{"generate_report":true}}`
	r := call(t, http.MethodPost, ts.URL+"/internal/execute-async", internalToken, []byte(body))
	if r.status != http.StatusAccepted {
		t.Fatalf("POST: %s", r)
	}
	h := decodeExecute(t, r)
	if !requestIDPattern.MatchString(h.JobID) || h.StatusURL != "/internal/execute-async/"+h.JobID+"?tenant_id=acme" {
		t.Errorf("handle %+v", h)
	}
	pollExecution(t, ts.URL+h.StatusURL)
	seen := runner.requests()[0]
	if seen.RulesetRef == nil || seen.RulesetRef.ID != "contract-review" || *seen.RulesetRef.Version != "1.0.0" || seen.InlineRuleset != nil ||
		*seen.TextInput != "hello" || len(seen.NamedInputs) != 1 || seen.NamedInputs[0].Name != "deal_size" || !*seen.Options.GenerateReport {
		t.Errorf("judged %+v", seen)
	}
}

func pollExecution(t *testing.T, url string) executeResponse {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b := decodeExecute(t, call(t, http.MethodGet, url, internalToken, nil))
		if b.Status == "completed" || b.Status == "failed" {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("job still %s after 10s", b.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExecuteAsyncRefuses: credentials, shapes, callbacks and size are
// checked as for POST /v1/validations, each problem named.
func TestExecuteAsyncRefuses(t *testing.T) {
	id := newIdentity(t)
	notifier, err := callback.New(callback.Config{Secret: []byte(strings.Repeat("k", 32)), AllowHosts: []string{"hooks.example.com"}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier, Internal: internalVerifier(t), Callbacks: notifier, MaxBodyBytes: 4096})
	url := ts.URL + "/internal/execute-async"
	valid := `{"tenant_id":"acme","type_config":` + specRuleset + `,"inputs":` + specInputs + `}`

	if r := call(t, http.MethodPost, url, "", []byte(valid)); r.status != http.StatusUnauthorized {
		t.Errorf("no token: %s", r)
	}
	if r := call(t, http.MethodPost, url, id.token(t, "acme"), []byte(valid)); r.status != http.StatusUnauthorized {
		t.Errorf("a public JWT: %s", r)
	}
	if r := call(t, http.MethodGet, url+"/x?tenant_id=acme", id.token(t, "acme"), nil); r.status != http.StatusUnauthorized {
		t.Errorf("status with a public JWT: %s", r)
	}
	if r := call(t, http.MethodGet, url+"/x", internalToken, nil); r.status != http.StatusBadRequest || !strings.Contains(r.errorMessage(), "tenant_id query parameter") {
		t.Errorf("status without tenant: %s", r)
	}
	for _, tc := range []struct {
		name, body string
		status     int
		want       []string
	}{
		{"not JSON", `{"tenant_id":`, http.StatusBadRequest, []string{"not an execution request"}},
		{"no tenant", `{"type_config":` + specRuleset + `,"inputs":{"text_input":"x"}}`, http.StatusBadRequest, []string{"tenant_id: missing"}},
		{"a tenant that cannot be one", `{"tenant_id":"a/b","type_config":` + specRuleset + `,"inputs":{"text_input":"x"}}`, http.StatusBadRequest, []string{"tenant_id "}},
		{"unknown field", `{"tenant_id":"acme","type_config":` + specRuleset + `,"inputs":{"text_input":"x"},"callback":"x"}`, http.StatusBadRequest, []string{"callback: unknown field"}},
		{"the ruleset twice", `{"tenant_id":"acme","type_config":` + specRuleset + `,"agent_config":{"type_config":{}},"inputs":{"text_input":"x"}}`, http.StatusBadRequest,
			[]string{"agent_config.type_config and type_config are both given"}},
		{"inline and by reference", `{"tenant_id":"acme","type_config":` + specRuleset + `,"ruleset_ref":{"id":"x"},"inputs":{"text_input":"x"}}`, http.StatusBadRequest,
			[]string{"both ruleset_ref and inline_ruleset are set"}},
		{"no inputs", `{"tenant_id":"acme","type_config":` + specRuleset + `}`, http.StatusBadRequest, []string{"inputs: must be an object"}},
		{"ambiguous document and bad job id", `{"job_id":"a b","tenant_id":"acme","type_config":` + specRuleset + `,"inputs":{"primary_docs":[{"name":"a","content":"x","text":"y"}]}}`,
			http.StatusBadRequest, []string{"primary_docs[0]: ambiguous: the document's text is given as both content and text", `request_id "a b": want 1 to 128 characters`}},
		{"bad job id", `{"job_id":"a/b","tenant_id":"acme","type_config":` + specRuleset + `,"inputs":{"text_input":"x"}}`, http.StatusBadRequest, []string{`request_id "a/b"`}},
		{"callback to a private address", `{"tenant_id":"acme","type_config":` + specRuleset + `,"inputs":{"text_input":"x"},"callback_url":"http://10.0.0.1/hook"}`,
			http.StatusBadRequest, []string{"options.callback_url: callback: target refused"}},
		{"callback off the list", `{"tenant_id":"acme","type_config":` + specRuleset + `,"inputs":{"text_input":"x"},"callback_url":"https://evil.example.net/hook"}`,
			http.StatusBadRequest, []string{`host "evil.example.net" is not in the allowed hosts`}},
		{"callback inside options", `{"tenant_id":"acme","type_config":` + specRuleset + `,"inputs":{"text_input":"x"},"options":{"callback_url":"https://hooks.example.com/x"}}`,
			http.StatusBadRequest, []string{"give the callback as callback_url at the top"}},
		{"too large", `{"tenant_id":"acme","type_config":` + specRuleset + `,"inputs":{"text_input":"` + strings.Repeat("x", 5000) + `"}}`,
			http.StatusRequestEntityTooLarge, []string{"over the limit of 4096 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, http.MethodPost, url, internalToken, []byte(tc.body))
			if r.status != tc.status {
				t.Fatalf("got %s, want %d", r, tc.status)
			}
			var b errorBody
			if err := json.Unmarshal(r.body, &b); err != nil {
				t.Fatalf("not an error body: %s", r.body)
			}
			said := b.Error.Message + "\n" + strings.Join(b.Error.Details, "\n")
			for _, want := range tc.want {
				if !strings.Contains(said, want) {
					t.Errorf("body %s does not say %q", r.body, want)
				}
			}
		})
	}
	if n := len(runner.requests()); n != 0 {
		t.Errorf("%d refused requests were submitted", n)
	}
	if r := call(t, http.MethodPost, url, internalToken, []byte(valid)); r.status != http.StatusAccepted {
		t.Errorf("the valid request: %s", r)
	}
}

// TestExecuteAsyncDisabled: without the internal token configured the
// routes do not exist.
func TestExecuteAsyncDisabled(t *testing.T) {
	_, ts := serveWithPipeline(t, Config{})
	for _, r := range []response{
		call(t, http.MethodPost, ts.URL+"/internal/execute-async", internalToken, []byte(`{}`)),
		call(t, http.MethodGet, ts.URL+"/internal/execute-async/x?tenant_id=a", internalToken, nil),
	} {
		if r.status != http.StatusNotFound {
			t.Errorf("got %s, want 404", r)
		}
	}
}
