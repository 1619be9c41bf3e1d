package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rulevalidator/callback"
	"rulevalidator/engine"
	"rulevalidator/report"
	"rulevalidator/request"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// inputVariants are the same judgement asked in every input shape the
// request model reads: the specification's own example first, then each
// alias of the document name and text, text_input as a string and as
// {text}, named inputs given and auto-promoted, string documents.
func inputVariants(t *testing.T) []struct{ name, inputs string } {
	t.Helper()
	in := exampleInputs(t)
	msa, policy := in.PrimaryDocs[0], in.AuxiliaryDocs[0]
	q := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	text := q(strings.Join(msa.Pages, "\f"))
	policyText := q(strings.Join(policy.Pages, "\f"))
	return []struct{ name, inputs string }{
		{"the specification's example: file_name and content, a number in named_inputs",
			`"primary_docs":[{"file_name":` + q(msa.Name) + `,"content":` + text + `}],"named_inputs":[{"name":"contract_value","value":250000}]`},
		{"name and text, a string document, text_input as a string, promoted named inputs",
			`"primary_docs":[{"name":` + q(msa.Name) + `,"text":` + text + `}],"auxiliary_docs":[` + policyText + `],"text_input":"Renewal review.","contract_value":250000,"counterparty":"Northwind Analytics Ltd"`},
		{"title and markdown, text_input as {text}, a message, a described named input",
			`"primary_docs":[{"title":` + q(msa.Name) + `,"markdown":` + text + `}],"auxiliary_docs":[{"title":` + q(policy.Name) + `,"content":` + policyText + `}],` +
				`"text_input":{"text":"Renewal review."},"message":"Pre-signature review.","named_inputs":[{"name":"approval_limit_usd","description":"what the manager may sign","value":250000}]`},
		{"pages, a promoted object",
			`"primary_docs":[{"file_name":` + q(msa.Name) + `,"pages":` + q(msa.Pages) + `}],"deal":{"value":250000,"currency":"USD","renewal":true}`},
	}
}

