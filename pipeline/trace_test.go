package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"rulevalidator/consumer"
	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/kafkatest"
	"rulevalidator/internal/llmfake"
	"rulevalidator/internal/tracing"
	"rulevalidator/judging"
	"rulevalidator/pipeline"
	"rulevalidator/producer"
	"rulevalidator/registry"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// What no span may hold: the document's text, the rule's text, the rationale.
const (
	docText   = "SECRETDOC The supplier shall deliver the goods within thirty days of the order."
	quote     = "The supplier shall deliver the goods within thirty days of the order."
	ruleText  = "SECRETRULE Does the supplier deliver within thirty days?"
	rationale = "SECRETRATIONALE The delivery clause says thirty days."
	incoming  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

func modelAnswer() llmfake.Reply {
	answer := map[string]any{"rules": []map[string]any{{
		"rule_id": "r1", "data_sufficiency": true, "rationale": rationale, "boolean_output": true, "not_applicable": false,
		"evidences": []map[string]any{{"text": quote, "source_origin": "contract.txt", "source_page_number": 1}},
	}}}
	data, _ := json.Marshal(answer)
	return llmfake.Reply{Content: string(data), Model: "fake-model-2026", PromptTokens: 321, CompletionTokens: 45}
}

// TestOneRequestSpanTree: one request message with a traceparent, handled by the
// pipeline, judged by the engine asking the scripted model through the OpenAI client,
// its events published through the producer to Kafka: the spans form one tree in the
// message's trace (process → decode, ruleset, documents, evaluate → plan, calls → call →
// chat; send verdicts, send summaries), the model call carries its model and usage, the
// published verdicts carry the send span's context in their traceparent, and no span
// attribute holds the document's, the rule's or the answer's text.
func TestOneRequestSpanTree(t *testing.T) {
	bootstrap := kafkatest.Broker(t)
	verdicts, summaries, deadLetters := kafkatest.UniqueTopic(t, "verdicts"), kafkatest.UniqueTopic(t, "summaries"), kafkatest.UniqueTopic(t, "deadletter")
	for _, topic := range []string{verdicts, summaries, deadLetters} {
		kafkatest.CreateTopic(t, bootstrap, topic, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	quiet := slog.New(slog.DiscardHandler)
	var logs bytes.Buffer // the pipeline's log, written by one goroutine here

	fake := llmfake.New()
	t.Cleanup(fake.Close)
	fake.SetDefault(modelAnswer())
	client, err := openai.New(openai.Config{BaseURL: fake.URL(), TracerProvider: tp, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(client, engine.Config{Model: "fake-model", TracerProvider: tp, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	static, err := registry.NewStatic(&engine.Ruleset{ID: "rs", Version: "1", Rules: []engine.Rule{{RuleID: "r1", Name: "Delivery", RuleText: ruleText}}})
	if err != nil {
		t.Fatal(err)
	}
	serde, err := schemas.NewSerde(ctx, schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	kafka, err := stream.NewClient(stream.ClientConfig{Brokers: []string{bootstrap}})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := producer.New(ctx, producer.Config{Client: kafka, VerdictTopic: verdicts, SummaryTopic: summaries, DeadLetterTopic: deadLetters,
		TracerProvider: tp, Logger: quiet}, serde)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	p, err := pipeline.New(pipeline.Config{
		Judging: judging.Config{Engine: eng, Rulesets: static}, Serde: serde, Publisher: prod,
		CacheEntries: -1, TracerProvider: tp, Logger: slog.New(tracing.LogHandler(slog.NewJSONHandler(&logs, nil))),
	})
	if err != nil {
		t.Fatal(err)
	}

	req := &schemas.Request{RequestID: "req-trace", TenantID: "acme", RulesetRef: &schemas.RulesetRef{ID: "rs"},
		PrimaryDocs: []schemas.Document{{Name: "contract.txt", Content: ptr(docText)}}, SubmittedAt: time.Now()}
	value, sh, err := serde.Encode("requests", req)
	if err != nil {
		t.Fatal(err)
	}
	m := &consumer.Message{Topic: "requests", Partition: 3, Offset: 17, Value: value,
		Headers: append([]stream.Header{{Key: producer.HeaderTraceparent, Value: []byte(incoming)}}, sh...)}
	handler := consumer.Chain(p.Handle, consumer.Trace(tp, "rulevalidator"))
	if err := handler(ctx, m); err != nil {
		t.Fatalf("handling: %v", err)
	}

	spans := tracetest.SpanStubsFromReadOnlySpans(rec.Ended())
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		if s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("span %q is in trace %s, not the message's", s.Name, s.SpanContext.TraceID())
		}
		byName[s.Name] = s
		for _, kv := range s.Attributes {
			v := kv.Value.String()
			for _, secret := range []string{"SECRETDOC", "SECRETRULE", "SECRETRATIONALE", "thirty days"} {
				if strings.Contains(v, secret) {
					t.Errorf("span %q attribute %s holds text (%q)", s.Name, kv.Key, secret)
				}
			}
		}
	}
	parentOf := func(name string) string {
		s, ok := byName[name]
		if !ok {
			t.Fatalf("no span %q among %v", name, names(spans))
		}
		for _, o := range spans {
			if o.SpanContext.SpanID() == s.Parent.SpanID() {
				return o.Name
			}
		}
		return "remote:" + s.Parent.SpanID().String()
	}
	for child, parent := range map[string]string{
		"process requests":  "remote:00f067aa0ba902b7",
		"decode":            "process requests",
		"ruleset":           "process requests",
		"documents":         "process requests",
		"evaluate":          "process requests",
		"plan":              "evaluate",
		"calls":             "evaluate",
		"call":              "calls",
		"chat fake-model":   "call",
		"send " + verdicts:  "process requests",
		"send " + summaries: "process requests",
	} {
		if got := parentOf(child); got != parent {
			t.Errorf("span %q has parent %q, want %q", child, got, parent)
		}
	}
	kinds := map[string]trace.SpanKind{"process requests": trace.SpanKindConsumer, "chat fake-model": trace.SpanKindClient,
		"send " + verdicts: trace.SpanKindProducer, "evaluate": trace.SpanKindInternal}
	for name, kind := range kinds {
		if byName[name].SpanKind != kind {
			t.Errorf("span %q kind %v, want %v", name, byName[name].SpanKind, kind)
		}
	}
	chat := attrMap(byName["chat fake-model"])
	if chat["gen_ai.request.model"] != "fake-model" || chat["gen_ai.response.model"] != "fake-model-2026" ||
		chat["gen_ai.usage.input_tokens"] != "321" || chat["gen_ai.usage.output_tokens"] != "45" || chat["gen_ai.operation.name"] != "chat" {
		t.Errorf("model call span attributes %v", chat)
	}
	send := attrMap(byName["send "+verdicts])
	if send["messaging.system"] != "kafka" || send["messaging.destination.name"] != verdicts || send["messaging.operation.type"] != "send" {
		t.Errorf("send span attributes %v", send)
	}
	if d := attrMap(byName["documents"]); d["rulevalidator.documents"] != "1" {
		t.Errorf("documents span attributes %v", d)
	}

	// The line saying the request was judged names the span it was written in.
	var line struct{ Msg, TraceID, SpanID string }
	for l := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err == nil && v["msg"] == "request judged" {
			line.Msg, line.TraceID, line.SpanID = "request judged", fmt.Sprint(v["trace_id"]), fmt.Sprint(v["span_id"])
		}
	}
	if line.Msg == "" || line.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || line.SpanID != byName["process requests"].SpanContext.SpanID().String() {
		t.Errorf("the log line %+v does not carry the process span's trace and span ids (log: %s)", line, logs.String())
	}

	got := make(chan stream.Record, 1)
	reader, err := stream.NewReader(stream.ReaderConfig{Client: kafka, Topics: []string{verdicts}, Handle: func(_ context.Context, r stream.Record) { got <- r }})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = reader.Run(ctx) }()
	select {
	case r := <-got:
		tp, _ := stream.HeaderValue(r.Headers, producer.HeaderTraceparent)
		want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + byName["send "+verdicts].SpanContext.SpanID().String() + "-01"
		if string(tp) != want {
			t.Errorf("the verdict's traceparent is %q, want the send span's %q", tp, want)
		}
	case <-ctx.Done():
		t.Fatal("the verdict was not read back")
	}
}

func ptr[T any](v T) *T { return &v }

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func attrMap(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}
