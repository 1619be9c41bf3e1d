package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// FuzzParseRuleset: any bytes, read as YAML or JSON, give a ruleset or an
// error matching ErrInvalidRuleset, never a panic; a ruleset accepted
// validates again unchanged, and written as JSON it reads back the same.
func FuzzParseRuleset(f *testing.F) {
	for _, path := range []string{
		"../examples/contract-review/ruleset.yaml",
		"../registry/testdata/rulesets/contract-review-1.10.0.json",
		"../registry/testdata/rulesets/nested/contract-review-1.9.2.yml",
		"../registry/testdata/rulesets/nested/broken.yaml",
	} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(groupedRuleset))
	f.Add([]byte(`{"id": "n", "type": "numerical", "global_numerical_rule_config": {"min_score": 0, "max_score": 10, "increment": 2.5},
	  "rules": [{"rule_id": "gate", "rule_text": "t", "filter_criteria": "inputs.region == 'EU'", "check": "1"}]}`))
	f.Add([]byte("a: &a [*a, *a]\nrules: *a\n"))
	f.Add([]byte("id: r\nversion: 2024-03-31\nrules:\n  - {rule_id: a, rule_text: Say hi., 1: x}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ParseRuleset(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidRuleset) {
				t.Fatalf("error %T %v does not match ErrInvalidRuleset", err, err)
			}
			if rs != nil {
				t.Fatal("a ruleset came with an error")
			}
			return
		}
		first, err := json.Marshal(rs)
		if err != nil {
			t.Fatalf("writing an accepted ruleset as JSON: %v", err)
		}
		if err := rs.Validate(); err != nil {
			t.Fatalf("an accepted ruleset fails Validate: %v", err)
		}
		if again, _ := json.Marshal(rs); !bytes.Equal(again, first) {
			t.Fatalf("Validate changed an accepted ruleset:\n%s\n%s", first, again)
		}
		back, err := ParseRuleset(first)
		if err != nil {
			t.Fatalf("an accepted ruleset written as JSON does not read back: %v\n%s", err, first)
		}
		if again, _ := json.Marshal(back); !bytes.Equal(again, first) {
			t.Fatalf("an accepted ruleset written as JSON reads back otherwise:\n%s\n%s", first, again)
		}
	})
}
