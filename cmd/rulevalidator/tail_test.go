package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"rulevalidator/consumer"
	"rulevalidator/internal/kafkatest"
	"rulevalidator/producer"
	"rulevalidator/schemas"
	"rulevalidator/stream"
	"rulevalidator/verdict"
)

func tailPtr[T any](v T) *T { return &v }

var tailStarted = time.Date(2025, 3, 3, 9, 0, 0, 0, time.UTC)

// tailVerdicts are two verdicts of request id: a failed boolean rule with a
// cited passage, and a numerical one kept with problems,
// with a quote not found and one found on another page than the one cited.
func tailVerdicts(id string) []schemas.VerdictEvent {
	return []schemas.VerdictEvent{{
		EventID: schemas.VerdictEventID("contoso", id, "liability-cap"), RequestID: id, TenantID: "contoso",
		RulesetID: "contract-review", RulesetVersion: tailPtr("1.0.0"), Model: "fake-model",
		RuleID: "liability-cap", RuleName: tailPtr("Liability cap"), RuleType: verdict.Boolean,
		DataSufficiency: true, Rationale: "Capped at twelve months of fees; data protection is not carved out.",
		BooleanOutput: tailPtr(false),
		Evidences: []verdict.Evidence{{
			Text: "This limit does not apply to breach of clause 6 (Confidentiality).", SourceOrigin: "msa.pdf",
			SourcePageNumber: 3, CitedPageNumber: 3, PassageID: "d1p3s2", Anchored: true, Match: verdict.MatchExact, StartOffset: tailPtr(120), EndOffset: tailPtr(186),
		}},
		StartedAt: tailStarted, CompletedAt: tailStarted.Add(2 * time.Second), RuleIndex: 1, RuleCount: 2,
	}, {
		EventID: schemas.VerdictEventID("contoso", id, "payment-terms"), RequestID: id, TenantID: "contoso",
		RulesetID: "contract-review", RulesetVersion: tailPtr("1.0.0"), Model: "fake-model",
		RuleID: "payment-terms", RuleType: verdict.Numerical, DataSufficiency: true,
		Rationale: "Payment within 30 days.", NumericalOutput: tailPtr(2), AllowedScores: []int{0, 1, 2, 3, 4, 5},
		Problems: []string{`the model's quote "payable in thirty days" is not in "msa.pdf"`},
		Evidences: []verdict.Evidence{
			{Text: "payable in thirty days", SourceOrigin: "msa.pdf", SourcePageNumber: 2, CitedPageNumber: 2, Match: verdict.MatchNone},
			{Text: "Invoices are payable within 30 days.", QuotedText: "invoices are payable within 30 days", SourceOrigin: "msa.pdf", SourcePageNumber: 2, CitedPageNumber: 5,
				Anchored: true, Match: verdict.MatchNormalized, Similarity: 1, StartOffset: tailPtr(40), EndOffset: tailPtr(76)},
			{Text: "250000", SourceOrigin: "approval_limit", Anchored: false, Match: verdict.MatchNotDocument},
		},
		StartedAt: tailStarted, CompletedAt: tailStarted.Add(2 * time.Second), RuleIndex: 0, RuleCount: 2,
	}}
}

