package eval

import (
	"context"

	"encoding/json"
	"rulevalidator/engine"
	"strings"
	"testing"

	"rulevalidator/internal/llmfake"
)

// judgedCases judges ds's cases (the engine, then the baseline's three
// calls, case by case) and returns the report as --json prints it.
func judgedCases(t *testing.T, ds *Dataset, cases ...int) *Report {
	t.Helper()
	engineReplies := allCorrect()
	rubric := [][]llmfake.Reply{rubricAnswers(true, false, 3), rubricAnswers(true, true, 0)}
	part := *ds
	part.Cases = nil
	var replies []llmfake.Reply
	for _, i := range cases {
		part.Cases = append(part.Cases, ds.Cases[i])
		replies = append(replies, engineReplies[i])
		replies = append(replies, rubric[i]...)
	}
	_, llm := newFake(t, replies...)
	return asPrinted(t, run(t, &part, llm, 1, BaselinePerRule))
}

// asPrinted is rep as --json prints it, read back: what --merge and
// --recheck read.
func asPrinted(t *testing.T, rep *Report) *Report {
	t.Helper()
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	return &back
}

// Reports of disjoint cases merge into the figures one run over all of
// them gives: every metric, per rule and per case, and the margin.
func TestMergeGivesTheWholeRunsFigures(t *testing.T) {
	ds := loadTest(t)
	whole := judgedCases(t, ds, 0, 1)
	merged, err := Merge([]*Report{judgedCases(t, ds, 0), judgedCases(t, ds, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if merged.Cases != 2 || merged.Rules != whole.Rules || merged.Dataset != whole.Dataset || merged.Model != whole.Model {
		t.Errorf("merged %d cases, %d labels of %q by %q; want 2, %d of %q by %q",
			merged.Cases, merged.Rules, merged.Dataset, merged.Model, whole.Rules, whole.Dataset, whole.Model)
	}
	same := func(what string, a, b any) {
		t.Helper()
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Errorf("%s: merged %s\nwhole %s", what, ja, jb)
		}
	}
	for i, s := range whole.Systems {
		m := merged.Systems[i]
		same(s.Name+" overall", m.Overall, s.Overall)
		same(s.Name+" per rule", m.PerRule, s.PerRule)
		same(s.Name+" outcomes", m.Outcomes, s.Outcomes)
		if len(m.PerCase) != 2 || m.PerCase[0].Case != "a" || m.PerCase[1].Case != "b" {
			t.Fatalf("%s per case %+v, want a then b", s.Name, m.PerCase)
		}
		for j := range s.PerCase {
			same(s.Name+" case "+s.PerCase[j].Case, m.PerCase[j].Metrics, s.PerCase[j].Metrics)
		}
		if m.Cost.Calls != s.Cost.Calls || m.Cost.PromptTokens != s.Cost.PromptTokens {
			t.Errorf("%s cost %+v, want the whole run's calls and tokens %+v", s.Name, m.Cost, s.Cost)
		}
	}
	if len(merged.Margins) != 1 || merged.Margins[0].BalancedAccuracy == nil || *merged.Margins[0].BalancedAccuracy != *whole.Margins[0].BalancedAccuracy {
		t.Errorf("merged margins %+v, want the whole run's %+v", merged.Margins, whole.Margins)
	}
}

// Reports that cannot be merged are refused, the reason named.
func TestMergeRefusesWhatDoesNotAddUp(t *testing.T) {
	ds := loadTest(t)
	a, b := judgedCases(t, ds, 0), judgedCases(t, ds, 1)
	otherModel := *b
	otherModel.Model = "another-model"
	moreRuns := *b
	moreRuns.Runs = 2
	fewerSystems := *b
	fewerSystems.Systems = b.Systems[:1]
	tests := []struct {
		name    string
		reports []*Report
		want    string
	}{
		{"none", nil, "no report"},
		{"the same case twice", []*Report{a, a}, `case "a" is in report 1 and report 2`},
		{"another model", []*Report{a, &otherModel}, `report 2 judged with model "another-model"`},
		{"other runs", []*Report{a, &moreRuns}, "report 2 has 2 runs, report 1 1"},
		{"other systems", []*Report{a, &fewerSystems}, "report 2 has systems [engine], report 1 [engine baseline]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Merge(tt.reports)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Merge: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// The overrule sweep of merged reports is the whole run's; reports judged
// with different thresholds are refused.
func TestMergeSweepsTheOverruleAgain(t *testing.T) {
	ds := loadTest(t)
	judged := allCorrect()
	checked := func(below float64, cases ...int) *Report {
		t.Helper()
		part := *ds
		part.Cases = nil
		llm := &checkingLLM{holds: map[string]float64{"governing law": 0.4, "fixed number of years": 0.7, "Score the years": 0.6}}
		for _, i := range cases {
			part.Cases = append(part.Cases, ds.Cases[i])
			llm.judged = append(llm.judged, judged[i].Content)
		}
		rep, err := Run(context.Background(), &part, Options{LLM: llm, Engine: engine.Config{
			Model: "fake-model", OutputRetries: -1, Confidence: engine.ConfidenceVerify, OverrulePassesBelow: below, CallConcurrency: 1,
		}})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	whole := checked(0.5, 0, 1)
	merged, err := Merge([]*Report{checked(0.5, 0), checked(0.5, 1)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(merged.Systems[0].Overrule)
	want, _ := json.Marshal(whole.Systems[0].Overrule)
	if string(got) != string(want) {
		t.Errorf("merged sweep %s\nwhole run's %s", got, want)
	}
	if _, err := Merge([]*Report{checked(0.5, 0), checked(0.45, 1)}); err == nil || !strings.Contains(err.Error(), "overrules passes below 0.45, an earlier report below 0.5") {
		t.Errorf("reports of two thresholds merged: %v", err)
	}
}
