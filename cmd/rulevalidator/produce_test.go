package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"rulevalidator/internal/kafkatest"
	"rulevalidator/producer"
	"rulevalidator/request"
	"rulevalidator/schemas"
)

// Helpers shared by the tests of produce, tail and rulesets.

// opRun runs one command line in this process with an empty environment.
func opRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code = run(ctx, args, &out, &errOut, func(string) string { return "" })
	return code, out.String(), errOut.String()
}

// opWriteFile writes a file in the test's temporary directory and returns its path.
func opWriteFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// opEndOffsets is the end offset (the next offset to be written) of each partition of topic.
func opEndOffsets(t *testing.T, bootstrap, topic string, partitions int) []int64 {
	t.Helper()
	req := make([]kafka.OffsetRequest, partitions)
	for p := range partitions {
		req[p] = kafka.LastOffsetOf(p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(bootstrap)}
	res, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: req}})
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	out := make([]int64, partitions)
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("end offset of %s partition %d: %v", topic, p.Partition, p.Error)
		}
		out[p.Partition] = p.LastOffset
	}
	return out
}

// opReadAt reads the record of topic at partition and offset.
func opReadAt(t *testing.T, bootstrap, topic string, partition int, offset int64) kafka.Message {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{bootstrap}, Topic: topic, Partition: partition, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	if err := r.SetOffset(offset); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		t.Fatalf("reading %s partition %d offset %d: %v", topic, partition, offset, err)
	}
	return m
}

// opDecode decodes a record's value in either wire format.
func opDecode(t *testing.T, m kafka.Message) schemas.Event {
	t.Helper()
	serde, err := schemas.NewSerde(context.Background(), schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	headers := make([]schemas.Header, len(m.Headers))
	for i, h := range m.Headers {
		headers[i] = schemas.Header{Key: h.Key, Value: h.Value}
	}
	ev, err := serde.Decode(context.Background(), m.Topic, m.Value, headers)
	if err != nil {
		t.Fatalf("decoding %s/%d/%d: %v", m.Topic, m.Partition, m.Offset, err)
	}
	return ev
}

// opHeaders is a record's headers by key; a key given twice fails the test.
func opHeaders(t *testing.T, m kafka.Message) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, h := range m.Headers {
		if _, dup := out[h.Key]; dup {
			t.Errorf("header %s given twice", h.Key)
		}
		out[h.Key] = string(h.Value)
	}
	return out
}

func opJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// requestDoc is a request in its JSON form using every field, without
// request_id and submitted_at, which produce fills in.
const requestDoc = `{
  "tenant_id": "file-tenant",
  "ruleset_ref": {"id": "contract-review", "version": "1.0.0"},
  "primary_docs": [{"name": "msa.pdf", "pages": ["Page one.", "Page two: liability is capped."]}],
  "auxiliary_docs": [
    {"name": "policy.md", "content": "Approved jurisdictions: New York.", "content_type": "text/markdown"},
    {"name": "annex.pdf", "uri": "s3://docs/contoso/annex.pdf", "content_type": "application/pdf"}
  ],
  "text_input": "Review before signature.",
  "named_inputs": [{"name": "approval_limit", "description": "yearly limit in USD", "value": {"usd": 250000}}],
  "message": "Please review the Northwind MSA.",
  "options": {"generate_report": false, "model": "gemma-3-270m", "callback_url": "https://hooks.example/cb"}
}`

// requestDocYAML is requestDoc in YAML.
const requestDocYAML = `
tenant_id: file-tenant
ruleset_ref: {id: contract-review, version: "1.0.0"}
primary_docs:
  - name: msa.pdf
    pages: ["Page one.", "Page two: liability is capped."]
auxiliary_docs:
  - name: policy.md
    content: "Approved jurisdictions: New York."
    content_type: text/markdown
  - name: annex.pdf
    uri: s3://docs/contoso/annex.pdf
    content_type: application/pdf
text_input: Review before signature.
named_inputs:
  - name: approval_limit
    description: yearly limit in USD
    value: {usd: 250000}
message: Please review the Northwind MSA.
options:
  generate_report: false
  model: gemma-3-270m
  callback_url: https://hooks.example/cb
`

