package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/engine"
	"rulevalidator/internal/kafkatest"
	"rulevalidator/internal/llmfake"
	"rulevalidator/internal/logbuf"
	"rulevalidator/internal/pdftest"
	"rulevalidator/request"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// Helpers for the integration tests of `serve`: each test gets its own topics, consumer group
// and scripted model, produces Avro requests, runs the service (in this process through run,
// or as the built binary) and reads back what it published.

const (
	// waitLimit bounds every wait; the tests normally finish far sooner.
	waitLimit = 60 * time.Second
	fakeModel = "fake-model"
	tenant    = "contoso"

	exampleRulesetID      = "contract-review"
	exampleRulesetVersion = "1.0.0"
)

// exampleRuleIDs are the example ruleset's rules, in order: the six the
// model judges, then the check of its nested ruleset signing-authority and
// the rule of data-protection, which a filter leaves out of the example
// request.
var exampleRuleIDs = []string{"governing-law", "liability-cap", "subprocessors", "contract-value", "payment-terms", "termination",
	"approval-limit-given", "dpa-attached"}

// exampleModelRuleIDs are the example ruleset's rules the model judges.
var exampleModelRuleIDs = exampleRuleIDs[:6]

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBinary.dir != "" {
		os.RemoveAll(builtBinary.dir)
	}
	os.Exit(code)
}

// builtBinary is the rulevalidator binary that the subprocess tests run, built without the
// race detector (which would only slow the service down) on first use.
var builtBinary struct {
	once      sync.Once
	dir, path string
	err       error
}

func serviceBinary(t *testing.T) string {
	t.Helper()
	builtBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "rulevalidator-bin-")
		if err != nil {
			builtBinary.err = err
			return
		}
		builtBinary.dir = dir
		builtBinary.path = filepath.Join(dir, "rulevalidator")
		cmd := exec.Command("go", "build", "-o", builtBinary.path, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			builtBinary.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if builtBinary.err != nil {
		t.Fatalf("building the rulevalidator binary: %v", builtBinary.err)
	}
	return builtBinary.path
}

// serveEnv is one test's topics, consumer group, ruleset directory and scripted model.
type serveEnv struct {
	bootstrap   string
	group       string
	requests    string
	verdicts    string
	summaries   string
	deadLetters string
	callbacks   string
	reviews     string
	partitions  int
	rulesetsDir string
	llm         *llmfake.Server
	serde       *schemas.Serde
}

// newServeEnv creates the request, verdict, summary and callback topics with the given number
// of partitions (the dead-letter topic has one) and a model that answers every call with
// exampleReply at once.
func newServeEnv(t *testing.T, partitions int) *serveEnv {
	t.Helper()
	return newServeEnvOn(t, kafkatest.Broker(t), partitions)
}

