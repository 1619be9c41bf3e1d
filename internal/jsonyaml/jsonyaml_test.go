package jsonyaml

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestDecodeReadsYAMLAsItsJSONTwin(t *testing.T) {
	tests := []struct {
		name, yaml, json string
	}{
		{"date", "version: 2024-03-31", `{"version": "2024-03-31"}`},
		{"date and time", "at: 2024-03-31T10:00:00Z", `{"at": "2024-03-31T10:00:00Z"}`},
		{"space-separated time", "at: 2024-03-31 10:00:00.5 +02:00", `{"at": "2024-03-31 10:00:00.5 +02:00"}`},
		{"explicit tag", "at: !!timestamp 2024-03-31", `{"at": "2024-03-31"}`},
		{"quoted", `at: "2024-03-31"`, `{"at": "2024-03-31"}`},
		{"in a list", "dates: [2024-01-01, 2024-12-31]", `{"dates": ["2024-01-01", "2024-12-31"]}`},
		{"as a key", "by_day:\n  2024-03-31: 3", `{"by_day": {"2024-03-31": 3}}`},
		{"through an alias", "a: &d 2024-03-31\nb: *d", `{"a": "2024-03-31", "b": "2024-03-31"}`},
		{"non-string keys", "1: one\ntrue: yes", `{"1": "one", "true": "yes"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fromYAML, err := Decode([]byte(tt.yaml))
			if err != nil {
				t.Fatalf("YAML: %v", err)
			}
			fromJSON, err := Decode([]byte(tt.json))
			if err != nil {
				t.Fatalf("JSON: %v", err)
			}
			// Numbers differ in type (json.Number against int), so compare
			// what each says as JSON.
			if got, want := jsonText(t, fromYAML), jsonText(t, fromJSON); got != want {
				t.Errorf("YAML reads as %s, its JSON twin as %s", got, want)
			}
			if !reflect.DeepEqual(typesOf(fromYAML), typesOf(fromJSON)) {
				t.Errorf("YAML value types %v, JSON's %v", typesOf(fromYAML), typesOf(fromJSON))
			}
		})
	}
}

// typesOf is v with every number as "number" and every other leaf as its
// JSON type's name.
func typesOf(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			out[k] = typesOf(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = typesOf(e)
		}
		return out
	default:
		return TypeName(v)
	}
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