func tailSummary(id string) schemas.SummaryEvent {
	return schemas.SummaryEvent{
		EventID: id, RequestID: id, TenantID: "contoso", RulesetID: "contract-review", RulesetVersion: tailPtr("1.0.0"),
		Model: "fake-model", Status: schemas.StatusCompleted,
		Counts: schemas.Counts{Rules: 2, Failed: 1, InsufficientData: 1},
		Aggregate: verdict.Aggregate{
			Boolean:   &verdict.BooleanAggregate{Mode: "all", Passed: false, Applicable: 1, PassedCount: 0},
			Numerical: &verdict.NumericalAggregate{Mode: "weighted_mean", Score: tailPtr(2.0), Counted: 1},
		},
		Sources: []verdict.Source{{SourceOrigin: "msa.pdf", Text: "page one", SourcePageNumber: 1}},
		Usage:   verdict.Usage{PromptTokens: 900, CompletionTokens: 300, CachedTokens: 512, LLMCalls: 1},
		Report: &schemas.ReportDescriptor{FileName: id + ".xlsx", URI: "s3://rulevalidator-reports/contoso/" + id + ".xlsx",
			MIMEType: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", ReferenceID: id},
		StartedAt: tailStarted, CompletedAt: tailStarted.Add(3 * time.Second),
	}
}

func tailDeadLetter() schemas.DeadLetter {
	return schemas.DeadLetter{
		OriginalTopic: "rulevalidator.requests", OriginalPartition: 2, OriginalOffset: 41,
		OriginalTimestamp: tailStarted, OriginalKey: []byte("r-9"), OriginalValue: []byte(`{"not":"avro"}`),
		OriginalHeaders: []schemas.Header{{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}},
		Reason:          schemas.ReasonUndecodable, Message: "schemas: cannot decode value: no rv-schema-fingerprint header",
		FailedAt: tailStarted.Add(time.Second), Attempts: 1,
	}
}

func TestTailLines(t *testing.T) {
	t.Parallel()
	v := tailVerdicts("r-1")
	failed := schemas.SummaryEvent{RequestID: "r-3", RulesetID: "contract-review", Status: schemas.StatusFailed,
		Error: &schemas.SummaryError{Code: schemas.ReasonUnknownRuleset, Message: `unknown ruleset "contract-review" version "9"`}}
	na := v[0]
	na.NotApplicable, na.BooleanOutput, na.Evidences = true, tailPtr(true), nil
	dl := tailDeadLetter()
	req := wantRequest("r-4", "contoso", tailStarted)

	for _, tc := range []struct {
		name, got, want string
	}{
		{"boolean verdict", verdictLine(&v[0]),
			`request r-1  rule liability-cap  FAIL  "Capped at twelve months of fees; data protection is not carved out."  evidence: "This limit does not apply to breach of clause 6 (Confidentiality)." (msa.pdf p.3, passage d1p3s2, anchored exact)`},
		{"numerical verdict kept with problems", verdictLine(&v[1]),
			`request r-1  rule payment-terms  score 2 of 5  kept with problems (the model's quote "payable in thirty days" is not in "msa.pdf")  "Payment within 30 days."  evidence: "payable in thirty days" (msa.pdf p.2, not found in the document); "Invoices are payable within 30 days." (msa.pdf p.2 (cited p.5), anchored normalized); "250000" (approval_limit, named input)`},
		{"named input cited by name", verdictLine(&schemas.VerdictEvent{RequestID: "r-1", RuleID: "limit", RuleType: verdict.Boolean, BooleanOutput: new(true), DataSufficiency: true,
			Rationale: "Within the limit.", Evidences: []verdict.Evidence{{Text: "250000", SourceOrigin: "approval_limit", PassageID: "approval_limit", CitedPageNumber: 1, Match: verdict.MatchNotDocument}}}),
			`request r-1  rule limit  PASS  "Within the limit."  evidence: "250000" (approval_limit, named input)`},
		{"kept with an altered quote", verdictLine(&schemas.VerdictEvent{RequestID: "r-1", RuleID: "term", RuleType: verdict.Boolean, BooleanOutput: new(true),
			Rationale: "Three years.", SufficiencyNote: new("your quote does not say what the document says"),
			Evidences: []verdict.Evidence{{Text: "five (5) years", QuotedText: "three (3) years", SourceOrigin: "msa.pdf", SourcePageNumber: 2,
				Anchored: true, Match: verdict.MatchFuzzy, Altered: true}}}),
			`request r-1  rule term  PASS  insufficient data (your quote does not say what the document says)  "Three years."  evidence: "five (5) years" (msa.pdf p.2, ALTERED: the model wrote "three (3) years")`},
		{"from the verdict cache", verdictLine(&schemas.VerdictEvent{RequestID: "r-2", RuleID: "limit", RuleType: verdict.Boolean, BooleanOutput: new(false), DataSufficiency: true,
			Rationale: "Over the limit.", Cached: &verdict.CachedFrom{JudgedAt: time.Date(2025, 3, 1, 9, 30, 0, 0, time.UTC), RequestID: "r-1"}}),
			`request r-2  rule limit  FAIL  "Over the limit."  evidence: none  cached: judged 2025-03-01T09:30:00Z under request r-1`},
		{"summary with cached verdicts", summaryLine(func() *schemas.SummaryEvent {
			s := tailSummary("r-6")
			s.Report, s.Aggregate, s.Counts.Cached = nil, verdict.Aggregate{}, 2
			return &s
		}()),
			`request r-6  summary completed  ruleset contract-review 1.0.0  2 rules: 0 passed, 1 failed, 0 not applicable, 1 insufficient data, 2 from the verdict cache  model fake-model  tokens 900 in (512 cached), 300 out, 1 call(s)`},
		{"routed to review", verdictLine(&schemas.VerdictEvent{RequestID: "r-2", RuleID: "limit", RuleType: verdict.Boolean, BooleanOutput: new(false), DataSufficiency: true,
			Rationale: "Over the limit.", Confidence: new(0.42), NeedsReview: true, ReviewReasons: []string{"low_confidence", "corrected_page"}}),
			`request r-2  rule limit  FAIL  confidence 0.42  NEEDS REVIEW (low_confidence, corrected_page)  "Over the limit."  evidence: none`},
		{"summary with verdicts needing review", summaryLine(func() *schemas.SummaryEvent {
			s := tailSummary("r-7")
			s.Report, s.Aggregate, s.Usage, s.Counts.NeedsReview = nil, verdict.Aggregate{}, verdict.Usage{}, 1
			return &s
		}()),
			`request r-7  summary completed  ruleset contract-review 1.0.0  2 rules: 0 passed, 1 failed, 0 not applicable, 1 insufficient data, 1 need review  model fake-model`},
		{"not applicable", verdictLine(&na),
			`request r-1  rule liability-cap  N/A (PASS)  "Capped at twelve months of fees; data protection is not carved out."  evidence: none`},
		{"completed summary", summaryLine(tailPtr(tailSummary("r-2"))),
			`request r-2  summary completed  ruleset contract-review 1.0.0  2 rules: 0 passed, 1 failed, 0 not applicable, 1 insufficient data  boolean (all) FAILED 0/1  numerical (weighted_mean) 2.00 over 1  report s3://rulevalidator-reports/contoso/r-2.xlsx  model fake-model  tokens 900 in (512 cached), 300 out, 1 call(s)`},
		{"split summary", summaryLine(func() *schemas.SummaryEvent {
			s := tailSummary("r-5")
			s.Report, s.Aggregate, s.Usage.LLMCalls, s.Usage.PlannedCalls = nil, verdict.Aggregate{}, 9, 7
			return &s
		}()),
			`request r-5  summary completed  ruleset contract-review 1.0.0  2 rules: 0 passed, 1 failed, 0 not applicable, 1 insufficient data  model fake-model  tokens 900 in (512 cached), 300 out, 9 call(s), split into 7`},
		{"summary with nested rulesets", summaryLine(func() *schemas.SummaryEvent {
			s := tailSummary("r-7")
			s.Report, s.Aggregate, s.Usage.RulesFiltered, s.Usage.RulesChecked = nil, verdict.Aggregate{}, 2, 1
			s.Groups = []verdict.GroupResult{
				{ID: "liability", Path: "liability", Required: true, GatedBy: []string{"liability/caps"},
					Aggregate: verdict.Aggregate{Boolean: &verdict.BooleanAggregate{Mode: "all", Applicable: 2, PassedCount: 1}}},
				{ID: "caps", Path: "liability/caps", Required: true, Aggregate: verdict.Aggregate{Boolean: &verdict.BooleanAggregate{Mode: "all", Applicable: 1}}},
				{ID: "payment", Path: "payment", NotApplicable: true},
				{ID: "quality", Path: "quality", Aggregate: verdict.Aggregate{Numerical: &verdict.NumericalAggregate{Mode: "min", Score: ptr(2.0), Counted: 2}}},
			}
			return &s
		}()),
			`request r-7  summary completed  ruleset contract-review 1.0.0  2 rules: 0 passed, 1 failed, 0 not applicable, 1 insufficient data` +
				`  groups liability (gate) FAILED 1/2, failed by the gate liability/caps; liability/caps (gate) FAILED 0/1; payment N/A; quality min 2.00 over 2` +
				`  2 rule(s) left out by filters, 1 judged by their check, without the model  model fake-model  tokens 900 in (512 cached), 300 out, 1 call(s)`},
		{"failed summary", summaryLine(&failed),
			`request r-3  summary failed  ruleset contract-review  error unknown_ruleset: "unknown ruleset \"contract-review\" version \"9\""`},
		{"dead letter", deadLetterLine(&dl),
			`dead letter  reason undecodable  from rulevalidator.requests 2:41  key "r-9"  "schemas: cannot decode value: no rv-schema-fingerprint header"  original value 14 bytes`},
		{"request", requestLine(req),
			`request r-4  tenant contoso  ruleset contract-review 1.0.0  3 document(s), 1 named input(s)  submitted 2025-03-03T09:00:00.000Z`},
		{"undecodable", recordLine(tailRecord{msg: stream.Record{Topic: "v", Partition: 1, Offset: 7, Value: []byte("garbage")}, err: errors.New("schemas: cannot decode value: no header")}),
			`UNDECODABLE  key none  7 bytes  schemas: cannot decode value: no header  [v 1:7]`},
		{"position", recordLine(tailRecord{msg: stream.Record{Topic: "d", Partition: 0, Offset: 3}, event: &dl}),
			deadLetterLine(&dl) + "  [d 0:3]"},
		{"clipped", clip(strings.Repeat("é", 10), 5), "éééé…"},
		{"not clipped", clip("short", 5), "short"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}
}

func TestTailJSONForm(t *testing.T) {
	t.Parallel()
	v := tailVerdicts("r-1")[0]
	msg := stream.Record{Topic: "verdicts", Partition: 2, Offset: 9, Key: []byte("r-1"), Time: tailStarted,
		Headers: []stream.Header{{Key: "ce_id", Value: []byte(v.EventID)}, {Key: "rv-schema", Value: []byte(schemas.VerdictSchema)}}}
	data, err := json.Marshal(recordJSON(tailRecord{msg: msg, event: &v}))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	eventJSON, _ := json.Marshal(v)
	for _, field := range []string{`"passage_id":"d1p3s2"`, `"cited_page_number":3`, `"problems":[]`} {
		if !strings.Contains(string(data), field) {
			t.Errorf("the record's event lacks %s: %s", field, data)
		}
	}
	want := map[string]string{
		"topic": `"verdicts"`, "partition": "2", "offset": "9", "key": `"r-1"`, "timestamp": `"2025-03-03T09:00:00.000Z"`,
		"headers": `{"ce_id":"contoso/r-1/liability-cap","rv-schema":"` + schemas.VerdictSchema + `"}`,
		"schema":  `"` + schemas.VerdictSchema + `"`, "event": string(eventJSON),
	}
	if len(got) != len(want) {
		t.Errorf("fields %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for k, w := range want {
		if string(got[k]) != w {
			t.Errorf("%s = %s, want %s", k, got[k], w)
		}
	}

	bad := stream.Record{Topic: "verdicts", Value: []byte("garbage")}
	data, err = json.Marshal(recordJSON(tailRecord{msg: bad, err: errors.New("cannot decode")}))
	if err != nil {
		t.Fatal(err)
	}
	var undecodable struct {
		Key        *string         `json:"key"`
		Error      string          `json:"error"`
		Value      []byte          `json:"value"`
		ValueBytes int             `json:"value_bytes"`
		Event      json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal(data, &undecodable); err != nil {
		t.Fatal(err)
	}
	if undecodable.Key != nil || undecodable.Error != "cannot decode" || string(undecodable.Value) != "garbage" || undecodable.ValueBytes != 7 || undecodable.Event != nil {
		t.Errorf("undecodable record as JSON: %s", data)
	}
}

func tailDeref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

func TestTailRecordConcerns(t *testing.T) {
	t.Parallel()
	v := tailVerdicts("r-1")[0]
	s := tailSummary("r-1")
	dl := tailDeadLetter()
	for _, tc := range []struct {
		name string
		rec  tailRecord
		id   string
		want bool
	}{
		{"verdict of the request", tailRecord{event: &v}, "r-1", true},
		{"verdict of another", tailRecord{event: &v}, "r-2", false},
		{"summary", tailRecord{event: &s}, "r-1", true},
		{"dead letter by original key", tailRecord{event: &dl}, "r-9", true},
		{"dead letter of another", tailRecord{event: &dl}, "r-1", false},
		{"request", tailRecord{event: wantRequest("r-5", "t", tailStarted)}, "r-5", true},
		{"undecodable by record key", tailRecord{msg: stream.Record{Key: []byte("r-1")}, err: errors.New("x")}, "r-1", true},
		{"undecodable without key", tailRecord{err: errors.New("x")}, "r-1", false},
	} {
		if got := tc.rec.concerns(tc.id); got != tc.want {
			t.Errorf("%s: concerns(%q) = %v, want %v", tc.name, tc.id, got, tc.want)
		}
	}
}

func TestTailTopicNames(t *testing.T) {
	t.Parallel()
	var kf kafkaConfig
	var names tailTopicNames
	cl := newCommandLine("tail", tailDoc, tailSettings(&kf, &names), io.Discard)
	getenv := func(k string) string {
		if k == "RULEVALIDATOR_TOPIC_VERDICTS" {
			return "prod.verdicts"
		}
		return ""
	}
	if code, ok := cl.parse([]string{"--deadletter-topic", "prod.deadletter"}, getenv); !ok {
		t.Fatalf("parse: exit %d", code)
	}
	got := tailTopics("verdicts, summaries,deadletter,requests,,custom.topic", names)
	want := []string{"prod.verdicts", "rulevalidator.summaries", "prod.deadletter", "rulevalidator.requests", "custom.topic"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tailTopics = %v, want %v", got, want)
	}
}

func TestTailFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		say  string
	}{
		{[]string{"tail", "--help"}, exitOK, "Example:"},
		{[]string{"tail", "--from", "middle"}, exitInvalid, `--from: "middle" is not beginning or end`},
		{[]string{"tail", "--max", "-1"}, exitInvalid, "--max: -1 must not be negative"},
		{[]string{"tail", "--topics", ","}, exitInvalid, "--topics: no topic given"},
		{[]string{"tail", "extra"}, exitInvalid, "unexpected arguments: extra"},
		{[]string{"tail", "--kafka-brokers", "127.0.0.1:1", "--topics", "x"}, exitFailure, "127.0.0.1:1"},
	} {
		code, _, stderr := opRun(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.say) {
			t.Errorf("%v: exit %d (want %d), stderr does not say %q:\n%s", tc.args, code, tc.code, tc.say, stderr)
		}
	}
}

// tailTopicsEnv is one test's verdict, summary and dead-letter topics (one partition each).
type tailTopicsEnv struct {
	bootstrap                       string
	verdicts, summaries, deadLetter string
	prod                            *producer.Producer
}

func newTailTopicsEnv(t *testing.T) *tailTopicsEnv {
	t.Helper()
	e := &tailTopicsEnv{
		bootstrap:  kafkatest.Broker(t),
		verdicts:   kafkatest.UniqueTopic(t, "verdicts"),
		summaries:  kafkatest.UniqueTopic(t, "summaries"),
		deadLetter: kafkatest.UniqueTopic(t, "deadletter"),
	}
	for _, topic := range []string{e.verdicts, e.summaries, e.deadLetter} {
		kafkatest.CreateTopic(t, e.bootstrap, topic, 1)
	}
	serde, err := schemas.NewSerde(context.Background(), schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	client, err := stream.NewClient(stream.ClientConfig{Brokers: []string{e.bootstrap}})
	if err != nil {
		t.Fatal(err)
	}
	e.prod, err = producer.New(context.Background(), producer.Config{
		Client: client, VerdictTopic: e.verdicts, SummaryTopic: e.summaries, DeadLetterTopic: e.deadLetter,
	}, serde)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.prod.Close() })
	return e
}

// publish writes a request's verdicts and summary as the service does.
func (e *tailTopicsEnv) publish(t *testing.T, id string) {
	t.Helper()
	msgs, err := e.prod.Encode(t.Context(), producer.Result{Verdicts: tailVerdicts(id), Summary: tailSummary(id)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.prod.Write(ctx, msgs); err != nil {
		t.Fatal(err)
	}
}

func (e *tailTopicsEnv) publishDeadLetter(t *testing.T) {
	t.Helper()
	dl := tailDeadLetter()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := &consumer.Message{Topic: dl.OriginalTopic, Partition: dl.OriginalPartition, Offset: dl.OriginalOffset,
		Key: dl.OriginalKey, Value: dl.OriginalValue, Time: dl.OriginalTimestamp}
	for _, h := range dl.OriginalHeaders {
		m.Headers = append(m.Headers, consumer.Header(h))
	}
	if err := e.prod.PublishDeadLetter(ctx, m, string(dl.Reason), errors.New(dl.Message)); err != nil {
		t.Fatal(err)
	}
}

// writeGarbage writes a record no wire format reads to topic.
func (e *tailTopicsEnv) writeGarbage(t *testing.T, topic, key, value string) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(e.bootstrap), Topic: topic, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(key), Value: []byte(value)}); err != nil {
		t.Fatal(err)
	}
}