// newServeEnvOn is newServeEnv on the broker at bootstrap.
func newServeEnvOn(t *testing.T, bootstrap string, partitions int) *serveEnv {
	t.Helper()
	// serve compiles the PDF engine at start unless it finds it compiled. On a cold cache the
	// services of tests started side by side each compiled it, starving one another and the
	// tests' own readers past their timeouts, and none lived long enough to keep it. Compiled
	// here first, it is loaded.
	pdftest.Warm(t)
	e := &serveEnv{
		bootstrap:   bootstrap,
		group:       kafkatest.UniqueTopic(t, "group"),
		requests:    kafkatest.UniqueTopic(t, "requests"),
		verdicts:    kafkatest.UniqueTopic(t, "verdicts"),
		summaries:   kafkatest.UniqueTopic(t, "summaries"),
		deadLetters: kafkatest.UniqueTopic(t, "deadletter"),
		callbacks:   kafkatest.UniqueTopic(t, "callbacks"),
		reviews:     kafkatest.UniqueTopic(t, "reviews"),
		partitions:  partitions,
		rulesetsDir: t.TempDir(),
		llm:         llmfake.New(),
	}
	t.Cleanup(e.llm.Close)
	for _, topic := range []string{e.requests, e.verdicts, e.summaries} {
		kafkatest.CreateTopic(t, bootstrap, topic, partitions)
	}
	kafkatest.CreateTopic(t, bootstrap, e.deadLetters, 1)
	kafkatest.CreateTopic(t, bootstrap, e.reviews, partitions)
	// As ops/kafka.sh creates it: a callback carries every verdict.
	kafkatest.CreateTopicWith(t, bootstrap, e.callbacks, partitions, map[string]string{"max.message.bytes": "8388608"})

	ruleset, err := os.ReadFile(exampleRuleset)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.rulesetsDir, "contract-review.yaml"), ruleset, 0o600); err != nil {
		t.Fatal(err)
	}
	e.llm.SetDefault(exampleReply(t, 0))

	e.serde, err = schemas.NewSerde(context.Background(), schemas.SerdeConfig{
		Format: schemas.FormatPlain,
		Topics: map[string]string{e.requests: schemas.RequestSchema},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// exampleValueProbs are the probabilities the scripted model gives the
// example answer's verdict values, in rule order: each verdict's confidence.
// liability-cap (0.62), contract-value (0.55) and termination (0.74) are
// under the default review threshold, 0.8.
var exampleValueProbs = []float64{0.97, 0.62, 0.91, 0.55, 0.88, 0.74}

// exampleReply is the scripted model's answer for the example ruleset, after delay.
func exampleReply(t *testing.T, delay time.Duration) llmfake.Reply {
	return llmfake.Reply{Content: exampleAnswer(t, nil), PromptTokens: 900, CompletionTokens: 300, CachedTokens: 512, Delay: delay,
		ValueProbs: exampleValueProbs}
}

// args are the command line of `serve` for this environment; extra flags come last and so
// override the ones here.
func (e *serveEnv) args(extra ...string) []string {
	return append([]string{"serve",
		"--kafka-brokers", e.bootstrap,
		"--group-id", e.group,
		"--requests-topic", e.requests,
		"--verdicts-topic", e.verdicts,
		"--summaries-topic", e.summaries,
		"--deadletter-topic", e.deadLetters,
		"--callbacks-topic", e.callbacks,
		"--reviews-topic", e.reviews,
		"--rulesets-topic=",
		"--rulesets-dir", e.rulesetsDir,
		"--llm-base-url", e.llm.URL(),
		"--model", fakeModel,
		"--llm-instructions", "system", // scripted replies answer judging calls only
		"--concurrency", "4",
		"--drain-timeout", "20s",
		// Production waits, shrunk: a killed member's partitions move after 6 s (the broker's
		// least), and a request that failed transiently is tried again within half a second.
		"--session-timeout", "6s",
		"--retry-backoff", "20ms",
		"--retry-backoff-max", "500ms",
		"--log-format", "text",
		// No public API (it needs token keys); the operations listener on any free port.
		"--http-addr=",
		"--ops-addr", "127.0.0.1:0",
	}, extra...)
}

// noEnv is the environment of in-process runs: everything comes from the flags.
func noEnv(string) string { return "" }

// inProcess is `serve` running in this process through run.
type inProcess struct {
	cancel context.CancelFunc
	done   chan struct{}
	code   int
	log    *logbuf.Buffer
}

// startInProcess runs `rulevalidator serve` with e.args(extra...) until stop (or the end of
// the test). Its log is shown when the test fails.
func (e *serveEnv) startInProcess(t *testing.T, extra ...string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{cancel: cancel, done: make(chan struct{}), log: &logbuf.Buffer{}}
	args := e.args(extra...)
	go func() {
		defer close(p.done)
		p.code = run(ctx, args, io.Discard, p.log, noEnv)
	}()
	t.Cleanup(func() {
		p.cancel()
		<-p.done
		if t.Failed() {
			t.Logf("service log:\n%s", tail(p.log.String(), 80))
		}
	})
	return p
}

// stop cancels the service's context (what SIGTERM does) and returns its exit status.
func (p *inProcess) stop(t *testing.T) int {
	t.Helper()
	p.cancel()
	select {
	case <-p.done:
		return p.code
	case <-time.After(waitLimit):
		t.Fatalf("serve did not return within %s of being stopped", waitLimit)
		return -1
	}
}

// process is the rulevalidator binary running `serve`.
type process struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

// startBinary runs the built binary with e.args(extra...); it is killed at the end of the
// test if still running, and its log shown when the test fails.
func (e *serveEnv) startBinary(t *testing.T, extra ...string) *process {
	t.Helper()
	logFile, err := os.CreateTemp(t.TempDir(), "serve-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(serviceBinary(t), e.args(extra...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	p := &process{cmd: cmd, logPath: logFile.Name(), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = cmd.Wait()
		logFile.Close()
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("log of serve (pid %d):\n%s", p.cmd.Process.Pid, tail(p.logText(), 80))
		}
	})
	return p
}

