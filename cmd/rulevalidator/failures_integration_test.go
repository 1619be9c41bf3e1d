package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"rulevalidator/internal/llmfake"
	"rulevalidator/internal/s3test"
	"rulevalidator/objstore"
	"rulevalidator/schemas"
)

// readiness is /readyz's status and body.
func readiness(t *testing.T, ops string) (int, string) {
	t.Helper()
	time.Sleep(250 * time.Millisecond) // each failed probe is a log line
	resp, err := http.Get(ops + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metricLine returns the exposition line of one series, "" when absent.
func metricLine(t *testing.T, ops, series string) string {
	t.Helper()
	resp, err := http.Get(ops + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.HasPrefix(line, series+" ") {
			return line
		}
	}
	return ""
}

// retriesSeen is how many times the service has handed a request back to be retried
// (rulevalidator_requests_consumed_total{outcome="retry"}).
func retriesSeen(t *testing.T, ops string) int {
	t.Helper()
	const series = `rulevalidator_requests_consumed_total{outcome="retry"}`
	line := metricLine(t, ops, series)
	if line == "" {
		return 0
	}
	n, err := strconv.ParseFloat(strings.TrimPrefix(line, series+" "), 64)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return int(n)
}

// waitRetried waits until the held requests were retried n more times than now.
func waitRetried(t *testing.T, ops string, n int) {
	t.Helper()
	from := retriesSeen(t, ops)
	waitUntil(t, waitLimit, fmt.Sprintf("%d more retries of the held requests", n), func() bool { return retriesSeen(t, ops) >= from+n })
}

// waitHeld waits until /readyz fails naming cause and the metric says the cause holds.
func waitHeld(t *testing.T, ops, cause string) {
	t.Helper()
	last := ""
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last /readyz: %s", last)
		}
	})
	waitUntil(t, waitLimit, "/readyz to fail naming "+cause, func() bool {
		code, body := readiness(t, ops)
		last = body
		return code == http.StatusServiceUnavailable && strings.Contains(body, `"name":"environment"`) && strings.Contains(body, cause)
	})
	series := `rulevalidator_environment_fault{cause="` + cause + `"}`
	waitUntil(t, waitLimit, series+" to be 1", func() bool { return metricLine(t, ops, series) == series+" 1" })
}

// waitResumed waits until /readyz is ready and the metric says cause no longer holds.
func waitResumed(t *testing.T, ops, cause string) {
	t.Helper()
	waitUntil(t, waitLimit, "/readyz to be ready again", func() bool {
		code, _ := readiness(t, ops)
		return code == http.StatusOK
	})
	series := `rulevalidator_environment_fault{cause="` + cause + `"}`
	if got := metricLine(t, ops, series); got != series+" 0" {
		t.Errorf("after the fault cleared: %q, want %s 0", got, series)
	}
}

// TestServeModelAuthFaultHolds: while the model refuses the API key, nothing is dead-lettered
// or published, /readyz names model_auth and the metric is 1; once the key is accepted
// again, consumption resumes by itself and every request completes.
func TestServeModelAuthFaultHolds(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 1)
	ops := freeAddr(t)
	summaryLog := e.watch(t, e.summaries, 1)
	deadLog := e.watch(t, e.deadLetters, 1)
	e.llm.SetDefault(llmfake.Reply{Status: http.StatusUnauthorized, Error: &llmfake.Error{Message: "Incorrect API key provided", Code: "invalid_api_key"}})
	ids, reqs := exampleRequests(t, "auth", 3)
	e.produceRequests(t, reqs...)
	p := e.startInProcess(t, "--ops-addr", ops)

	waitHeld(t, "http://"+ops, "model_auth")
	waitRetried(t, "http://"+ops, 5)
	if n, m := deadLog.len(), summaryLog.len(); n != 0 || m != 0 {
		t.Fatalf("while the key was refused: %d dead letters and %d summaries, want none", n, m)
	}
	if !strings.Contains(p.log.String(), "environment fault: consumption is held") || !strings.Contains(p.log.String(), "check the model server's API key") {
		t.Error("the log does not say what to fix")
	}

	e.llm.SetDefault(exampleReply(t, 0))
	waitUntil(t, waitLimit, "every summary", func() bool { return summaryLog.len() >= len(ids) })
	e.waitCommittedToEnd(t)
	waitResumed(t, "http://"+ops, "model_auth")
	for _, m := range summaryLog.snapshot() {
		if s := e.summary(t, m); s.Status != schemas.StatusCompleted {
			t.Errorf("summary %s, want completed", jsonText(t, s))
		}
	}
	if n := deadLog.len(); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
	if !strings.Contains(p.log.String(), "environment fault cleared: consumption resumed") {
		t.Error("the log does not say consumption resumed")
	}
}

