package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Bounds written into the grammar schema: they stop a small model from
// looping inside a string, and keep answers short enough to be fast.
const (
	grammarMaxRationale = 400
	grammarMaxQuote     = 300
	grammarMaxOrigin    = 200
	grammarMaxEvidences = 3
)

// OutputSchema is the JSON Schema the model's answer must follow for the given
// rules, in the subset strict structured-output servers accept: rule ids are
// constrained to those asked for and each numerical rule's score to its
// allowed set. It is deterministic for the same rules, so request prefixes
// stay cacheable.
func OutputSchema(rules []Rule) (json.RawMessage, error) {
	variants := make([]any, 0, len(rules))
	for _, r := range rules {
		variants = append(variants, ruleSchema(r, false))
	}
	var items any = obj{{"anyOf", variants}}
	if len(variants) == 1 {
		items = variants[0]
	}
	return marshalSchema(obj{
		{"type", "object"},
		{"properties", obj{{"rules", obj{{"type", "array"}, {"items", items}}}}},
		{"required", []string{"rules"}},
		{"additionalProperties", false},
	})
}

// GrammarSchema is a stricter form of OutputSchema for servers that enforce a
// schema with a grammar (llama.cpp): exactly one entry per rule, in ruleset
// order, with bounded string lengths. Such servers need no schema support
// from the API to produce a valid answer.
func GrammarSchema(rules []Rule) (json.RawMessage, error) {
	items := make([]any, 0, len(rules))
	for _, r := range rules {
		items = append(items, ruleSchema(r, true))
	}
	return marshalSchema(obj{
		{"type", "object"},
		{"properties", obj{{"rules", obj{
			{"type", "array"},
			{"prefixItems", items},
			{"items", false},
			{"minItems", len(rules)},
			{"maxItems", len(rules)},
		}}}},
		{"required", []string{"rules"}},
		{"additionalProperties", false},
	})
}

// ruleSchema is one rule's entry. Properties are in the order a model should
// write them: what it cites, then why, then whether the rule applies and the
// data suffice, then the verdict.
func ruleSchema(r Rule, bounded bool) obj {
	str := func(maxLen int) obj {
		if !bounded {
			return obj{{"type", "string"}}
		}
		return obj{{"type", "string"}, {"maxLength", maxLen}}
	}
	evidence := obj{
		{"type", "object"},
		{"properties", obj{
			{"text", str(grammarMaxQuote)},
			{"source_origin", str(grammarMaxOrigin)},
			{"source_page_number", obj{{"type", "integer"}}},
		}},
		{"required", []string{"text", "source_origin", "source_page_number"}},
		{"additionalProperties", false},
	}
	evidences := obj{{"type", "array"}, {"items", evidence}}
	if bounded {
		evidences = append(evidences, kv{"maxItems", grammarMaxEvidences})
	}
	rationale := str(grammarMaxRationale)
	if bounded {
		rationale = append(rationale, kv{"minLength", 1})
	}
	// Think first, decide last: what is cited and why come before any
	// judgement, so a grammar-driven model writes its verdict after them.
	props := obj{
		{"rule_id", obj{{"type", "string"}, {"enum", []string{r.RuleID}}}},
		{"evidences", evidences},
		{"rationale", rationale},
		{"not_applicable", obj{{"type", "boolean"}}},
		{"data_sufficiency", obj{{"type", "boolean"}}},
	}
	required := []string{"rule_id", "evidences", "rationale", "not_applicable", "data_sufficiency"}
	if r.Type == Numerical {
		props = append(props, kv{"numerical_output", obj{{"type", "integer"}, {"enum", r.AllowedScores()}}})
		required = append(required, "numerical_output")
	} else {
		props = append(props, kv{"boolean_output", obj{{"type", "boolean"}}})
		required = append(required, "boolean_output")
	}
	return obj{
		{"type", "object"},
		{"properties", props},
		{"required", required},
		{"additionalProperties", false},
	}
}

// kv and obj build JSON objects whose keys keep their order: grammar-based
// servers generate properties in schema order.
type kv struct {
	key   string
	value any
}

type obj []kv

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(p.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(p.value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshalSchema(schema obj) (json.RawMessage, error) {
	data, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("engine: marshalling the output schema: %w", err)
	}
	return data, nil
}
