package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"rulevalidator/internal/docfixture"
	"rulevalidator/internal/opsscript"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// TestInteropServePythonClients has clients nobody on the project wrote talk to the service:
// Python's confluent-kafka (librdkafka) produces a request that fastavro encoded, with the
// fingerprint header fastavro computed; the service judges it; confluent-kafka reads the
// verdicts and the summary and fastavro decodes them, choosing the schema by that header.
// Both sides must read every field alike.
func TestInteropServePythonClients(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 3)
	python := pythonClients(t)
	requestLog := e.watch(t, e.requests, e.partitions)
	verdictLog := e.watch(t, e.verdicts, e.partitions)
	summaryLog := e.watch(t, e.summaries, e.partitions)
	schemaDir, err := filepath.Abs("../../schemas")
	if err != nil {
		t.Fatal(err)
	}

	req := exampleRequest(t, "py-0001")
	requestFile := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(requestFile, []byte(jsonText(t, requestRecord(req))), 0o600); err != nil {
		t.Fatal(err)
	}
	out := runPython(t, python, "produce", "--bootstrap", e.bootstrap, "--topic", e.requests, "--schemas", schemaDir, "--request", requestFile)
	var produced struct {
		Partition   int    `json:"partition"`
		Offset      int64  `json:"offset"`
		Fingerprint string `json:"fingerprint"`
		Traceparent string `json:"traceparent"`
	}
	if err := json.Unmarshal(out, &produced); err != nil {
		t.Fatalf("pyclient.py produce printed %q: %v", out, err)
	}

	e.startInProcess(t)
	waitUntil(t, waitLimit, "the summary", func() bool { return summaryLog.len() >= 1 })
	waitUntil(t, waitLimit, "the verdicts", func() bool { return verdictLog.len() >= len(exampleRuleIDs) })
	waitUntil(t, waitLimit, "the request read back", func() bool { return requestLog.len() >= 1 })

	// What Python wrote, Go reads as the request it was built from.
	m := requestLog.snapshot()[0]
	if m.Partition != produced.Partition || m.Offset != produced.Offset || string(m.Key) != req.RequestID {
		t.Errorf("request record %q at %d/%d, Python reported %d/%d", m.Key, m.Partition, m.Offset, produced.Partition, produced.Offset)
	}
	if fp, _ := header(m, schemas.HeaderFingerprint); fp != produced.Fingerprint {
		t.Errorf("fingerprint header %q, Python computed %q", fp, produced.Fingerprint)
	}
	got := decodeAs[*schemas.Request](t, e, m)
	if !jsonEqual(t, got, req) {
		t.Errorf("Go reads the request fastavro wrote as\n%s\nwant\n%s", jsonText(t, got), jsonText(t, req))
	}

	// What Go wrote, Python reads as Go does.
	lines := runPython(t, python, "consume", "--bootstrap", e.bootstrap, "--schemas", schemaDir,
		"--expect", fmt.Sprintf("%s=%d", e.verdicts, len(exampleRuleIDs)), "--expect", e.summaries+"=1", "--timeout", "60")
	published := map[string]kafka.Message{}
	for _, m := range append(verdictLog.snapshot(), summaryLog.snapshot()...) {
		published[fmt.Sprintf("%s/%d/%d", m.Topic, m.Partition, m.Offset)] = m
	}
	read := 0
	for line := range bytes.Lines(bytes.TrimSpace(lines)) {
		var ev struct {
			Topic     string            `json:"topic"`
			Partition int               `json:"partition"`
			Offset    int64             `json:"offset"`
			Key       string            `json:"key"`
			Headers   map[string]string `json:"headers"`
			Schema    string            `json:"schema"`
			Record    json.RawMessage   `json:"record"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("pyclient.py consume printed %q: %v", line, err)
		}
		where := fmt.Sprintf("%s/%d/%d", ev.Topic, ev.Partition, ev.Offset)
		m, ok := published[where]
		if !ok {
			t.Errorf("Python read %s, which Go did not", where)
			continue
		}
		read++
		var want any
		switch ev.Schema {
		case schemas.VerdictSchema:
			want = verdictRecord(e.verdict(t, m))
		case schemas.SummarySchema:
			want = summaryRecord(e.summary(t, m))
		default:
			t.Fatalf("%s: Python read a %s", where, ev.Schema)
		}
		if !sameJSON(t, ev.Record, want) {
			t.Errorf("%s: fastavro reads\n%s\nGo reads\n%s", where, ev.Record, jsonText(t, want))
		}
		if ev.Key != string(m.Key) || len(ev.Headers) != len(m.Headers) {
			t.Errorf("%s: Python read key %q and headers %v; Go %q and %v", where, ev.Key, ev.Headers, m.Key, headersExcept(m, ""))
		}
		for _, h := range m.Headers {
			if ev.Headers[h.Key] != string(h.Value) {
				t.Errorf("%s: header %s: Python read %q, Go %q", where, h.Key, ev.Headers[h.Key], h.Value)
			}
		}
		if ev.Headers["traceparent"] != produced.Traceparent {
			t.Errorf("%s: traceparent %q, want the one Python sent, %q", where, ev.Headers["traceparent"], produced.Traceparent)
		}
	}
	if read != len(exampleRuleIDs)+1 {
		t.Errorf("Python read %d events, want %d", read, len(exampleRuleIDs)+1)
	}
}

// An upstream producer in Python (confluent-kafka, fastavro on the shipped schema) sends the
// agreement as a PDF in the request's data field; the service reads it and cites its pages.
func TestInteropPythonSendsAPDF(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 1)
	python := pythonClients(t)
	verdictLog := e.watch(t, e.verdicts, 1)
	summaryLog := e.watch(t, e.summaries, 1)
	schemaDir, err := filepath.Abs("../../schemas")
	if err != nil {
		t.Fatal(err)
	}
	req := exampleRequest(t, "py-pdf-0001")
	msa := req.PrimaryDocs[0]
	req.PrimaryDocs = []schemas.Document{{Name: msa.Name, Data: docfixture.One(t, docfixture.PDF, msa.Pages...), ContentType: ptr("application/pdf")}}
	requestFile := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(requestFile, []byte(jsonText(t, requestRecord(req))), 0o600); err != nil {
		t.Fatal(err)
	}
	runPython(t, python, "produce", "--bootstrap", e.bootstrap, "--topic", e.requests, "--schemas", schemaDir, "--request", requestFile)
	e.startInProcess(t)
	waitUntil(t, waitLimit, "the summary", func() bool { return summaryLog.len() >= 1 })
	waitUntil(t, waitLimit, "the verdicts", func() bool { return verdictLog.len() >= len(exampleRuleIDs) })
	if s := e.summary(t, summaryLog.snapshot()[0]); s.Status != schemas.StatusCompleted {
		t.Fatalf("summary %s", jsonText(t, s))
	}
	for _, m := range verdictLog.snapshot() {
		v := e.verdict(t, m)
		if v.RuleID != "governing-law" {
			continue
		}
		if len(v.Evidences) == 0 || v.Evidences[0].SourceOrigin != msa.Name || v.Evidences[0].SourcePageNumber != 3 || !v.Evidences[0].Anchored {
			t.Errorf("governing-law evidence %s, want anchored on page 3 of the PDF", jsonText(t, v.Evidences))
		}
	}
}

// pythonClients returns the interpreter of the virtualenv ops/pyclients.sh makes, or skips the
// test saying why (a failure with RULEVALIDATOR_REQUIRE_INTEGRATION=1).
func pythonClients(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("RULEVALIDATOR_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "rulevalidator")
	}
	python := filepath.Join(cache, "pyclients", "venv", "bin", "python")
	out, err := exec.Command(python, "-c", "import confluent_kafka, fastavro").CombinedOutput()
	if err == nil {
		return python
	}
	msg := fmt.Sprintf("confluent-kafka and fastavro are not importable with %s (%v: %s); run ops/pyclients.sh install", python, err, strings.TrimSpace(string(out)))
	opsscript.Unavailable(t, "Python interop", "%s", msg)
	return ""
}

func runPython(t *testing.T, python string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(python, append([]string{"testdata/pyclient.py"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pyclient.py %s: %v\n%s", args[0], err, stderr.String())
	}
	return out
}

// sameJSON compares a JSON document with v as JSON.
func sameJSON(t *testing.T, doc json.RawMessage, v any) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(doc, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(jsonText(t, v)), &b); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(a, b)
}

// The records below spell out the Avro schemas' fields, as fastavro reads or writes them:
// unions unwrapped, timestamps in milliseconds.

func requestRecord(r *schemas.Request) map[string]any {
	docs := func(ds []schemas.Document) []any {
		out := []any{}
		for _, d := range ds {
			var pages any
			if d.Pages != nil {
				pages = d.Pages
			}
			var data any
			if d.Data != nil {
				data = hex.EncodeToString(d.Data) // pyclient.py reads bytes as hex
			}
			out = append(out, map[string]any{"name": d.Name, "content": d.Content, "pages": pages, "uri": d.URI, "content_type": d.ContentType, "data": data})
		}
		return out
	}
	named := []any{}
	for _, n := range r.NamedInputs {
		named = append(named, map[string]any{"name": n.Name, "description": n.Description, "value_json": n.ValueJSON})
	}
	var ref any
	if r.RulesetRef != nil {
		ref = map[string]any{"id": r.RulesetRef.ID, "version": r.RulesetRef.Version}
	}
	return map[string]any{
		"request_id":     r.RequestID,
		"tenant_id":      r.TenantID,
		"ruleset_ref":    ref,
		"inline_ruleset": r.InlineRuleset,
		"primary_docs":   docs(r.PrimaryDocs),
		"auxiliary_docs": docs(r.AuxiliaryDocs),
		"text_input":     r.TextInput,
		"named_inputs":   named,
		"message":        r.Message,
		"options":        map[string]any{"generate_report": r.Options.GenerateReport, "model": r.Options.Model, "callback_url": r.Options.CallbackURL, "cache": r.Options.Cache},
		"submitted_at":   r.SubmittedAt.UnixMilli(),
	}
}

// pagesRecord is a verdict's pages_considered as a Python reader sees it.
func pagesRecord(dps []verdict.DocumentPages) []any {
	out := []any{}
	for _, dp := range dps {
		pages := []int{}
		out = append(out, map[string]any{"document": dp.Document, "pages": append(pages, dp.Pages...)})
	}
	return out
}

func verdictRecord(v *schemas.VerdictEvent) map[string]any {
	evidences := []any{}
	for _, ev := range v.Evidences {
		differences := []any{}
		for _, d := range ev.Differences {
			differences = append(differences, map[string]any{"kind": d.Kind, "quote": d.Quote, "document": d.Document})
		}
		var quoted, similarity, passage, citedPage, citedPassage any
		if ev.QuotedText != "" {
			quoted = ev.QuotedText
		}
		if ev.Similarity != 0 {
			similarity = ev.Similarity
		}
		if ev.PassageID != "" {
			passage = ev.PassageID
		}
		if ev.CitedPageNumber != 0 {
			citedPage = ev.CitedPageNumber
		}
		if ev.CitedPassageID != "" {
			citedPassage = ev.CitedPassageID
		}
		evidences = append(evidences, map[string]any{
			"text": ev.Text, "source_origin": ev.SourceOrigin, "source_page_number": ev.SourcePageNumber,
			"anchored": ev.Anchored, "match": string(ev.Match), "start_offset": ev.StartOffset, "end_offset": ev.EndOffset,
			"quoted_text": quoted, "similarity": similarity, "altered": ev.Altered, "differences": differences,
			"passage_id": passage, "cited_page_number": citedPage, "cited_passage_id": citedPassage,
		})
	}
	scores := []int{}
	scores = append(scores, v.AllowedScores...)
	var cached any
	if c := v.Cached; c != nil {
		cached = map[string]any{"judged_at": c.JudgedAt.UnixMilli(), "request_id": c.RequestID}
	}
	return map[string]any{
		"event_id":         v.EventID,
		"request_id":       v.RequestID,
		"tenant_id":        v.TenantID,
		"ruleset_id":       v.RulesetID,
		"ruleset_version":  v.RulesetVersion,
		"model":            v.Model,
		"rule_id":          v.RuleID,
		"rule_name":        v.RuleName,
		"rule_type":        string(v.RuleType),
		"data_sufficiency": v.DataSufficiency,
		"rationale":        v.Rationale,
		"boolean_output":   v.BooleanOutput,
		"numerical_output": v.NumericalOutput,
		"allowed_scores":   scores,
		"not_applicable":   v.NotApplicable,
		"sufficiency_note": v.SufficiencyNote,
		"problems":         append([]string{}, v.Problems...),
		"confidence":       v.Confidence,
		"needs_review":     v.NeedsReview,
		"review_reasons":   append([]string{}, v.ReviewReasons...),
		"rule_weight":      v.RuleWeight,
		"pages_considered": pagesRecord(v.PagesConsidered),
		"evidences":        evidences,
		"started_at":       v.StartedAt.UnixMilli(),
		"completed_at":     v.CompletedAt.UnixMilli(),
		"rule_index":       v.RuleIndex,
		"rule_count":       v.RuleCount,
		"cached":           cached,
	}
}

// aggregateRecord is an Aggregate record as the Avro reader gives it.
func aggregateRecord(a verdict.Aggregate) map[string]any {
	var boolean, numerical any
	if b := a.Boolean; b != nil {
		boolean = map[string]any{"mode": string(b.Mode), "passed": b.Passed, "applicable": b.Applicable, "passed_count": b.PassedCount}
	}
	if n := a.Numerical; n != nil {
		numerical = map[string]any{"mode": string(n.Mode), "score": n.Score, "counted": n.Counted}
	}
	return map[string]any{"boolean": boolean, "numerical": numerical}
}

func summaryRecord(s *schemas.SummaryEvent) map[string]any {
	var failure, report any
	if s.Error != nil {
		failure = map[string]any{"code": string(s.Error.Code), "message": s.Error.Message}
	}
	if r := s.Report; r != nil {
		report = map[string]any{"file_name": r.FileName, "uri": r.URI, "mime_type": r.MIMEType, "reference_id": r.ReferenceID}
	}
	sources := []any{}
	for _, src := range s.Sources {
		sources = append(sources, map[string]any{"source_origin": src.SourceOrigin, "text": src.Text, "source_page_number": src.SourcePageNumber})
	}
	groups := []any{}
	for _, g := range s.Groups {
		var name, reason any
		if g.Name != "" {
			name = g.Name
		}
		if g.Reason != "" {
			reason = g.Reason
		}
		groups = append(groups, map[string]any{"id": g.ID, "path": g.Path, "name": name, "required": g.Required,
			"not_applicable": g.NotApplicable, "reason": reason, "gated_by": append([]string{}, g.GatedBy...),
			"rule_ids": append([]string{}, g.RuleIDs...), "aggregate": aggregateRecord(g.Aggregate)})
	}
	return map[string]any{
		"event_id":        s.EventID,
		"request_id":      s.RequestID,
		"tenant_id":       s.TenantID,
		"ruleset_id":      s.RulesetID,
		"ruleset_version": s.RulesetVersion,
		"model":           s.Model,
		"status":          string(s.Status),
		"counts": map[string]any{"rules": s.Counts.Rules, "passed": s.Counts.Passed, "failed": s.Counts.Failed,
			"not_applicable": s.Counts.NotApplicable, "insufficient_data": s.Counts.InsufficientData, "cached": s.Counts.Cached,
			"needs_review": s.Counts.NeedsReview},
		"aggregate": aggregateRecord(s.Aggregate),
		"sources":   sources,
		"usage": map[string]any{"prompt_tokens": s.Usage.PromptTokens, "completion_tokens": s.Usage.CompletionTokens,
			"cached_tokens": s.Usage.CachedTokens, "llm_calls": s.Usage.LLMCalls, "planned_calls": s.Usage.PlannedCalls,
			"rules_filtered": s.Usage.RulesFiltered, "rules_checked": s.Usage.RulesChecked, "cost": s.Usage.Cost},
		"groups":            groups,
		"error":             failure,
		"validation_report": report,
		"started_at":        s.StartedAt.UnixMilli(),
		"completed_at":      s.CompletedAt.UnixMilli(),
	}
}
