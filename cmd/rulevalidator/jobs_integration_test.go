package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestServeJobStatusSharedAndDurable: with object storage, job status is the
// same on every replica and survives restarts. Two replicas in one group,
// each with its own listeners: a validation submitted on A is answered by B
// at once (pending) and, once judged by whichever replica owns its partition,
// completed with its verdicts, byte for byte as A answers it, on the public
// and the internal route. Both stop; one starts again and answers the same.
func TestServeJobStatusSharedAndDurable(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	// Slow enough to see the job pending on the other replica first.
	e.llm.SetDefault(exampleReply(t, 2*time.Second))
	httpB, opsB := freeAddr(t), freeAddr(t)
	argsA := e.serveArgs()
	argsB := append(e.serveArgs(), "--http-addr", httpB, "--ops-addr", opsB)
	a := e.startInProcess(t, argsA...)
	b := e.startInProcess(t, argsB...)
	ready := func(ops string) {
		waitUntil(t, waitLimit, ops+" ready", func() bool {
			resp, err := http.Get("http://" + ops + "/readyz")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil && resp.StatusCode == http.StatusOK
		})
	}
	ready(e.opsAddr)
	ready(opsB)
	for name, p := range map[string]*inProcess{"A": a, "B": b} {
		if log := p.log.String(); !strings.Contains(log, "job status is kept in object storage") || strings.Contains(log, "job status is kept in memory") {
			t.Errorf("replica %s does not say job status is in object storage:\n%s", name, tail(log, 20))
		}
	}

	example, err := os.ReadFile(exampleRequestJSON)
	if err != nil {
		t.Fatal(err)
	}
	var submission map[string]any
	if err := json.Unmarshal(example, &submission); err != nil {
		t.Fatal(err)
	}
	delete(submission, "tenant_id")
	submission["request_id"] = "shared-1"
	submission["options"] = map[string]any{"generate_report": false}
	body, _ := json.Marshal(submission)
	acme := e.token(t, "acme")
	publicA, publicB := "http://"+e.httpAddr, "http://"+httpB
	const path = "/v1/validations/shared-1"
	internalPath := "/internal/execute-async/shared-1?tenant_id=acme"
	internal := strings.Repeat("i", 40)

	code, _, posted := httpDo(t, http.MethodPost, publicA+"/v1/validations", acme, body)
	if code != http.StatusAccepted {
		t.Fatalf("POST on A = %d %s", code, posted)
	}
	var accepted jobView
	decode(t, posted, &accepted)
	code, _, pendingB := httpDo(t, http.MethodGet, publicB+path, acme, nil)
	var onB jobView
	decode(t, pendingB, &onB)
	if code != http.StatusOK || onB.Status != "pending" || onB.SubmittedAt != accepted.SubmittedAt || onB.Result != nil {
		t.Fatalf("GET on B right after POST on A = %d %s, want the pending job", code, pendingB)
	}
	if code, _, again := httpDo(t, http.MethodPost, publicB+"/v1/validations", acme, body); code != http.StatusAccepted || !bytes.Contains(again, []byte(`"submitted_at":"`+accepted.SubmittedAt+`"`)) {
		t.Errorf("POST of the same id on B = %d %s, want A's job", code, again)
	}
	if code, _, _ := httpDo(t, http.MethodGet, publicB+path, e.token(t, "globex"), nil); code != http.StatusNotFound {
		t.Errorf("another tenant's GET on B = %d, want 404", code)
	}

	var done []byte
	waitUntil(t, waitLimit, "the job to finish on B", func() bool {
		code, _, got := httpDo(t, http.MethodGet, publicB+path, acme, nil)
		var j jobView
		decode(t, got, &j)
		done = got
		return code == http.StatusOK && (j.Status == "completed" || j.Status == "failed")
	})
	var final jobView
	decode(t, done, &final)
	if final.Status != "completed" || final.Result == nil || len(final.Result.Verdicts) != len(exampleRuleIDs) || final.SubmittedAt != accepted.SubmittedAt {
		t.Fatalf("finished job on B: %s", done)
	}
	for i, v := range final.Result.Verdicts {
		if v.RuleID != exampleRuleIDs[i] {
			t.Errorf("verdict %d is rule %q, want %q", i, v.RuleID, exampleRuleIDs[i])
		}
	}
	if _, _, onA := httpDo(t, http.MethodGet, publicA+path, acme, nil); !bytes.Equal(onA, done) {
		t.Errorf("A answers\n%s\nB answers\n%s", onA, done)
	}
	_, _, internalB := httpDo(t, http.MethodGet, publicB+internalPath, internal, nil)
	if n := len(e.llm.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want once (one request, judged once)", n)
	}

	for name, p := range map[string]*inProcess{"A": a, "B": b} {
		if code := p.stop(t); code != 0 {
			t.Fatalf("replica %s exited %d", name, code)
		}
	}
	restarted := e.startInProcess(t, argsB...)
	ready(opsB)
	if _, _, after := httpDo(t, http.MethodGet, publicB+path, acme, nil); !bytes.Equal(after, done) {
		t.Errorf("after a restart B answers\n%s\nbefore it answered\n%s", after, done)
	}
	if _, _, after := httpDo(t, http.MethodGet, publicB+internalPath, internal, nil); !bytes.Equal(after, internalB) || !bytes.Contains(after, []byte(`"status":"completed"`)) {
		t.Errorf("after a restart the internal route answers\n%s\nbefore it answered\n%s", after, internalB)
	}
	if code := restarted.stop(t); code != 0 {
		t.Fatalf("restarted replica exited %d", code)
	}
}

