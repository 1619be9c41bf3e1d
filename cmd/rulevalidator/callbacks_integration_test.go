package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/callback"
	"rulevalidator/internal/llmfake"
	"rulevalidator/schemas"
)

// callbackSecret signs the callbacks of these tests.
const callbackSecret = "integration-callback-secret-0123456789abcdef"

// callbackReceiver is a webhook endpoint on loopback that answers every
// POST with the status set last, and keeps what it received.
type callbackReceiver struct {
	srv *httptest.Server

	mu     sync.Mutex
	status int
	got    []webhookCall
}

type webhookCall struct {
	path, eventID, timestamp, signature string
	body                                []byte
	answered                            int
	at                                  time.Time
}

func newCallbackReceiver(t *testing.T, status int) *callbackReceiver {
	t.Helper()
	r := &callbackReceiver{status: status}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		status := r.status
		r.got = append(r.got, webhookCall{
			path: req.URL.Path, eventID: req.Header.Get(callback.HeaderEventID),
			timestamp: req.Header.Get(callback.HeaderTimestamp), signature: req.Header.Get(callback.HeaderSignature),
			body: body, answered: status, at: time.Now(),
		})
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *callbackReceiver) setStatus(status int) {
	r.mu.Lock()
	r.status = status
	r.mu.Unlock()
}

func (r *callbackReceiver) received() []webhookCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]webhookCall(nil), r.got...)
}

// answered counts, by event id, the callbacks answered with status.
func (r *callbackReceiver) answered(status int) map[string]int {
	out := map[string]int{}
	for _, c := range r.received() {
		if c.answered == status {
			out[c.eventID]++
		}
	}
	return out
}

// groupCommitted is a consumer group's committed offsets on topic, by partition (0 when none).
func groupCommitted(t *testing.T, bootstrap, group, topic string, partitions int) map[int]int64 {
	t.Helper()
	parts := make([]int, partitions)
	for i := range parts {
		parts[i] = i
	}
	client := &kafka.Client{Addr: kafka.TCP(bootstrap)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		t.Fatalf("committed offsets of group %s on %s: %v", group, topic, err)
	}
	out := map[int]int64{}
	for _, p := range res.Topics[topic] {
		out[p.Partition] = max(p.CommittedOffset, 0)
	}
	return out
}

