package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"rulevalidator/internal/logbuf"
	"rulevalidator/internal/otlptest"
)

// TestServeExportsOneTraceEndToEnd: serve with only the OTEL_* variables set exports, over
// OTLP/HTTP, the spans of one POST /v1/validations that carries a traceparent, all in that
// trace: the API's request, the consumed message, each model call with its model and usage,
// the verdicts published, the callback delivered; the verdict events, the requests to the
// model and the callback carry that trace in their traceparent; and the latency histograms,
// scraped as OpenMetrics, hold exemplars naming it.
func TestServeExportsOneTraceEndToEnd(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	rcv := otlptest.New(t)
	otel := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL(),
		"OTEL_SERVICE_NAME":           "rulevalidator-e2e",
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	log := &logbuf.Buffer{}
	args := e.args(e.serveArgs()...)
	go func() {
		defer close(done)
		run(ctx, args, io.Discard, log, func(k string) string { return otel[k] })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("service log:\n%s", tail(log.String(), 80))
		}
	})
	verdicts := e.watch(t, e.verdicts, e.partitions)
	public := "http://" + e.httpAddr
	waitForListener(t, public)

	example, err := os.ReadFile(exampleRequestJSON)
	if err != nil {
		t.Fatal(err)
	}
	var submission map[string]any
	if err := json.Unmarshal(example, &submission); err != nil {
		t.Fatal(err)
	}
	delete(submission, "tenant_id")
	submission["request_id"] = "traced-req-1"
	submission["options"] = map[string]any{"callback_url": e.callbackURL + "?token=SECRET"}
	body, _ := json.Marshal(submission)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, err := http.NewRequest(http.MethodPost, public+"/v1/validations", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token(t, "acme"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST = %d", resp.StatusCode)
	}

	want := []string{"POST /v1/validations", "process " + e.requests, "chat " + fakeModel, "send " + e.verdicts, "send " + e.summaries,
		"send " + e.serveEnv.callbacks, "process " + e.serveEnv.callbacks, "POST"}
	spans, ok := rcv.Wait(waitLimit, func(spans []otlptest.Span) bool {
		seen := map[string]bool{}
		for _, s := range spans {
			if s.TraceID() == traceID {
				seen[s.GetName()] = true
			}
		}
		for _, name := range want {
			if !seen[name] {
				return false
			}
		}
		return true
	})
	if !ok {
		var got []string
		for _, s := range spans {
			got = append(got, s.GetName()+"@"+s.TraceID())
		}
		t.Fatalf("spans %v, want %v in trace %s", got, want, traceID)
	}
	for _, s := range spans {
		if s.TraceID() != traceID {
			continue
		}
		if s.Service != "rulevalidator-e2e" {
			t.Errorf("span %q of service %q", s.GetName(), s.Service)
		}
		switch name := s.GetName(); {
		case name == "process "+e.requests:
			if s.Attr("messaging.system") != "kafka" || s.Attr("messaging.consumer.group.name") != e.group || s.Attr("messaging.kafka.offset") == "" {
				t.Errorf("process span attributes %v", s.GetAttributes())
			}
		case name == "chat "+fakeModel:
			if s.Attr("gen_ai.request.model") != fakeModel || s.Attr("gen_ai.response.model") == "" ||
				s.Attr("gen_ai.usage.input_tokens") != "900" || s.Attr("gen_ai.usage.output_tokens") != "300" {
				t.Errorf("model call span attributes %v", s.GetAttributes())
			}
		case name == "POST":
			if s.Attr("url.full") != e.callbackURL || s.Attr("http.response.status_code") != "200" || s.Attr("rulevalidator.callback.attempt") != "1" {
				t.Errorf("callback span attributes %v", s.GetAttributes())
			}
		}
	}

	// What left the service for the model and the receiver carries the trace.
	for _, call := range e.llm.Requests() {
		if tp := call.Header.Get("traceparent"); !strings.HasPrefix(tp, "00-"+traceID+"-") {
			t.Errorf("a request to the model carries traceparent %q, not of trace %s", tp, traceID)
		}
	}
	select {
	case cb := <-e.callbacks:
		if tp := cb.header.Get("traceparent"); !strings.HasPrefix(tp, "00-"+traceID+"-") {
			t.Errorf("the callback carries traceparent %q, not of trace %s", tp, traceID)
		}
	case <-time.After(waitLimit):
		t.Error("no callback received")
	}

	// The latency histograms name the trace in their exemplars (OpenMetrics only).
	mreq, err := http.NewRequest(http.MethodGet, "http://"+e.opsAddr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	mreq.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	mresp, err := http.DefaultClient.Do(mreq)
	if err != nil {
		t.Fatal(err)
	}
	exposition, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, family := range []string{"rulevalidator_http_request_duration_seconds", "rulevalidator_handler_duration_seconds",
		"rulevalidator_request_duration_seconds", "rulevalidator_llm_request_duration_seconds"} {
		found := false
		for line := range strings.Lines(string(exposition)) {
			if strings.HasPrefix(line, family+"_bucket{") && strings.Contains(line, `trace_id="`+traceID+`"`) {
				found = true
			}
		}
		if !found {
			t.Errorf("no bucket of %s has an exemplar of trace %s", family, traceID)
		}
	}

	waitUntil(t, waitLimit, "the verdicts", func() bool { return verdicts.len() >= len(exampleRuleIDs) })
	for _, m := range verdicts.snapshot() {
		var tp string
		for _, h := range m.Headers {
			if h.Key == "traceparent" {
				tp = string(h.Value)
			}
		}
		if !strings.HasPrefix(tp, "00-"+traceID+"-") {
			t.Errorf("verdict %s carries traceparent %q, not of trace %s", m.Key, tp, traceID)
		}
	}
}
