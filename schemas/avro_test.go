package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/linkedin/goavro/v2"

	"rulevalidator/verdict"
)

func TestAvroCodecsListTheEventSchemas(t *testing.T) {
	c := newTestCodecs(t)
	var names []string
	seen := map[string]bool{}
	for _, s := range c.Schemas() {
		names = append(names, s.Name())
		hex := s.FingerprintHex()
		if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(hex) {
			t.Errorf("%s: fingerprint %q is not 16 hex digits", s.Name(), hex)
		}
		if seen[hex] {
			t.Errorf("%s: fingerprint %s is not unique", s.Name(), hex)
		}
		seen[hex] = true
		if got, ok := c.ByFingerprint(s.Fingerprint()); !ok || got != s {
			t.Errorf("%s: ByFingerprint does not find it", s.Name())
		}
		if !strings.Contains(s.Canonical(), `"name":"`+s.Name()+`"`) {
			t.Errorf("%s: canonical form %s lacks the full name", s.Name(), s.Canonical())
		}
	}
	assertEqual(t, names, []string{RequestSchema, VerdictSchema, SummarySchema, DeadLetterSchema, ReviewSchema})
}

// TestAvroFingerprint checks the CRC-64-AVRO fingerprint against the Avro
// spec's value for "null" and the canonical form against the spec's rules
// for a field with a logical type.
func TestAvroFingerprint(t *testing.T) {
	if got, want := rabin([]byte(`"null"`)), uint64(0x63dd24e7cc258f8a); got != want {
		t.Errorf("rabin(\"null\") = %#x, want %#x", got, want)
	}
	s, err := newSchema(`{"type":"record","name":"T","namespace":"x","doc":"d","fields":[
		{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"},"doc":"d"},
		{"name":"n","type":["null",{"type":"int"}],"default":null}]}`)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"x.T","type":"record","fields":[{"name":"at","type":"long"},{"name":"n","type":["null","int"]}]}`
	if s.Canonical() != want {
		t.Errorf("canonical form\n got %s\nwant %s", s.Canonical(), want)
	}
	if s.Fingerprint() != rabin([]byte(want)) {
		t.Error("the fingerprint is not that of the canonical form")
	}
	// Without logical types goavro's fingerprint is right, and ours agrees.
	plain, err := newSchema(`{"type":"record","name":"T","fields":[{"name":"a","type":"string"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Fingerprint() != plain.codec.Rabin {
		t.Errorf("fingerprint %#x, goavro says %#x", plain.Fingerprint(), plain.codec.Rabin)
	}
}

// TestAvroSchemaConventions checks what makes the schemas pleasant to use
// from other languages and safe to evolve: docs everywhere, one namespace,
// nullable unions null-first with a null default, arrays with a default,
// timestamps as timestamp-millis.
func TestAvroSchemaConventions(t *testing.T) {
	for _, s := range newTestCodecs(t).Schemas() {
		t.Run(s.Name(), func(t *testing.T) {
			var root map[string]any
			if err := json.Unmarshal([]byte(s.Text()), &root); err != nil {
				t.Fatal(err)
			}
			if root["namespace"] != Namespace {
				t.Errorf("namespace is %v, want %s", root["namespace"], Namespace)
			}
			checkSchemaNode(t, root["name"].(string), root)
		})
	}
}

func checkSchemaNode(t *testing.T, path string, node any) {
	t.Helper()
	switch n := node.(type) {
	case []any:
		for _, b := range n {
			checkSchemaNode(t, path, b)
		}
	case map[string]any:
		typ, _ := n["type"].(string)
		if _, ok := n["namespace"]; ok && path != n["name"] {
			t.Errorf("%s: nested namespace %v; keep every type in %s", path, n["namespace"], Namespace)
		}
		switch typ {
		case "record", "enum":
			if doc, _ := n["doc"].(string); doc == "" {
				t.Errorf("%s: %s %v has no doc", path, typ, n["name"])
			}
		case "array":
			checkSchemaNode(t, path+"[]", n["items"])
		}
		for _, f := range asList(n["fields"]) {
			field := f.(map[string]any)
			fpath := path + "." + field["name"].(string)
			if doc, _ := field["doc"].(string); doc == "" {
				t.Errorf("%s: field has no doc", fpath)
			}
			def, hasDefault := field["default"]
			switch ft := field["type"].(type) {
			case []any:
				if ft[0] != "null" {
					t.Errorf("%s: union %v does not start with null", fpath, ft)
				}
				if !hasDefault || def != nil {
					t.Errorf("%s: nullable field needs \"default\": null", fpath)
				}
			case map[string]any:
				if ft["type"] == "array" && !hasDefault {
					t.Errorf("%s: array field needs \"default\": []", fpath)
				}
			}
			name := field["name"].(string)
			if strings.HasSuffix(name, "_at") || name == "original_timestamp" {
				ft, _ := field["type"].(map[string]any)
				if ft["type"] != "long" || ft["logicalType"] != "timestamp-millis" {
					t.Errorf("%s: want {long, timestamp-millis}, got %v", fpath, field["type"])
				}
			}
			checkSchemaNode(t, fpath, field["type"])
		}
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func TestAvroDeadLetterReasonsMatchTheGoConstants(t *testing.T) {
	s, _ := newTestCodecs(t).Schema(DeadLetterSchema)
	symbols, err := json.Marshal(Reasons)
	if err != nil {
		t.Fatal(err)
	}
	want := `"symbols":` + string(symbols)
	if !strings.Contains(s.Canonical(), want) {
		t.Errorf("canonical form %s lacks %s", s.Canonical(), want)
	}
	for _, r := range []Reason{ReasonUndecodable, ReasonInvalidRequest, ReasonInvalidRuleset, ReasonInvalidInput, ReasonUnknownRuleset, ReasonOversized, ReasonModelRejected, ReasonInvalidOutput, ReasonInternal, ReasonReportFailed, ReasonTimeout, ReasonUnreadableDocument} {
		if !strings.Contains(want, `"`+string(r)+`"`) {
			t.Errorf("reason %q is not a symbol", r)
		}
	}
	if !strings.Contains(s.Text(), `"default": "internal"`) {
		t.Error(`the reason enum needs "default": "internal" so readers on older schemas can read new reasons`)
	}
}

func TestAvroEventRoundTrip(t *testing.T) {
	c := newTestCodecs(t)
	for _, tc := range sampleEvents() {
		t.Run(tc.name, func(t *testing.T) {
			body, err := c.Marshal(tc.ev)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			got, err := c.Unmarshal(tc.ev.SchemaName(), body)
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			assertEqual(t, got, tc.ev)
		})
	}
}

// TestAvroEventEmptySlicesEncodeAsNil: an empty slice and a nil one are
// the same empty Avro array; decoding gives nil.
func TestAvroEventEmptySlicesEncodeAsNil(t *testing.T) {
	c := newTestCodecs(t)
	withEmpty := fullVerdict()
	withEmpty.Evidences, withEmpty.AllowedScores = []verdict.Evidence{}, []int{}
	withNil := fullVerdict()
	withNil.Evidences, withNil.AllowedScores = nil, nil
	a, err := c.Marshal(withEmpty)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Marshal(withNil)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Error("empty and nil slices encode differently")
	}
	got, err := c.Unmarshal(VerdictSchema, a)
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, got, withNil)
}

func TestAvroEventTimesKeepMilliseconds(t *testing.T) {
	c := newTestCodecs(t)
	for _, ts := range []time.Time{
		time.UnixMilli(-1).UTC(),
		time.Date(1969, 12, 31, 23, 59, 59, 999_000_000, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC),
		{},
	} {
		ev := fullDeadLetter()
		ev.OriginalTimestamp, ev.FailedAt = ts, ts
		body, err := c.Marshal(ev)
		if err != nil {
			t.Fatalf("%v: %v", ts, err)
		}
		got, err := c.Unmarshal(DeadLetterSchema, body)
		if err != nil {
			t.Fatalf("%v: %v", ts, err)
		}
		if d := got.(*DeadLetter); !d.OriginalTimestamp.Equal(ts) || d.OriginalTimestamp.Location() != time.UTC {
			t.Errorf("%v came back as %v", ts, d.OriginalTimestamp)
		}
	}
}

func TestAvroEventEncodeErrors(t *testing.T) {
	c := newTestCodecs(t)
	tooBig := fullVerdict()
	tooBig.RuleIndex = 1 << 40
	badUTF8 := fullVerdict()
	badUTF8.Evidences[1].Text = "ok \xff"
	badReason := fullDeadLetter()
	badReason.Reason = "bored"
	invalid := fullRequest()
	invalid.TenantID = ""
	for _, tc := range []struct {
		name string
		ev   Event
		want string
	}{
		{"int out of range", tooBig, "rule_index"},
		{"invalid UTF-8", badUTF8, "avro: string is not valid UTF-8 at byte offset"},
		{"unknown enum symbol", badReason, `"bored"`},
		{"invalid request", invalid, "tenant_id is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Marshal(tc.ev)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
	_, err := c.Marshal(invalid)
	if !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("invalid request: %v does not match ErrInvalidRequest", err)
	}
}

// TestAvroDecodeMalformed: every malformed body is a *DecodeError naming
// the byte offset and the field.
func TestAvroDecodeMalformed(t *testing.T) {
	c := newTestCodecs(t)
	good, err := c.Marshal(fullRequest())
	if err != nil {
		t.Fatal(err)
	}
	// request_id "req-1" is bytes 0..5, tenant_id "acme" 6..10, then the
	// ruleset_ref union branch at 11.
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"empty", nil, "avro: string length cut short at byte offset 0 (request_id)"},
		{"truncated", good[:len(good)-3], "cut short"},
		{"trailing bytes", append(append([]byte{}, good...), 0, 0), fmt.Sprintf("avro: 2 unexpected bytes after the record at byte offset %d", len(good))},
		{"string longer than the body", []byte{0x0a, 'r'}, "avro: string length 5 exceeds the 1 bytes left at byte offset 0 (request_id)"},
		{"negative length", []byte{0x01}, "avro: negative string length -1 at byte offset 0 (request_id)"},
		{"bad union branch", append(append([]byte{}, good[:11]...), 0x04), "avro: union branch 2 out of range (2 branches) at byte offset 11 (ruleset_ref)"},
		{"invalid UTF-8", []byte{0x04, 'a', 0xc3}, "avro: string is not valid UTF-8 at byte offset 2 (request_id)"},
		{"varint too long", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, "varint longer than 10 bytes at byte offset 0 (request_id)"},
		// The block count 2^31-1 made goavro allocate 32 GiB and the process
		// die before the check existed.
		{"huge array block count", []byte{0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0x0f}, "avro: block count 2147483647 exceeds the 0 bytes left at byte offset 4 (primary_docs)"},
		{"huge negative block count", []byte{0, 0, 0, 0, 0xfd, 0xff, 0xff, 0xff, 0x0f, 0x00}, "block count 2147483647 exceeds the 0 bytes left at byte offset 4 (primary_docs)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Unmarshal(RequestSchema, tc.body)
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrUndecodable) {
				t.Fatalf("got %v (%T), want a *DecodeError", err, err)
			}
			if !strings.Contains(de.Problem, tc.want) {
				t.Errorf("problem %q does not contain %q", de.Problem, tc.want)
			}
			if de.Schema != RequestSchema {
				t.Errorf("Schema is %q", de.Schema)
			}
		})
	}
}