func (p *process) logText() string {
	data, _ := os.ReadFile(p.logPath)
	return string(data)
}

func (p *process) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("sending %v to pid %d: %v", sig, p.cmd.Process.Pid, err)
	}
}

// wait waits for the process to end and returns its exit status, -1 when a signal ended it.
func (p *process) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("serve (pid %d) still running %s after it was told to stop", p.cmd.Process.Pid, limit)
	}
	var exit *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &exit):
		return exit.ExitCode()
	default:
		t.Fatalf("waiting for serve: %v", p.err)
		return -1
	}
}

// exampleInputs are the example's inputs, read once per call (tests change the copies).
func exampleInputs(t *testing.T) *engine.Inputs {
	t.Helper()
	in, err := readFile(exampleInput, request.ParseInputs)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// exampleRequest asks for the example's inputs to be judged against the example ruleset by
// reference. Its message carries a ticket naming id, so that the model's requests can be told
// apart (ticketsSeen).
func exampleRequest(t *testing.T, id string) *schemas.Request {
	t.Helper()
	in := exampleInputs(t)
	req := &schemas.Request{
		RequestID:     id,
		TenantID:      tenant,
		RulesetRef:    &schemas.RulesetRef{ID: exampleRulesetID},
		PrimaryDocs:   requestDocs(in.PrimaryDocs),
		AuxiliaryDocs: requestDocs(in.AuxiliaryDocs),
		Message:       ptr(in.Message + " [ticket " + id + "]"),
		Options:       schemas.Options{GenerateReport: ptr(false)},
		SubmittedAt:   time.Now().UTC().Truncate(time.Millisecond),
	}
	for _, ni := range in.NamedInputs {
		value, err := json.Marshal(ni.Value)
		if err != nil {
			t.Fatal(err)
		}
		item := schemas.NamedInput{Name: ni.Name, ValueJSON: string(value)}
		if ni.Description != "" {
			item.Description = ptr(ni.Description)
		}
		req.NamedInputs = append(req.NamedInputs, item)
	}
	return req
}

// exampleRequests are n example requests with the ids prefix-00, prefix-01...
func exampleRequests(t *testing.T, prefix string, n int) (ids []string, reqs []*schemas.Request) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("%s-%02d", prefix, i)
		ids = append(ids, id)
		reqs = append(reqs, exampleRequest(t, id))
	}
	return ids, reqs
}

func requestDocs(docs []engine.Document) []schemas.Document {
	out := make([]schemas.Document, len(docs))
	for i, d := range docs {
		out[i] = schemas.Document{Name: d.Name, Pages: slices.Clone(d.Pages)}
	}
	return out
}

var ticketPattern = regexp.MustCompile(`\[ticket ([^\]]+)\]`)

// ticketsSeen counts the model's requests by the request id in their ticket.
func ticketsSeen(fake *llmfake.Server) map[string]int {
	seen := map[string]int{}
	for _, r := range fake.Requests() {
		for _, m := range r.Messages {
			if m.Role != "user" {
				continue
			}
			if match := ticketPattern.FindStringSubmatch(m.Content); match != nil {
				seen[match[1]]++
				break
			}
		}
	}
	return seen
}

// traceparentFor is a W3C traceparent derived from a request id.
func traceparentFor(id string) string {
	sum := sha256.Sum256([]byte(id))
	return fmt.Sprintf("00-%x-%x-01", sum[:16], sum[16:24])
}

// requestMessage encodes req in the plain wire format, keyed by its id, with a traceparent.
func (e *serveEnv) requestMessage(t *testing.T, req *schemas.Request) kafka.Message {
	t.Helper()
	value, sh, err := e.serde.Encode(e.requests, req)
	if err != nil {
		t.Fatalf("encoding request %s: %v", req.RequestID, err)
	}
	headers := []kafka.Header{{Key: "traceparent", Value: []byte(traceparentFor(req.RequestID))}}
	for _, h := range sh {
		headers = append(headers, kafka.Header{Key: h.Key, Value: h.Value})
	}
	return kafka.Message{Key: []byte(req.RequestID), Value: value, Headers: headers}
}

// produce writes msgs to the requests topic, partitioned by key as the service partitions its
// events, in one call, and waits for every acknowledgement.
func (e *serveEnv) produce(t *testing.T, msgs ...kafka.Message) {
	t.Helper()
	w := &kafka.Writer{
		Addr:         kafka.TCP(e.bootstrap),
		Topic:        e.requests,
		Balancer:     &kafka.Murmur2Balancer{}, // as every producer of the service does
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond,
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("producing %d requests to %s: %v", len(msgs), e.requests, err)
	}
}

