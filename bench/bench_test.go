package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"rulevalidator/consumer"
	"rulevalidator/engine"
	"rulevalidator/internal/kafkatest"
	"rulevalidator/internal/tracing"
	"rulevalidator/judging"
	"rulevalidator/pipeline"
	"rulevalidator/producer"
	"rulevalidator/registry"
	"rulevalidator/request"
	"rulevalidator/schemas"
	"rulevalidator/stream"
	"rulevalidator/verdict"
)

// The service is wired here as `rulevalidator serve` wires it (consumer → retry, dead-letter
// and recover middleware → pipeline → engine → producer), in process, with a scripted model:
// scriptedModel answers every call with a valid answer for the example ruleset after a fixed
// latency (zero for the throughput benchmarks).

const (
	exampleRuleset = "../examples/contract-review/ruleset.yaml"
	exampleInput   = "../examples/contract-review/input.json"
	// concurrency is the service's default --concurrency, used by both sides.
	concurrency = 8
	// partitions of the request, verdict and summary topics.
	partitions = 8
	// warmup requests go through before timing starts, so the group join and the first
	// fetches are not counted.
	warmup = 2 * concurrency
	// commitInterval is the consumer's default, also used by the pass-through.
	commitInterval = consumer.DefaultCommitInterval
	waitLimit      = 5 * time.Minute
)

// exampleAnswer is a valid answer for the example ruleset and inputs, one that passes the
// answer and content checks, so that each request takes one model call: six verdicts, five
// quotes to anchor (exact, normalised, fuzzy and one on the wrong page) and a citation of a
// named input. The benchmarks that judge fail when a request takes another number of calls.
const exampleAnswer = `{"rules":[
{"rule_id":"governing-law","data_sufficiency":true,"rationale":"Governed by New York law, which the policy approves.","boolean_output":true,"not_applicable":false,"evidences":[{"text":"This Agreement is governed by the laws of the State of","source_origin":"northwind-msa.pdf","source_page_number":1}]},
{"rule_id":"liability-cap","data_sufficiency":true,"rationale":"Capped at twelve months of fees; confidentiality carved out but not data protection.","boolean_output":false,"not_applicable":false,"evidences":[{"text":"“This limit does not apply to breach of clause 6 (Confidentiality).”","source_origin":"northwind-msa.pdf","source_page_number":3}]},
{"rule_id":"subprocessors","data_sufficiency":true,"rationale":"Only notice is required, not approval.","boolean_output":false,"not_applicable":false,"evidences":[{"text":"Supplier may engage subprocessors, provided it notifies Customer at least thirty days in advance.","source_origin":"northwind-msa.pdf","source_page_number":2}]},
{"rule_id":"contract-value","data_sufficiency":true,"rationale":"USD 240,000 a year, under the approval limit.","boolean_output":true,"not_applicable":false,"evidences":[{"text":"250000","source_origin":"approval_limit_usd","source_page_number":0}]},
{"rule_id":"payment-terms","data_sufficiency":true,"rationale":"30 days with 1.5% monthly interest.","numerical_output":2,"not_applicable":false,"evidences":[{"text":"Invoices are payable within thirty (30) days of receipt.","source_origin":"northwind-msa.pdf","source_page_number":2}]},
{"rule_id":"termination","data_sufficiency":true,"rationale":"Termination for convenience on 90 days' notice.","numerical_output":2,"not_applicable":false,"evidences":[{"text":"Customer may terminate for convenience on ninety (90) days' written notice.","source_origin":"northwind-msa.pdf","source_page_number":3}]}]}`

// scriptedModel is an engine.LLM that answers every call with answer after latency, and
// counts the calls.
type scriptedModel struct {
	answer  string
	latency time.Duration
	calls   atomic.Int64
}