// TestRequestShapesOnEveryPath posts every input variant to POST
// /v1/validations, to POST /internal/execute-async and through `produce`,
// with serve on a real broker and no object storage, and checks that each
// completes with the verdicts `validate` gives for the same input, from the
// same prompt; that execute-async's callback arrives signed and agrees with
// its status route; and that reports asked for (the example ruleset asks)
// are skipped, not failed, without storage.
func TestRequestShapesOnEveryPath(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	var args []string
	for i := 0; i < len(e.serveArgs()); i++ {
		a := e.serveArgs()[i]
		if strings.HasPrefix(a, "--s3-") {
			i++ // and its value: no object storage
			continue
		}
		args = append(args, a)
	}
	// Every path's request is judged by the model, so that the prompts can be compared:
	// the verdict cache would answer the second path's from the first's.
	args = append(args, "--verdict-cache=false")
	svc := e.startInProcess(t, args...)
	public := "http://" + e.httpAddr
	waitForListener(t, public)
	internal := strings.Repeat("i", 40) // serveArgs' --internal-token
	acme := e.token(t, "acme")
	rulesetYAML, err := os.ReadFile(exampleRuleset)
	if err != nil {
		t.Fatal(err)
	}
	typeConfig := documentJSON(t, rulesetYAML) // the ruleset as the specification's type_config

	// What validate gives for each variant, on the same scripted model, is
	// what every path must give.
	variants := inputVariants(t)
	want := make([][]byte, len(variants))
	for i, v := range variants {
		file := filepath.Join(t.TempDir(), "input.json")
		if err := os.WriteFile(file, []byte("{"+v.inputs+"}"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI(t, e.llm, "validate", "--ruleset", exampleRuleset, "--input", file, "--json")
		if code != exitOK {
			t.Fatalf("%s: validate exit %d: %s", v.name, code, stderr)
		}
		var res engine.Result
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatal(err)
		}
		want[i] = verdictsOf(t, res.Rules, res.Aggregate)
	}

	type submitted struct {
		variant int
		path    string
		id      string
		poll    string // URL
		token   string
	}
	var all []submitted
	for i, v := range variants {
		id := fmt.Sprintf("shape-%d-validations", i)
		body := `{"request_id":"` + id + `","ruleset_ref":{"id":"contract-review"},` + v.inputs + `}`
		if code, _, resp := httpDo(t, http.MethodPost, public+"/v1/validations", acme, []byte(body)); code != http.StatusAccepted {
			t.Fatalf("%s: POST /v1/validations = %d %s", v.name, code, resp)
		}
		all = append(all, submitted{i, "validations", id, public + "/v1/validations/" + id, acme})

		id = fmt.Sprintf("shape-%d-execute", i)
		body = `{"job_id":"` + id + `","tenant_id":"acme","agent_config":{"type_config":` + string(typeConfig) + `},"inputs":{` + v.inputs + `}`
		if i == 0 {
			body += `,"callback_url":"` + e.callbackURL + `"`
		}
		code, hdr, resp := httpDo(t, http.MethodPost, public+"/internal/execute-async", internal, []byte(body+"}"))
		var handle struct {
			JobID     string `json:"job_id"`
			Status    string `json:"status"`
			StatusURL string `json:"status_url"`
		}
		if err := json.Unmarshal(resp, &handle); err != nil || code != http.StatusAccepted || handle.JobID != id ||
			handle.StatusURL != "/internal/execute-async/"+id+"?tenant_id=acme" || hdr.Get("Location") != handle.StatusURL {
			t.Fatalf("%s: POST /internal/execute-async = %d %s", v.name, code, resp)
		}
		all = append(all, submitted{i, "execute", id, public + handle.StatusURL, internal})

		id = fmt.Sprintf("shape-%d-produce", i)
		file := filepath.Join(t.TempDir(), "request.json")
		if err := os.WriteFile(file, []byte(`{"request_id":"`+id+`","tenant_id":"acme","ruleset_ref":{"id":"contract-review"},`+v.inputs+`}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := opRun(t, "produce", "--file", file, "--kafka-brokers", e.bootstrap, "--requests-topic", e.requests); code != exitOK {
			t.Fatalf("%s: produce exit %d: %s", v.name, code, stderr)
		}
		// The job feed mirrors every event, so the public GET answers for it too.
		all = append(all, submitted{i, "produce", id, public + "/v1/validations/" + id, acme})
	}

	type result struct {
		Status string `json:"status"`
		Result *struct {
			Summary  schemas.SummaryEvent   `json:"summary"`
			Verdicts []schemas.VerdictEvent `json:"verdicts"`
		} `json:"result"`
	}
	var statusBody []byte
	for _, s := range all {
		var got result
		waitUntil(t, waitLimit, s.id+" to finish", func() bool {
			code, _, body := httpDo(t, http.MethodGet, s.poll, s.token, nil)
			if code != http.StatusOK {
				return false
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("%s: %v\n%s", s.id, err, body)
			}
			if s.id == "shape-0-execute" {
				statusBody = body
			}
			return got.Status == "completed" || got.Status == "failed"
		})
		if got.Status != "completed" || got.Result == nil {
			t.Errorf("%s (%s): %s", s.id, variants[s.variant].name, got.Status)
			continue
		}
		sum := got.Result.Summary
		if sum.Report != nil || sum.TenantID != "acme" {
			t.Errorf("%s: summary %+v, want no report (no storage) for tenant acme", s.id, sum)
		}
		var rules []engine.Verdict
		for _, v := range got.Result.Verdicts {
			rules = append(rules, engine.Verdict{RuleID: v.RuleID, Type: verdict.RuleType(v.RuleType), DataSufficiency: v.DataSufficiency, Rationale: v.Rationale,
				BooleanOutput: v.BooleanOutput, NumericalOutput: v.NumericalOutput, NotApplicable: v.NotApplicable, Evidences: viaJSON[[]verdict.Evidence](t, v.Evidences)})
		}
		if g := verdictsOf(t, rules, viaJSON[verdict.Aggregate](t, sum.Aggregate)); !bytes.Equal(g, want[s.variant]) {
			t.Errorf("%s (%s) differs from validate:\n     got %s\nvalidate %s", s.id, variants[s.variant].name, g, want[s.variant])
		}
	}

	// The same input made the same prompt on every path: each variant's
	// prompt (the user message of a first call; a corrective re-ask adds
	// its correction, and is left out) was sent by validate and by each path
	// alike, so as many times by each of the four, and the variants'
	// prompts differ.
	prompts := map[string]int{}
	for _, r := range e.llm.Requests() {
		for _, m := range r.Messages {
			if m.Role == "user" {
				if !strings.Contains(m.Content, "could not be accepted") {
					prompts[m.Content]++
				}
				break
			}
		}
	}
	if len(prompts) != len(variants) {
		t.Errorf("%d distinct prompts, want one per variant (%d)", len(prompts), len(variants))
	}
	for p, n := range prompts {
		if n%4 != 0 {
			t.Errorf("a prompt was sent %d times, not the same number of times by validate and the three paths: %.80q…", n, p)
		}
	}

	// execute-async's callback: signed, and what the status route answers.
	select {
	case cb := <-e.callbacks:
		if err := callback.Verify([]byte(e.callbackSecret), cb.header.Get(callback.HeaderTimestamp), cb.header.Get(callback.HeaderSignature), cb.body, time.Now(), 5*time.Minute); err != nil {
			t.Errorf("callback signature: %v", err)
		}
		var c, st struct {
			RequestID string          `json:"request_id"`
			JobID     string          `json:"job_id"`
			Status    string          `json:"status"`
			Result    json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(cb.body, &c); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(statusBody, &st); err != nil {
			t.Fatal(err)
		}
		if c.RequestID != "shape-0-execute" || st.JobID != c.RequestID || c.Status != st.Status || !jsonEqual(t, c.Result, st.Result) {
			t.Errorf("callback %s\ndisagrees with the status route %s", cb.body, statusBody)
		}
	case <-time.After(waitLimit):
		t.Error("no callback arrived")
	}

	log := svc.log.String()
	for _, want := range []string{"reports are disabled: no object storage is configured", "report skipped: a report was asked for but no report storage is configured"} {
		if !strings.Contains(log, want) {
			t.Errorf("the service log does not say %q", want)
		}
	}
}

// verdictsOf is what must agree between paths: each rule's verdict with its
// anchored evidence, and the aggregates, as JSON.
// viaJSON converts an event's value into the engine's type of the same JSON
// form, so that the two paths' results compare field by field.
// documentJSON is a JSON or YAML object as JSON.
func documentJSON(t *testing.T, data []byte) []byte {
	t.Helper()
	m, err := request.DecodeObject(data)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func viaJSON[T any](t *testing.T, v any) T {
	t.Helper()
	var out T
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func verdictsOf(t *testing.T, rules []engine.Verdict, agg verdict.Aggregate) []byte {
	t.Helper()
	type verdictRow struct {
		RuleID          string
		DataSufficiency bool
		Rationale       string
		BooleanOutput   *bool
		NumericalOutput *int
		NotApplicable   bool
		Evidences       []verdict.Evidence
	}
	var out []verdictRow
	for _, v := range rules {
		evs := v.Evidences
		if evs == nil {
			evs = []verdict.Evidence{}
		}
		out = append(out, verdictRow{v.RuleID, v.DataSufficiency, v.Rationale, v.BooleanOutput, v.NumericalOutput, v.NotApplicable, evs})
	}
	b, err := json.Marshal(map[string]any{"rules": out, "aggregate": agg})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestServeExecuteAsyncEndToEnd: serve with a real broker and object
// storage takes the specification's execution request on the internal
// credential, answers 202 with a job handle, judges it from the requests
// topic, posts the signed result to the callback receiver, answers the same
// on the status route, and stores the report the ruleset asks for, which the
// internal download route serves for the job's tenant only.
func TestServeExecuteAsyncEndToEnd(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.startInProcess(t, e.serveArgs()...)
	public := "http://" + e.httpAddr
	internal := strings.Repeat("i", 40)
	waitUntil(t, waitLimit, "the public listener", func() bool {
		resp, err := http.Get(public + "/internal/execute-async/x")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	rulesetYAML, err := os.ReadFile(exampleRuleset)
	if err != nil {
		t.Fatal(err)
	}
	typeConfig := documentJSON(t, rulesetYAML)
	body := []byte(`{"job_id":"async-1","tenant_id":"contoso","agent_config":{"type_config":` + string(typeConfig) + `},` +
		`"inputs":{` + inputVariants(t)[0].inputs + `},"callback_url":"` + e.callbackURL + `"}`)

	if code, _, _ := httpDo(t, http.MethodPost, public+"/internal/execute-async", e.token(t, "contoso"), body); code != http.StatusUnauthorized {
		t.Errorf("a public JWT on the internal route = %d, want 401", code)
	}
	code, hdr, resp := httpDo(t, http.MethodPost, public+"/internal/execute-async", internal, body)
	type job struct {
		JobID     string `json:"job_id"`
		TenantID  string `json:"tenant_id"`
		Status    string `json:"status"`
		StatusURL string `json:"status_url"`
		Result    *struct {
			Summary  schemas.SummaryEvent   `json:"summary"`
			Verdicts []schemas.VerdictEvent `json:"verdicts"`
		} `json:"result"`
	}
	var handle job
	if err := json.Unmarshal(resp, &handle); err != nil || code != http.StatusAccepted || handle.JobID != "async-1" || handle.TenantID != "contoso" ||
		handle.StatusURL != "/internal/execute-async/async-1?tenant_id=contoso" || hdr.Get("Location") != handle.StatusURL || handle.Result != nil {
		t.Fatalf("POST = %d %s", code, resp)
	}

	var cb receivedCallback
	select {
	case cb = <-e.callbacks:
	case <-time.After(waitLimit):
		t.Fatal("no callback arrived")
	}
	if err := callback.Verify([]byte(e.callbackSecret), cb.header.Get(callback.HeaderTimestamp), cb.header.Get(callback.HeaderSignature), cb.body, time.Now(), 5*time.Minute); err != nil {
		t.Errorf("callback signature: %v", err)
	}
	if cb.header.Get(callback.HeaderEventID) != "contoso/async-1" {
		t.Errorf("callback event id %q", cb.header.Get(callback.HeaderEventID))
	}
	var delivered struct {
		RequestID string          `json:"request_id"`
		Status    string          `json:"status"`
		Result    json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(cb.body, &delivered); err != nil || delivered.RequestID != "async-1" || delivered.Status != "completed" {
		t.Fatalf("callback body %s", cb.body)
	}

	// The status route agrees with the callback once the job feed has the events.
	var status job
	var statusResult json.RawMessage
	waitUntil(t, waitLimit, "the status route to show the job done", func() bool {
		code, _, resp := httpDo(t, http.MethodGet, public+handle.StatusURL, internal, nil)
		if code != http.StatusOK {
			t.Fatalf("GET status = %d %s", code, resp)
		}
		var raw struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(resp, &status); err != nil || json.Unmarshal(resp, &raw) != nil {
			t.Fatalf("status body %s", resp)
		}
		statusResult = raw.Result
		return status.Status == "completed" || status.Status == "failed"
	})
	if status.Status != delivered.Status || !jsonEqual(t, statusResult, delivered.Result) || len(status.Result.Verdicts) != len(exampleRuleIDs) {
		t.Errorf("status %s\ndisagrees with the callback %s", statusResult, delivered.Result)
	}
	if code, _, _ := httpDo(t, http.MethodGet, public+"/internal/execute-async/async-1?tenant_id=globex", internal, nil); code != http.StatusNotFound {
		t.Errorf("the job under another tenant = %d, want 404", code)
	}

	rep := status.Result.Summary.Report
	if rep == nil || rep.MIMEType != report.MIMEType || !report.ValidReferenceID(rep.ReferenceID) {
		t.Fatalf("report descriptor %+v", rep)
	}
	code, hdr, xlsx := httpDo(t, http.MethodGet, public+"/internal/rule-validation-reports/"+rep.ReferenceID+"?tenant_id=contoso", internal, nil)
	if code != http.StatusOK || hdr.Get("Content-Type") != report.MIMEType || len(xlsx) == 0 {
		t.Errorf("internal download = %d %v", code, hdr)
	}
	if code, _, _ := httpDo(t, http.MethodGet, public+"/internal/rule-validation-reports/"+rep.ReferenceID+"?tenant_id=globex", internal, nil); code != http.StatusNotFound {
		t.Errorf("the report under another tenant = %d, want 404", code)
	}
}
