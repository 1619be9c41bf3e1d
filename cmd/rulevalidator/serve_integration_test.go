package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/segmentio/kafka-go"

	"rulevalidator/engine"
	"rulevalidator/internal/kafkatest"
	"rulevalidator/internal/logbuf"
	"rulevalidator/registry"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// Integration tests of `rulevalidator serve` against the real local Kafka broker and a
// scripted model (llmfake) that answers every request for the example ruleset alike.

// TestServeEndToEnd produces requests, runs the service and checks every field and header of
// what it publishes, where it publishes it, and that the group's offsets reach the end.
func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 3)
	verdictLog := e.watch(t, e.verdicts, e.partitions)
	summaryLog := e.watch(t, e.summaries, e.partitions)

	const n = 12
	ids, reqs := exampleRequests(t, "e2e", n)
	begin := time.Now().UTC().Truncate(time.Millisecond)
	e.produceRequests(t, reqs...)
	svc := e.startInProcess(t)

	waitUntil(t, waitLimit, "every request has its summary", func() bool { return hasAll(summaryLog.keys(), ids) })
	waitUntil(t, waitLimit, "every verdict is read", func() bool { return verdictLog.len() >= n*len(exampleRuleIDs) })
	e.waitCommittedToEnd(t)
	if code := svc.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d, want %d", code, exitOK)
	}
	end := time.Now()

	verdicts, summaries := verdictLog.snapshot(), summaryLog.snapshot()
	if len(verdicts) != n*len(exampleRuleIDs) || len(summaries) != n {
		t.Fatalf("%d verdicts and %d summaries published, want %d and %d", len(verdicts), len(summaries), n*len(exampleRuleIDs), n)
	}
	if calls := len(e.llm.Requests()); calls != n {
		t.Errorf("the model was called %d times for %d requests", calls, n)
	}

	// Keys, headers, partitions, order.
	type placement struct {
		partition int
		rules     []string
		verdicts  []*schemas.VerdictEvent
	}
	byRequest := map[string]*placement{}
	for _, m := range verdicts { // by partition, then offset
		v := e.verdict(t, m)
		checkEventMessage(t, m, v.RequestID, v.EventID, schemas.VerdictSchema, v.RuleID, v.CompletedAt)
		p, ok := byRequest[v.RequestID]
		if !ok {
			p = &placement{partition: m.Partition}
			byRequest[v.RequestID] = p
		}
		if m.Partition != p.partition {
			t.Errorf("request %s: verdicts in partitions %d and %d", v.RequestID, p.partition, m.Partition)
		}
		p.rules = append(p.rules, v.RuleID)
		p.verdicts = append(p.verdicts, v)
	}
	summaryOf := map[string]*schemas.SummaryEvent{}
	for _, m := range summaries {
		s := e.summary(t, m)
		checkEventMessage(t, m, s.RequestID, tenant+"/"+s.RequestID, schemas.SummarySchema, "", s.CompletedAt)
		summaryOf[s.RequestID] = s
		if p := byRequest[s.RequestID]; p == nil || p.partition != m.Partition {
			t.Errorf("request %s: summary in partition %d, verdicts in %+v", s.RequestID, m.Partition, p)
		}
	}
	for _, id := range ids {
		p := byRequest[id]
		if p == nil || !slices.Equal(p.rules, exampleRuleIDs) {
			t.Errorf("request %s: verdicts in offset order %v, want the ruleset's order %v", id, p.rules, exampleRuleIDs)
		}
	}

	// Every field of one request's events.
	id := ids[0]
	got := byRequest[id].verdicts
	first := got[0]
	if !first.StartedAt.After(begin.Add(-time.Millisecond)) || first.CompletedAt.Before(first.StartedAt) || first.CompletedAt.After(end) {
		t.Errorf("started_at %v, completed_at %v: not within the run (%v to %v) in order", first.StartedAt, first.CompletedAt, begin, end)
	}
	docText := exampleDocText(t, "northwind-msa.pdf")
	checkVerdictFields(t, got[0], &schemas.VerdictEvent{
		EventID: tenant + "/" + id + "/governing-law", RequestID: id, TenantID: tenant,
		RulesetID: exampleRulesetID, RulesetVersion: ptr(exampleRulesetVersion), Model: fakeModel,
		RuleID: "governing-law", RuleName: ptr("Governing law"), RuleType: verdict.Boolean,
		DataSufficiency: true, Rationale: "Governed by New York law, which the policy approves.",
		BooleanOutput: ptr(true),
		// The model cited page 1; the quote is on page 3.
		Evidences: []verdict.Evidence{exactEvidence(t, docText, "northwind-msa.pdf", 3, 1,
			"This Agreement is governed by the laws of the State of")},
		StartedAt: first.StartedAt, CompletedAt: first.CompletedAt, RuleIndex: 0, RuleCount: len(exampleRuleIDs),
		// The corrected page routes it to a person; the model was sure of its value.
		NeedsReview: true, ReviewReasons: []string{"corrected_page"}, RuleWeight: ptr(1.0), Confidence: ptr(0.97),
	})
	checkVerdictFields(t, got[4], &schemas.VerdictEvent{
		EventID: tenant + "/" + id + "/payment-terms", RequestID: id, TenantID: tenant,
		RulesetID: exampleRulesetID, RulesetVersion: ptr(exampleRulesetVersion), Model: fakeModel,
		RuleID: "payment-terms", RuleName: ptr("Payment terms"), RuleType: verdict.Numerical,
		DataSufficiency: true, Rationale: "30 days with 1.5% monthly interest.",
		NumericalOutput: ptr(2), AllowedScores: []int{0, 1, 2, 3, 4, 5},
		Evidences: []verdict.Evidence{exactEvidence(t, docText, "northwind-msa.pdf", 2, 2,
			"Invoices are payable within thirty (30) days of receipt.")},
		StartedAt: first.StartedAt, CompletedAt: first.CompletedAt, RuleIndex: 4, RuleCount: len(exampleRuleIDs),
		RuleWeight: ptr(2.0), Confidence: ptr(0.88),
	})
	// The rest: outcomes and how each quote was anchored to a verbatim span.
	for i, w := range []struct {
		boolean *bool
		score   *int
		scores  []int
		match   verdict.Match
		page    int
	}{
		1: {boolean: ptr(false), match: verdict.MatchNormalized, page: 3},
		2: {boolean: ptr(false), match: verdict.MatchFuzzy, page: 2},
		3: {boolean: ptr(true), match: verdict.MatchNotDocument},
		5: {score: ptr(2), scores: []int{0, 1, 2, 3}, match: verdict.MatchExact, page: 3},
	} {
		if i == 0 || i == 4 {
			continue
		}
		v := got[i]
		if v.RuleIndex != i || v.RuleCount != len(exampleRuleIDs) || !equalPtr(v.BooleanOutput, w.boolean) || !equalPtr(v.NumericalOutput, w.score) || !slices.Equal(v.AllowedScores, w.scores) {
			t.Errorf("verdict %d = %s", i, jsonText(t, v))
		}
		if w.match == "" {
			if len(v.Evidences) != 0 {
				t.Errorf("verdict %s: evidences %s, want none", v.RuleID, jsonText(t, v.Evidences))
			}
			continue
		}
		if len(v.Evidences) != 1 {
			t.Fatalf("verdict %s: evidences %s, want one", v.RuleID, jsonText(t, v.Evidences))
		}
		ev := v.Evidences[0]
		if w.match == verdict.MatchNotDocument { // the named input the verdict rests on
			if ev.Anchored || ev.Match != w.match || ev.SourceOrigin != "approval_limit_usd" || ev.SourcePageNumber != 0 {
				t.Errorf("verdict %s: evidence %s, want the named input, not anchored", v.RuleID, jsonText(t, ev))
			}
			continue
		}
		if !ev.Anchored || ev.Match != w.match || ev.SourcePageNumber != w.page || ev.StartOffset == nil || ev.EndOffset == nil ||
			runeSlice(docText, *ev.StartOffset, *ev.EndOffset) != ev.Text {
			t.Errorf("verdict %s: evidence %s is not a verbatim span of the document anchored by %s on page %d", v.RuleID, jsonText(t, ev), w.match, w.page)
		}
	}

	// Sources: the evidence anchored in a document; the named input cites none.
	var sources []verdict.Source
	for _, v := range got {
		for _, ev := range v.Evidences {
			if ev.Anchored {
				sources = append(sources, verdict.Source{SourceOrigin: ev.SourceOrigin, Text: ev.Text, SourcePageNumber: ev.SourcePageNumber})
			}
		}
	}
	if len(sources) != 5 {
		t.Fatalf("%d anchored evidences in the verdicts, want 5", len(sources))
	}
	wantSummary := &schemas.SummaryEvent{
		EventID: tenant + "/" + id, RequestID: id, TenantID: tenant,
		RulesetID: exampleRulesetID, RulesetVersion: ptr(exampleRulesetVersion), Model: fakeModel,
		Status: schemas.StatusCompleted,
		// The check of signing-authority passes; a filter leaves
		// data-protection out.
		// Three verdicts under the review threshold, and governing-law's
		// corrected page.
		Counts: schemas.Counts{Rules: 8, Passed: 3, Failed: 2, NotApplicable: 1, NeedsReview: 4},
		Aggregate: verdict.Aggregate{
			// Four boolean rules and the gate signing-authority.
			Boolean:   &verdict.BooleanAggregate{Mode: "all", Passed: false, Applicable: 5, PassedCount: 3},
			Numerical: &verdict.NumericalAggregate{Mode: "weighted_mean", Score: ptr(2.0), Counted: 2},
		},
		Groups: []verdict.GroupResult{
			{ID: "signing-authority", Path: "signing-authority", Name: "Signing authority", Required: true, RuleIDs: []string{"approval-limit-given"},
				Aggregate: verdict.Aggregate{Boolean: &verdict.BooleanAggregate{Mode: "all", Passed: true, Applicable: 1, PassedCount: 1}}},
			{ID: "data-protection", Path: "data-protection", Name: "Data protection", NotApplicable: true, RuleIDs: []string{"dpa-attached"},
				Reason:    `not applicable: filter_criteria of nested ruleset "data-protection" (has(inputs.personal_data) && inputs.personal_data) is false for this request; not given: personal_data`,
				Aggregate: verdict.Aggregate{Boolean: &verdict.BooleanAggregate{Mode: "all", Passed: true}}},
		},
		Sources:   sources,
		Usage:     verdict.Usage{PromptTokens: 900, CompletionTokens: 300, CachedTokens: 512, LLMCalls: 1, PlannedCalls: 1, RulesFiltered: 1, RulesChecked: 1},
		StartedAt: first.StartedAt, CompletedAt: first.CompletedAt,
	}
	if s := summaryOf[id]; !jsonEqual(t, s, wantSummary) {
		t.Errorf("summary of %s:\n%s\nwant\n%s", id, jsonText(t, s), jsonText(t, wantSummary))
	}
	// Every request was judged alike.
	for _, other := range ids[1:] {
		s := summaryOf[other]
		if s.Status != schemas.StatusCompleted || s.Counts != wantSummary.Counts || !jsonEqual(t, s.Aggregate, wantSummary.Aggregate) {
			t.Errorf("summary of %s: %s", other, jsonText(t, s))
		}
	}
}