func (m *scriptedModel) Chat(ctx context.Context, req engine.ChatRequest) (engine.ChatResponse, error) {
	m.calls.Add(1)
	if m.latency > 0 {
		t := time.NewTimer(m.latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return engine.ChatResponse{}, fmt.Errorf("%w: %v", engine.ErrLLMUnavailable, ctx.Err())
		}
	}
	return engine.ChatResponse{Content: m.answer, Format: req.Format, Model: req.Model,
		Usage: verdict.Usage{PromptTokens: 900, CompletionTokens: 300, LLMCalls: 1}}, nil
}

// requireOneCallPerRequest fails b unless the model was called once per request judged, as
// the benchmarks assume: a re-ask (an answer that no longer passes the checks) or a
// redelivery judged again would measure something else.
func (m *scriptedModel) requireOneCallPerRequest(b *testing.B, requests int64) {
	b.Helper()
	if calls := m.calls.Load(); calls != requests {
		b.Fatalf("%d model calls for %d requests (%.2f a request), want one each: does the scripted answer still pass the checks?",
			calls, requests, float64(calls)/float64(requests))
	}
}

// fixture is one benchmark run's topics, consumer group and request records.
type fixture struct {
	bootstrap                                  string
	group                                      string
	requests, verdicts, summaries, deadLetters string
	serde                                      *schemas.Serde
	rulesetsDir                                string
	inputs                                     *engine.Inputs
}

func newFixture(b *testing.B) *fixture {
	b.Helper()
	bootstrap := kafkatest.Broker(b)
	f := &fixture{
		bootstrap:   bootstrap,
		group:       kafkatest.UniqueTopic(b, "group"),
		requests:    kafkatest.UniqueTopic(b, "requests"),
		verdicts:    kafkatest.UniqueTopic(b, "verdicts"),
		summaries:   kafkatest.UniqueTopic(b, "summaries"),
		deadLetters: kafkatest.UniqueTopic(b, "deadletter"),
	}
	for _, topic := range []string{f.requests, f.verdicts, f.summaries} {
		kafkatest.CreateTopic(b, bootstrap, topic, partitions)
	}
	kafkatest.CreateTopic(b, bootstrap, f.deadLetters, 1)
	f.load(b)
	return f
}

// load reads the example ruleset and inputs and sets up the wire format for f's topics.
func (f *fixture) load(b *testing.B) {
	b.Helper()
	f.rulesetsDir = b.TempDir()
	ruleset, err := os.ReadFile(exampleRuleset)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.rulesetsDir, "contract-review.yaml"), ruleset, 0o600); err != nil {
		b.Fatal(err)
	}
	input, err := os.ReadFile(exampleInput)
	if err != nil {
		b.Fatal(err)
	}
	if f.inputs, err = request.ParseInputs(input); err != nil {
		b.Fatal(err)
	}
	f.serde, err = schemas.NewSerde(context.Background(), schemas.SerdeConfig{
		Format: schemas.FormatPlain,
		Topics: map[string]string{
			f.requests: schemas.RequestSchema, f.verdicts: schemas.VerdictSchema,
			f.summaries: schemas.SummarySchema, f.deadLetters: schemas.DeadLetterSchema,
		},
	})
	if err != nil {
		b.Fatal(err)
	}
}

// request is the example asked for by reference, as upstream pipelines send it.
func (f *fixture) request(id string) *schemas.Request {
	docs := func(in []engine.Document) []schemas.Document {
		out := make([]schemas.Document, len(in))
		for i, d := range in {
			out[i] = schemas.Document{Name: d.Name, Pages: d.Pages}
		}
		return out
	}
	noReport := false
	message := f.inputs.Message
	req := &schemas.Request{
		RequestID:     id,
		TenantID:      "contoso",
		RulesetRef:    &schemas.RulesetRef{ID: "contract-review"},
		PrimaryDocs:   docs(f.inputs.PrimaryDocs),
		AuxiliaryDocs: docs(f.inputs.AuxiliaryDocs),
		Message:       &message,
		Options:       schemas.Options{GenerateReport: &noReport},
		SubmittedAt:   time.Now().UTC().Truncate(time.Millisecond),
	}
	for _, ni := range f.inputs.NamedInputs {
		value, _ := json.Marshal(ni.Value)
		req.NamedInputs = append(req.NamedInputs, schemas.NamedInput{Name: ni.Name, ValueJSON: string(value)})
	}
	return req
}

