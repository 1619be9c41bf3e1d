package eval

import (
	"testing"

	"rulevalidator/verdict"
)

const shippedDataset = "../examples/eval/edgar-nda"

// The shipped dataset loads, and mixes what the scorer scores: boolean and
// numerical rules, not-applicable labels and gold evidence.
func TestShippedDatasetLoads(t *testing.T) {
	ds, err := Load(shippedDataset)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Cases) < 5 {
		t.Errorf("%d cases, want at least 5", len(ds.Cases))
	}
	for _, c := range ds.Cases {
		if n := len(c.Labels); n < 8 || n > 12 {
			t.Errorf("case %s: %d labelled rules, want 8 to 12", c.ID, n)
		}
		kinds := map[string]int{}
		for _, l := range c.Labels {
			kinds[string(l.Type)]++
			if l.NotApplicable {
				kinds["not_applicable"]++
			}
			kinds["gold"] += len(l.Gold)
			for _, g := range l.Gold {
				doc := c.Inputs.Documents()[0]
				if got := string([]rune(doc.Text())[g.Start:g.End]); collapse(got) != collapse(g.Text) {
					t.Errorf("case %s rule %s: span [%d,%d) reads %q, not the gold text %q", c.ID, l.RuleID, g.Start, g.End, got, g.Text)
				}
			}
		}
		for _, k := range []string{string(verdict.Boolean), string(verdict.Numerical), "not_applicable", "gold"} {
			if kinds[k] == 0 {
				t.Errorf("case %s: no %s label", c.ID, k)
			}
		}
	}
}

func collapse(s string) string { return oneLine(s) }