// checkEventMessage checks the record around an event: its key, timestamp and headers.
func checkEventMessage(t *testing.T, m kafka.Message, requestID, eventID, schema, subject string, completed time.Time) {
	t.Helper()
	where := fmt.Sprintf("%s/%d/%d (%s)", m.Topic, m.Partition, m.Offset, eventID)
	if string(m.Key) != requestID {
		t.Errorf("%s: key %q, want the request id %q", where, m.Key, requestID)
	}
	if !m.Time.Equal(completed) {
		t.Errorf("%s: record time %v, want completed_at %v", where, m.Time, completed)
	}
	fingerprints, err := schemaFingerprints()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ce_id":                   eventID,
		"rv-event-id":             eventID,
		"ce_type":                 schema,
		"ce_source":               "rulevalidator",
		"ce_specversion":          "1.0",
		"ce_time":                 completed.UTC().Format(time.RFC3339Nano),
		"content-type":            "application/avro",
		"rv-tenant-id":            tenant,
		"traceparent":             traceparentFor(requestID),
		schemas.HeaderSchema:      schema,
		schemas.HeaderFingerprint: fingerprints[schema],
	}
	if subject != "" {
		want["ce_subject"] = subject
	}
	for key, value := range want {
		if got, one := header(m, key); !one || got != value {
			t.Errorf("%s: header %s = %q (exactly once: %v), want %q", where, key, got, one, value)
		}
	}
	if subject == "" {
		if _, present := header(m, "ce_subject"); present {
			t.Errorf("%s: a summary carries ce_subject", where)
		}
	}
	if len(m.Headers) != len(want) {
		t.Errorf("%s: headers %v, want exactly %v", where, headersExcept(m, ""), want)
	}
}

