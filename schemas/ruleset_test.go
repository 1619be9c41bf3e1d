package schemas_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"rulevalidator/engine"
	"rulevalidator/schemas"
)

// compileRulesetSchema compiles the embedded schema; compiling also checks it
// against the draft 2020-12 metaschema.
func compileRulesetSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.RulesetJSONSchema()))
	if err != nil {
		t.Fatalf("ruleset schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	const url = "urn:rulevalidator:schema:ruleset"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("AddResource: %v", err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compile ruleset schema: %v", err)
	}
	return sch
}

// rulesetSchemaMap is the schema as plain JSON values, for looking inside it.
func rulesetSchemaMap(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(schemas.RulesetJSONSchema(), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func validateWithSchema(t *testing.T, sch *jsonschema.Schema, doc []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("test document is not JSON: %v\n%s", err, doc)
	}
	return sch.Validate(inst)
}

// rulesDoc builds a ruleset document with n distinct rules.
func rulesDoc(n int) string {
	rules := make([]string, n)
	for i := range rules {
		rules[i] = fmt.Sprintf(`{"rule_id": "r%d", "rule_text": "t"}`, i)
	}
	return `{"rules": [` + strings.Join(rules, ",") + `]}`
}

// oneRule builds a ruleset document whose only rule has the given fields
// besides rule_id and rule_text.
func oneRule(top, rule string) string {
	if top != "" {
		top += ", "
	}
	if rule != "" {
		rule = ", " + rule
	}
	return `{` + top + `"rules": [{"rule_id": "a", "rule_text": "t"` + rule + `}]}`
}

// TestRulesetSchemaAgreesWithParseRuleset checks that the JSON Schema and
// engine.ParseRuleset accept and reject the same documents. Checks that JSON
// Schema cannot state are left out here and listed in
// TestRulesetSchemaKnownGaps.
func TestRulesetSchemaAgreesWithParseRuleset(t *testing.T) {
	sch := compileRulesetSchema(t)
	long := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name  string
		doc   string
		valid bool
	}{
		// Accepted.
		{"minimal", oneRule("", ""), true},
		{"every field", `{"id": "all", "version": "1", "type": "boolean", "boolean_aggregation": "majority",
			"numerical_aggregation": "weighted_mean", "generate_report": true, "inputs": {"region": "string"},
			"nested_rulesets": [{"id": "x", "name": "X", "required": true, "weight": 2, "numerical_aggregation": "min",
			"filter_criteria": "inputs.region == 'EU'", "rules": [{"rule_id": "x1", "rule_text": "t", "type": "boolean", "check": "inputs.region != ''"}]}],
			"filter_criteria": "inputs.region != 'US'", "global_numerical_rule_config": {"min_score": 0, "max_score": 5, "increment": 1},
			"rules": [{"rule_id": "a", "rule_text": "t", "type": "numerical", "numerical_rule_config": {"possible_scores": [1, 2]},
			"not_applicable_text": "n", "name": "A", "weight": 2.5}, {"rule_id": "b", "rule_text": "t", "type": "boolean"}]}`, true},
		{"nested_rulesets must be rulesets", oneRule(`"nested_rulesets": "x"`, ""), false},
		{"filter_criteria must be an expression", oneRule(`"filter_criteria": {"region": "EU"}`, ""), false},
		{"a nested ruleset takes no version", oneRule(`"nested_rulesets": [{"id": "g", "version": "1", "rules": [{"rule_id": "g1", "rule_text": "t"}]}]`, ""), false},
		{"max aggregation", oneRule(`"numerical_aggregation": "max"`, ""), true},
		{"integral floats are integers", oneRule(`"type": "numerical"`, `"numerical_rule_config": {"possible_scores": [3.0, 1e1, -2]}`), true},
		{"duplicate scores are allowed", oneRule(`"type": "numerical"`, `"numerical_rule_config": {"possible_scores": [1, 1]}`), true},
		{"numerical rule on the global range", oneRule(`"global_numerical_rule_config": {"min_score": 1, "max_score": 3}`, `"type": "numerical"`), true},
		{"numerical rule with an empty config on the global range", oneRule(`"global_numerical_rule_config": {"min_score": 1, "max_score": 3}`, `"type": "numerical", "numerical_rule_config": {}`), true},
		{"inherited numerical type with scores", oneRule(`"type": "numerical"`, `"numerical_rule_config": {"possible_scores": [0]}`), true},
		{"boolean rule in a numerical ruleset", oneRule(`"type": "numerical"`, `"type": "boolean"`), true},
		{"unused incomplete global config", oneRule(`"global_numerical_rule_config": {"increment": 2}`, ""), true},
		{"small positive weight", oneRule("", `"weight": 0.001`), true},
		{"review thresholds 0 and 1", oneRule(`"review_below_confidence": 0`, `"review_below_confidence": 1`), true},
		{"rule_id with inner spaces and letters", `{"rules": [{"rule_id": "rule one – é", "rule_text": "t"}]}`, true},
		{"rule_id of 128 characters", `{"rules": [{"rule_id": "` + strings.Repeat("é", 128) + `", "rule_text": "t"}]}`, true},
		{"rule_text of 8192 characters", `{"rules": [{"rule_id": "a", "rule_text": "` + long(8192) + `"}]}`, true},
		{"not_applicable_text of 8192 characters", oneRule("", `"not_applicable_text": "`+long(8192)+`"`), true},
		{"500 rules", rulesDoc(500), true},
		{"1001 possible scores", oneRule(`"type": "numerical"`, `"numerical_rule_config": {"possible_scores": [`+strings.TrimSuffix(strings.Repeat("1,", 1001), ",")+`]}`), true},

		// Rejected: shape.
		{"not an object", `[]`, false},
		{"unknown top-level field", oneRule(`"rule": []`, ""), false},
		{"unknown rule field", oneRule("", `"scroe": 3`), false},
		{"unknown global config field", oneRule(`"global_numerical_rule_config": {"min": 0}`, ""), false},
		{"unknown numerical_rule_config field", oneRule(`"type": "numerical"`, `"numerical_rule_config": {"scores": [1]}`), false},
		{"missing rules", `{"id": "x"}`, false},
		{"empty rules", `{"rules": []}`, false},
		{"501 rules", rulesDoc(501), false},
		{"missing rule_id", `{"rules": [{"rule_text": "t"}]}`, false},
		{"missing rule_text", `{"rules": [{"rule_id": "a"}]}`, false},

		// Rejected: values.
		{"bad ruleset type", oneRule(`"type": "ternary"`, ""), false},
		{"bad rule type", oneRule("", `"type": "ternary"`), false},
		{"bad boolean_aggregation", oneRule(`"boolean_aggregation": "most"`, ""), false},
		{"bad numerical_aggregation", oneRule(`"numerical_aggregation": "median"`, ""), false},
		{"weight 0", oneRule("", `"weight": 0`), false},
		{"negative weight", oneRule("", `"weight": -1`), false},
		{"review threshold over 1", oneRule(`"review_below_confidence": 1.2`, ""), false},
		{"negative rule review threshold", oneRule("", `"review_below_confidence": -0.5`), false},
		{"blank rule_text", `{"rules": [{"rule_id": "a", "rule_text": " \t\n"}]}`, false},
		{"rule_text of Unicode white space", `{"rules": [{"rule_id": "a", "rule_text": "\u00a0\u2003\u3000"}]}`, false},
		{"rule_text of 8193 characters", `{"rules": [{"rule_id": "a", "rule_text": "` + long(8193) + `"}]}`, false},
		{"not_applicable_text of 8193 characters", oneRule("", `"not_applicable_text": "`+long(8193)+`"`), false},
		{"empty rule_id", `{"rules": [{"rule_id": "", "rule_text": "t"}]}`, false},
		{"rule_id with a slash", `{"rules": [{"rule_id": "a/b", "rule_text": "t"}]}`, false},
		{"rule_id with a control character", `{"rules": [{"rule_id": "a\u0000b", "rule_text": "t"}]}`, false},
		{"rule_id with a C1 control character", `{"rules": [{"rule_id": "a\u0085b", "rule_text": "t"}]}`, false},
		{"rule_id with a leading space", `{"rules": [{"rule_id": " a", "rule_text": "t"}]}`, false},
		{"rule_id with a trailing no-break space", `{"rules": [{"rule_id": "a\u00a0", "rule_text": "t"}]}`, false},
		{"rule_id of 129 characters", `{"rules": [{"rule_id": "` + strings.Repeat("é", 129) + `", "rule_text": "t"}]}`, false},
		{"empty possible_scores", oneRule(`"type": "numerical"`, `"numerical_rule_config": {"possible_scores": []}`), false},
		{"1002 possible scores", oneRule(`"type": "numerical"`, `"numerical_rule_config": {"possible_scores": [`+strings.TrimSuffix(strings.Repeat("1,", 1002), ",")+`]}`), false},
		{"increment 0", oneRule(`"global_numerical_rule_config": {"min_score": 0, "max_score": 1, "increment": 0}`, ""), false},
		{"negative increment", oneRule(`"global_numerical_rule_config": {"increment": -1}`, ""), false},
		{"scores on an explicit boolean rule", oneRule("", `"type": "boolean", "numerical_rule_config": {"possible_scores": [1]}`), false},
		{"scores on a rule inheriting the default type", oneRule("", `"numerical_rule_config": {"possible_scores": [1]}`), false},
		{"scores on a rule inheriting the boolean type", oneRule(`"type": "boolean"`, `"numerical_rule_config": {}`), false},

		// Rejected: JSON types.
		{"id is a number", oneRule(`"id": 1`, ""), false},
		{"id is null", oneRule(`"id": null`, ""), false},
		{"version is a number", oneRule(`"version": 1.2`, ""), false},
		{"type is null", oneRule(`"type": null`, ""), false},
		{"generate_report is a string", oneRule(`"generate_report": "yes"`, ""), false},
		{"rules is an object", `{"rules": {"rule_id": "a", "rule_text": "t"}}`, false},
		{"rules is null", `{"rules": null}`, false},
		{"a rule is a string", `{"rules": ["a"]}`, false},
		{"rule_id is a number", `{"rules": [{"rule_id": 1, "rule_text": "t"}]}`, false},
		{"rule_text is a number", `{"rules": [{"rule_id": "a", "rule_text": 1}]}`, false},
		{"name is a number", oneRule("", `"name": 1`), false},
		{"not_applicable_text is an array", oneRule("", `"not_applicable_text": ["x"]`), false},
		{"weight is a string", oneRule("", `"weight": "1"`), false},
		{"weight is null", oneRule("", `"weight": null`), false},
		{"global config is an array", oneRule(`"global_numerical_rule_config": [0, 5]`, ""), false},
		{"global config is null", oneRule(`"global_numerical_rule_config": null`, ""), false},
		{"min_score is fractional", oneRule(`"global_numerical_rule_config": {"min_score": 0.5, "max_score": 1}`, ""), false},
		{"max_score is a string", oneRule(`"global_numerical_rule_config": {"min_score": 0, "max_score": "5"}`, ""), false},
		{"numerical_rule_config is a list", oneRule(`"type": "numerical"`, `"numerical_rule_config": [1]`), false},
		{"possible_scores is a number", oneRule(`"type": "numerical"`, `"numerical_rule_config": {"possible_scores": 3}`), false},
		{"a possible score is fractional", oneRule(`"type": "numerical"`, `"numerical_rule_config": {"possible_scores": [1.5]}`), false},
		{"a possible score is a string", oneRule(`"type": "numerical"`, `"numerical_rule_config": {"possible_scores": ["1"]}`), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, goErr := engine.ParseRuleset([]byte(tc.doc))
			schemaErr := validateWithSchema(t, sch, []byte(tc.doc))
			if (goErr == nil) != tc.valid {
				t.Errorf("ParseRuleset: valid = %v, want %v (error: %v)", goErr == nil, tc.valid, goErr)
			}
			if (schemaErr == nil) != tc.valid {
				t.Errorf("JSON Schema: valid = %v, want %v (error: %v)", schemaErr == nil, tc.valid, schemaErr)
			}
		})
	}
}

