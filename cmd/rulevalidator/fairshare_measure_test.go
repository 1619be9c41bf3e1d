package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rulevalidator/internal/llmfake"
)

// The measurement of the issue "Share one stream fairly", end to end: serve as its own binary
// on the real broker and object storage, requests submitted through POST /v1/validations and
// polled through GET /v1/validations/{id}, a scripted model that takes 1 s a call, four
// requests judged at once. Each request is one rule, judged in one model call.
const (
	// floodModelCall is how long the scripted model takes to answer a call.
	floodModelCall = time.Second
	// floodConcurrency is serve's --concurrency.
	floodConcurrency = 4
	// calmRequests is how many requests the calm tenant submits, alone and under the flood.
	calmRequests = 3
	// floodRequests is the flooding tenant's burst in the first scenario.
	floodRequests = 120
	// capacityRequests is the burst sent to the model of limited capacity, and
	// modelCapacity the calls that model serves at once (it answers 429 past it).
	capacityRequests = 40
	modelCapacity    = 2

	// The targets of the "after" columns.
	calmUnderFloodMax = 2.0  // the calm tenant's worst latency under the flood, over its latency alone
	drainMax          = 1.3  // the flood's drain time, over its ideal
	refusedShareMax   = 0.15 // the model's calls that met a 429
	capacityTimeMax   = 1.3  // the burst's time to the model of capacity 2, over its ideal
)

// TestFairShareAndModelCapacityEndToEnd measures, side by side in one run, (1) a calm tenant's
// worst latency alone and under another tenant's flood of 120 requests, in fetch order
// (--read-ahead 0, before) and with the fair share (the default, after), with the flood's drain
// time; and (2) a burst of 40 requests to a model that serves 2 calls at once and answers 429
// with Retry-After: 1 past that, with the limit on calls to the model fixed (before) and
// adaptive (the default, after): the share of the model's calls that met a 429 and the time to
// judge them all. Every run is a fresh serve on topics and a consumer group of its own. It
// takes minutes, so it runs only with RULEVALIDATOR_MEASURE_FLOOD=1; the "after" columns are
// held to the targets, the "before" ones only logged.
func TestFairShareAndModelCapacityEndToEnd(t *testing.T) {
	if os.Getenv("RULEVALIDATOR_MEASURE_FLOOD") != "1" {
		t.Skip("a measurement of minutes; set RULEVALIDATOR_MEASURE_FLOOD=1 to run it")
	}
	var fetchOrder, fairShare calmResult
	t.Run("fetch-order", func(t *testing.T) { fetchOrder = measureCalmUnderFlood(t, "--read-ahead", "0") })
	t.Run("fair-share", func(t *testing.T) { fairShare = measureCalmUnderFlood(t) })
	var fixed, adaptive capacityResult
	t.Run("fixed-limit", func(t *testing.T) {
		fixed = measureModelCapacity(t, "--llm-adaptive-concurrency=false")
	})
	t.Run("adaptive-limit", func(t *testing.T) { adaptive = measureModelCapacity(t) })

	floodIdeal := time.Duration(floodRequests/floodConcurrency) * floodModelCall
	t.Logf("1. a calm tenant's %d requests alone, then behind another tenant's %d (--concurrency %d, the model %s a call; ideal drain %s):",
		calmRequests, floodRequests, floodConcurrency, floodModelCall, floodIdeal)
	t.Logf("   %-24s | %-10s | %-17s | %-11s | %-21s | %s", "serve", "calm alone", "calm under flood", "flood ahead", "flood drained", "model calls")
	for _, r := range []struct {
		name string
		r    calmResult
	}{{"--read-ahead 0 (before)", fetchOrder}, {"--read-ahead 256 (after)", fairShare}} {
		t.Logf("   %-24s | %10s | %8s (%5.1fx) | %11d | %8s (%4.2fx ideal) | %d",
			r.name, r.r.calmAlone, r.r.calmFlood, ratio(r.r.calmFlood, r.r.calmAlone), r.r.floodAhead, r.r.drain, ratio(r.r.drain, floodIdeal), r.r.calls)
	}
	capacityIdeal := time.Duration(capacityRequests/modelCapacity) * floodModelCall
	t.Logf("2. %d requests to a model of capacity %d (429 with Retry-After: 1 past it; ideal %s):", capacityRequests, modelCapacity, capacityIdeal)
	t.Logf("   %-34s | %-20s | %-21s | %s", "serve", "calls that met a 429", "all judged", "limit at the end")
	for _, r := range []struct {
		name string
		r    capacityResult
	}{{"--llm-adaptive-concurrency=false", fixed}, {"--llm-adaptive-concurrency (after)", adaptive}} {
		t.Logf("   %-34s | %3d of %3d (%4.1f%%) | %8s (%4.2fx ideal) | %s",
			r.name, r.r.refused, r.r.calls, 100*r.r.share(), r.r.took, ratio(r.r.took, capacityIdeal), r.r.finalLimit)
	}

	if t.Failed() {
		return // a run did not complete: its figures mean nothing
	}
	// The fair share itself: once the calm tenant's requests are read ahead, they take the
	// next free slots ahead of the flood's, its usage being far below the flood's, so few of
	// the flood's calls start ahead of each (in fetch order, all of them do): at most a round
	// of them started between its POST and its requests being read, and one started with
	// them at the next round.
	if most := floodConcurrency + 1; fairShare.floodAhead > most {
		t.Errorf("fair share: %d of the flood's calls started between a calm request's POST and its call, want at most %d",
			fairShare.floodAhead, most)
	}
	// The target. Under the flood the calm tenant takes 3 of the 4 slots as they
	// come free, as it does alone: its latency is one model call and the wait for the slots
	// the flood holds, 0 to 1s, so up to 2x its latency alone, when the flood's calls
	// started just before its POST.
	if most := time.Duration(calmUnderFloodMax * float64(fairShare.calmAlone)); fairShare.calmFlood > most {
		t.Errorf("fair share: the calm tenant's worst latency under the flood is %s, over %.0fx its %s alone (%s)",
			fairShare.calmFlood, calmUnderFloodMax, fairShare.calmAlone, most.Round(time.Millisecond))
	}
	if most := time.Duration(drainMax * float64(floodIdeal)); fairShare.drain > most {
		t.Errorf("fair share: the flood drained in %s, over %.1fx its ideal %s (%s)", fairShare.drain, drainMax, floodIdeal, most)
	}
	if adaptive.share() > refusedShareMax {
		t.Errorf("adaptive limit: %.1f%% of the model's calls met a 429, want at most %.0f%%", 100*adaptive.share(), 100*refusedShareMax)
	}
	if most := time.Duration(capacityTimeMax * float64(capacityIdeal)); adaptive.took > most {
		t.Errorf("adaptive limit: the %d requests took %s, over %.1fx their ideal %s (%s)", capacityRequests, adaptive.took, capacityTimeMax, capacityIdeal, most)
	}
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(max(b, 1)) }