// wantRequest is requestDoc as decoded, for the given id, tenant and time.
func wantRequest(id, tenant string, submitted time.Time) *schemas.Request {
	s := func(v string) *string { return &v }
	f := false
	return &schemas.Request{
		RequestID:   id,
		TenantID:    tenant,
		RulesetRef:  &schemas.RulesetRef{ID: "contract-review", Version: s("1.0.0")},
		PrimaryDocs: []schemas.Document{{Name: "msa.pdf", Pages: []string{"Page one.", "Page two: liability is capped."}}},
		AuxiliaryDocs: []schemas.Document{
			{Name: "policy.md", Content: s("Approved jurisdictions: New York."), ContentType: s("text/markdown")},
			{Name: "annex.pdf", URI: s("s3://docs/contoso/annex.pdf"), ContentType: s("application/pdf")},
		},
		TextInput:   s("Review before signature."),
		NamedInputs: []schemas.NamedInput{{Name: "approval_limit", Description: s("yearly limit in USD"), ValueJSON: `{"usd":250000}`}},
		Message:     s("Please review the Northwind MSA."),
		Options:     schemas.Options{GenerateReport: &f, Model: s("gemma-3-270m"), CallbackURL: s("https://hooks.example/cb")},
		SubmittedAt: submitted,
	}
}