// TestRulesetSchemaKnownGaps lists the checks JSON Schema cannot state: the
// schema accepts these documents and ParseRuleset rejects them. Should the
// schema ever catch one, move it to the agreement table.
func TestRulesetSchemaKnownGaps(t *testing.T) {
	sch := compileRulesetSchema(t)
	tests := []struct{ name, doc string }{
		{"duplicate rule ids (uniqueness of one property across items)",
			`{"rules": [{"rule_id": "a", "rule_text": "t"}, {"rule_id": "a", "rule_text": "u"}]}`},
		{"numerical rule with no score set anywhere",
			oneRule("", `"type": "numerical"`)},
		{"global range missing max_score when a rule uses it",
			oneRule(`"global_numerical_rule_config": {"min_score": 0}`, `"type": "numerical"`)},
		{"min_score greater than max_score (comparison of two values)",
			oneRule(`"global_numerical_rule_config": {"min_score": 5, "max_score": 1}`, "")},
		{"global range of more than 1001 scores (arithmetic)",
			oneRule(`"global_numerical_rule_config": {"min_score": 0, "max_score": 2000}`, "")},
		{"integer beyond 64 bits",
			oneRule(`"type": "numerical"`, `"numerical_rule_config": {"possible_scores": [1e30]}`)},
		{"weight beyond float64",
			oneRule("", `"weight": 1e400`)},
		{"an expression that does not compile (CEL)",
			oneRule("", `"check": "inputs.cap <"`)},
		{"an input the declaration does not name",
			oneRule(`"inputs": {"cap": "number"}`, `"filter_criteria": "inputs.value > 1"`)},
		{"a rule id repeated in a nested ruleset",
			oneRule(`"nested_rulesets": [{"id": "g", "rules": [{"rule_id": "a", "rule_text": "t"}]}]`, "")},
		{"a nested ruleset without a rule anywhere in its tree",
			oneRule(`"nested_rulesets": [{"id": "g", "rules": []}]`, "")},
		{"a gate without boolean rules",
			oneRule(`"nested_rulesets": [{"id": "g", "required": true, "rules": [{"rule_id": "n", "rule_text": "t", "type": "numerical", "numerical_rule_config": {"possible_scores": [1]}}]}]`, "")},
		{"nested rulesets deeper than 4 levels (recursion depth)",
			oneRule(`"nested_rulesets": [{"id": "g1", "nested_rulesets": [{"id": "g2", "nested_rulesets": [{"id": "g3", "nested_rulesets": [{"id": "g4",
			"nested_rulesets": [{"id": "g5", "rules": [{"rule_id": "deep", "rule_text": "t"}]}]}]}]}]}]`, "")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := engine.ParseRuleset([]byte(tc.doc)); err == nil {
				t.Error("ParseRuleset accepted it; the gap is not where this test says")
			}
			if err := validateWithSchema(t, sch, []byte(tc.doc)); err != nil {
				t.Errorf("the schema rejects it now (%v); move the case to the agreement table", err)
			}
		})
	}
}