// requestMessages encodes n requests with distinct ids, so they spread over the partitions.
func (f *fixture) requestMessages(b *testing.B, prefix string, n int) []kafka.Message {
	b.Helper()
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		req := f.request(fmt.Sprintf("%s-%06d", prefix, i))
		value, sh, err := f.serde.Encode(f.requests, req)
		if err != nil {
			b.Fatal(err)
		}
		headers := make([]kafka.Header, len(sh), len(sh)+1)
		for j, h := range sh {
			headers[j] = kafka.Header{Key: h.Key, Value: h.Value}
		}
		// A trace of its own, as produce and the API give every request.
		headers = append(headers, kafka.Header{Key: producer.HeaderTraceparent, Value: []byte(producer.NewTraceparent())})
		msgs[i] = kafka.Message{Key: []byte(req.RequestID), Value: value, Headers: headers}
	}
	return msgs
}

// produce writes msgs to the requests topic and waits for every acknowledgement.
func (f *fixture) produce(b *testing.B, msgs []kafka.Message) {
	b.Helper()
	w := &kafka.Writer{
		Addr:         kafka.TCP(f.bootstrap),
		Topic:        f.requests,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond,
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		b.Fatalf("producing %d requests: %v", len(msgs), err)
	}
}

// commitCounter sums, over the partitions, the committed offsets reported to it: with topics
// that start at offset 0, the number of records committed.
type commitCounter struct {
	mu     sync.Mutex
	byPart map[int]int64
	total  atomic.Int64
}

func newCommitCounter() *commitCounter { return &commitCounter{byPart: map[int]int64{}} }

func (c *commitCounter) committed(partition int, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if offset > c.byPart[partition] {
		c.total.Add(offset - c.byPart[partition])
		c.byPart[partition] = offset
	}
}

func (c *commitCounter) wait(b *testing.B, n int64) {
	b.Helper()
	deadline := time.Now().Add(waitLimit)
	for c.total.Load() < n {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d records committed after %s", c.total.Load(), n, waitLimit)
		}
		time.Sleep(time.Millisecond)
	}
}

// running is a consume loop started in the background.
type running struct {
	commits *commitCounter
	cancel  context.CancelFunc
	done    chan error
}

func (r *running) stop(b *testing.B) {
	b.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		b.Fatalf("consume loop: %v", err)
	}
}

// startService runs the service's consumer, pipeline and producer on f's topics, making no
// spans (no tracer provider).
func startService(b *testing.B, f *fixture, model engine.LLM) *running {
	return startTracedService(b, f, model, nil)
}