func TestProduceReadsYAMLAsJSON(t *testing.T) {
	t.Parallel()
	fromJSON, err := readRequestFile(opWriteFile(t, "r.json", requestDoc), nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	fromYAML, err := readRequestFile(opWriteFile(t, "r.yaml", requestDocYAML), nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := wantRequest("", "file-tenant", time.Time{})
	for name, got := range map[string]*schemas.Request{"json": fromJSON, "yaml": fromYAML} {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got\n%s\nwant\n%s", name, opJSON(t, got), opJSON(t, want))
		}
	}

	// An inline ruleset written as a YAML mapping becomes the same JSON text as in JSON.
	inlineYAML := "tenant_id: t\ntext_input: hi\nsubmitted_at: 2025-03-01T10:00:00Z\ninline_ruleset:\n  id: x\n  rules:\n    - {rule_id: a, rule_text: Say hi.}\n"
	inlineJSON := `{"tenant_id":"t","text_input":"hi","submitted_at":"2025-03-01T10:00:00Z","inline_ruleset":{"id":"x","rules":[{"rule_id":"a","rule_text":"Say hi."}]}}`
	a, err := readRequestFile(opWriteFile(t, "i.yaml", inlineYAML), nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	b, err := readRequestFile(opWriteFile(t, "i.json", inlineJSON), nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("YAML and JSON inline rulesets differ:\n%s\n%s", opJSON(t, a), opJSON(t, b))
	}
	if !a.SubmittedAt.Equal(time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("submitted_at from YAML = %s", a.SubmittedAt)
	}
}

func TestProduceRequestCopies(t *testing.T) {
	t.Parallel()
	base := wantRequest("", "t", time.Now())
	ids := func(reqs []*schemas.Request) []string {
		var out []string
		for _, r := range reqs {
			out = append(out, r.RequestID)
		}
		return out
	}
	named := *base
	named.RequestID = "load"
	if got := ids(requestCopies(&named, 1)); !reflect.DeepEqual(got, []string{"load"}) {
		t.Errorf("one copy of %q: %v", named.RequestID, got)
	}
	if got := ids(requestCopies(&named, 10)); got[0] != "load-01" || got[9] != "load-10" || len(got) != 10 {
		t.Errorf("ten copies of %q: %v", named.RequestID, got)
	}
	random := ids(requestCopies(base, 50))
	seen := map[string]bool{}
	for _, id := range random {
		if len(id) != 36 || id[14] != '4' || seen[id] {
			t.Errorf("random id %q is not a fresh UUIDv4 (all: %v)", id, random)
		}
		seen[id] = true
	}
}

// TestProduceInvalid runs without a broker: every check happens before Kafka is contacted.
func TestProduceInvalid(t *testing.T) {
	t.Parallel()
	badInline := strings.Replace(requestDoc, `"ruleset_ref": {"id": "contract-review", "version": "1.0.0"},`,
		`"inline_ruleset": {"id": "x", "rules": [{"rule_id": "a", "rule_text": "t", "type": "numerical", "weight": -1}]},`, 1)
	unreachable := []string{"--kafka-brokers", "127.0.0.1:1"}
	for _, tc := range []struct {
		name    string
		file    string
		args    []string
		wantErr []string
	}{
		{"no tenant", `{"ruleset_ref": {"id": "x"}, "text_input": "hi"}`, nil, []string{"tenant_id is empty"}},
		{"two rulesets", `{"tenant_id": "t", "ruleset_ref": {"id": "x"}, "inline_ruleset": {"id": "x", "rules": []}, "text_input": "hi"}`, nil,
			[]string{"both ruleset_ref and inline_ruleset are set"}},
		{"document without text", `{"tenant_id": "t", "ruleset_ref": {"id": "x"}, "primary_docs": [{"name": "a.pdf"}]}`, nil,
			[]string{`primary_docs[0]: document "a.pdf" has no text`}},
		{"misspelt field", `{"tenant_id": "t", "ruleset_ref": {"id": "x"}, "text_imput": "hi"}`, nil, []string{`unknown field "text_imput"`}},
		{"bad YAML", "tenant_id: [unclosed\n", nil, []string{"not a request: invalid YAML"}},
		{"invalid inline ruleset", badInline, nil, []string{`inline_ruleset: ruleset "x": rules[0] (rule_id "a"): weight: must be a finite number greater than 0 (got -1)`}},
		{"no inputs", `{"tenant_id": "t", "ruleset_ref": {"id": "x"}}`, nil, []string{"inputs: no inputs: give at least one of"}},
		{"bad traceparent", requestDoc, []string{"--traceparent", "nope"}, []string{"--traceparent:"}},
		{"bad count", requestDoc, []string{"--count", "0"}, []string{"--count: 0 must be at least 1"}},
		{"confluent without registry", requestDoc, []string{"--wire-format", "confluent"}, []string{"--wire-format confluent needs --schema-registry"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"produce", "--file", opWriteFile(t, "request.json", tc.file)}, unreachable...)
			code, stdout, stderr := opRun(t, append(args, tc.args...)...)
			if code != exitInvalid {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitInvalid, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr)
				}
			}
		})
	}

	t.Run("non-strict sends what the service will reject", func(t *testing.T) {
		path := opWriteFile(t, "request.json", `{"tenant_id": "t", "ruleset_ref": {"id": "x"}}`)
		code, _, stderr := opRun(t, "produce", "--file", path, "--strict=false", "--kafka-brokers", "127.0.0.1:1")
		if code != exitFailure || !strings.Contains(stderr, "127.0.0.1:1") {
			t.Errorf("exit %d (want %d: the checks pass, then the broker is unreachable); stderr:\n%s", code, exitFailure, stderr)
		}
	})
}