// calmResult is what one serve measured of the calm tenant and the flood.
type calmResult struct {
	// calmAlone and calmFlood are the calm tenant's worst latency, submit to completed, alone
	// and submitted right after the flood.
	calmAlone, calmFlood time.Duration
	// drain is from the flood's first submission to its last request seen completed.
	drain time.Duration
	// floodAhead is, at most over the calm tenant's requests under the flood, how many of the
	// flood's calls started between the request's POST and its call.
	floodAhead int
	// calls is the model's calls, the warm-up's included.
	calls int
}

// capacityResult is what one serve measured of a burst to the model of limited capacity.
type capacityResult struct {
	refused, calls int
	took           time.Duration
	finalLimit     string
}

func (r capacityResult) share() float64 { return float64(r.refused) / float64(max(r.calls, 1)) }

// measureCalmUnderFlood starts serve with extra flags, and times the calm tenant's requests
// alone, then right behind the flood.
func measureCalmUnderFlood(t *testing.T, extra ...string) calmResult {
	model := &scriptedCapacity{delay: floodModelCall}
	m := startFloodServe(t, model, extra...)
	calm, flood := m.e.token(t, "tenant-a"), m.e.token(t, "tenant-b")

	var r calmResult
	alone := m.bodies(t, "calm-alone", calmRequests)
	took, _ := m.submitAndTime(t, calm, alone)
	r.calmAlone = slices.Max(took)

	burst := m.bodies(t, "flood", floodRequests)
	under := m.bodies(t, "calm-flood", calmRequests)
	start := time.Now()
	floodDone := make(chan time.Time, 1)
	m.submitAll(t, flood, burst)
	go func() { floodDone <- m.waitAll(t.Context(), flood, ids(burst), time.Now().Add(4*time.Minute)) }()
	took, submitted := m.submitAndTime(t, calm, under)
	r.calmFlood = slices.Max(took)
	last := <-floodDone
	if last.IsZero() {
		t.Fatalf("the flood of %d did not complete within 4 minutes", floodRequests)
	}
	r.drain = last.Sub(start).Round(time.Millisecond)
	r.calls = model.checkOneCallEach(t, slices.Concat(ids(alone), ids(burst), ids(under)))
	r.floodAhead = model.logCalm(t, under, took, submitted)
	t.Logf("%s: calm alone %s, calm under the flood %s, flood drained in %s, %d model calls",
		t.Name(), r.calmAlone, r.calmFlood, r.drain, r.calls)
	return r
}