// TestServeCallbacksSurviveSIGTERM: callbacks wait on the callbacks topic and
// are committed only once delivered, so a SIGTERM loses none. The receiver
// answers 503 while serve is stopped with request A's callback waiting to be
// retried, and request B is judged during the drain; after the restart the
// receiver answers 200 and gets both callbacks, signed, with the verdicts.
func TestServeCallbacksSurviveSIGTERM(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 2)
	callbacks := e.callbacks
	callbackGroup := e.group + ".callbacks"
	rcv := newCallbackReceiver(t, http.StatusServiceUnavailable)

	// A is judged at once; B's answer is held until the drain has begun.
	reply := exampleReply(t, 0)
	releaseB := make(chan struct{})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(releaseB) }) }
	t.Cleanup(release)
	e.llm.Answer(func(r llmfake.Call) llmfake.Reply {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, "[ticket cb-slow]") {
				<-releaseB
			}
		}
		return reply
	})
	reqA, reqB := exampleRequest(t, "cb-fast"), exampleRequest(t, "cb-slow")
	for _, r := range []*schemas.Request{reqA, reqB} {
		r.Options.CallbackURL = ptr(rcv.srv.URL + "/hooks/" + r.RequestID)
	}
	eventA, eventB := schemas.SummaryEventID(tenant, reqA.RequestID), schemas.SummaryEventID(tenant, reqB.RequestID)
	summaryLog := e.watch(t, e.summaries, e.partitions)
	e.produceRequests(t, reqA, reqB)

	flags := []string{"--callback-secret", callbackSecret, "--callback-allow-private"}
	first := e.startBinary(t, flags...)
	waitUntil(t, waitLimit, "A's callback was refused with 503 and B is with the model", func() bool {
		return rcv.answered(http.StatusServiceUnavailable)[eventA] > 0 && ticketsSeen(e.llm)[reqB.RequestID] > 0
	})
	if got := summaryLog.keys(); got[reqB.RequestID] != 0 {
		t.Fatalf("B was judged before the SIGTERM; the test needs it judged during the drain")
	}
	first.signal(t, syscall.SIGTERM)
	waitUntil(t, waitLimit, "the requests consumer drains", func() bool {
		for _, line := range strings.Split(first.logText(), "\n") {
			if strings.Contains(line, "partitions revoked: draining") && strings.Contains(line, e.requests) {
				return true
			}
		}
		return false
	})
	release()
	if code := first.wait(t, 40*time.Second); code != exitOK {
		t.Fatalf("exit status %d after SIGTERM, want %d", code, exitOK)
	}
	// Published before the exit; the watcher may read it a moment later.
	waitUntil(t, waitLimit, "B's summary, published by the drain, is read", func() bool { return summaryLog.keys()[reqB.RequestID] > 0 })
	if got := summaryLog.keys(); got[reqB.RequestID] != 1 {
		t.Fatalf("B's summary published %d times by the drain, want once", got[reqB.RequestID])
	}
	if delivered := rcv.answered(http.StatusOK); len(delivered) > 0 {
		t.Fatalf("callbacks answered 200 before the receiver was up: %v", delivered)
	}
	if committed := groupCommitted(t, e.bootstrap, callbackGroup, callbacks, 2); committed[0]+committed[1] != 0 {
		t.Fatalf("the callback group committed %v although nothing was delivered", committed)
	}
	if log := first.logText(); !strings.Contains(log, "callback interrupted by shutdown") || !strings.Contains(log, "retry given up at the drain; not committed") {
		t.Errorf("the log does not say A's callback was left uncommitted at the drain:\n%s", tail(log, 30))
	}
	refusedBefore := len(rcv.received())

	rcv.setStatus(http.StatusOK)
	restarted := time.Now()
	second := e.startBinary(t, flags...)
	waitUntil(t, waitLimit, "both callbacks are delivered after the restart", func() bool {
		ok := rcv.answered(http.StatusOK)
		return ok[eventA] > 0 && ok[eventB] > 0
	})
	waitUntil(t, waitLimit, "the callback group commits both", func() bool {
		committed := groupCommitted(t, e.bootstrap, callbackGroup, callbacks, 2)
		return committed[0]+committed[1] == 2
	})
	second.signal(t, syscall.SIGTERM)
	if code := second.wait(t, 40*time.Second); code != exitOK {
		t.Fatalf("second run: exit status %d after SIGTERM, want %d", code, exitOK)
	}

	for _, c := range rcv.received()[refusedBefore:] {
		if c.answered != http.StatusOK || c.at.Before(restarted) {
			continue
		}
		id := strings.TrimPrefix(c.eventID, tenant+"/")
		if c.path != "/hooks/"+id {
			t.Errorf("callback %s went to %s, want /hooks/%s", c.eventID, c.path, id)
		}
		if err := callback.Verify([]byte(callbackSecret), c.timestamp, c.signature, c.body, time.Now(), 5*time.Minute); err != nil {
			t.Errorf("callback %s: %v", c.eventID, err)
		}
		var body struct {
			RequestID string `json:"request_id"`
			Status    string `json:"status"`
			StatusURL string `json:"status_url"`
			Result    struct {
				Summary struct {
					EventID string `json:"event_id"`
					Status  string `json:"status"`
				} `json:"summary"`
				Verdicts []struct {
					RuleID string `json:"rule_id"`
				} `json:"verdicts"`
			} `json:"result"`
		}
		if err := json.Unmarshal(c.body, &body); err != nil {
			t.Fatalf("callback %s: %v\n%s", c.eventID, err, c.body)
		}
		if body.RequestID != id || body.Status != "completed" || body.Result.Summary.EventID != c.eventID || body.StatusURL != "/v1/validations/"+id {
			t.Errorf("callback %s: body %s", c.eventID, c.body)
		}
		var rules []string
		for _, v := range body.Result.Verdicts {
			rules = append(rules, v.RuleID)
		}
		if strings.Join(rules, ",") != strings.Join(exampleRuleIDs, ",") {
			t.Errorf("callback %s carries verdicts on %v, want %v", c.eventID, rules, exampleRuleIDs)
		}
	}
	seen := ticketsSeen(e.llm)
	for _, id := range []string{reqA.RequestID, reqB.RequestID} {
		if seen[id] != 1 {
			t.Errorf("the model was asked about %s %d times, want once: the callback alone was redelivered", id, seen[id])
		}
	}
	t.Logf("receiver: %d refused before the restart, then %s", refusedBefore, strconv.Quote(callbackSummary(rcv.received()[refusedBefore:])))
}

func callbackSummary(cs []webhookCall) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, c.eventID+"="+strconv.Itoa(c.answered))
	}
	return strings.Join(parts, " ")
}