// claimCheckedRequest is the example request with its first document read from uri.
func claimCheckedRequest(t *testing.T, id, uri string) (*schemas.Request, []byte) {
	req := exampleRequest(t, id)
	doc := req.PrimaryDocs[0]
	var text []byte
	if doc.Content != nil {
		text = []byte(*doc.Content)
	} else {
		text = []byte(strings.Join(doc.Pages, "\f"))
	}
	req.PrimaryDocs[0] = schemas.Document{Name: doc.Name, URI: &uri, ContentType: ptr("text/plain")}
	return req, text
}

// TestServeStorageFaultsHold: a wrong S3 secret (reading a claim-checked document) and a missing
// bucket (storing the report) hold the request, named on /readyz, instead of dead-lettering it;
// the request completes once the fault is fixed (the secret by a restart with the right one, the
// bucket by creating it).
func TestServeStorageFaultsHold(t *testing.T) {
	t.Parallel()
	endpoint, accessKey, secretKey := s3test.Endpoint(t)

	t.Run("wrong secret", func(t *testing.T) {
		e := newServeEnv(t, 1)
		ops := freeAddr(t)
		summaryLog := e.watch(t, e.summaries, 1)
		deadLog := e.watch(t, e.deadLetters, 1)
		store := s3test.Store(t)
		req, text := claimCheckedRequest(t, "wrong-secret", "s3://"+store.Bucket()+"/claims/"+tenant+"/msa.txt")
		if _, err := store.Put(t.Context(), "claims/"+tenant+"/msa.txt", text, "text/plain", nil); err != nil {
			t.Fatal(err)
		}
		e.produceRequests(t, req)
		p := e.startInProcess(t, "--ops-addr", ops, "--s3-endpoint", endpoint, "--s3-access-key", accessKey,
			"--s3-secret-key", secretKey+"-rotated", "--s3-bucket", store.Bucket())
		waitHeld(t, "http://"+ops, "storage_auth")
		waitRetried(t, "http://"+ops, 3)
		if n, m := deadLog.len(), summaryLog.len(); n != 0 || m != 0 {
			t.Fatalf("with the wrong secret: %d dead letters and %d summaries, want none", n, m)
		}
		if code := p.stop(t); code != 0 {
			t.Fatalf("serve exited %d on stop", code)
		}

		e.startInProcess(t, "--ops-addr", ops, "--s3-endpoint", endpoint, "--s3-access-key", accessKey,
			"--s3-secret-key", secretKey, "--s3-bucket", store.Bucket())
		waitUntil(t, waitLimit, "the summary", func() bool { return summaryLog.len() >= 1 })
		e.waitCommittedToEnd(t)
		if s := e.summary(t, summaryLog.snapshot()[0]); s.Status != schemas.StatusCompleted {
			t.Errorf("summary %s, want completed", jsonText(t, s))
		}
		if n := deadLog.len(); n != 0 {
			t.Errorf("%d dead letters, want none", n)
		}
	})

	t.Run("missing bucket", func(t *testing.T) {
		// The report goes to the missing bucket: creating the bucket is the whole fix, with
		// no moment where the bucket exists and the request's object does not.
		e := newServeEnv(t, 1)
		ops := freeAddr(t)
		summaryLog := e.watch(t, e.summaries, 1)
		deadLog := e.watch(t, e.deadLetters, 1)
		bucket := s3test.UniqueBucket(t)
		req := exampleRequest(t, "missing-bucket")
		req.Options.GenerateReport = ptr(true)
		e.produceRequests(t, req)
		e.startInProcess(t, "--ops-addr", ops, "--s3-endpoint", endpoint, "--s3-access-key", accessKey,
			"--s3-secret-key", secretKey, "--s3-bucket", bucket)
		waitHeld(t, "http://"+ops, "storage_bucket")
		waitRetried(t, "http://"+ops, 3)
		if n, m := deadLog.len(), summaryLog.len(); n != 0 || m != 0 {
			t.Fatalf("with the bucket missing: %d dead letters and %d summaries, want none", n, m)
		}

		store, err := objstore.New(objstore.Config{Endpoint: endpoint, AccessKey: accessKey, SecretKey: secretKey, Bucket: bucket})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := store.EnsureBucket(ctx); err != nil {
			t.Fatal(err)
		}
		s3test.RemoveOnCleanup(t, bucket)
		waitUntil(t, waitLimit, "the summary", func() bool { return summaryLog.len() >= 1 })
		e.waitCommittedToEnd(t)
		waitResumed(t, "http://"+ops, "storage_bucket")
		s := e.summary(t, summaryLog.snapshot()[0])
		if s.Status != schemas.StatusCompleted || s.Report == nil || !strings.HasPrefix(s.Report.URI, "s3://"+bucket+"/") {
			t.Errorf("summary %s, want completed with its report in %s", jsonText(t, s), bucket)
		}
		if n := deadLog.len(); n != 0 {
			t.Errorf("%d dead letters, want none", n)
		}
	})
}

