package schemas

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"rulevalidator/verdict"
)

// TestEventJSONRoundTrip: every sample verdict, summary and dead letter
// survives JSON form → event, and reads back equal to what Avro decoding of
// the same event gives.
func TestEventJSONRoundTrip(t *testing.T) {
	codecs := newTestCodecs(t)
	for _, tc := range sampleEvents() {
		if _, ok := tc.ev.(*Request); ok {
			continue // the request's JSON form has its own tests
		}
		t.Run(tc.name, func(t *testing.T) {
			data, err := json.Marshal(tc.ev)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			back := reflect.New(reflect.TypeOf(tc.ev).Elem()).Interface().(Event)
			if err := json.Unmarshal(data, back); err != nil {
				t.Fatalf("Unmarshal %s: %v", data, err)
			}
			body, err := codecs.Marshal(tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			viaAvro, err := codecs.Unmarshal(tc.ev.SchemaName(), body)
			if err != nil {
				t.Fatal(err)
			}
			assertEqual(t, back, viaAvro)
		})
	}
}

// TestEventJSONNamesMatchAvro: the JSON form has exactly the Avro field
// names, at every level, with nulls and empty arrays written out.
func TestEventJSONNamesMatchAvro(t *testing.T) {
	codecs := newTestCodecs(t)
	for _, tc := range sampleEvents() {
		if _, ok := tc.ev.(*Request); ok {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			schema, _ := codecs.Schema(tc.ev.SchemaName())
			var avsc any
			if err := json.Unmarshal([]byte(schema.Text()), &avsc); err != nil {
				t.Fatal(err)
			}
			data, err := json.Marshal(tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			var doc any
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			checkShape(t, tc.ev.SchemaName(), inlineNamedTypes(avsc, map[string]any{}), doc)
		})
	}
}

// inlineNamedTypes replaces each reference to a named type by the type
// itself (the schemas are not recursive), so that checkShape sees
// definitions only.
func inlineNamedTypes(avroType any, named map[string]any) any {
	switch typ := avroType.(type) {
	case string:
		if def, ok := named[typ]; ok {
			return def
		}
		return typ
	case []any:
		out := make([]any, len(typ))
		for i, branch := range typ {
			out[i] = inlineNamedTypes(branch, named)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(typ))
		for k, v := range typ {
			out[k] = v
		}
		if name, ok := typ["name"].(string); ok && typ["type"] != nil && (typ["type"] == "record" || typ["type"] == "enum") {
			named[name] = out
		}
		if fields, ok := typ["fields"].([]any); ok {
			inlined := make([]any, len(fields))
			for i, f := range fields {
				field := maps.Clone(f.(map[string]any))
				field["type"] = inlineNamedTypes(field["type"], named)
				inlined[i] = field
			}
			out["fields"] = inlined
		}
		if items, ok := typ["items"]; ok {
			out["items"] = inlineNamedTypes(items, named)
		}
		if t, ok := typ["type"].(map[string]any); ok {
			out["type"] = inlineNamedTypes(t, named)
		}
		return out
	}
	return avroType
}

// checkShape walks value along the Avro type, failing where an object's keys
// differ from a record's fields or a value has the wrong JSON kind.
func checkShape(t *testing.T, path string, avroType, value any) {
	t.Helper()
	switch typ := avroType.(type) {
	case string:
		checkPrimitive(t, path, typ, value)
	case []any: // union: null or the other branch
		if value == nil {
			if !slices.Contains(typ, any("null")) {
				t.Errorf("%s: null, but the union %v has no null", path, typ)
			}
			return
		}
		for _, branch := range typ {
			if branch != "null" {
				checkShape(t, path, branch, value)
				return
			}
		}
	case map[string]any:
		switch typ["type"] {
		case "record":
			obj, ok := value.(map[string]any)
			if !ok {
				t.Errorf("%s: got %T, want an object", path, value)
				return
			}
			var fields, keys []string
			for _, f := range typ["fields"].([]any) {
				field := f.(map[string]any)
				name := field["name"].(string)
				fields = append(fields, name)
				v, present := obj[name]
				if !present {
					continue
				}
				checkShape(t, path+"."+name, field["type"], v)
			}
			for k := range obj {
				keys = append(keys, k)
			}
			slices.Sort(fields)
			slices.Sort(keys)
			if !slices.Equal(fields, keys) {
				t.Errorf("%s: keys %v, want the Avro fields %v", path, keys, fields)
			}
		case "array":
			items, ok := value.([]any)
			if !ok {
				t.Errorf("%s: got %T (%v), want an array", path, value, value)
				return
			}
			for i, item := range items {
				checkShape(t, fmt.Sprintf("%s[%d]", path, i), typ["items"], item)
			}
		case "enum":
			s, ok := value.(string)
			if !ok || !slices.Contains(typ["symbols"].([]any), any(s)) {
				t.Errorf("%s: %v is not one of %v", path, value, typ["symbols"])
			}
		case "long":
			if typ["logicalType"] == "timestamp-millis" {
				s, ok := value.(string)
				if _, err := time.Parse(TimeLayout, s); !ok || err != nil || !strings.HasSuffix(s, "Z") || len(s) != len("2006-01-02T15:04:05.000Z") {
					t.Errorf("%s: %v is not an RFC 3339 UTC timestamp with milliseconds", path, value)
				}
				return
			}
			checkPrimitive(t, path, "long", value)
		default:
			checkPrimitive(t, path, typ["type"].(string), value)
		}
	}
}

func checkPrimitive(t *testing.T, path, typ string, value any) {
	t.Helper()
	ok := false
	switch typ {
	case "string", "bytes":
		_, ok = value.(string)
	case "int", "long":
		f, isNum := value.(float64)
		ok = isNum && f == float64(int64(f))
	case "double", "float":
		_, ok = value.(float64)
	case "boolean":
		_, ok = value.(bool)
	case "null":
		ok = value == nil
	default:
		t.Errorf("%s: named type %q not expected in these schemas", path, typ)
		return
	}
	if !ok {
		t.Errorf("%s: %v (%T) is not an Avro %s", path, value, value, typ)
	}
}

func TestVerdictJSONForm(t *testing.T) {
	v := fullVerdict()
	v.RuleName = nil
	v.StartedAt = time.Date(2025, 3, 1, 10, 30, 0, 0, time.FixedZone("CET", 3600))
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"rule_name":null`,
		`"numerical_output":null`,
		`"allowed_scores":[]`,
		`"started_at":"2025-03-01T09:30:00.000Z"`,
		`"completed_at":"2025-03-01T09:30:43.750Z"`,
		`"start_offset":30,"end_offset":52`,
		`"match":"not_document","start_offset":null,"end_offset":null`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON form lacks %s:\n%s", want, data)
		}
	}
	// Held by value, the event is written in the same form.
	byValue, err := json.Marshal(struct{ V VerdictEvent }{*v})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"V":` + string(data) + `}`; string(byValue) != want {
		t.Errorf("by value:\n got %s\nwant %s", byValue, want)
	}
}

func TestSummaryJSONForm(t *testing.T) {
	failed := NewFailedSummary(&Request{RequestID: "r", TenantID: "t"}, ReasonModelRejected, "refused", t1, t2)
	data, err := json.Marshal(failed)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"status":"failed"`,
		`"aggregate":{"boolean":null,"numerical":null}`,
		`"sources":[]`,
		`"error":{"code":"model_rejected","message":"refused"}`,
		`"validation_report":null`,
		`"ruleset_version":null`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON form lacks %s:\n%s", want, data)
		}
	}
}

func TestEventJSONReadErrors(t *testing.T) {
	verdict, err := json.Marshal(fullVerdict())
	if err != nil {
		t.Fatal(err)
	}
	summary, err := json.Marshal(fullSummary())
	if err != nil {
		t.Fatal(err)
	}
	edit := func(data []byte, from, to string) []byte {
		t.Helper()
		if !strings.Contains(string(data), from) {
			t.Fatalf("%s not in %s", from, data)
		}
		return []byte(strings.Replace(string(data), from, to, 1))
	}
	for _, tc := range []struct {
		name string
		data []byte
		into Event
		want string
	}{
		{"verdict time not RFC 3339", edit(verdict, `"started_at":"2025-03-01T09:30:01.750Z"`, `"started_at":"01/03/2025"`), &VerdictEvent{},
			`schemas: verdict "req-1/payment-terms": started_at: want an RFC 3339 timestamp, got "01/03/2025"`},
		{"verdict time a number", edit(verdict, `"completed_at":"2025-03-01T09:30:43.750Z"`, `"completed_at":1740821443750`), &VerdictEvent{},
			`schemas: verdict "req-1/payment-terms": completed_at: want an RFC 3339 timestamp string, got 1740821443750`},
		{"verdict time missing", edit(verdict, `"completed_at":"2025-03-01T09:30:43.750Z",`, ``), &VerdictEvent{},
			`schemas: verdict "req-1/payment-terms": completed_at is missing`},
		{"unknown rule type", edit(verdict, `"rule_type":"boolean"`, `"rule_type":"fuzzy"`), &VerdictEvent{},
			`schemas: verdict "req-1/payment-terms": rule_type "fuzzy" is not boolean or numerical`},
		{"unknown status", edit(summary, `"status":"completed"`, `"status":"done"`), &SummaryEvent{},
			`schemas: summary "req-1": status "done" is not completed or failed`},
		{"not an object", []byte(`[1]`), &SummaryEvent{}, `schemas: not a summary in JSON form`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := json.Unmarshal(tc.data, tc.into)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got %v, want %s", err, tc.want)
			}
		})
	}
}

// Fields a newer schema adds are ignored, as an Avro reader on an older
// schema ignores them.
func TestEventJSONIgnoresUnknownFields(t *testing.T) {
	data, err := json.Marshal(fullSummary())
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), `{`, `{"added_later":{"x":1},`, 1))
	var s SummaryEvent
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	assertEqual(t, &s, fullSummary())
}

func ExampleVerdictEvent_MarshalJSON() {
	v := VerdictEvent{
		EventID: "req-1/signed", RequestID: "req-1", TenantID: "acme", RulesetID: "contracts",
		Model: "gemma-3-270m", RuleID: "signed", RuleType: verdict.Boolean, DataSufficiency: true,
		Rationale: "Both parties signed.", BooleanOutput: new(true),
		StartedAt: time.UnixMilli(1740821400250), CompletedAt: time.UnixMilli(1740821401750),
		RuleCount: 1,
	}
	data, _ := json.MarshalIndent(v, "", "  ")
	fmt.Println(string(data))
	// Output:
	// {
	//   "event_id": "req-1/signed",
	//   "request_id": "req-1",
	//   "tenant_id": "acme",
	//   "ruleset_id": "contracts",
	//   "ruleset_version": null,
	//   "model": "gemma-3-270m",
	//   "rule_id": "signed",
	//   "rule_name": null,
	//   "rule_type": "boolean",
	//   "data_sufficiency": true,
	//   "rationale": "Both parties signed.",
	//   "boolean_output": true,
	//   "numerical_output": null,
	//   "allowed_scores": [],
	//   "not_applicable": false,
	//   "sufficiency_note": null,
	//   "problems": [],
	//   "pages_considered": [],
	//   "evidences": [],
	//   "started_at": "2025-03-01T09:30:00.250Z",
	//   "completed_at": "2025-03-01T09:30:01.750Z",
	//   "rule_index": 0,
	//   "rule_count": 1,
	//   "cached": null,
	//   "confidence": null,
	//   "needs_review": false,
	//   "review_reasons": [],
	//   "rule_weight": null
	// }
}

// TestVerdictJSONCitations: the JSON form carries the passage cited, the
// page the model gave and the problems left, and reads JSON written before
// them as a verdict without them.
func TestVerdictJSONCitations(t *testing.T) {
	v := fullVerdict()
	v.Problems = []string{"the model gave no rationale"}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"problems":["the model gave no rationale"]`,
		`"source_page_number":3,"anchored":true`,
		`"passage_id":null,"cited_page_number":9,"cited_passage_id":null}`,
		`"passage_id":"d1p2s4","cited_page_number":2,"cited_passage_id":null}`,
		`"passage_id":"volume","cited_page_number":null,"cited_passage_id":null}`,
		`"passage_id":"d1p3s1","cited_page_number":2,"cited_passage_id":"d1p2s5"}`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON form lacks %s:\n%s", want, data)
		}
	}

	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "problems")
	for _, e := range doc["evidences"].([]any) {
		delete(e.(map[string]any), "passage_id")
		delete(e.(map[string]any), "cited_page_number")
	}
	older, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var got VerdictEvent
	if err := json.Unmarshal(older, &got); err != nil {
		t.Fatal(err)
	}
	want := fullVerdict()
	for i := range want.Evidences {
		want.Evidences[i].PassageID, want.Evidences[i].CitedPageNumber = "", 0
	}
	assertEqual(t, &got, want)
}