// measureModelCapacity starts serve with extra flags against a model that serves modelCapacity
// calls at once, and times a burst of capacityRequests.
func measureModelCapacity(t *testing.T, extra ...string) capacityResult {
	model := &scriptedCapacity{delay: floodModelCall, capacity: modelCapacity}
	m := startFloodServe(t, model, extra...)
	token := m.e.token(t, "tenant-b")
	burst := m.bodies(t, "burst", capacityRequests)
	model.resetCounts() // the warm-up's call is not part of the burst
	start := time.Now()
	m.submitAll(t, token, burst)
	last := m.waitAll(t.Context(), token, ids(burst), time.Now().Add(4*time.Minute))
	if last.IsZero() {
		t.Fatalf("the burst of %d did not complete within 4 minutes", capacityRequests)
	}
	r := capacityResult{took: last.Sub(start).Round(time.Millisecond)}
	r.calls = model.checkOneCallEach(t, ids(burst))
	r.refused = model.refusals()
	r.finalLimit = m.limitGauge(t)
	t.Logf("%s: %d of %d calls met a 429, all judged in %s, limit at the end %s",
		t.Name(), r.refused, r.calls, r.took, r.finalLimit)
	return r
}

// floodServe is one serve under measurement.
type floodServe struct {
	e           *apiEnv
	public, ops string
	client      *http.Client
}

// startFloodServe starts serve as its own binary with the public API, the model and extra
// flags, and waits until a first request has been judged, so that the group has its
// partitions and the timings start from a running service.
func startFloodServe(t *testing.T, model *scriptedCapacity, extra ...string) *floodServe {
	t.Helper()
	e := newAPIEnv(t)
	e.llm.Forget() // the scripted model counts the calls itself
	e.llm.Answer(model.answer)
	args := append(e.serveArgs(),
		"--concurrency", strconv.Itoa(floodConcurrency),
		// One model call a request: one rule a call, no confidence calls.
		"--llm-rules-per-call", "1",
		"--confidence", "off",
		"--log-level", "warn",
	)
	e.startBinary(t, append(args, extra...)...)
	m := &floodServe{e: e, public: "http://" + e.httpAddr, ops: "http://" + e.opsAddr, client: &http.Client{Timeout: 10 * time.Second}}
	waitUntil(t, waitLimit, "serve to be ready", func() bool {
		resp, err := http.Get(m.ops + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	waitForListener(t, m.public)
	warmup := m.bodies(t, "warmup", 1)
	m.submitAll(t, e.token(t, "warmup"), warmup)
	if m.waitAll(t.Context(), e.token(t, "warmup"), ids(warmup), time.Now().Add(waitLimit)).IsZero() {
		t.Fatal("the warm-up request was not judged")
	}
	return m
}

// floodBody is one request's id and its body for POST /v1/validations.
type floodBody struct {
	id   string
	body []byte
}

// bodies are n requests of one rule each, ids prefix-000…, each naming its id in a ticket its
// document carries, so that the model's calls are told apart and no verdict is taken from
// the verdict cache.
func (m *floodServe) bodies(t *testing.T, prefix string, n int) []floodBody {
	t.Helper()
	out := make([]floodBody, n)
	for i := range out {
		id := fmt.Sprintf("%s-%03d", prefix, i)
		out[i] = floodBody{id: id, body: mustJSON(t, map[string]any{
			"request_id":     id,
			"inline_ruleset": inlineRuleset("signature", `{"rule_id":"signed","type":"boolean","rule_text":"Is the contract signed by both parties?"}`),
			"primary_docs":   []any{map[string]any{"name": "contract.txt", "content": "The contract is signed by both parties [ticket " + id + "]."}},
			"options":        map[string]any{"generate_report": false},
		})}
	}
	return out
}

func ids(bodies []floodBody) []string {
	out := make([]string, len(bodies))
	for i, b := range bodies {
		out[i] = b.id
	}
	return out
}

// submitAll posts bodies as token's tenant, eight at a time, and returns once every POST has
// answered 202.
func (m *floodServe) submitAll(t *testing.T, token string, bodies []floodBody) {
	t.Helper()
	work := make(chan floodBody)
	errs := make(chan error, len(bodies))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for b := range work {
				if err := m.post(token, b.body); err != nil {
					errs <- fmt.Errorf("%s: %w", b.id, err)
				}
			}
		})
	}
	for _, b := range bodies {
		work <- b
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("POST /v1/validations: %v", err)
	}
}