func TestProduceWritesTheRequest(t *testing.T) {
	t.Parallel()
	bootstrap := kafkatest.Broker(t)
	topic := kafkatest.UniqueTopic(t, "requests")
	kafkatest.CreateTopic(t, bootstrap, topic, 3)
	path := opWriteFile(t, "request.json", requestDoc)
	const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

	before := time.Now().UTC().Truncate(time.Millisecond)
	code, stdout, stderr := opRun(t, "produce", "--file", path, "--kafka-brokers", bootstrap, "--requests-topic", topic,
		"--tenant", "contoso", "--traceparent", trace, "--json")
	after := time.Now().UTC()
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	var line producedLine
	if err := json.Unmarshal([]byte(stdout), &line); err != nil || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("stdout is not one JSON line: %q (%v)", stdout, err)
	}
	if line.Topic != topic || line.RequestID == "" {
		t.Errorf("printed %+v", line)
	}

	m := opReadAt(t, bootstrap, topic, line.Partition, line.Offset)
	if string(m.Key) != line.RequestID {
		t.Errorf("key %q, want the request id %q", m.Key, line.RequestID)
	}
	headers := opHeaders(t, m)
	if headers["traceparent"] != trace {
		t.Errorf("traceparent header %q, want %q", headers["traceparent"], trace)
	}
	if headers[schemas.HeaderSchema] != schemas.RequestSchema || len(headers[schemas.HeaderFingerprint]) != 16 {
		t.Errorf("wire-format headers: %v", headers)
	}
	got, ok := opDecode(t, m).(*schemas.Request)
	if !ok {
		t.Fatalf("decoded a %T, not a request", got)
	}
	if got.SubmittedAt.Before(before) || got.SubmittedAt.After(after) {
		t.Errorf("submitted_at %s not between %s and %s", got.SubmittedAt, before, after)
	}
	want := wantRequest(line.RequestID, "contoso", got.SubmittedAt)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded request:\n%s\nwant:\n%s", opJSON(t, got), opJSON(t, want))
	}
	if err := got.Validate(); err != nil {
		t.Errorf("the request read back is invalid: %v", err)
	}

	// The same record as the API writes for the request: its tenant and
	// trace headers included.
	serde, err := schemas.NewSerde(context.Background(), schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	apiRecord, err := producer.RequestRecord(serde, topic, producer.Submission{Request: got, Trace: producer.TraceHeaders(trace, "")})
	if err != nil {
		t.Fatal(err)
	}
	wantHeaders := map[string]string{}
	for _, h := range apiRecord.Headers {
		wantHeaders[h.Key] = string(h.Value)
	}
	if !reflect.DeepEqual(headers, wantHeaders) || headers[producer.HeaderTenant] != "contoso" {
		t.Errorf("produce's headers %v, want the API's %v", headers, wantHeaders)
	}
	if string(m.Value) != string(apiRecord.Value) {
		t.Error("produce's value differs from the API's record of the same request")
	}
}

func TestProduceCount(t *testing.T) {
	t.Parallel()
	bootstrap := kafkatest.Broker(t)
	topic := kafkatest.UniqueTopic(t, "requests")
	kafkatest.CreateTopic(t, bootstrap, topic, 2)
	path := opWriteFile(t, "request.yaml", requestDocYAML)

	code, stdout, stderr := opRun(t, "produce", "--file", path, "--kafka-brokers", bootstrap, "--requests-topic", topic,
		"--request-id", "load", "--count", "12")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	ids := strings.Fields(stdout)
	if len(ids) != 12 || ids[0] != "load-01" || ids[11] != "load-12" {
		t.Fatalf("printed ids %v", ids)
	}
	ends := opEndOffsets(t, bootstrap, topic, 2)
	if ends[0]+ends[1] != 12 {
		t.Fatalf("end offsets %v, want 12 records in all", ends)
	}
	traces := map[string]bool{}
	for p, end := range ends {
		for off := range end {
			m := opReadAt(t, bootstrap, topic, p, off)
			req := opDecode(t, m).(*schemas.Request)
			if string(m.Key) != req.RequestID || !strings.HasPrefix(req.RequestID, "load-") || req.TenantID != "file-tenant" {
				t.Errorf("record %d/%d: key %q, request %q of tenant %q", p, off, m.Key, req.RequestID, req.TenantID)
			}
			tp := opHeaders(t, m)["traceparent"]
			if err := producer.CheckTraceparent(tp); err != nil || traces[tp] {
				t.Errorf("record %d/%d: traceparent %q (%v), or seen before", p, off, tp, err)
			}
			traces[tp] = true
		}
	}
}

