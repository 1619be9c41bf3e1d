package reviews

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

func TestCheck(t *testing.T) {
	boolean := schemas.VerdictEvent{RuleID: "signed", RuleType: verdict.Boolean, BooleanOutput: new(true)}
	numerical := schemas.VerdictEvent{RuleID: "clarity", RuleType: verdict.Numerical, NumericalOutput: new(2), AllowedScores: []int{0, 2, 4}}
	known := func(id string) bool { return id == "d1p1s1" }
	ok := func(f func(*Review)) Review {
		r := Review{ReviewID: "rv-1", RuleID: "signed", Decision: Override, BooleanOutput: new(false)}
		f(&r)
		return r
	}
	for _, tc := range []struct {
		name    string
		r       Review
		v       schemas.VerdictEvent
		field   string // "" for a good review
		problem string
	}{
		{"override boolean", ok(func(*Review) {}), boolean, "", ""},
		{"confirm", ok(func(r *Review) { r.Decision, r.BooleanOutput = Confirm, nil }), boolean, "", ""},
		{"override to not applicable", ok(func(r *Review) { r.BooleanOutput, r.NotApplicable = nil, true }), boolean, "", ""},
		{"a passage of the material", ok(func(r *Review) { r.PassageIDs = []string{"d1p1s1"} }), boolean, "", ""},
		{"allowed score", ok(func(r *Review) { r.RuleID, r.BooleanOutput, r.NumericalOutput = "clarity", nil, new(4) }), numerical, "", ""},
		{"no review id", ok(func(r *Review) { r.ReviewID = "" }), boolean, "review_id", "missing"},
		{"review id with a slash", ok(func(r *Review) { r.ReviewID = "a/b" }), boolean, "review_id", "without '/'"},
		{"long review id", ok(func(r *Review) { r.ReviewID = strings.Repeat("x", 129) }), boolean, "review_id", "too long"},
		{"another rule", ok(func(r *Review) { r.RuleID = "other" }), boolean, "rule_id", `no rule "other"`},
		{"no decision", ok(func(r *Review) { r.Decision = "" }), boolean, "decision", "missing"},
		{"unknown decision", ok(func(r *Review) { r.Decision = "approve" }), boolean, "decision", `"approve" is not`},
		{"confirm with an output", ok(func(r *Review) { r.Decision = Confirm }), boolean, "boolean_output", "a confirm takes no boolean_output"},
		{"override without an output", ok(func(r *Review) { r.BooleanOutput = nil }), boolean, "boolean_output", `rule "signed" is boolean`},
		{"score on a boolean rule", ok(func(r *Review) { r.BooleanOutput, r.NumericalOutput = nil, new(1) }), boolean, "numerical_output", "is boolean"},
		{"score outside the set", ok(func(r *Review) { r.RuleID, r.BooleanOutput, r.NumericalOutput = "clarity", nil, new(3) }), numerical,
			"numerical_output", `3 is not an allowed score of rule "clarity" (allowed: 0, 2, 4)`},
		{"boolean on a numerical rule", ok(func(r *Review) { r.RuleID = "clarity" }), numerical, "boolean_output", "is numerical"},
		{"long note", ok(func(r *Review) { r.Note = strings.Repeat("é", MaxNoteChars+1) }), boolean, "note", "too long: 4001 characters"},
		{"unknown passage", ok(func(r *Review) { r.PassageIDs = []string{"d1p1s1", "d9p9s9"} }), boolean, "passage_ids[1]", `"d9p9s9" is not a passage`},
		{"too many passages", ok(func(r *Review) { r.PassageIDs = make([]string, MaxPassageIDs+1) }), boolean, "passage_ids", "too many"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.r, tc.v, known)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Problem, tc.problem) {
				t.Fatalf("Check = %v, want a problem with %s containing %q", err, tc.field, tc.problem)
			}
		})
	}
}

func TestQueueOrderAndPages(t *testing.T) {
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	items := []Item{
		{RequestID: "r1", RuleID: "a", RulesetID: "x", Confidence: new(0.9), JudgedAt: at(0)},
		{RequestID: "r1", RuleID: "b", RulesetID: "x", JudgedAt: at(0)},
		{RequestID: "r2", RuleID: "a", RulesetID: "y", Confidence: new(0.1), JudgedAt: at(1)},
		{RequestID: "r3", RuleID: "a", RulesetID: "x", Confidence: new(0.5), JudgedAt: at(2)},
		{RequestID: "r4", RuleID: "a", RulesetID: "x", Confidence: new(0.5), JudgedAt: at(1)},
		{RequestID: "r5", RuleID: "c", RulesetID: "x", JudgedAt: at(-5)},
	}
	ids := func(p Page) string {
		var out []string
		for _, it := range p.Items {
			out = append(out, it.RequestID+"/"+it.RuleID)
		}
		return strings.Join(out, " ")
	}
	all, err := Queue(items, QueueQuery{})
	if err != nil || ids(all) != "r2/a r4/a r3/a r1/a r5/c r1/b" || all.Next != "" {
		t.Fatalf("Queue = %q next %q, %v", ids(all), all.Next, err)
	}
	var pages []string
	q := QueueQuery{Limit: 4}
	for {
		p, err := Queue(items, q)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, ids(p))
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	if got := fmt.Sprint(pages); got != "[r2/a r4/a r3/a r1/a r5/c r1/b]" {
		t.Errorf("pages = %s", got)
	}
	if p, _ := Queue(items, QueueQuery{RulesetID: "x", RuleID: "a"}); ids(p) != "r4/a r3/a r1/a" {
		t.Errorf("filtered = %q", ids(p))
	}
	if _, err := Queue(items, QueueQuery{Cursor: "not a cursor!"}); !errors.Is(err, ErrBadCursor) {
		t.Errorf("bad cursor: %v", err)
	}
}