// schemaFingerprints maps each event schema's name to its fingerprint as the plain wire
// format's header carries it.
var schemaFingerprints = sync.OnceValues(func() (map[string]string, error) {
	codecs, err := schemas.NewCodecs()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, sc := range codecs.Schemas() {
		out[sc.Name()] = sc.FingerprintHex()
	}
	return out, nil
})

func checkVerdictFields(t *testing.T, got, want *schemas.VerdictEvent) {
	t.Helper()
	if !jsonEqual(t, got, want) {
		t.Errorf("verdict %s:\n%s\nwant\n%s", want.EventID, jsonText(t, got), jsonText(t, want))
	}
}

// exampleDocText is the text of an example document as offsets count it (pages joined by
// form feeds).
func exampleDocText(t *testing.T, name string) string {
	t.Helper()
	for _, d := range exampleInputs(t).Documents() {
		if d.Name == name {
			return d.Text()
		}
	}
	t.Fatalf("the example has no document %q", name)
	return ""
}

// exactEvidence is quote anchored exactly in text on page, with its code
// point offsets, where the model cited page cited.
func exactEvidence(t *testing.T, text, origin string, page, cited int, quote string) verdict.Evidence {
	t.Helper()
	i := strings.Index(text, quote)
	if i < 0 {
		t.Fatalf("%q is not in %s", quote, origin)
	}
	start := utf8.RuneCountInString(text[:i])
	return verdict.Evidence{Text: quote, QuotedText: quote, Similarity: 1, SourceOrigin: origin, SourcePageNumber: page, CitedPageNumber: cited, Anchored: true, Match: verdict.MatchExact,
		StartOffset: ptr(start), EndOffset: ptr(start + utf8.RuneCountInString(quote))}
}

func runeSlice(s string, start, end int) string {
	r := []rune(s)
	if start < 0 || end > len(r) || start > end {
		return ""
	}
	return string(r[start:end])
}

