package eval

import (
	"context"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/internal/llmfake"
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

const contractNLIDev = "../examples/eval/contractnli-dev"

// The ContractNLI dev split loads as its converter wrote it: 61 agreements,
// each labelled against the 17 hypotheses, "not mentioned" as
// data_sufficiency false, every gold passage where it was annotated.
func TestContractNLIDevLoads(t *testing.T) {
	ds, err := Load(contractNLIDev)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Cases) != 61 {
		t.Errorf("%d cases, want the dev split's 61", len(ds.Cases))
	}
	counts := map[string]int{}
	for _, c := range ds.Cases {
		if n := len(c.Labels); n != 17 {
			t.Errorf("case %s: %d labels, want 17", c.ID, n)
		}
		text := []rune(c.Inputs.Documents()[0].Text())
		for _, l := range c.Labels {
			switch {
			case l.Insufficient && *l.Boolean:
				t.Errorf("case %s rule %s: not mentioned, yet expected to pass", c.ID, l.RuleID)
			case l.Insufficient:
				counts["not mentioned"]++
			case *l.Boolean:
				counts["entailed"]++
			default:
				counts["contradicted"]++
			}
			if l.Insufficient && len(l.Gold) > 0 {
				t.Errorf("case %s rule %s: not mentioned, with gold passages", c.ID, l.RuleID)
			}
			counts["gold"] += len(l.Gold)
			for _, g := range l.Gold {
				if got := string(text[g.Start:g.End]); got != g.Text {
					t.Errorf("case %s rule %s: span [%d,%d) reads %q, not the gold text %q", c.ID, l.RuleID, g.Start, g.End, got, g.Text)
				}
			}
		}
	}
	want := map[string]int{"entailed": 519, "contradicted": 95, "not mentioned": 423, "gold": 1225}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%d %s labels, want %d", counts[k], k, n)
		}
	}
}

// Every verdict of the dev split answered as labelled, "not mentioned" as
// data_sufficiency false, quoting the gold passages, scores 1.0 on every
// headline figure: the labels, the gold passages and the engine's anchoring
// agree.
func TestContractNLIDevAllCorrectScoresOne(t *testing.T) {
	ds, err := Load(contractNLIDev)
	if err != nil {
		t.Fatal(err)
	}
	var replies []llmfake.Reply
	for _, c := range ds.Cases {
		var rules []rule
		for _, l := range c.Labels {
			r := rule{ID: l.RuleID, Boolean: l.Boolean, Insufficient: l.Insufficient}
			for _, g := range l.Gold {
				r.Quotes = append(r.Quotes, quote{g.Text, g.Document, g.Page})
			}
			rules = append(rules, r)
		}
		replies = append(replies, engineReply(rules...))
	}
	_, llm := newFake(t, replies...)
	// One call per agreement: the longest hold some 8,000 tokens.
	rep, err := Run(context.Background(), ds, Options{LLM: llm, Engine: engine.Config{Model: "fake-model", OutputRetries: -1, ContextTokens: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.System(SystemEngine).Overall
	wantRatio(t, "accuracy", m.Accuracy, 1)
	wantRatio(t, "balanced accuracy", m.Boolean.BalancedAccuracy, 1)
	wantRatio(t, "not mentioned said", m.NotMentioned.Recall, 1)
	wantRatio(t, "not mentioned precision", m.NotMentioned.Precision, 1)
	wantRatio(t, "verdicts overlapping gold", m.Evidence.VerdictsOverlapping, 1)
	wantRatio(t, "evidence recall by characters", m.Evidence.CharRecall, 1)
	if m.NotMentioned.Labelled != 423 || m.Evidence.WithGold != 614 {
		t.Errorf("%d not mentioned, %d verdicts with gold; want 423 and 614", m.NotMentioned.Labelled, m.Evidence.WithGold)
	}
}
