package eval

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"rulevalidator/schemas"
)

// The schema and the structs Load decodes into name the same fields, so a
// field added to one is not silently dropped by the other.
func TestSchemaAndManifestAgree(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(schemas.EvalDatasetJSONSchema(), &doc); err != nil {
		t.Fatal(err)
	}
	defs := doc["$defs"].(map[string]any)
	for _, tt := range []struct {
		name   string
		schema map[string]any
		typ    reflect.Type
	}{
		{"manifest", doc, reflect.TypeFor[Manifest]()},
		{"case", defs["case"].(map[string]any), reflect.TypeFor[ManifestCase]()},
		{"label", defs["label"].(map[string]any), reflect.TypeFor[ManifestLabel]()},
		{"span", defs["span"].(map[string]any), reflect.TypeFor[ManifestSpan]()},
	} {
		var inSchema []string
		for k := range tt.schema["properties"].(map[string]any) {
			inSchema = append(inSchema, k)
		}
		var inStruct []string
		for i := range tt.typ.NumField() {
			inStruct = append(inStruct, strings.Split(tt.typ.Field(i).Tag.Get("json"), ",")[0])
		}
		slices.Sort(inSchema)
		slices.Sort(inStruct)
		if !slices.Equal(inSchema, inStruct) {
			t.Errorf("%s: schema properties %v, struct fields %v", tt.name, inSchema, inStruct)
		}
		if tt.schema["additionalProperties"] != false {
			t.Errorf("%s: the schema must reject unknown fields", tt.name)
		}
	}
}