// submitAndTime posts bodies at once, each from its own goroutine, and returns each one's
// latency, from just before its POST to its first GET that finds it completed, and when its
// POST was sent.
func (m *floodServe) submitAndTime(t *testing.T, token string, bodies []floodBody) (took []time.Duration, submitted []time.Time) {
	t.Helper()
	took, submitted = make([]time.Duration, len(bodies)), make([]time.Time, len(bodies))
	errs := make([]error, len(bodies))
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Go(func() {
			start := time.Now()
			submitted[i] = start
			if errs[i] = m.post(token, b.body); errs[i] != nil {
				return
			}
			deadline := start.Add(4 * time.Minute)
			for time.Now().Before(deadline) {
				status, err := m.status(token, b.id)
				switch {
				case err != nil:
					errs[i] = err
					return
				case status == "completed":
					took[i] = time.Since(start).Round(time.Millisecond)
					return
				case status == "failed":
					errs[i] = fmt.Errorf("%s failed", b.id)
					return
				}
				time.Sleep(25 * time.Millisecond)
			}
			errs[i] = fmt.Errorf("%s not completed within 4 minutes", b.id)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return took, submitted
}

// waitAll polls the requests named until every one is completed, and returns when the last
// was seen completed; zero when deadline passes or ctx ends first, or one failed. It sweeps the requests
// not yet seen completed, one GET at a time, every 100 ms: near the end, when the time is
// taken, few are left and a sweep is quick.
func (m *floodServe) waitAll(ctx context.Context, token string, ids []string, deadline time.Time) time.Time {
	pending := slices.Clone(ids)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		var left []string
		for _, id := range pending {
			status, err := m.status(token, id)
			if status == "failed" {
				return time.Time{}
			}
			if err != nil || status != "completed" {
				left = append(left, id)
			}
		}
		if pending = left; len(pending) == 0 {
			return time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Time{}
}

func (m *floodServe) post(token string, body []byte) error {
	req, err := http.NewRequest(http.MethodPost, m.public+"/v1/validations", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("answered %d %s", resp.StatusCode, data)
	}
	return nil
}

// status is a validation's status as GET /v1/validations/{id} answers it.
func (m *floodServe) status(token, id string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, m.public+"/v1/validations/"+id, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := m.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s answered %d %s", id, resp.StatusCode, data)
	}
	var job struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(data, &job); err != nil {
		return "", fmt.Errorf("GET %s: %w", id, err)
	}
	return job.Status, nil
}

var limitGauge = regexp.MustCompile(`(?m)^rulevalidator_llm_concurrency\{[^}]*state="limit"[^}]*\} (\S+)$`)

// limitGauge is the limit on calls to the model that serve's metrics show now.
func (m *floodServe) limitGauge(t *testing.T) string {
	t.Helper()
	code, _, body := httpDo(t, http.MethodGet, m.ops+"/metrics", "", nil)
	if match := limitGauge.FindSubmatch(body); code == http.StatusOK && match != nil {
		return string(match[1])
	}
	return "?"
}

// scriptedCapacity is the scripted model of the measurement: it answers any ruleset after
// delay, serving at most capacity calls at once (0: any number) and answering the calls past
// that at once with 429 and Retry-After: 1, as a shared endpoint's gateway does. It counts
// each request's answered and refused calls by the ticket in its prompt.
type scriptedCapacity struct {
	delay    time.Duration
	capacity int64

	inFlight atomic.Int64
	mu       sync.Mutex
	answered map[string]int
	refused  map[string]int
	// started is when each request's answered call reached the model.
	started map[string]time.Time
}

func (s *scriptedCapacity) answer(call llmfake.Call) llmfake.Reply {
	ticket := "?"
	for _, msg := range call.Messages {
		if match := ticketPattern.FindStringSubmatch(msg.Content); msg.Role == "user" && match != nil {
			ticket = match[1]
			break
		}
	}
	n := s.inFlight.Add(1)
	if s.capacity > 0 && n > s.capacity {
		s.inFlight.Add(-1)
		s.count(&s.refused, ticket)
		return llmfake.Reply{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "1"},
			Error: &llmfake.Error{Message: "too many requests at once", Type: "rate_limit_error"}}
	}
	s.mu.Lock()
	if s.started == nil {
		s.started = map[string]time.Time{}
	}
	s.started[ticket] = time.Now()
	s.mu.Unlock()
	reply := llmfake.Verdicts(call)
	time.Sleep(s.delay)
	// Done before the answer is sent: a client sending its next call as soon as it reads this
	// one finds the place free.
	s.inFlight.Add(-1)
	s.count(&s.answered, ticket)
	return reply
}

func (s *scriptedCapacity) count(m *map[string]int, ticket string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[ticket]++
}

func (s *scriptedCapacity) resetCounts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answered, s.refused, s.started = nil, nil, nil
}