func equalPtr[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// TestServeDeadLetters interleaves poison messages with good requests: each poison message
// lands in the dead-letter topic, byte for byte, with its position and reason; decodable
// ones also get a failed summary; the good requests are judged all the same.
func TestServeDeadLetters(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 1)
	requestLog := e.watch(t, e.requests, 1)
	verdictLog := e.watch(t, e.verdicts, 1)
	summaryLog := e.watch(t, e.summaries, 1)
	deadLog := e.watch(t, e.deadLetters, 1)

	good := []string{"dl-good-0", "dl-good-1", "dl-good-2", "dl-good-3"}
	type poison struct {
		msg       kafka.Message
		reason    schemas.Reason
		detail    string // in the dead letter's message
		summary   bool   // decodable: a failed summary is published too
		rulesetID string
	}
	truncated := e.requestMessage(t, exampleRequest(t, "junk-truncated"))
	truncated.Value = truncated.Value[:len(truncated.Value)/2]
	unknown := exampleRequest(t, "dl-unknown")
	unknown.RulesetRef = &schemas.RulesetRef{ID: "no-such-ruleset"}
	inline := exampleRequest(t, "dl-inline")
	inline.RulesetRef = nil
	inline.InlineRuleset = ptr(`{"id":"inline-broken","rules":[{"rule_id":"r1","rule_txt":"typo"}]}`)
	oversized := exampleRequest(t, "dl-oversized")
	oversized.PrimaryDocs = append(oversized.PrimaryDocs, schemas.Document{Name: "appendix.txt", Content: ptr(strings.Repeat("Lorem ipsum dolor sit amet. ", 1500))})

	poisons := map[string]poison{
		"junk-json": {msg: kafka.Message{Key: []byte("junk-json"), Value: []byte(`{"request_id":"junk-json"}`),
			Headers: []kafka.Header{{Key: "traceparent", Value: []byte(traceparentFor("junk-json"))}}},
			reason: schemas.ReasonUndecodable, detail: "JSON?"},
		"junk-truncated": {msg: truncated, reason: schemas.ReasonUndecodable, detail: "ValidationRequest"},
		"dl-unknown":     {msg: e.requestMessage(t, unknown), reason: schemas.ReasonUnknownRuleset, detail: "no-such-ruleset", summary: true, rulesetID: "no-such-ruleset"},
		"dl-inline":      {msg: e.requestMessage(t, inline), reason: schemas.ReasonInvalidRuleset, detail: `"rule_txt"`, summary: true},
		"dl-oversized":   {msg: e.requestMessage(t, oversized), reason: schemas.ReasonOversized, detail: "over the limit of 16384", summary: true, rulesetID: exampleRulesetID},
	}
	order := []string{"dl-good-0", "junk-json", "dl-good-1", "dl-unknown", "junk-truncated", "dl-inline", "dl-good-2", "dl-oversized", "dl-good-3"}
	var msgs []kafka.Message
	for _, key := range order {
		if p, ok := poisons[key]; ok {
			msgs = append(msgs, p.msg)
		} else {
			msgs = append(msgs, e.requestMessage(t, exampleRequest(t, key)))
		}
	}
	e.produce(t, msgs...)
	e.startInProcess(t, "--max-input-bytes", "16384")

	waitUntil(t, waitLimit, "every poison message is dead-lettered", func() bool { return deadLog.len() >= len(poisons) })
	waitUntil(t, waitLimit, "every summary", func() bool { return summaryLog.len() >= len(good)+3 })
	waitUntil(t, waitLimit, "every verdict", func() bool { return verdictLog.len() >= len(good)*len(exampleRuleIDs) })
	waitUntil(t, waitLimit, "the requests are read back", func() bool { return requestLog.len() == len(order) })
	e.waitCommittedToEnd(t)

	produced := map[string]kafka.Message{}
	for _, m := range requestLog.snapshot() {
		produced[string(m.Key)] = m
	}
	summaries := map[string][]*schemas.SummaryEvent{}
	for _, m := range summaryLog.snapshot() {
		s := e.summary(t, m)
		checkEventMessage(t, m, s.RequestID, tenant+"/"+s.RequestID, schemas.SummarySchema, "", s.CompletedAt)
		summaries[s.RequestID] = append(summaries[s.RequestID], s)
	}
	verdictKeys := verdictLog.keys()
	for _, id := range good {
		if s := summaries[id]; len(s) != 1 || s[0].Status != schemas.StatusCompleted || verdictKeys[id] != len(exampleRuleIDs) {
			t.Errorf("good request %s: summaries %s and %d verdicts", id, jsonText(t, s), verdictKeys[id])
		}
	}

	dead := map[int64]kafka.Message{}
	for _, m := range deadLog.snapshot() {
		dl := e.deadLetter(t, m)
		dead[dl.OriginalOffset] = m
	}
	if len(dead) != len(poisons) {
		t.Errorf("%d dead letters, want %d", len(dead), len(poisons))
	}
	for key, p := range poisons {
		t.Run(key, func(t *testing.T) {
			orig := produced[key]
			m, ok := dead[orig.Offset]
			if !ok {
				t.Fatalf("no dead letter for offset %d", orig.Offset)
			}
			dl := e.deadLetter(t, m)
			t.Logf("reason %s: %s", dl.Reason, dl.Message)
			if dl.OriginalTopic != e.requests || dl.OriginalPartition != 0 || dl.OriginalOffset != orig.Offset ||
				!bytes.Equal(dl.OriginalValue, p.msg.Value) || !bytes.Equal(dl.OriginalKey, p.msg.Key) ||
				!dl.OriginalTimestamp.Equal(orig.Time.Truncate(time.Millisecond)) || dl.Reason != p.reason ||
				!strings.Contains(dl.Message, p.detail) || dl.Attempts != 1 || time.Since(dl.FailedAt) > 2*waitLimit {
				t.Errorf("dead letter %s\nwant the record at %s/0/%d byte for byte, reason %s, a message naming %q",
					jsonText(t, dl), e.requests, orig.Offset, p.reason, p.detail)
			}
			if !slices.EqualFunc(dl.OriginalHeaders, p.msg.Headers, func(a schemas.Header, b kafka.Header) bool {
				return a.Key == b.Key && bytes.Equal(a.Value, b.Value)
			}) {
				t.Errorf("original headers %v, want %v", dl.OriginalHeaders, p.msg.Headers)
			}
			if string(m.Key) != key {
				t.Errorf("dead letter keyed %q, want the original key %q", m.Key, key)
			}
			for h, want := range map[string]string{
				"__connect.errors.topic":                e.requests,
				"__connect.errors.partition":            "0",
				"__connect.errors.offset":               strconv.FormatInt(orig.Offset, 10),
				"__connect.errors.exception.class.name": string(p.reason),
				"rv-dlq-reason":                         string(p.reason),
				"ce_type":                               schemas.DeadLetterSchema,
				"traceparent":                           traceparentFor(key),
			} {
				if got, one := header(m, h); !one || got != want {
					t.Errorf("header %s = %q (exactly once: %v), want %q", h, got, one, want)
				}
			}
			if msg, _ := header(m, "__connect.errors.exception.message"); msg != dl.Message {
				t.Errorf("header __connect.errors.exception.message = %q, want the dead letter's message %q", msg, dl.Message)
			}

			s := summaries[key]
			switch {
			case !p.summary && len(s) != 0:
				t.Errorf("an undecodable message got a summary: %s", jsonText(t, s))
			case p.summary && (len(s) != 1 || s[0].Status != schemas.StatusFailed || s[0].Error == nil ||
				s[0].Error.Code != p.reason || !strings.Contains(s[0].Error.Message, p.detail) || s[0].RulesetID != p.rulesetID ||
				s[0].Counts != (schemas.Counts{}) || s[0].Sources != nil || s[0].Model != ""):
				t.Errorf("summaries %s, want one failed summary with code %s naming %q, ruleset %q", jsonText(t, s), p.reason, p.detail, p.rulesetID)
			}
			if verdictKeys[key] != 0 {
				t.Errorf("%d verdicts published for it", verdictKeys[key])
			}
		})
	}
	if seen := ticketsSeen(e.llm); len(seen) != len(good) || !hasAll(seen, good) {
		t.Errorf("the model saw %v, want only the good requests %v", seen, good)
	}
}