// TestServeRequestTimeoutDeadLettered: a request whose model call always outlasts
// --request-timeout is tried --request-timeout-attempts times, then dead-lettered as timeout
// with a failed summary, and the request behind it on the partition is judged.
func TestServeRequestTimeoutDeadLettered(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 1)
	summaryLog := e.watch(t, e.summaries, 1)
	deadLog := e.watch(t, e.deadLetters, 1)
	fast := exampleReply(t, 0)
	e.llm.Answer(func(r llmfake.Call) llmfake.Reply {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, "[ticket always-slow]") {
				return exampleReply(t, 30*time.Second)
			}
		}
		return fast
	})
	e.produceRequests(t, exampleRequest(t, "always-slow"), exampleRequest(t, "after-slow"))
	// The window is given, so an attempt's time goes to the model call
	// alone: a context-window probe on a loaded machine could otherwise use
	// up a short attempt before the model is asked.
	e.startInProcess(t, "--request-timeout", "1500ms", "--request-timeout-attempts", "3", "--concurrency", "1", "--llm-context-tokens", "8192")

	waitUntil(t, waitLimit, "the dead letter", func() bool { return deadLog.len() >= 1 })
	waitUntil(t, waitLimit, "both summaries", func() bool { return summaryLog.len() >= 2 })
	e.waitCommittedToEnd(t)

	dl := e.deadLetter(t, deadLog.snapshot()[0])
	if dl.Reason != schemas.ReasonTimeout || dl.OriginalOffset != 0 || !strings.Contains(dl.Message, "3 attempts") || dl.Attempts != 3 {
		t.Errorf("dead letter: reason %s, offset %d, attempts %d, message %q; want timeout at offset 0 after 3 attempts", dl.Reason, dl.OriginalOffset, dl.Attempts, dl.Message)
	}
	status := map[string]*schemas.SummaryEvent{}
	for _, m := range summaryLog.snapshot() {
		s := e.summary(t, m)
		status[s.RequestID] = s
	}
	if s := status["always-slow"]; s == nil || s.Status != schemas.StatusFailed || s.Error == nil || s.Error.Code != schemas.ReasonTimeout {
		t.Errorf("summary of always-slow: %s, want failed with code timeout", jsonText(t, s))
	}
	if s := status["after-slow"]; s == nil || s.Status != schemas.StatusCompleted {
		t.Errorf("summary of after-slow: %s, want completed", jsonText(t, s))
	}
	if seen := ticketsSeen(e.llm); seen["always-slow"] != 3 {
		t.Errorf("the model was asked %d times for always-slow, want 3", seen["always-slow"])
	}
}

// TestServeTenantsShareARequestID: a request_id is unique within its tenant only. Two tenants
// sending one request_id are each judged (the second is not answered from the first's cached
// result) and each get their own summary and verdicts, with tenant-scoped event ids.
func TestServeTenantsShareARequestID(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 1)
	verdictLog := e.watch(t, e.verdicts, 1)
	summaryLog := e.watch(t, e.summaries, 1)
	tenants := []string{"contoso", "fabrikam"}
	var reqs []*schemas.Request
	for _, tn := range tenants {
		req := exampleRequest(t, "shared-id")
		req.TenantID = tn
		reqs = append(reqs, req)
	}
	e.produceRequests(t, reqs...)
	e.startInProcess(t)

	waitUntil(t, waitLimit, "both summaries", func() bool { return summaryLog.len() >= 2 })
	waitUntil(t, waitLimit, "both sets of verdicts", func() bool { return verdictLog.len() >= 2*len(exampleRuleIDs) })
	e.waitCommittedToEnd(t)

	if seen := ticketsSeen(e.llm); seen["shared-id"] != 2 {
		t.Errorf("the model was asked %d times, want once per tenant", seen["shared-id"])
	}
	summaries := map[string]*schemas.SummaryEvent{}
	for _, m := range summaryLog.snapshot() {
		s := e.summary(t, m)
		summaries[s.TenantID] = s
		if id, _ := header(m, "ce_id"); id != s.EventID {
			t.Errorf("summary ce_id %q, want %q", id, s.EventID)
		}
	}
	verdicts := map[string]int{}
	for _, m := range verdictLog.snapshot() {
		v := e.verdict(t, m)
		if want := v.TenantID + "/shared-id/" + v.RuleID; v.EventID != want {
			t.Errorf("verdict event id %q, want %q", v.EventID, want)
		}
		if id, _ := header(m, "rv-event-id"); id != v.EventID {
			t.Errorf("verdict rv-event-id %q, want %q", id, v.EventID)
		}
		verdicts[v.TenantID]++
	}
	for _, tn := range tenants {
		s := summaries[tn]
		if s == nil || s.Status != schemas.StatusCompleted || s.EventID != tn+"/shared-id" || s.RequestID != "shared-id" {
			t.Errorf("summary of %s: %s, want completed with event id %s/shared-id", tn, jsonText(t, s), tn)
		}
		if verdicts[tn] != len(exampleRuleIDs) {
			t.Errorf("%d verdicts for %s, want %d", verdicts[tn], tn, len(exampleRuleIDs))
		}
	}
}