// startTracedService is startService with every part making its spans with tp, as serve
// gives them the provider of its OTEL_* variables.
func startTracedService(b *testing.B, f *fixture, model engine.LLM, tp trace.TracerProvider) *running {
	b.Helper()
	// Logged as serve logs, to JSON, with the trace ids, so that the cost of a log line per
	// request counts.
	logger := slog.New(tracing.LogHandler(slog.NewJSONHandler(io.Discard, nil)))
	eng, err := engine.New(model, engine.Config{Model: "bench-model", TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	rulesets, err := registry.NewDir(f.rulesetsDir, registry.DirOptions{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	client := f.client(b)
	prod, err := producer.New(context.Background(), producer.Config{
		Client: client, VerdictTopic: f.verdicts, SummaryTopic: f.summaries,
		DeadLetterTopic: f.deadLetters, Logger: logger, TracerProvider: tp,
	}, f.serde)
	if err != nil {
		b.Fatal(err)
	}
	pipe, err := pipeline.New(pipeline.Config{Judging: judging.Config{Engine: eng, Rulesets: rulesets}, Serde: f.serde, Publisher: prod, Logger: logger,
		TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	commits := newCommitCounter()
	handler := consumer.Chain(pipe.Handle,
		pipe.ReleaseHolds,
		consumer.Retry(consumer.RetryPolicy{}, logger),
		consumer.DeadLetter(prod, logger),
		consumer.Recover(logger),
	)
	cons, err := consumer.New(consumer.Config{
		GroupConfig:    stream.GroupConfig{Client: client, GroupID: f.group, Topic: f.requests, Logger: logger},
		Concurrency:    concurrency,
		Hooks:          consumer.Hooks{Committed: commits.committed},
		TracerProvider: tp,
	}, handler)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{commits: commits, cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := cons.Run(ctx)
		if closeErr := prod.Close(); err == nil {
			err = closeErr
		}
		r.done <- err
	}()
	return r
}

// startPassThrough runs the baseline: a raw kafka-go loop that fetches each request, writes
// out for it (the service's own encoded events for one request, re-keyed: the same number and
// sizes of records) and commits, with the service's discipline: FetchMessage, up to
// concurrency writes in flight, each one WriteMessages with acks=all and the producer's batch
// timeout, offsets committed every commitInterval up to the last record written in fetch
// order. It does no decoding, judging or encoding, and keeps no per-key order.
func startPassThrough(b *testing.B, f *fixture, out []kafka.Message) *running {
	b.Helper()
	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{f.bootstrap}, GroupID: f.group, Topic: f.requests,
		MinBytes: stream.DefaultMinBytes, MaxBytes: stream.DefaultMaxBytes, MaxWait: stream.DefaultMaxWait,
		StartOffset: kafka.FirstOffset, CommitInterval: 0, ReadLagInterval: -1,
		SessionTimeout: stream.DefaultSessionTimeout, JoinGroupBackoff: time.Second,
	})
	writer := &kafka.Writer{
		Addr: kafka.TCP(f.bootstrap), Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: producer.DefaultBatchTimeout, WriteTimeout: 30 * time.Second, MaxAttempts: 3,
	}
	type inFlight struct {
		msg  kafka.Message
		done chan error
	}
	ctx, cancel := context.WithCancel(context.Background())
	commits := newCommitCounter()
	slots := make(chan struct{}, concurrency)
	ordered := make(chan *inFlight, 1<<16)
	g := &errgroup.Group{}
	g.Go(func() error { // fetch and write
		defer close(ordered)
		for {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			m, err := reader.FetchMessage(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("fetching: %w", err)
			}
			p := &inFlight{msg: m, done: make(chan error, 1)}
			ordered <- p
			go func() {
				msgs := make([]kafka.Message, len(out))
				for i, o := range out {
					msgs[i] = kafka.Message{Topic: o.Topic, Key: m.Key, Value: o.Value, Headers: o.Headers}
				}
				err := writer.WriteMessages(context.WithoutCancel(ctx), msgs...)
				<-slots
				p.done <- err
			}()
		}
	})
	g.Go(func() error { // commit in fetch order, every commitInterval, what was written
		var pending []kafka.Message
		commit := func() error {
			if len(pending) == 0 {
				return nil
			}
			if err := reader.CommitMessages(context.Background(), pending...); err != nil {
				return fmt.Errorf("committing: %w", err)
			}
			for _, m := range pending {
				commits.committed(m.Partition, m.Offset+1)
			}
			pending = pending[:0]
			return nil
		}
		ticker := time.NewTicker(commitInterval)
		defer ticker.Stop()
		var next *inFlight
		for {
			var nextDone <-chan error
			if next != nil {
				nextDone = next.done
			}
			var queue <-chan *inFlight
			if next == nil {
				queue = ordered
			}
			select {
			case p, ok := <-queue:
				if !ok {
					return commit()
				}
				next = p
			case err := <-nextDone:
				if err != nil {
					return fmt.Errorf("writing: %w", err)
				}
				pending, next = append(pending, next.msg), nil
			case <-ticker.C:
				if err := commit(); err != nil {
					return err
				}
			}
		}
	})
	r := &running{commits: commits, cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := g.Wait()
		if closeErr := reader.Close(); err == nil {
			err = closeErr
		}
		if closeErr := writer.Close(); err == nil {
			err = closeErr
		}
		r.done <- err
	}()
	return r
}

// serviceEvents are the records the service publishes for one example request, encoded.
func serviceEvents(b *testing.B, f *fixture) []kafka.Message {
	b.Helper()
	model := &scriptedModel{answer: exampleAnswer}
	eng, err := engine.New(model, engine.Config{Model: "bench-model"})
	if err != nil {
		b.Fatal(err)
	}
	rulesets, err := registry.NewDir(f.rulesetsDir, registry.DirOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	judge, err := judging.New(judging.Config{Engine: eng, Rulesets: rulesets})
	if err != nil {
		b.Fatal(err)
	}
	out, release, err := judge.Judge(context.Background(), f.request("tpl-000000"), time.Now())
	release()
	if err != nil {
		b.Fatal(err)
	}
	prod, err := producer.New(context.Background(), producer.Config{Client: f.client(b), VerdictTopic: f.verdicts,
		SummaryTopic: f.summaries, DeadLetterTopic: f.deadLetters}, f.serde)
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	recs, err := prod.Encode(context.Background(), producer.Result{Verdicts: out.Verdicts, Summary: out.Summary})
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]kafka.Message, len(recs))
	for i, r := range recs {
		msgs[i] = kafka.Message{Topic: r.Topic, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
	}
	return msgs
}

// client is a stream client for f's broker.
func (f *fixture) client(b *testing.B) *stream.Client {
	b.Helper()
	c, err := stream.NewClient(stream.ClientConfig{Brokers: []string{f.bootstrap}})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// measure starts a consume loop on a fresh fixture, lets warmup requests through, then times
// n requests from being produced to being committed. The benchmark timer runs only then.
func measure(b *testing.B, n int, start func(*fixture) *running) time.Duration {
	b.Helper()
	b.StopTimer()
	f := newFixture(b)
	r := start(f)
	defer r.stop(b)
	f.produce(b, f.requestMessages(b, "warmup", warmup))
	r.commits.wait(b, warmup)
	msgs := f.requestMessages(b, "req", n)

	b.StartTimer()
	begin := time.Now()
	f.produce(b, msgs)
	r.commits.wait(b, int64(warmup+n))
	took := time.Since(begin)
	b.StopTimer()
	return took
}

// serveRun measures the service on n requests (after the warmup ones), judged by model, which
// must have been called once per request.
func serveRun(b *testing.B, n int, model *scriptedModel) time.Duration {
	took := measure(b, n, func(f *fixture) *running { return startService(b, f, model) })
	model.requireOneCallPerRequest(b, int64(warmup+n))
	return took
}

func passThroughRun(b *testing.B, n int) time.Duration {
	return measure(b, n, func(f *fixture) *running { return startPassThrough(b, f, serviceEvents(b, f)) })
}

func perSecond(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// BenchmarkServeEndToEnd is the service's throughput with an instant model: requests produced,
// consumed, judged, their 7 events acknowledged by all replicas, and their offsets committed.
func BenchmarkServeEndToEnd(b *testing.B) {
	took := serveRun(b, b.N, &scriptedModel{answer: exampleAnswer})
	b.ReportMetric(perSecond(b.N, took), "req/s")
}

// BenchmarkServeTracing is BenchmarkServeEndToEnd with the tracer provider serve gets from
// its OTEL_* variables: "off" none set (the no-op provider: a request's traceparent passes
// through, no span is made), "unsampled" the SDK with OTEL_TRACES_SAMPLER=always_off (spans
// started, none recorded), "sampled" the SDK recording every span into a batch exporter that
// sends nowhere.
func BenchmarkServeTracing(b *testing.B) {
	for _, mode := range []struct {
		name string
		tp   func() trace.TracerProvider
	}{
		{"off", tracing.Noop},
		{"unsampled", func() trace.TracerProvider {
			return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
		}},
		{"sampled", func() trace.TracerProvider {
			return sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			tp := mode.tp()
			if sdk, ok := tp.(*sdktrace.TracerProvider); ok {
				defer sdk.Shutdown(context.Background())
			}
			model := &scriptedModel{answer: exampleAnswer}
			took := measure(b, b.N, func(f *fixture) *running { return startTracedService(b, f, model, tp) })
			model.requireOneCallPerRequest(b, int64(warmup+b.N))
			b.ReportMetric(perSecond(b.N, took), "req/s")
		})
	}
}

// BenchmarkPassThrough is the baseline for BenchmarkServeEndToEnd: the same records in and out
// through raw kafka-go with the same commit discipline and concurrency.
func BenchmarkPassThrough(b *testing.B) {
	took := passThroughRun(b, b.N)
	b.ReportMetric(perSecond(b.N, took), "req/s")
}

// BenchmarkServeVsPassThrough runs both with b.N requests each and reports their ratio; its
// ns/op covers both runs.
func BenchmarkServeVsPassThrough(b *testing.B) {
	serve := perSecond(b.N, serveRun(b, b.N, &scriptedModel{answer: exampleAnswer}))
	raw := perSecond(b.N, passThroughRun(b, b.N))
	b.ReportMetric(serve, "serve_req/s")
	b.ReportMetric(raw, "passthrough_req/s")
	b.ReportMetric(serve/raw, "ratio")
}

// BenchmarkConcurrencyEfficiency gives the model a fixed latency W: with concurrency C the
// ideal is C/W requests a second, and efficiency is the share of it achieved.
func BenchmarkConcurrencyEfficiency(b *testing.B) {
	const latency = 100 * time.Millisecond
	took := serveRun(b, b.N, &scriptedModel{answer: exampleAnswer, latency: latency})
	achieved := perSecond(b.N, took)
	ideal := float64(concurrency) / latency.Seconds()
	b.ReportMetric(achieved, "req/s")
	b.ReportMetric(ideal, "ideal_req/s")
	b.ReportMetric(achieved/ideal, "efficiency")
}

// BenchmarkHandleCPU is the service's own work on one request, without a broker: decoding the
// record, judging it with an instant model (prompt, answer checks, evidence anchoring,
// aggregation) and encoding its 7 events. It tells how much of the gap to the pass-through is
// computing rather than waiting.
func BenchmarkHandleCPU(b *testing.B) {
	f := &fixture{bootstrap: "127.0.0.1:9", requests: "requests", verdicts: "verdicts", summaries: "summaries", deadLetters: "deadletter"}
	f.load(b)
	model := &scriptedModel{answer: exampleAnswer}
	eng, err := engine.New(model, engine.Config{Model: "bench-model"})
	if err != nil {
		b.Fatal(err)
	}
	rulesets, err := registry.NewDir(f.rulesetsDir, registry.DirOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	judge, err := judging.New(judging.Config{Engine: eng, Rulesets: rulesets})
	if err != nil {
		b.Fatal(err)
	}
	// No broker answers: the producer only encodes here.
	prod, err := producer.New(context.Background(), producer.Config{Client: f.client(b), VerdictTopic: f.verdicts,
		SummaryTopic: f.summaries, DeadLetterTopic: f.deadLetters, Logger: slog.New(slog.DiscardHandler)}, f.serde)
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	m := f.requestMessages(b, "req", 1)[0]
	headers := make([]schemas.Header, len(m.Headers))
	for i, h := range m.Headers {
		headers[i] = schemas.Header{Key: h.Key, Value: h.Value}
	}
	ctx := context.Background()
	b.ReportAllocs()
	var judged int64
	for b.Loop() {
		judged++
		ev, err := f.serde.Decode(ctx, f.requests, m.Value, headers)
		if err != nil {
			b.Fatal(err)
		}
		out, release, err := judge.Judge(ctx, ev.(*schemas.Request), time.Now())
		release()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := prod.Encode(ctx, producer.Result{Verdicts: out.Verdicts, Summary: out.Summary}); err != nil {
			b.Fatal(err)
		}
	}
	model.requireOneCallPerRequest(b, judged)
}