// TestServeJobStatusInMemoryWithoutStorage: without object storage serve
// says at start that job status is per replica and lost on restart, and
// answers its own submissions from the events it reads back.
func TestServeJobStatusInMemoryWithoutStorage(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	p := e.startInProcess(t, append(e.serveArgs(), "--s3-endpoint=")...)
	waitUntil(t, waitLimit, "the public listener", func() bool {
		return strings.Contains(p.log.String(), `what="public API"`)
	})
	if log := p.log.String(); !strings.Contains(log, "job status is kept in memory: it is per replica") || !strings.Contains(log, "lost on restart") {
		t.Errorf("serve does not say job status is per replica and lost on restart:\n%s", tail(log, 20))
	}
	example, err := os.ReadFile(exampleRequestJSON)
	if err != nil {
		t.Fatal(err)
	}
	var submission map[string]any
	if err := json.Unmarshal(example, &submission); err != nil {
		t.Fatal(err)
	}
	delete(submission, "tenant_id")
	submission["request_id"] = "memory-1"
	body, _ := json.Marshal(submission)
	acme := e.token(t, "acme")
	public := "http://" + e.httpAddr
	if code, _, resp := httpDo(t, http.MethodPost, public+"/v1/validations", acme, body); code != http.StatusAccepted {
		t.Fatalf("POST = %d %s", code, resp)
	}
	var j jobView
	waitUntil(t, waitLimit, "the job to finish", func() bool {
		code, _, got := httpDo(t, http.MethodGet, public+"/v1/validations/memory-1", acme, nil)
		decode(t, got, &j)
		return code == http.StatusOK && (j.Status == "completed" || j.Status == "failed")
	})
	if j.Status != "completed" || j.Result == nil || len(j.Result.Verdicts) != len(exampleRuleIDs) {
		t.Errorf("finished job %+v", j)
	}
}

// jobView is the part of a job body these tests look at.
type jobView struct {
	Status      string `json:"status"`
	SubmittedAt string `json:"submitted_at"`
	Result      *struct {
		Summary struct {
			Status   string `json:"status"`
			TenantID string `json:"tenant_id"`
		} `json:"summary"`
		Verdicts []struct {
			RuleID string `json:"rule_id"`
		} `json:"verdicts"`
	} `json:"result"`
}

func decode(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
}