func TestAvroDecodeNestedPathAndOffset(t *testing.T) {
	c := newTestCodecs(t)
	req := fullRequest()
	req.PrimaryDocs[1].Name = "MARK"
	body, err := c.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(body), "MARK")
	body[i+2] = 0xff
	_, err = c.Unmarshal(RequestSchema, body)
	want := fmt.Sprintf("avro: string is not valid UTF-8 at byte offset %d (primary_docs[1].name)", i+2)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestAvroDecodeContradictoryRequest(t *testing.T) {
	c := newTestCodecs(t)
	s, _ := c.Schema(RequestSchema)
	// Encoded with goavro directly, past Request.Validate.
	native, err := fullRequest().native()
	if err != nil {
		t.Fatal(err)
	}
	native["inline_ruleset"] = goavro.Union("string", "{}")
	native["tenant_id"] = ""
	body, err := s.codec.BinaryFromNative(nil, native)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Unmarshal(RequestSchema, body)
	var re *RequestError
	if !errors.As(err, &re) || !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("got %v, want a *RequestError", err)
	}
	assertEqual(t, re.Problems, []string{"tenant_id is empty", "both ruleset_ref and inline_ruleset are set; set exactly one"})
	if re.Request == nil || re.Request.RequestID != "req-1" {
		t.Errorf("the error does not carry the decoded request: %+v", re.Request)
	}
}