func TestProduceInvalidWritesNothing(t *testing.T) {
	t.Parallel()
	bootstrap := kafkatest.Broker(t)
	topic := kafkatest.UniqueTopic(t, "requests")
	kafkatest.CreateTopic(t, bootstrap, topic, 1)
	path := opWriteFile(t, "request.json", `{"ruleset_ref": {"id": "x"}, "primary_docs": [{"name": "a.pdf", "content": "x", "pages": ["x"]}]}`)

	code, stdout, stderr := opRun(t, "produce", "--file", path, "--kafka-brokers", bootstrap, "--requests-topic", topic)
	if code != exitInvalid {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitInvalid, stderr)
	}
	for _, want := range []string{"tenant_id is empty", "primary_docs[0]: ambiguous: the document's text is given as both pages and content"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}
	if end := opEndOffsets(t, bootstrap, topic, 1); end[0] != 0 {
		t.Errorf("%d records written, want none", end[0])
	}

	code, _, stderr = opRun(t, "produce", "--file", opWriteFile(t, "ok.json", requestDoc), "--kafka-brokers", bootstrap, "--requests-topic", topic+"-missing")
	if code != exitFailure || !strings.Contains(stderr, "no such topic") {
		t.Errorf("missing topic: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestProduceAndTailConfluent writes a request in the Confluent wire format and reads it back
// with tail, with the registry (decoded) and without it (printed as undecodable).
func TestProduceAndTailConfluent(t *testing.T) {
	t.Parallel()
	bootstrap := kafkatest.Broker(t)
	topic := kafkatest.UniqueTopic(t, "requests")
	kafkatest.CreateTopic(t, bootstrap, topic, 1)
	reg := srfake.New()
	t.Cleanup(reg.Close)

	code, stdout, stderr := opRun(t, "produce", "--file", opWriteFile(t, "request.json", requestDoc), "--kafka-brokers", bootstrap,
		"--requests-topic", topic, "--request-id", "conf-1", "--wire-format", "confluent", "--schema-registry", reg.URL())
	if code != exitOK || stdout != "conf-1\n" {
		t.Fatalf("produce: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	m := opReadAt(t, bootstrap, topic, 0, 0)
	if len(m.Value) < 5 || m.Value[0] != 0 {
		t.Fatalf("value does not start with the Confluent magic byte: % x", m.Value[:min(len(m.Value), 8)])
	}
	if _, ok := opHeaders(t, m)[schemas.HeaderFingerprint]; ok {
		t.Errorf("the Confluent format carries no %s header", schemas.HeaderFingerprint)
	}

	code, stdout, stderr = opRun(t, "tail", "--kafka-brokers", bootstrap, "--topics", topic, "--schema-registry", reg.URL(), "--max", "1", "--json")
	if code != exitOK {
		t.Fatalf("tail: exit %d, stderr:\n%s", code, stderr)
	}
	var line struct {
		Schema string          `json:"schema"`
		Event  json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal([]byte(stdout), &line); err != nil {
		t.Fatalf("tail printed %q: %v", stdout, err)
	}
	got, err := request.FromJSON(line.Event)
	if err != nil {
		t.Fatalf("event %s: %v", line.Event, err)
	}
	if want := wantRequest("conf-1", "file-tenant", got.SubmittedAt); line.Schema != schemas.RequestSchema || !reflect.DeepEqual(got, want) {
		t.Errorf("tail read %s\n%s\nwant\n%s", line.Schema, opJSON(t, got), opJSON(t, want))
	}

	code, stdout, stderr = opRun(t, "tail", "--kafka-brokers", bootstrap, "--topics", topic, "--max", "1")
	if code != exitOK || !strings.Contains(stdout, "UNDECODABLE") || !strings.Contains(stdout, "no schema registry is configured") {
		t.Errorf("tail without a registry: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
}
