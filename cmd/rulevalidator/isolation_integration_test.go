package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rulevalidator/internal/docfixture"
	"rulevalidator/internal/llmfake"
	"rulevalidator/objstore"
)

// Limits the isolation test holds the service to, through the public API.
const (
	// isolationMaxRSS is the serve process's peak RSS across every attack.
	isolationMaxRSS = 600 << 20
	// isolationMaxPixels caps a page image, whatever its page box.
	isolationMaxPixels = 16_000_000
	// attackEnds is how long a request carrying an expression bomb may take
	// to end, from its acceptance.
	attackEnds = 20 * time.Second
)

// One tenant must not read, stall or exhaust another. Through the public
// API only, on the real broker and object storage (the model scripted), a
// hostile tenant names every object the service keeps (the other tenant's
// review material, job status, reports, verdict cache) as a claim check,
// posts regex and concatenation bombs in inline rulesets, a check over a
// 600 KB input and a PDF with a very tall page, while the other tenant's
// requests go on. Every claim check is refused and the secret never reaches
// the hostile tenant; every bomb is refused or ends within seconds; the page
// image stays under 16 MP; /readyz answers throughout; the other tenant's
// next request completes; and the serve process's peak RSS stays under
// 600 MB.
func TestHostileTenantCannotReadStallOrExhaustAnother(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.llm.Answer(llmfake.Verdicts)
	proc := e.startBinary(t, e.serveArgs()...)
	public, ops := "http://"+e.httpAddr, "http://"+e.opsAddr
	waitUntil(t, waitLimit, "the ops listener", func() bool {
		resp, err := http.Get(ops + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	waitForListener(t, public)
	victim, hostile := e.token(t, "globex"), e.token(t, "acme")

	// /readyz is probed throughout; every probe must answer 200 in time.
	readiness := watchReadiness(t, ops+"/readyz")

	// The victim's validation, with a secret in its document, kept for review.
	const secret = "Globex pays a confidential rebate of 17.5 percent."
	victimRequest := func(id string) []byte {
		return mustJSON(t, map[string]any{
			"request_id":     id,
			"inline_ruleset": inlineRuleset("terms", `{"rule_id":"rebate","type":"boolean","rule_text":"Does the contract state a rebate?"}`),
			"primary_docs":   []any{map[string]any{"name": "terms.txt", "content": "Terms.\f" + secret}},
		})
	}
	submit(t, public, victim, victimRequest("victim-1"), http.StatusAccepted)
	if job := waitJob(t, public, victim, "victim-1", waitLimit); job.Status != "completed" {
		t.Fatalf("the victim's first request: %+v", job)
	}

	// Every key the service keeps, named as a claim check by the hostile tenant.
	store, err := objstore.New(objstore.Config{Endpoint: e.s3, AccessKey: e.s3Key, SecretKey: e.s3Sec, Bucket: e.bucket})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := store.List(t.Context(), "", func(key string) error { keys = append(keys, key); return nil }); err != nil {
		t.Fatal(err)
	}
	if !containsPrefix(keys, "reviews-material/globex/") || !containsPrefix(keys, "jobs/globex/") {
		t.Fatalf("the bucket holds %v; want the victim's review material and job among them", keys)
	}
	keys = append(keys, "claims/globex/terms.txt")
	for i, key := range keys {
		body := mustJSON(t, map[string]any{
			"request_id":     fmt.Sprintf("steal-%d", i),
			"inline_ruleset": inlineRuleset("steal", `{"rule_id":"leak","type":"boolean","rule_text":"Repeat the document."}`),
			"primary_docs":   []any{map[string]any{"name": "stolen.txt", "uri": store.URI(key), "content_type": "text/plain"}},
		})
		code, resp := submit(t, public, hostile, body, http.StatusForbidden)
		if bytes.Contains(resp, []byte(secret)) {
			t.Errorf("the refusal of %s quotes the victim's secret: %s", key, resp)
		}
		if code == http.StatusForbidden && !bytes.Contains(resp, []byte("claims/acme/")) {
			t.Errorf("the refusal of %s does not say where acme's documents belong: %s", key, resp)
		}
	}

	// Expression bombs: refused when posted, or ended within seconds.
	big := strings.Repeat("ab", 450<<10) // 900 KiB, what a request on a 1 MiB topic can carry
	hundredK := strings.Repeat("x", 100<<10)
	bombs := []struct {
		id, check string
		inputs    map[string]any
	}{
		{"regex-of-itself", `inputs.s.matches(inputs.s)`, map[string]any{"s": hundredK}},
		{"constant-regex-900k", `inputs.s.matches("(a|b)*c")`, map[string]any{"s": big}},
		{"concat-in-map", `[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16].map(x, inputs.s + inputs.s + inputs.s).size() > 0`, map[string]any{"s": hundredK}},
		{"nested-concat", `[1,2,3,4,5,6,7,8].all(x, [1,2,3,4,5,6,7,8].all(y, size(inputs.s + inputs.s) > 0))`, map[string]any{"s": hundredK}},
	}
	var pending []string
	posted := map[string]time.Time{}
	for _, b := range bombs {
		posted[b.id] = time.Now()
		body := mustJSON(t, map[string]any{
			"request_id":     b.id,
			"inline_ruleset": inlineRuleset("bomb", `{"rule_id":"bomb","type":"boolean","rule_text":"Bomb.","check":`+strconv.Quote(b.check)+`}`),
			"primary_docs":   []any{map[string]any{"name": "a.txt", "content": "A."}},
			"named_inputs":   namedInputs(b.inputs),
		})
		code, resp := submit(t, public, hostile, body, 0)
		switch code {
		case http.StatusBadRequest:
			t.Logf("%s: refused when posted: %.200s", b.id, resp)
			if !bytes.Contains(resp, []byte("bomb")) {
				t.Errorf("%s refused without naming the rule: %s", b.id, resp)
			}
		case http.StatusAccepted:
			pending = append(pending, b.id)
		default:
			t.Errorf("%s: POST answered %d %s, want 400 or 202", b.id, code, resp)
		}
	}
	if len(pending) > 0 && pending[0] == "regex-of-itself" {
		t.Errorf("a pattern that is not a constant was accepted: %v", pending)
	}
	for _, id := range pending {
		job := waitJob(t, public, hostile, id, attackEnds)
		t.Logf("%s: %s %s after it was posted", id, job.Status, time.Since(posted[id]).Round(time.Millisecond))
		if job.Status != "completed" && job.Status != "failed" {
			t.Errorf("%s did not end within %s: %+v", id, attackEnds, job)
		}
	}

	// A check quoting a 600 KB input completes, its rationale and evidence clipped.
	sixHundredK := strings.Repeat("y", 600<<10)
	submit(t, public, hostile, mustJSON(t, map[string]any{
		"request_id":     "check-600k",
		"inline_ruleset": inlineRuleset("quote", `{"rule_id":"quote","type":"boolean","rule_text":"Quote.","check":"size(inputs.s) > 0"}`),
		"primary_docs":   []any{map[string]any{"name": "a.txt", "content": "A."}},
		"named_inputs":   namedInputs(map[string]any{"s": sixHundredK}),
	}), http.StatusAccepted)
	job := waitJob(t, public, hostile, "check-600k", attackEnds)
	if job.Status != "completed" || job.Result == nil || len(job.Result.Verdicts) != 1 {
		t.Fatalf("the check over a 600 KB input: %+v", job)
	}
	if v := job.Result.Verdicts[0]; len(v.Rationale) > 4096 || len(v.Evidences) != 1 || len(v.Evidences[0].Text) > 4096 {
		t.Errorf("the check's rationale is %d bytes and its evidence %d passages; want both clipped", len(v.Rationale), len(v.Evidences))
	}

	// A very tall page renders at most 16 MP.
	submit(t, public, hostile, mustJSON(t, map[string]any{
		"request_id":     "tall-page",
		"inline_ruleset": inlineRuleset("tall", `{"rule_id":"tall","type":"boolean","rule_text":"Tall?"}`),
		"primary_docs":   []any{map[string]any{"name": "tall.pdf", "data": docfixture.PageBoxPDF(4, 1000), "content_type": "application/pdf"}},
	}), http.StatusAccepted)
	if job := waitJob(t, public, hostile, "tall-page", waitLimit); job.Status != "completed" {
		t.Fatalf("the tall page's request: %+v", job)
	}
	code, _, image := httpDo(t, http.MethodGet, public+"/v1/validations/tall-page/documents/1/pages/1.png", hostile, nil)
	if code != http.StatusOK {
		t.Fatalf("the tall page's image: %d %s", code, image)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(image))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Width*cfg.Height > isolationMaxPixels {
		t.Errorf("the tall page's image is %d × %d pixels, over %d", cfg.Width, cfg.Height, isolationMaxPixels)
	}

	// The victim's next request flows, and its first is untouched.
	submit(t, public, victim, victimRequest("victim-2"), http.StatusAccepted)
	if job := waitJob(t, public, victim, "victim-2", waitLimit); job.Status != "completed" {
		t.Errorf("the victim's request after the attacks: %+v", job)
	}
	if job := waitJob(t, public, victim, "victim-1", waitLimit); job.Status != "completed" || job.Result == nil || len(job.Result.Verdicts) != 1 {
		t.Errorf("the victim's first request after the attacks: %+v", job)
	}
	if code, _, _ := httpDo(t, http.MethodGet, public+"/v1/validations/victim-1", hostile, nil); code != http.StatusNotFound {
		t.Errorf("the hostile tenant's GET of the victim's job = %d, want 404", code)
	}

	if failures := readiness.stop(); len(failures) > 0 {
		t.Errorf("/readyz failed %d times during the attacks: %v", len(failures), failures[:min(5, len(failures))])
	}
	peak := procStatusKB(t, proc.cmd.Process.Pid, "VmHWM") << 10
	t.Logf("serve's peak RSS across the attacks: %d MB", peak>>20)
	if peak > isolationMaxRSS {
		t.Errorf("serve's peak RSS is %d MB, over %d MB", peak>>20, isolationMaxRSS>>20)
	}
}

// isolationJob is what GET /v1/validations/{id} answers, as far as the
// isolation test reads it.
type isolationJob struct {
	Status string `json:"status"`
	Result *struct {
		Verdicts []struct {
			Rationale string `json:"rationale"`
			Evidences []struct {
				Text string `json:"text"`
			} `json:"evidences"`
		} `json:"verdicts"`
	} `json:"result"`
}

// submit posts a validation as token's tenant; want, when not 0, is the
// status it must answer.
func submit(t *testing.T, public, token string, body []byte, want int) (int, []byte) {
	t.Helper()
	code, _, resp := httpDo(t, http.MethodPost, public+"/v1/validations", token, body)
	if want != 0 && code != want {
		t.Errorf("POST answered %d %s, want %d", code, resp, want)
	}
	return code, resp
}

// waitJob polls a validation until it ends or limit passes, and returns it.
func waitJob(t *testing.T, public, token, id string, limit time.Duration) isolationJob {
	t.Helper()
	var job isolationJob
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		code, _, resp := httpDo(t, http.MethodGet, public+"/v1/validations/"+id, token, nil)
		if code == http.StatusOK {
			job = isolationJob{}
			if err := json.Unmarshal(resp, &job); err != nil {
				t.Fatalf("GET %s: %v", id, err)
			}
			if job.Status == "completed" || job.Status == "failed" {
				return job
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return job
}

func inlineRuleset(id string, rules ...string) json.RawMessage {
	return json.RawMessage(`{"id":"` + id + `","rules":[` + strings.Join(rules, ",") + `]}`)
}

func namedInputs(values map[string]any) []any {
	var out []any
	for name, v := range values {
		out = append(out, map[string]any{"name": name, "value": v})
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func containsPrefix(keys []string, prefix string) bool {
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// readinessWatch probes a readiness URL every 250 ms until stopped.
type readinessWatch struct {
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	failures []string
}

func watchReadiness(t *testing.T, url string) *readinessWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &readinessWatch{cancel: cancel, done: make(chan struct{})}
	client := &http.Client{Timeout: 3 * time.Second}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			start := time.Now()
			resp, err := client.Get(url)
			switch {
			case err != nil:
				w.fail(fmt.Sprintf("%s: %v", start.Format(time.TimeOnly), err))
			default:
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					w.fail(fmt.Sprintf("%s: %d", start.Format(time.TimeOnly), resp.StatusCode))
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *readinessWatch) fail(s string) {
	w.mu.Lock()
	w.failures = append(w.failures, s)
	w.mu.Unlock()
}

// stop ends the probes and returns the failures seen.
func (w *readinessWatch) stop() []string {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failures
}

// procStatusKB reads a field of /proc/<pid>/status, in KiB.
func procStatusKB(t *testing.T, pid int, field string) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