func (e *tailTopicsEnv) args(extra ...string) []string {
	return append([]string{"tail", "--kafka-brokers", e.bootstrap, "--topics", strings.Join([]string{e.verdicts, e.summaries, e.deadLetter}, ",")}, extra...)
}

func TestTailPrintsEveryKindOfRecord(t *testing.T) {
	t.Parallel()
	e := newTailTopicsEnv(t)
	e.writeGarbage(t, e.verdicts, "r-1", "garbage")
	e.publish(t, "r-1")
	e.publishDeadLetter(t)
	v, s, dl := tailVerdicts("r-1"), tailSummary("r-1"), tailDeadLetter()

	// --follow: only --max can end it before the test's deadline.
	began := time.Now()
	code, stdout, stderr := opRun(t, e.args("--follow", "--max", "5")...)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Errorf("tail took %s to stop at --max 5", took)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	slices.Sort(lines)
	want := []string{
		"UNDECODABLE  key \"r-1\"  7 bytes  schemas: cannot decode value from topic \"" + e.verdicts + "\": no rv-schema-fingerprint header and no Confluent magic byte 0x00 (first byte 0x67)  [" + e.verdicts + " 0:0]",
		verdictLine(&v[0]) + "  [" + e.verdicts + " 0:1]",
		verdictLine(&v[1]) + "  [" + e.verdicts + " 0:2]",
		summaryLine(&s) + "  [" + e.summaries + " 0:0]",
		deadLetterLine(&dl) + "  [" + e.deadLetter + " 0:0]",
	}
	slices.Sort(want)
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("tail printed:\n%s\nwant (in any order):\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// Within a partition, records come in order: the undecodable one did not stop the reading.
	if i, j := strings.Index(stdout, "UNDECODABLE"), strings.Index(stdout, "rule liability-cap"); i < 0 || j < i {
		t.Errorf("the undecodable record should come before the verdicts:\n%s", stdout)
	}

	code, stdout, stderr = opRun(t, e.args("--max", "5", "--json")...)
	if code != exitOK {
		t.Fatalf("--json: exit %d; stderr:\n%s", code, stderr)
	}
	type jsonLine struct {
		Topic      string            `json:"topic"`
		Partition  int               `json:"partition"`
		Offset     int64             `json:"offset"`
		Key        *string           `json:"key"`
		Headers    map[string]string `json:"headers"`
		Schema     string            `json:"schema"`
		Event      json.RawMessage   `json:"event"`
		Error      string            `json:"error"`
		ValueBytes int               `json:"value_bytes"`
	}
	byPlace := map[string]jsonLine{}
	for _, line := range strings.Split(strings.TrimRight(stdout, "\n"), "\n") {
		var l jsonLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		byPlace[fmt.Sprintf("%s/%d", l.Topic, l.Offset)] = l
	}
	if len(byPlace) != 5 {
		t.Fatalf("%d distinct records printed, want 5:\n%s", len(byPlace), stdout)
	}
	for place, want := range map[string]struct {
		key, schema string
		event       any
	}{
		e.verdicts + "/1":   {"r-1", schemas.VerdictSchema, v[0]},
		e.verdicts + "/2":   {"r-1", schemas.VerdictSchema, v[1]},
		e.summaries + "/0":  {"r-1", schemas.SummarySchema, s},
		e.deadLetter + "/0": {"r-9", schemas.DeadLetterSchema, dl},
	} {
		got := byPlace[place]
		if want.schema == schemas.DeadLetterSchema {
			// The producer stamps the time of failure: take it from what was read.
			var read schemas.DeadLetter
			if err := json.Unmarshal(got.Event, &read); err != nil {
				t.Fatalf("%s: %v", place, err)
			}
			if time.Since(read.FailedAt) > time.Minute {
				t.Errorf("%s: failed_at %s is not the time of publishing", place, read.FailedAt)
			}
			stamped := want.event.(schemas.DeadLetter)
			stamped.FailedAt = read.FailedAt
			want.event = stamped
		}
		wantEvent, _ := json.Marshal(want.event)
		if got.Key == nil || *got.Key != want.key || got.Schema != want.schema || string(got.Event) != string(wantEvent) {
			t.Errorf("%s: key %q schema %q event\n%s\nwant key %q schema %q event\n%s", place, tailDeref(got.Key), got.Schema, got.Event, want.key, want.schema, wantEvent)
		}
		if got.Headers["ce_type"] != want.schema || got.Headers[schemas.HeaderSchema] != want.schema {
			t.Errorf("%s: headers %v", place, got.Headers)
		}
	}
	if got := byPlace[e.verdicts+"/0"]; !strings.Contains(got.Error, "cannot decode value") || got.ValueBytes != 7 || got.Event != nil {
		t.Errorf("undecodable record: %+v", got)
	}
	if got := byPlace[e.deadLetter+"/0"]; got.Headers[producer.HeaderDLQReason] != "undecodable" || got.Headers[producer.HeaderDLQOffset] != "41" {
		t.Errorf("dead letter headers: %v", got.Headers)
	}
}

func TestTailFiltersByRequestAndStopsWhenIdle(t *testing.T) {
	t.Parallel()
	e := newTailTopicsEnv(t)
	e.publish(t, "r-1")
	e.publish(t, "r-2")
	e.publishDeadLetter(t) // of r-9
	e.writeGarbage(t, e.summaries, "r-2", "\x00\x00\x00\x00\x07oops")

	began := time.Now()
	code, stdout, stderr := opRun(t, e.args("--request-id", "r-2", "--timeout", "1500ms")...)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if took := time.Since(began); took < 1500*time.Millisecond || took > 30*time.Second {
		t.Errorf("tail stopped after %s, want about 1.5s after the last record", took)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("printed %d lines, want r-2's 2 verdicts, summary and undecodable record:\n%s", len(lines), stdout)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "request r-2  ") && !strings.HasPrefix(l, `UNDECODABLE  key "r-2"`) {
			t.Errorf("line not about r-2: %s", l)
		}
	}
}

func TestTailFromEnd(t *testing.T) {
	t.Parallel()
	e := newTailTopicsEnv(t)
	e.publish(t, "old")

	var (
		wg             sync.WaitGroup
		code           int
		stdout, stderr string
		done           = make(chan struct{})
	)
	wg.Go(func() {
		defer close(done)
		code, stdout, stderr = opRun(t, e.args("--from", "end", "--follow", "--max", "1")...)
	})
	// The reader finds the end of each partition when it starts: keep publishing until a new
	// record is seen.
	for i := 0; ; i++ {
		select {
		case <-done:
			wg.Wait()
			if code != exitOK {
				t.Fatalf("exit %d; stderr:\n%s", code, stderr)
			}
			if strings.Contains(stdout, "request old") || !strings.Contains(stdout, "request new-") || strings.Count(stdout, "\n") != 1 {
				t.Errorf("tail --from end printed:\n%s", stdout)
			}
			return
		case <-time.After(300 * time.Millisecond):
			if i > 100 {
				t.Fatal("tail --from end printed nothing")
			}
			e.publish(t, fmt.Sprintf("new-%d", i))
		}
	}
}
