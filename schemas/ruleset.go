package schemas

import (
	"bytes"
	_ "embed"
)

//go:embed ruleset.schema.json
var rulesetSchema []byte

// RulesetJSONSchema is the JSON Schema (draft 2020-12) of a ruleset
// (type_config) document, for editors and for clients that check a ruleset
// before sending it. It states the same checks as engine.ParseRuleset, except
// the few its description lists. Each call returns a fresh copy.
func RulesetJSONSchema() []byte {
	return bytes.Clone(rulesetSchema)
}
