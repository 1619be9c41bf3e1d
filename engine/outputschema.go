package engine

import (
	"encoding/json"
	"fmt"
)

// OutputSchema is the JSON Schema the model's answer must follow for the given
// rules: rule ids are constrained to those asked for and each numerical rule's
// score to its allowed set. It is deterministic for the same rules, so request
// prefixes stay cacheable.
func OutputSchema(rules []Rule) (json.RawMessage, error) {
	variants := make([]any, 0, len(rules))
	for _, r := range rules {
		props := map[string]any{
			"rule_id":          map[string]any{"type": "string", "const": r.RuleID},
			"data_sufficiency": map[string]any{"type": "boolean"},
			"rationale":        map[string]any{"type": "string", "minLength": 1},
			"not_applicable":   map[string]any{"type": "boolean"},
			"evidences": map[string]any{
				"type": "array",
				"items": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"text":               map[string]any{"type": "string"},
						"source_origin":      map[string]any{"type": "string"},
						"source_page_number": map[string]any{"type": "integer"},
					},
					"required":             []string{"text", "source_origin", "source_page_number"},
					"additionalProperties": false,
				},
			},
		}
		required := []string{"rule_id", "data_sufficiency", "rationale", "not_applicable", "evidences"}
		if r.Type == Numerical {
			props["numerical_output"] = map[string]any{"type": "integer", "enum": r.AllowedScores()}
			required = append(required, "numerical_output")
		} else {
			props["boolean_output"] = map[string]any{"type": "boolean"}
			required = append(required, "boolean_output")
		}
		variants = append(variants, map[string]any{
			"type":                 "object",
			"properties":           props,
			"required":             required,
			"additionalProperties": false,
		})
	}
	var items any = map[string]any{"anyOf": variants}
	if len(variants) == 1 {
		items = variants[0]
	}
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"rules": map[string]any{
				"type":     "array",
				"items":    items,
				"minItems": len(rules),
				"maxItems": len(rules),
			},
		},
		"required":             []string{"rules"},
		"additionalProperties": false,
	}
	data, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("engine: marshalling the output schema: %w", err)
	}
	return data, nil
}