// TestServeRedeliveryAnsweredFromCache produces one request twice: the model is asked once
// and both publications are the same bytes.
func TestServeRedeliveryAnsweredFromCache(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 3)
	verdictLog := e.watch(t, e.verdicts, e.partitions)
	summaryLog := e.watch(t, e.summaries, e.partitions)
	msg := e.requestMessage(t, exampleRequest(t, "twice"))
	e.produce(t, msg, msg)
	e.startInProcess(t)

	waitUntil(t, waitLimit, "two summaries", func() bool { return summaryLog.len() >= 2 })
	waitUntil(t, waitLimit, "two sets of verdicts", func() bool { return verdictLog.len() >= 2*len(exampleRuleIDs) })
	e.waitCommittedToEnd(t)

	if calls := len(e.llm.Requests()); calls != 1 {
		t.Errorf("the model was called %d times, want once", calls)
	}
	verdicts, summaries := verdictLog.snapshot(), summaryLog.snapshot()
	if len(verdicts) != 2*len(exampleRuleIDs) || len(summaries) != 2 {
		t.Fatalf("%d verdicts and %d summaries, want %d and 2", len(verdicts), len(summaries), 2*len(exampleRuleIDs))
	}
	n := len(exampleRuleIDs)
	pairs := [][2]kafka.Message{{summaries[0], summaries[1]}}
	for i := range n {
		pairs = append(pairs, [2]kafka.Message{verdicts[i], verdicts[n+i]})
	}
	for _, p := range pairs {
		a, b := p[0], p[1]
		if !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Value, b.Value) || !a.Time.Equal(b.Time) || a.Partition != b.Partition ||
			!slices.Equal(headersExcept(a, ""), headersExcept(b, "")) {
			t.Errorf("%s/%d/%d and %s/%d/%d differ:\n%q %x %v\n%q %x %v", a.Topic, a.Partition, a.Offset, b.Topic, b.Partition, b.Offset,
				a.Key, a.Value, headersExcept(a, ""), b.Key, b.Value, headersExcept(b, ""))
		}
	}
	if v := e.verdict(t, verdicts[n]); v.EventID != tenant+"/twice/governing-law" {
		t.Errorf("the second publication starts with %s", v.EventID)
	}
}

// TestServeRequestTimeout bounds a request's work by --request-timeout: a model call that
// outlasts it is abandoned and retried, and the retry's answer is published.
func TestServeRequestTimeout(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 1)
	summaryLog := e.watch(t, e.summaries, 1)
	e.llm.Enqueue(exampleReply(t, 20*time.Second))
	e.produceRequests(t, exampleRequest(t, "slow"))
	start := time.Now()
	e.startInProcess(t, "--request-timeout", "500ms")

	waitUntil(t, waitLimit, "the summary", func() bool { return summaryLog.len() >= 1 })
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the summary came after %s: the 20s model call was not cut short", took)
	}
	if s := e.summary(t, summaryLog.snapshot()[0]); s.Status != schemas.StatusCompleted || s.Usage.LLMCalls != 1 {
		t.Errorf("summary %s, want completed after one answered call", jsonText(t, s))
	}
	if seen := ticketsSeen(e.llm); seen["slow"] < 2 {
		t.Errorf("the model was asked %d times, want the timed-out call and at least one retry", seen["slow"])
	}
}