func TestAgreement(t *testing.T) {
	var all [][]Review
	// 20 reviews of rule a: the model says pass each time; 15 confirms, 5 overrides to fail.
	for i := range 20 {
		d := Confirm
		if i < 5 {
			d = Override
		}
		all = append(all, []Review{review("rv", fmt.Sprintf("r%d", i), "a", d)})
	}
	// Rule b: 3 reviews; the first superseded by a confirm.
	all = append(all, []Review{review("1", "s", "b", Override), review("2", "s", "b", Confirm)})
	got := Agreement(all)
	if len(got) != 2 || got[0].RuleID != "a" || got[1].RuleID != "b" {
		t.Fatalf("Agreement = %+v", got)
	}
	a := got[0]
	if a.Reviews != 20 || a.Agreed != 15 || a.Accuracy == nil || *a.Accuracy != 0.75 {
		t.Errorf("rule a = %+v", a)
	}
	// The model says pass always: chance agreement is 15/20, kappa 0.
	if a.Kappa == nil || *a.Kappa != 0 {
		t.Errorf("rule a kappa = %v, want 0", a.Kappa)
	}
	if b := got[1]; b.Reviews != 1 || b.Agreed != 1 || b.Accuracy != nil || b.Kappa != nil {
		t.Errorf("rule b (below %d reviews) = %+v", MinAgreementReviews, b)
	}
}

func TestAgreementKappa(t *testing.T) {
	// Model and reviewers: 10 pass/pass, 5 fail/fail, 3 pass/fail, 2 fail/pass.
	var all [][]Review
	add := func(n int, model bool, final bool) {
		for range n {
			r := review("rv", fmt.Sprintf("r%d", len(all)), "a", Override)
			r.ModelVerdict = ModelVerdict{Outcome: map[bool]engine.Outcome{true: engine.OutcomePass, false: engine.OutcomeFail}[model]}
			r.BooleanOutput = &final
			all = append(all, []Review{r})
		}
	}
	add(10, true, true)
	add(5, false, false)
	add(3, true, false)
	add(2, false, true)
	a := Agreement(all)[0]
	// po = 0.75; pe = 0.65*0.6 + 0.35*0.4 = 0.53; kappa = 0.22/0.47.
	if a.Kappa == nil || fmt.Sprintf("%.4f", *a.Kappa) != fmt.Sprintf("%.4f", 0.22/0.47) {
		t.Errorf("kappa = %v, want %.4f", a.Kappa, 0.22/0.47)
	}
}

func TestFinalAggregates(t *testing.T) {
	summary := schemas.SummaryEvent{Aggregate: verdict.Aggregate{
		Boolean:   &verdict.BooleanAggregate{Mode: "all"},
		Numerical: &verdict.NumericalAggregate{Mode: "weighted_mean"},
	}}
	verdicts := []schemas.VerdictEvent{
		{RuleID: "signed", RuleType: verdict.Boolean, DataSufficiency: true, BooleanOutput: new(true)},
		{RuleID: "insured", RuleType: verdict.Boolean, DataSufficiency: true, BooleanOutput: new(true)},
		{RuleID: "clarity", RuleType: verdict.Numerical, DataSufficiency: false, NumericalOutput: new(2), RuleWeight: new(3.0)},
		{RuleID: "risk", RuleType: verdict.Numerical, DataSufficiency: true, NumericalOutput: new(4)},
	}
	model := FinalAggregates(summary, verdicts, nil)
	if !model.Boolean.Passed || model.Numerical.Counted != 1 || *model.Numerical.Score != 4 {
		t.Fatalf("without reviews = %+v %+v", *model.Boolean, *model.Numerical)
	}
	all := []Review{
		{RuleID: "insured", Decision: Override, BooleanOutput: new(false)},
		{RuleID: "clarity", Decision: Override, NumericalOutput: new(0)},
		{RuleID: "signed", Decision: Confirm},
	}
	final := FinalAggregates(summary, verdicts, all)
	// insured now fails; clarity (weight 3) is counted at 0: (3*0 + 1*4)/4.
	if final.Boolean.Passed || final.Boolean.PassedCount != 1 || final.Numerical.Counted != 2 || *final.Numerical.Score != 1 {
		t.Errorf("final = %+v %+v", *final.Boolean, *final.Numerical)
	}
	if f := FinalOf(verdicts[1], Current(all, "insured")); f.Source != FromReview || f.Outcome != engine.OutcomeFail || !f.Reviewed {
		t.Errorf("final of insured = %+v", f)
	}
	if f := FinalOf(verdicts[0], Current(all, "signed")); f.Source != FromModel || f.Outcome != engine.OutcomePass || !f.Reviewed {
		t.Errorf("final of signed = %+v", f)
	}
}