func (s *scriptedCapacity) refusals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.refused {
		n += c
	}
	return n
}

// logCalm logs, for each of the calm tenant's requests submitted under the flood, when its
// model call started and when it was seen completed, and the flood's calls that started
// between its submission and its call; it returns the most of those.
func (s *scriptedCapacity) logCalm(t *testing.T, calm []floodBody, took []time.Duration, submitted []time.Time) (most int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range calm {
		started := s.started[b.id]
		var after []time.Duration
		for id, at := range s.started {
			if strings.HasPrefix(id, "flood-") && at.After(submitted[i]) && at.Before(started) {
				after = append(after, at.Sub(submitted[i]))
			}
		}
		slices.Sort(after)
		n := len(after)
		most = max(most, n)
		var flood []string
		for j, d := range after {
			switch {
			case n <= 8 || j < 4 || j == n-1:
				flood = append(flood, fmt.Sprintf("+%.2fs", d.Seconds()))
			case j == 4:
				flood = append(flood, "…")
			}
		}
		t.Logf("  %s: its call started +%.2fs after its POST, completed +%.2fs; %d flood calls started between: %v",
			b.id, started.Sub(submitted[i]).Seconds(), took[i].Seconds(), n, flood)
	}
	return most
}

// checkOneCallEach checks that the model answered exactly one call for each of the requests
// named and none for any other (the warm-up apart), and returns the calls it saw, refused ones
// included.
func (s *scriptedCapacity) checkOneCallEach(t *testing.T, ids []string) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
		if n := s.answered[id]; n != 1 {
			t.Errorf("the model answered %d calls for %s, want 1", n, id)
		}
	}
	calls := 0
	for id, n := range s.answered {
		if !want[id] && !strings.HasPrefix(id, "warmup-") {
			t.Errorf("the model answered %d calls for %q, not a request of the measurement", n, id)
		}
		calls += n
	}
	for _, n := range s.refused {
		calls += n
	}
	return calls
}

// The measurement's scripted model can be driven without the stack: a call past its capacity
// is refused with 429 and Retry-After, and each request's calls are counted.
func TestScriptedCapacityRefusesPastItsCapacity(t *testing.T) {
	t.Parallel()
	s := &scriptedCapacity{delay: 200 * time.Millisecond, capacity: 1}
	call := func(id string) llmfake.Call {
		return llmfake.Call{Messages: []llmfake.Message{{Role: "user", Content: "Text [ticket " + id + "]."}}}
	}
	replies := make(chan llmfake.Reply, 1)
	go func() { replies <- s.answer(call("a")) }()
	waitUntil(t, time.Second, "the first call to be in flight", func() bool { return s.inFlight.Load() == 1 })
	second := s.answer(call("b"))
	if second.Status != http.StatusTooManyRequests || second.Header["Retry-After"] != "1" {
		t.Errorf("a call past the capacity got %d %v, want 429 with Retry-After: 1", second.Status, second.Header)
	}
	if first := <-replies; first.Status != 0 {
		t.Errorf("the call within the capacity got %d, want an answer", first.Status)
	}
	s.answer(call("b"))
	if calls := s.checkOneCallEach(t, []string{"a", "b"}); calls != 3 || s.refusals() != 1 {
		t.Errorf("calls %d, refused %d; want 3, 1", calls, s.refusals())
	}
}