// TestRulesetSchemaPropertiesMatchGoFields fails when a field is added on one
// side only: every property of every object in the schema must be a json tag
// of the matching Go struct, and the other way round.
func TestRulesetSchemaPropertiesMatchGoFields(t *testing.T) {
	root := rulesetSchemaMap(t)
	defs, _ := root["$defs"].(map[string]any)
	resolve := func(node map[string]any) map[string]any {
		ref, ok := node["$ref"].(string)
		if !ok {
			return node
		}
		def, ok := defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		if !ok {
			t.Fatalf("unresolvable $ref %q", ref)
		}
		return def
	}
	// The fields of engine.Ruleset that only one level takes: a nested
	// ruleset takes no version, report, cache or input declaration, the
	// top level no gate, weight or name.
	notHere := map[string][]string{
		"":                      {"required", "weight", "name"},
		"#/$defs/nestedRuleset": {"version", "generate_report", "cache", "inputs", "review_below_confidence"},
	}
	visited := map[string]bool{}
	var check func(path string, node map[string]any, typ reflect.Type)
	check = func(path string, node map[string]any, typ reflect.Type) {
		ref, _ := node["$ref"].(string)
		if ref != "" && visited[ref] {
			return // a recursive definition, checked once
		}
		visited[ref] = true
		skip := notHere[ref]
		if typ.Name() != "Ruleset" {
			skip = nil
		}
		node = resolve(node)
		if node["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties must be false, as the parser rejects unknown fields", path)
		}
		props, _ := node["properties"].(map[string]any)
		var schemaNames, goNames []string
		for name := range props {
			schemaNames = append(schemaNames, name)
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || slices.Contains(skip, name) {
				continue
			}
			goNames = append(goNames, name)
			prop, ok := props[name].(map[string]any)
			if !ok {
				continue
			}
			// Follow nested structs: *T, T and []T.
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Slice {
				ft = ft.Elem()
				items, ok := prop["items"].(map[string]any)
				if !ok {
					if ft.Kind() == reflect.Struct {
						t.Errorf("%s.%s: array of %s without items", path, name, ft.Name())
					}
					continue
				}
				prop = items
			}
			if ft.Kind() == reflect.Struct {
				check(path+"."+name, prop, ft)
			}
		}
		slices.Sort(schemaNames)
		slices.Sort(goNames)
		if !slices.Equal(schemaNames, goNames) {
			t.Errorf("%s (%s): schema properties %v, Go json tags %v", path, typ.Name(), schemaNames, goNames)
		}
	}
	check("ruleset", root, reflect.TypeFor[engine.Ruleset]())
}

