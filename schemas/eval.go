package schemas

import (
	"bytes"
	_ "embed"
)

//go:embed eval_dataset.schema.json
var evalDatasetSchema []byte

// EvalDatasetJSONSchema is the JSON Schema (draft 2020-12) of an evaluation
// dataset's manifest (dataset.yaml or dataset.json), which
// `rulevalidator eval` checks every dataset against before its own checks.
// Each call returns a fresh copy.
func EvalDatasetJSONSchema() []byte {
	return bytes.Clone(evalDatasetSchema)
}