// produceRequests encodes and produces requests.
func (e *serveEnv) produceRequests(t *testing.T, reqs ...*schemas.Request) {
	t.Helper()
	msgs := make([]kafka.Message, len(reqs))
	for i, r := range reqs {
		msgs[i] = e.requestMessage(t, r)
	}
	e.produce(t, msgs...)
}

// topicLog collects every record of a topic, read from the start of each partition without
// a consumer group, until the test ends.
type topicLog struct {
	mu   sync.Mutex
	msgs []kafka.Message
}

// watch starts reading topic (of the given partitions) in the background.
func (e *serveEnv) watch(t *testing.T, topic string, partitions int) *topicLog {
	t.Helper()
	l := &topicLog{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for p := range partitions {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   []string{e.bootstrap},
			Topic:     topic,
			Partition: p,
			MinBytes:  1,
			MaxBytes:  10 << 20,
			MaxWait:   100 * time.Millisecond,
		})
		wg.Go(func() {
			defer r.Close()
			for {
				m, err := r.ReadMessage(ctx)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					// The broker restarting: the reader reconnects by itself.
					time.Sleep(100 * time.Millisecond)
					continue
				}
				l.mu.Lock()
				l.msgs = append(l.msgs, m)
				l.mu.Unlock()
			}
		})
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return l
}

// snapshot is what was read so far, by partition then offset.
func (l *topicLog) snapshot() []kafka.Message {
	l.mu.Lock()
	out := slices.Clone(l.msgs)
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b kafka.Message) int {
		if a.Partition != b.Partition {
			return a.Partition - b.Partition
		}
		return int(a.Offset - b.Offset)
	})
	return out
}

func (l *topicLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.msgs)
}

// waitReadToEnd waits until l holds every record of topic (of the given partitions) written
// so far. Each partition is read on its own, so a record can be on the broker and not in l
// yet, behind a record of another topic that is.
func (l *topicLog) waitReadToEnd(t *testing.T, bootstrap, topic string, partitions int) {
	t.Helper()
	end := opEndOffsets(t, bootstrap, topic, partitions)
	waitUntil(t, waitLimit, "every record of "+topic+" is read", func() bool {
		next := make([]int64, partitions)
		for _, m := range l.snapshot() {
			next[m.Partition] = max(next[m.Partition], m.Offset+1)
		}
		for p := range partitions {
			if next[p] < end[p] {
				return false
			}
		}
		return true
	})
}

// keys counts the records by key.
func (l *topicLog) keys() map[string]int {
	out := map[string]int{}
	for _, m := range l.snapshot() {
		out[string(m.Key)]++
	}
	return out
}

// waitUntil polls cond until it holds, failing the test after limit.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hasAll reports whether every id occurs among got's keys.
func hasAll(got map[string]int, ids []string) bool {
	for _, id := range ids {
		if got[id] == 0 {
			return false
		}
	}
	return true
}