// TestServeRulesetFromTopic resolves rulesets published to the compacted rulesets topic:
// the latest version, a pinned one, and a version nobody published.
func TestServeRulesetFromTopic(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 1)
	rulesets := kafkatest.UniqueTopic(t, "rulesets")
	kafkatest.CreateTopic(t, e.bootstrap, rulesets, 1)
	verdictLog := e.watch(t, e.verdicts, 1)
	summaryLog := e.watch(t, e.summaries, 1)
	deadLog := e.watch(t, e.deadLetters, 1)

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	v1, err := readFile(exampleRuleset, engine.ParseRuleset)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := readFile(exampleRuleset, engine.ParseRuleset)
	if err != nil {
		t.Fatal(err)
	}
	v2.Version = "2.0.0"
	v2.Rules[0].Name = "Governing law (v2)"
	for _, rs := range []*engine.Ruleset{v1, v2} {
		if err := registry.Publish(ctx, e.client(t), rulesets, rs); err != nil {
			t.Fatal(err)
		}
	}

	latest := exampleRequest(t, "ref-latest")
	pinned := exampleRequest(t, "ref-pinned")
	pinned.RulesetRef.Version = ptr(exampleRulesetVersion)
	missing := exampleRequest(t, "ref-missing")
	missing.RulesetRef.Version = ptr("9.9.9")
	e.produceRequests(t, latest, pinned, missing)
	e.startInProcess(t, "--rulesets-topic", rulesets, "--rulesets-dir=")

	waitUntil(t, waitLimit, "three summaries", func() bool { return summaryLog.len() >= 3 })
	waitUntil(t, waitLimit, "a dead letter", func() bool { return deadLog.len() >= 1 })
	waitUntil(t, waitLimit, "the verdicts", func() bool { return verdictLog.len() >= 2*len(exampleRuleIDs) })

	summaries := map[string]*schemas.SummaryEvent{}
	for _, m := range summaryLog.snapshot() {
		s := e.summary(t, m)
		summaries[s.RequestID] = s
	}
	names := map[string]string{}
	for _, m := range verdictLog.snapshot() {
		if v := e.verdict(t, m); v.RuleID == "governing-law" {
			names[v.RequestID] = *v.RuleName
		}
	}
	for _, w := range []struct{ id, version, name string }{
		{"ref-latest", "2.0.0", "Governing law (v2)"},
		{"ref-pinned", "1.0.0", "Governing law"},
	} {
		s := summaries[w.id]
		if s == nil || s.Status != schemas.StatusCompleted || s.RulesetID != exampleRulesetID || s.RulesetVersion == nil || *s.RulesetVersion != w.version || names[w.id] != w.name {
			t.Errorf("%s: summary %s, first rule named %q; want ruleset %s %s with the rule named %q", w.id, jsonText(t, s), names[w.id], exampleRulesetID, w.version, w.name)
		}
	}
	s := summaries["ref-missing"]
	if s == nil || s.Status != schemas.StatusFailed || s.Error == nil || s.Error.Code != schemas.ReasonUnknownRuleset || !strings.Contains(s.Error.Message, "9.9.9") {
		t.Errorf("ref-missing: summary %s, want failed with unknown_ruleset naming 9.9.9", jsonText(t, s))
	}
	if dl := e.deadLetter(t, deadLog.snapshot()[0]); dl.Reason != schemas.ReasonUnknownRuleset || string(dl.OriginalKey) != "ref-missing" {
		t.Errorf("dead letter %s", jsonText(t, dl))
	}
}