// TestRulesetSchemaDefaultsMatchValidate checks the defaults the schema
// documents against the ones Validate fills in.
func TestRulesetSchemaDefaultsMatchValidate(t *testing.T) {
	root := rulesetSchemaMap(t)
	props := root["properties"].(map[string]any)
	rule := root["$defs"].(map[string]any)["rule"].(map[string]any)["properties"].(map[string]any)
	global := root["$defs"].(map[string]any)["globalNumericalRuleConfig"].(map[string]any)["properties"].(map[string]any)

	rs, err := engine.ParseRuleset([]byte(`{"global_numerical_rule_config": {"min_score": 0, "max_score": 2},
		"rules": [{"rule_id": "a", "rule_text": "t"}, {"rule_id": "b", "rule_text": "t", "type": "numerical"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		schema    any
		validated any
	}{
		{"type", props["type"].(map[string]any)["default"], string(rs.Type)},
		{"boolean_aggregation", props["boolean_aggregation"].(map[string]any)["default"], string(rs.BooleanAggregation)},
		{"numerical_aggregation", props["numerical_aggregation"].(map[string]any)["default"], string(rs.NumericalAggregation)},
		{"generate_report", props["generate_report"].(map[string]any)["default"], rs.GenerateReport},
		{"rules[].weight", rule["weight"].(map[string]any)["default"], rs.Rules[0].WeightOrDefault()},
		// The default increment 1 gives 0, 1, 2.
		{"global_numerical_rule_config.increment", global["increment"].(map[string]any)["default"], float64(rs.Rules[1].AllowedScores()[1] - rs.Rules[1].AllowedScores()[0])},
	} {
		if !reflect.DeepEqual(c.schema, c.validated) {
			t.Errorf("%s: schema default %#v, Validate gives %#v", c.name, c.schema, c.validated)
		}
	}
}

// TestRulesetSchemaExamples checks every example ruleset with both validators.
func TestRulesetSchemaExamples(t *testing.T) {
	sch := compileRulesetSchema(t)
	var files []string
	for _, pattern := range []string{"../examples/*/ruleset.yaml", "../examples/*/ruleset.yml", "../examples/*/ruleset.json"} {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, matches...)
	}
	if len(files) == 0 {
		t.Fatal("no example rulesets under ../examples")
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := engine.ParseRuleset(data); err != nil {
				t.Errorf("ParseRuleset: %v", err)
			}
			var doc any
			if err := yaml.Unmarshal(data, &doc); err != nil { // YAML reads JSON too
				t.Fatal(err)
			}
			asJSON, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			if err := validateWithSchema(t, sch, asJSON); err != nil {
				t.Errorf("JSON Schema: %v", err)
			}
		})
	}
}

func TestRulesetJSONSchemaReturnsACopy(t *testing.T) {
	first := schemas.RulesetJSONSchema()
	want := string(first)
	for i := range first {
		first[i] = 'x'
	}
	if got := string(schemas.RulesetJSONSchema()); got != want {
		t.Error("changing the returned bytes changed the embedded schema")
	}
}