// TestAvroEventEvolution decodes with writer schemas one version older and
// one newer than ours, as the registry path does.
func TestAvroEventEvolution(t *testing.T) {
	c := newTestCodecs(t)
	ours, _ := c.Schema(VerdictSchema)
	older := dropFields(t, ours.Text(), "rule_name", "evidences", "allowed_scores")
	newer := strings.Replace(ours.Text(), `"fields": [`, `"fields": [
    {"name": "calibrated_confidence", "type": ["null", "double"], "default": null, "doc": "A field from the future."},`, 1)
	beforeReviewRouting := dropFields(t, ours.Text(), "confidence", "needs_review", "review_reasons", "rule_weight")
	citationAdditions := []string{"passage_id", "cited_page_number", "cited_passage_id"}
	evidenceAdditions := append([]string{"quoted_text", "similarity", "altered", "differences"}, citationAdditions...)
	beforeAlteredEvidence := dropEvidenceFields(t, dropFields(t, ours.Text(), "sufficiency_note", "problems", "pages_considered"), evidenceAdditions...)
	beforePages := dropFields(t, dropEvidenceFields(t, ours.Text(), citationAdditions...), "problems", "pages_considered")
	beforeCitations := dropFields(t, dropEvidenceFields(t, ours.Text(), citationAdditions...), "problems")
	dropCitations := func(m map[string]any) {
		delete(m, "problems")
		for _, e := range m["evidences"].([]any) {
			for _, f := range citationAdditions {
				delete(e.(map[string]any), f)
			}
		}
	}
	withoutCitations := func(v *VerdictEvent) {
		v.Problems = nil
		for i := range v.Evidences {
			v.Evidences[i].PassageID, v.Evidences[i].CitedPageNumber, v.Evidences[i].CitedPassageID = "", 0, ""
		}
	}

	for _, tc := range []struct {
		name   string
		schema string
		edit   func(map[string]any)
		want   func(*VerdictEvent)
	}{
		{"older writer", older, func(m map[string]any) {
			delete(m, "rule_name")
			delete(m, "evidences")
			delete(m, "allowed_scores")
		}, func(v *VerdictEvent) { v.RuleName, v.Evidences, v.AllowedScores = nil, nil, nil }},
		{"writer before confidence and review routing", beforeReviewRouting, func(m map[string]any) {
			delete(m, "confidence")
			delete(m, "needs_review")
			delete(m, "review_reasons")
			delete(m, "rule_weight")
		}, func(v *VerdictEvent) {
			v.Confidence, v.NeedsReview, v.ReviewReasons, v.RuleWeight = nil, false, nil, nil
		}},
		{"writer before passage_id, cited_page_number and problems", beforeCitations, dropCitations, withoutCitations},
		{"writer before pages_considered", beforePages, func(m map[string]any) {
			dropCitations(m)
			delete(m, "pages_considered")
		}, func(v *VerdictEvent) {
			withoutCitations(v)
			v.PagesConsidered = nil
		}},
		{"writer before quoted_text and altered", beforeAlteredEvidence, func(m map[string]any) {
			delete(m, "sufficiency_note")
			delete(m, "problems")
			delete(m, "pages_considered")
			for _, e := range m["evidences"].([]any) {
				for _, f := range evidenceAdditions {
					delete(e.(map[string]any), f)
				}
			}
		}, func(v *VerdictEvent) {
			v.SufficiencyNote, v.Problems, v.PagesConsidered = nil, nil, nil
			for i := range v.Evidences {
				e := &v.Evidences[i]
				e.QuotedText, e.Similarity, e.Altered, e.Differences, e.PassageID, e.CitedPageNumber, e.CitedPassageID = "", 0, false, nil, "", 0, ""
			}
		}},
		{"newer writer", newer, func(m map[string]any) {
			m["calibrated_confidence"] = goavro.Union("double", 0.9)
		}, func(*VerdictEvent) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writer, err := newSchema(tc.schema)
			if err != nil {
				t.Fatal(err)
			}
			if writer.Fingerprint() == ours.Fingerprint() {
				t.Fatal("the writer's schema is ours")
			}
			native, _ := fullVerdict().native()
			tc.edit(native)
			body, err := writer.codec.BinaryFromNative(nil, native)
			if err != nil {
				t.Fatal(err)
			}
			got, err := writer.unmarshal(body, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := fullVerdict()
			tc.want(want)
			assertEqual(t, got, want)
		})
	}
}