// TestServeSIGKILLLosesNothing kills the service with SIGKILL in the middle of a batch and
// restarts it: every request gets its summary, and an event published twice (its request was
// judged again because its offset was not committed yet) is the same event both times.
func TestServeSIGKILLLosesNothing(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 3)
	e.llm.SetDefault(exampleReply(t, 200*time.Millisecond))
	verdictLog := e.watch(t, e.verdicts, e.partitions)
	summaryLog := e.watch(t, e.summaries, e.partitions)

	const n = 40
	ids, reqs := exampleRequests(t, "kill", n)
	e.produceRequests(t, reqs...)

	first := e.startBinary(t, "--concurrency", "4")
	// Kill it right as a summary comes in, before its offset is likely to be committed.
	waitUntil(t, waitLimit, "8 summaries", func() bool { return summaryLog.len() >= 8 })
	before := summaryLog.len()
	waitUntil(t, 5*time.Second, "one more summary", func() bool { return summaryLog.len() > before })
	first.signal(t, syscall.SIGKILL)
	if code := first.wait(t, 10*time.Second); code != -1 {
		t.Fatalf("exit status %d after SIGKILL, want death by signal", code)
	}
	killedAt := summaryLog.len()
	if killedAt >= n {
		t.Fatalf("all %d requests finished before the kill; nothing was tested", n)
	}

	second := e.startBinary(t, "--concurrency", "4")
	waitUntil(t, waitLimit, "every request has its summary", func() bool { return hasAll(summaryLog.keys(), ids) })
	e.waitCommittedToEnd(t)
	second.signal(t, syscall.SIGTERM)
	if code := second.wait(t, 30*time.Second); code != exitOK {
		t.Fatalf("exit status %d after SIGTERM, want %d", code, exitOK)
	}
	summaryLog.waitReadToEnd(t, e.bootstrap, e.summaries, e.partitions)
	verdictLog.waitReadToEnd(t, e.bootstrap, e.verdicts, e.partitions)

	summaries := summaryLog.keys()
	for _, id := range ids {
		if summaries[id] == 0 {
			t.Errorf("request %s has no summary", id)
		}
	}
	verdicts := verdictLog.keys()
	for _, id := range ids {
		if verdicts[id] < len(exampleRuleIDs) || verdicts[id]%len(exampleRuleIDs) != 0 {
			t.Errorf("request %s has %d verdicts, want %d per publication", id, verdicts[id], len(exampleRuleIDs))
		}
	}
	repeated := checkRedeliveriesIdentical(t, e, verdictLog.snapshot(), summaryLog.snapshot())
	t.Logf("%d of %d summaries were in before the kill; %d events were published twice, identically", killedAt, n, repeated)
}

// TestServeSIGTERMDrains stops the service with SIGTERM while requests are in flight: they
// finish, their offsets are committed, the exit status is 0, and a restart judges only the
// requests that had not been taken on.
func TestServeSIGTERMDrains(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 3)
	e.llm.SetDefault(exampleReply(t, 1500*time.Millisecond))
	summaryLog := e.watch(t, e.summaries, e.partitions)

	const n, concurrency = 10, 4
	ids, reqs := exampleRequests(t, "term", n)
	e.produceRequests(t, reqs...)

	first := e.startBinary(t, "--concurrency", strconv.Itoa(concurrency))
	waitUntil(t, waitLimit, "the model has every slot's request", func() bool { return len(e.llm.Requests()) >= concurrency })
	inFlight := ticketsSeen(e.llm)
	first.signal(t, syscall.SIGTERM)
	if code := first.wait(t, 30*time.Second); code != exitOK {
		t.Fatalf("exit status %d after SIGTERM, want %d", code, exitOK)
	}
	if len(inFlight) != concurrency {
		t.Fatalf("in flight at SIGTERM: %v, want %d requests", inFlight, concurrency)
	}
	var drained []string
	for id := range inFlight {
		drained = append(drained, id)
	}
	waitUntil(t, 10*time.Second, "the in-flight requests' summaries", func() bool { return hasAll(summaryLog.keys(), drained) })
	committed, _ := e.offsets(t)
	var total int64
	for _, off := range committed {
		total += off
	}
	if total != concurrency {
		t.Errorf("committed offsets %v: %d records, want the %d drained", committed, total, concurrency)
	}
	if !strings.Contains(first.logText(), "serve stopped cleanly") {
		t.Errorf("the log does not say the service stopped cleanly:\n%s", tail(first.logText(), 20))
	}

	e.llm.SetDefault(exampleReply(t, 0))
	second := e.startBinary(t, "--concurrency", strconv.Itoa(concurrency))
	waitUntil(t, waitLimit, "every request has its summary", func() bool { return hasAll(summaryLog.keys(), ids) })
	e.waitCommittedToEnd(t)
	second.signal(t, syscall.SIGTERM)
	if code := second.wait(t, 30*time.Second); code != exitOK {
		t.Fatalf("second run: exit status %d after SIGTERM, want %d", code, exitOK)
	}
	summaryLog.waitReadToEnd(t, e.bootstrap, e.summaries, e.partitions)
	seen := ticketsSeen(e.llm)
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("the model was asked about %s %d times, want once", id, seen[id])
		}
	}
	for id, count := range summaryLog.keys() {
		if count != 1 {
			t.Errorf("request %s has %d summaries, want 1", id, count)
		}
	}
}

// TestServeSurvivesBrokerRestart restarts the broker while the service works through a batch;
// every request is judged afterwards, those produced after the restart included. The broker
// is the test's own, so that the other tests run on meanwhile.
func TestServeSurvivesBrokerRestart(t *testing.T) {
	t.Parallel()
	broker := kafkatest.OwnBroker(t)
	e := newServeEnvOn(t, broker.Addr, 3)
	e.llm.SetDefault(exampleReply(t, 100*time.Millisecond))
	verdictLog := e.watch(t, e.verdicts, e.partitions)
	summaryLog := e.watch(t, e.summaries, e.partitions)

	batch := func(prefix string, n int) []string {
		ids, reqs := exampleRequests(t, prefix, n)
		e.produceRequests(t, reqs...)
		return ids
	}
	ids := batch("before", 30)
	svc := e.startInProcess(t, "--concurrency", "2")
	waitUntil(t, waitLimit, "5 summaries", func() bool { return summaryLog.len() >= 5 })
	beforeRestart := summaryLog.len()
	broker.Restart(t)
	afterRestart := summaryLog.len()
	ids = append(ids, batch("after", 10)...)

	waitUntil(t, 3*waitLimit, "every request has its summary", func() bool { return hasAll(summaryLog.keys(), ids) })
	e.waitCommittedToEnd(t)
	if code := svc.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d, want %d", code, exitOK)
	}
	repeated := checkRedeliveriesIdentical(t, e, verdictLog.snapshot(), summaryLog.snapshot())
	t.Logf("%d of %d summaries in when the restart began, %d when the broker was back; %d events published twice, identically",
		beforeRestart, len(ids), afterRestart, repeated)
}

