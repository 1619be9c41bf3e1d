package eval

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"rulevalidator/engine"
)

// checkedRun judges ds with the verify check on: the engine's judging calls
// answered as allCorrect does, each check as holds gives its rule.
func checkedRun(t *testing.T, ds *Dataset, llm *checkingLLM, below float64, recheck *Report) *Report {
	t.Helper()
	rep, err := Run(context.Background(), ds, Options{LLM: llm, Recheck: recheck, Engine: engine.Config{
		Model: "fake-model", OutputRetries: -1, Confidence: engine.ConfidenceVerify, OverrulePassesBelow: below, CallConcurrency: 1,
		Evidence: engine.EvidenceCite,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// citeReplies are allCorrect's answers in the cite evidence mode: each
// quote given as the id of the passage that holds it.
func citeReplies(t *testing.T, ds *Dataset) []string {
	t.Helper()
	var out []string
	for i, r := range allCorrect() {
		var ans struct {
			Rules []map[string]any `json:"rules"`
		}
		if err := json.Unmarshal([]byte(r.Content), &ans); err != nil {
			t.Fatal(err)
		}
		passages := engine.Passages(ds.Cases[i].Inputs)
		for _, rule := range ans.Rules {
			var cited []map[string]any
			for _, ev := range rule["evidences"].([]any) {
				text := ev.(map[string]any)["text"].(string)
				for _, p := range passages {
					if strings.Contains(p.Text, text) {
						cited = append(cited, map[string]any{"passage_id": p.ID, "quote": ""})
						break
					}
				}
			}
			rule["evidences"] = cited
		}
		data, _ := json.Marshal(ans)
		out = append(out, string(data))
	}
	return out
}

// A recheck of a recorded run makes no judging call: its verdicts are the
// recorded ones, each checked again, so other check answers and another
// threshold give what a run with them would have. A pass the recorded run
// overruled stands when the new check does not doubt it.
func TestRecheckAsksOnlyTheChecks(t *testing.T) {
	ds := loadTest(t)
	holds := map[string]float64{"governing law": 0.4, "fixed number of years": 0.7, "Score the years": 0.6}
	recorded := checkedRun(t, ds, &checkingLLM{judged: citeReplies(t, ds), holds: holds}, 0.5, nil)
	law := recorded.System(SystemEngine).Outcomes[0]
	if law.RuleID != "law" || !law.Overruled {
		t.Fatalf("the recorded run did not overrule law's pass: %+v", law)
	}
	back := asPrinted(t, recorded)

	again := &checkingLLM{holds: map[string]float64{"governing law": 0.9, "fixed number of years": 0.3, "Score the years": 0.6}}
	rep := checkedRun(t, ds, again, 0.45, back) // no judging answer queued: a judging call fails the case
	s := rep.System(SystemEngine)
	if len(s.Errors) > 0 {
		t.Fatalf("recheck failed: %+v", s.Errors)
	}
	if by := s.Cost.ByPurpose; len(by) != 1 || by[engine.PurposeCheck].Calls != 6 {
		t.Errorf("calls by purpose %+v, want the six checks alone", by)
	}
	byKey := map[string]Outcome{}
	for _, o := range s.Outcomes {
		byKey[o.Case+"/"+o.RuleID] = o
	}
	if o := byKey["a/law"]; o.Overruled || o.Boolean == nil || !*o.Boolean || !o.Correct || o.Confidence == nil || *o.Confidence != 0.9 {
		t.Errorf("a/law: %+v, want the model's pass standing at 0.9", o)
	}
	if o := byKey["a/term"]; !o.Overruled || o.Boolean == nil || *o.Boolean || !slices.Contains(o.ReviewReasons, engine.ReviewOverruledPass) {
		t.Errorf("a/term: %+v, want overruled under 0.45", o)
	}
	if s.Overrule == nil || s.Overrule.Used != 0.45 || s.Overrule.Checked != 2 {
		t.Errorf("sweep %+v, want the two passes checked at 0.45", s.Overrule)
	}
}

// What a recheck cannot do is refused before any call.
func TestRecheckRefuses(t *testing.T) {
	ds := loadTest(t)
	recorded := checkedRun(t, ds, &checkingLLM{judged: citeReplies(t, ds), holds: map[string]float64{"governing law": 0.4, "fixed number of years": 0.7, "Score the years": 0.6}}, 0.5, nil)
	one := *ds
	one.Cases = ds.Cases[:1]
	partial := checkedRun(t, &one, &checkingLLM{judged: citeReplies(t, ds)[:1], holds: map[string]float64{"governing law": 0.4, "fixed number of years": 0.7, "Score the years": 0.6}}, 0.5, nil)
	quoted := run(t, ds, func() engine.LLM { _, l := newFake(t, allCorrect()...); return l }(), 1, "")
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"another confidence", Options{Recheck: recorded, Engine: engine.Config{Model: "m", Confidence: engine.ConfidenceLogProbs}}, "the engine's confidence must be verify"},
		{"with a baseline", Options{Recheck: recorded, Baseline: BaselinePerRule, Engine: engine.Config{Model: "m", Confidence: engine.ConfidenceVerify}}, "judges no baseline"},
		{"a case not recorded", Options{Recheck: partial, Engine: engine.Config{Model: "m", Confidence: engine.ConfidenceVerify}}, `case "b" is not in the recorded report`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := &checkingLLM{}
			tt.opts.LLM = llm
			if _, err := Run(context.Background(), ds, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run: %v, want %q", err, tt.want)
			}
		})
	}
	// Quotes name no passage: the case fails, the reason given.
	rep := checkedRun(t, ds, &checkingLLM{}, 0.5, quoted)
	if errs := rep.System(SystemEngine).Errors; len(errs) == 0 || !strings.Contains(errs[0].Error, "is a quote, not a passage: recheck a report judged in the cite evidence mode") {
		t.Errorf("a recheck of quotes: %+v", errs)
	}
}