// dropEvidenceFields removes fields from the evidence record of a verdict
// schema.
func dropEvidenceFields(t *testing.T, text string, names ...string) string {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal([]byte(text), &root); err != nil {
		t.Fatal(err)
	}
	for _, f := range root["fields"].([]any) {
		field := f.(map[string]any)
		if field["name"] != "evidences" {
			continue
		}
		rec := field["type"].(map[string]any)["items"].(map[string]any)
		data, _ := json.Marshal(rec)
		var trimmed map[string]any
		if err := json.Unmarshal([]byte(dropFields(t, string(data), names...)), &trimmed); err != nil {
			t.Fatal(err)
		}
		field["type"].(map[string]any)["items"] = trimmed
	}
	out, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func dropFields(t *testing.T, text string, names ...string) string {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal([]byte(text), &root); err != nil {
		t.Fatal(err)
	}
	var kept []any
	for _, f := range root["fields"].([]any) {
		drop := false
		for _, n := range names {
			drop = drop || f.(map[string]any)["name"] == n
		}
		if !drop {
			kept = append(kept, f)
		}
	}
	root["fields"] = kept
	out, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestReasonKnown(t *testing.T) {
	if !ReasonReportFailed.Known() || !ReasonInternal.Known() || Reason("unspecified").Known() {
		t.Error("Known disagrees with the DeadLetterReason symbols")
	}
}

// TestAvroSummaryBeforePlannedCalls decodes a summary from a writer whose
// usage record lacks planned_calls: it reads as 0.
// oldSummaryWriter is the summary schema as an older writer had it: without
// the top-level fields top and the usage fields usage. It fails when that is
// our schema.
func oldSummaryWriter(t *testing.T, top, usage []string) *Schema {
	t.Helper()
	c := newTestCodecs(t)
	ours, _ := c.Schema(SummarySchema)
	var root map[string]any
	if err := json.Unmarshal([]byte(dropFields(t, ours.Text(), top...)), &root); err != nil {
		t.Fatal(err)
	}
	for _, f := range root["fields"].([]any) {
		field := f.(map[string]any)
		if field["name"] != "usage" {
			continue
		}
		data, _ := json.Marshal(field["type"])
		var trimmed map[string]any
		if err := json.Unmarshal([]byte(dropFields(t, string(data), usage...)), &trimmed); err != nil {
			t.Fatal(err)
		}
		field["type"] = trimmed
	}
	text, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	writer, err := newSchema(string(text))
	if err != nil {
		t.Fatal(err)
	}
	if writer.Fingerprint() == ours.Fingerprint() {
		t.Fatal("the writer's schema is ours")
	}
	return writer
}

// readAsOldRecord writes fullSummary as writer writes it (without the
// fields top and usage) and reads it back with our schema.
func readAsOldRecord(t *testing.T, writer *Schema, top, usage []string) Event {
	t.Helper()
	native, err := fullSummary().native()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range top {
		delete(native, f)
	}
	for _, f := range usage {
		delete(native["usage"].(map[string]any), f)
	}
	body, err := writer.codec.BinaryFromNative(nil, native)
	if err != nil {
		t.Fatal(err)
	}
	got, err := writer.unmarshal(body, 0)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestAvroSummaryBeforePlannedCalls(t *testing.T) {
	usage := []string{"planned_calls", "rules_filtered", "rules_checked"}
	top := []string{"groups"}
	got := readAsOldRecord(t, oldSummaryWriter(t, top, usage), top, usage)
	want := fullSummary()
	want.Usage.PlannedCalls, want.Usage.RulesFiltered, want.Usage.RulesChecked, want.Groups = 0, 0, 0, nil
	assertEqual(t, got, want)
}

// A summary written before nested rulesets (no groups, no rules_filtered or
// rules_checked in its usage) is read with none of them.
func TestAvroSummaryBeforeGroups(t *testing.T) {
	usage := []string{"rules_filtered", "rules_checked"}
	top := []string{"groups"}
	got := readAsOldRecord(t, oldSummaryWriter(t, top, usage), top, usage)
	want := fullSummary()
	want.Groups, want.Usage.RulesFiltered, want.Usage.RulesChecked = nil, 0, 0
	assertEqual(t, got, want)
}