// TestServeConfigErrors checks that bad settings stop `serve` at start with exit status 2 and
// a message naming the setting.
func TestServeConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	configFile := filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(configFile, []byte("concurrency: 4\nconcurrancy: 8\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"serve", "--kafka-brokers", "127.0.0.1:1", "--rulesets-dir", dir, "--rulesets-topic=", "--http-addr=", "--ops-addr", "127.0.0.1:0"}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"zero concurrency", []string{"--concurrency", "0"}, []string{"--concurrency: 0 must be at least 1"}},
		{"concurrency not a number", []string{"--concurrency", "many"}, []string{`--concurrency: "many" is not an integer`}},
		{"no brokers", []string{"--kafka-brokers", " , "}, []string{"--kafka-brokers: at least one broker is required"}},
		{"unknown wire format", []string{"--wire-format", "json"}, []string{`--wire-format: "json" is not plain or confluent`}},
		{"confluent without registry", []string{"--wire-format", "confluent"}, []string{"--wire-format confluent needs --schema-registry"}},
		{"no requests topic", []string{"--requests-topic="}, []string{"--requests-topic is required"}},
		{"zero request timeout", []string{"--request-timeout", "0s"}, []string{"--request-timeout: 0s must be positive"}},
		{"negative cache", []string{"--result-cache", "-1"}, []string{"--result-cache: -1 must not be negative"}},
		{"zero input cap", []string{"--max-input-bytes", "0"}, []string{"--max-input-bytes: 0 must be positive"}},
		{"missing rulesets dir", []string{"--rulesets-dir", filepath.Join(dir, "nope")}, []string{`--rulesets-dir: "` + filepath.Join(dir, "nope") + `" is not a directory`}},
		{"s3 without keys", []string{"--s3-endpoint", "127.0.0.1:9000"}, []string{"--s3-endpoint is set but --s3-access-key or --s3-secret-key is empty"}},
		{"bad log level", []string{"--log-level", "loud"}, []string{`--log-level: "loud" is not debug, info, warn or error`}},
		{"bad duration", []string{"--drain-timeout", "soon"}, []string{`--drain-timeout: "soon" is not a duration`}},
		{"every problem at once", []string{"--concurrency", "0", "--log-format", "xml"}, []string{"--concurrency: 0 must be at least 1", `--log-format: "xml" is not json or text`}},
		{"unknown flag", []string{"--concurency", "4"}, []string{"flag provided but not defined: -concurency"}},
		{"stray argument", []string{"now"}, []string{"unexpected arguments: now"}},
		{"config file typo", []string{"--config", configFile}, []string{configFile + `: unknown setting "concurrancy"`}},
		{"no ruleset source", []string{"--rulesets-dir="}, []string{"no ruleset source: set --rulesets-dir or --rulesets-topic"}},
		{"same topic twice", []string{"--verdicts-topic", "events", "--summaries-topic", "events"}, []string{"topics must differ"}},
		{"callbacks without a topic", []string{"--callback-secret", strings.Repeat("s", 32), "--callbacks-topic="}, []string{"--callback-secret is set but --callbacks-topic is empty"}},
		{"callbacks on the summaries topic", []string{"--callback-secret", strings.Repeat("s", 32), "--callbacks-topic", "rulevalidator.summaries"}, []string{`--callbacks-topic "rulevalidator.summaries" must be a topic of its own`}},
		{"callbacks in the requests' group", []string{"--callback-secret", strings.Repeat("s", 32), "--callback-group", "rulevalidator"}, []string{`--callback-group "rulevalidator" must differ from --group-id`}},
		{"zero session timeout", []string{"--session-timeout", "0s"}, []string{"--session-timeout: 0s must be positive"}},
		{"zero retry backoff", []string{"--retry-backoff", "0s"}, []string{"--retry-backoff: 0s must be positive"}},
		{"retry backoff over its cap", []string{"--retry-backoff", "2s", "--retry-backoff-max", "1s"}, []string{"--retry-backoff-max: 1s must be at least --retry-backoff (2s)"}},
		{"callback backoff over its cap", []string{"--callback-backoff", "0s", "--callback-backoff-max", "-1s"}, []string{"--callback-backoff: 0s must be positive", "--callback-backoff-max: -1s must be at least --callback-backoff (0s)"}},
		{"zero callback attempts", []string{"--callback-attempts", "0", "--callback-concurrency", "0"}, []string{"--callback-attempts: 0 must be at least 1", "--callback-concurrency: 0 must be at least 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr logbuf.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			code := run(ctx, append(slices.Clone(base), tt.args...), &stdout, &stderr, noEnv)
			if code != exitInvalid {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, exitInvalid, stderr.String())
			}
			for _, want := range tt.want {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}