func schemaHeadersOf(m kafka.Message) []schemas.Header {
	out := make([]schemas.Header, len(m.Headers))
	for i, h := range m.Headers {
		out[i] = schemas.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

func decodeAs[T schemas.Event](t *testing.T, e *serveEnv, m kafka.Message) T {
	t.Helper()
	ev, err := e.serde.Decode(context.Background(), m.Topic, m.Value, schemaHeadersOf(m))
	if err != nil {
		t.Fatalf("decoding %s/%d/%d: %v", m.Topic, m.Partition, m.Offset, err)
	}
	v, ok := ev.(T)
	if !ok {
		t.Fatalf("%s/%d/%d holds a %s, not a %T", m.Topic, m.Partition, m.Offset, ev.SchemaName(), v)
	}
	return v
}

func (e *serveEnv) verdict(t *testing.T, m kafka.Message) *schemas.VerdictEvent {
	t.Helper()
	return decodeAs[*schemas.VerdictEvent](t, e, m)
}

func (e *serveEnv) summary(t *testing.T, m kafka.Message) *schemas.SummaryEvent {
	t.Helper()
	return decodeAs[*schemas.SummaryEvent](t, e, m)
}

func (e *serveEnv) deadLetter(t *testing.T, m kafka.Message) *schemas.DeadLetter {
	t.Helper()
	return decodeAs[*schemas.DeadLetter](t, e, m)
}

// header returns the value of the header named key, and whether there is exactly one.
func header(m kafka.Message, key string) (string, bool) {
	var value string
	n := 0
	for _, h := range m.Headers {
		if h.Key == key {
			value = string(h.Value)
			n++
		}
	}
	return value, n == 1
}

// offsets is the group's committed offset and the end offset of each request partition.
func (e *serveEnv) offsets(t *testing.T) (committed, end map[int]int64) {
	t.Helper()
	parts := make([]int, e.partitions)
	for i := range parts {
		parts[i] = i
	}
	client := &kafka.Client{Addr: kafka.TCP(e.bootstrap)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: e.group, Topics: map[string][]int{e.requests: parts}})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		t.Fatalf("committed offsets of group %s: %v", e.group, err)
	}
	committed = map[int]int64{}
	for _, p := range res.Topics[e.requests] {
		committed[p.Partition] = max(p.CommittedOffset, 0)
	}
	req := make([]kafka.OffsetRequest, len(parts))
	for i, p := range parts {
		req[i] = kafka.LastOffsetOf(p)
	}
	lo, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{e.requests: req}})
	if err != nil {
		t.Fatalf("end offsets of %s: %v", e.requests, err)
	}
	end = map[int]int64{}
	for _, p := range lo.Topics[e.requests] {
		if p.Error != nil {
			t.Fatalf("end offset of %s partition %d: %v", e.requests, p.Partition, p.Error)
		}
		end[p.Partition] = p.LastOffset
	}
	return committed, end
}

// waitCommittedToEnd waits until the group has committed every request partition to its end.
func (e *serveEnv) waitCommittedToEnd(t *testing.T) {
	t.Helper()
	var committed, end map[int]int64
	deadline := time.Now().Add(waitLimit)
	for {
		committed, end = e.offsets(t)
		done := true
		for p, last := range end {
			if committed[p] != last {
				done = false
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s committed %v, end offsets %v, after %s", e.group, committed, end, waitLimit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkRedeliveriesIdentical checks that every event published more than once (a request
// handled again after a crash or a lost commit) is the same event each time, timestamps apart.
// It returns how many events were published more than once.
func checkRedeliveriesIdentical(t *testing.T, e *serveEnv, verdicts, summaries []kafka.Message) int {
	t.Helper()
	type copyOf struct {
		msg kafka.Message
		ev  schemas.Event
	}
	byID := map[string][]copyOf{}
	for _, m := range verdicts {
		v := e.verdict(t, m)
		v.StartedAt, v.CompletedAt = time.Time{}, time.Time{}
		byID[v.EventID] = append(byID[v.EventID], copyOf{m, v})
	}
	for _, m := range summaries {
		s := e.summary(t, m)
		s.StartedAt, s.CompletedAt = time.Time{}, time.Time{}
		byID[s.EventID] = append(byID[s.EventID], copyOf{m, s})
	}
	repeated := 0
	for id, copies := range byID {
		if len(copies) < 2 {
			continue
		}
		repeated++
		first := copies[0]
		for _, c := range copies[1:] {
			if !jsonEqual(t, first.ev, c.ev) {
				t.Errorf("event %s published twice with different content:\n%s\n%s", id, jsonText(t, first.ev), jsonText(t, c.ev))
			}
			if string(c.msg.Key) != string(first.msg.Key) || c.msg.Partition != first.msg.Partition {
				t.Errorf("event %s published under key %q partition %d, then key %q partition %d",
					id, first.msg.Key, first.msg.Partition, c.msg.Key, c.msg.Partition)
			}
			if a, b := headersExcept(first.msg, "ce_time"), headersExcept(c.msg, "ce_time"); !slices.Equal(a, b) {
				t.Errorf("event %s published twice with different headers:\n%v\n%v", id, a, b)
			}
		}
	}
	return repeated
}

func headersExcept(m kafka.Message, skip string) []string {
	var out []string
	for _, h := range m.Headers {
		if h.Key != skip {
			out = append(out, h.Key+"="+string(h.Value))
		}
	}
	return out
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	return jsonText(t, a) == jsonText(t, b)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func ptr[T any](v T) *T { return &v }

// client is a stream client for the test's broker.
func (e *serveEnv) client(t *testing.T) *stream.Client {
	t.Helper()
	c, err := stream.NewClient(stream.ClientConfig{Brokers: []string{e.bootstrap}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
