package eval

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/internal/llmfake"
	"rulevalidator/verdict"
)

// boolVerdict is an answered boolean verdict.
func boolVerdict(b *bool, sufficient, na bool, rationale string) *engine.Verdict {
	return &engine.Verdict{RuleID: "r", Type: verdict.Boolean, BooleanOutput: b, DataSufficiency: sufficient, NotApplicable: na, Rationale: rationale}
}

func boolLabel(want bool, insufficient bool) Label {
	return Label{RuleID: "r", Type: verdict.Boolean, Boolean: &want, Insufficient: insufficient}
}

// Balanced accuracy is the mean of the recall of each class: a judge that
// answers one class every time scores one half however the labels are
// spread, and a verdict with no boolean is wrong for either class.
func TestBalancedAccuracy(t *testing.T) {
	yes, no := ptr(true), ptr(false)
	type pair struct {
		want bool
		got  *engine.Verdict // nil: unanswered
	}
	tests := []struct {
		name                      string
		pairs                     []pair
		passRecall, failRecall    *float64
		balanced, plainBooleanAcc *float64
	}{
		{"all right", []pair{{true, boolVerdict(yes, true, false, "")}, {false, boolVerdict(no, true, false, "")}},
			ptr(1.0), ptr(1.0), ptr(1.0), ptr(1.0)},
		{"always pass on one pass and three fails", []pair{
			{true, boolVerdict(yes, true, false, "")}, {false, boolVerdict(yes, true, false, "")},
			{false, boolVerdict(yes, true, false, "")}, {false, boolVerdict(yes, true, false, "")}},
			ptr(1.0), ptr(0.0), ptr(0.5), ptr(0.25)},
		{"always fail on one pass and three fails", []pair{
			{true, boolVerdict(no, true, false, "")}, {false, boolVerdict(no, true, false, "")},
			{false, boolVerdict(no, true, false, "")}, {false, boolVerdict(no, true, false, "")}},
			ptr(0.0), ptr(1.0), ptr(0.5), ptr(0.75)},
		{"unanswered counts wrong in both classes", []pair{
			{true, nil}, {true, boolVerdict(yes, true, false, "")}, {false, nil}, {false, boolVerdict(no, true, false, "")}},
			ptr(0.5), ptr(0.5), ptr(0.5), ptr(0.5)},
		{"no boolean because the material does not say reads as fail", []pair{
			{true, boolVerdict(yes, true, false, "")}, {false, boolVerdict(nil, false, false, "")}, {false, boolVerdict(nil, true, true, "")}},
			ptr(1.0), ptr(1.0), ptr(1.0), ptr(1.0)},
		{"no boolean, the material said sufficient: no answer", []pair{
			{true, boolVerdict(yes, true, false, "")}, {false, boolVerdict(nil, true, false, "")}},
			ptr(1.0), ptr(0.0), ptr(0.5), ptr(0.5)},
		{"one class only: no balanced accuracy", []pair{{false, boolVerdict(no, true, false, "")}},
			nil, ptr(1.0), nil, ptr(1.0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var outs []Outcome
			for _, p := range tt.pairs {
				outs = append(outs, scoreVerdict("c", 1, boolLabel(p.want, false), p.got))
			}
			b := summarise(outs).Boolean
			for _, f := range []struct {
				name      string
				got, want *float64
			}{{"pass recall", b.PassRecall, tt.passRecall}, {"fail recall", b.FailRecall, tt.failRecall},
				{"balanced accuracy", b.BalancedAccuracy, tt.balanced}, {"boolean accuracy", b.Accuracy, tt.plainBooleanAcc}} {
				switch {
				case f.want == nil && f.got != nil:
					t.Errorf("%s = %v, want none", f.name, *f.got)
				case f.want != nil:
					wantRatio(t, f.name, f.got, *f.want)
				}
			}
		})
	}
}

// Where the material does not say (data_sufficiency false in the label), a
// verdict says so with data_sufficiency false or not applicable; either is
// counted, and neither flag makes the verdict wrong there.
func TestNotMentionedSaid(t *testing.T) {
	yes, no := ptr(true), ptr(false)
	tests := []struct {
		name         string
		label        Label
		got          *engine.Verdict
		says, counts bool // SaysNotMentioned; counted as labelled and said
		correct      bool
	}{
		{"insufficient data said", boolLabel(false, true), boolVerdict(no, false, false, ""), true, true, true},
		{"not applicable said", boolLabel(false, true), boolVerdict(nil, true, true, ""), true, true, true},
		{"not applicable with a false", boolLabel(false, true), boolVerdict(no, true, true, ""), true, true, true},
		{"a plain false says nothing", boolLabel(false, true), boolVerdict(no, true, false, ""), false, false, true},
		{"a pass where nothing is said", boolLabel(false, true), boolVerdict(yes, true, false, ""), false, false, false},
		{"insufficient data with a pass is still wrong", boolLabel(false, true), boolVerdict(yes, false, false, ""), true, true, false},
		{"unanswered", boolLabel(false, true), nil, false, false, false},
		{"said where the material does say", boolLabel(false, false), boolVerdict(no, false, false, ""), true, false, true},
		{"not applicable where the material does say is wrong", boolLabel(false, false), boolVerdict(no, true, true, ""), true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := scoreVerdict("c", 1, tt.label, tt.got)
			if o.SaysNotMentioned() != tt.says || o.Correct != tt.correct {
				t.Errorf("says %t, correct %t; want %t, %t", o.SaysNotMentioned(), o.Correct, tt.says, tt.correct)
			}
			if o.ExpectedDataSufficiency == tt.label.Insufficient {
				t.Errorf("expected data sufficiency %t for a label insufficient %t", o.ExpectedDataSufficiency, tt.label.Insufficient)
			}
			m := summarise([]Outcome{o}).NotMentioned
			if said := m.Said == 1; said != tt.counts {
				t.Errorf("counted as said: %t, want %t (%+v)", said, tt.counts, m)
			}
		})
	}
	// Over a set: recall over the labels that do not say, precision over
	// the verdicts that said so.
	outs := []Outcome{
		scoreVerdict("c", 1, boolLabel(false, true), boolVerdict(no, false, false, "")),
		scoreVerdict("c", 1, boolLabel(false, true), boolVerdict(no, true, false, "")),
		scoreVerdict("c", 1, boolLabel(false, true), nil),
		scoreVerdict("c", 1, boolLabel(false, false), boolVerdict(no, false, false, "")),
		scoreVerdict("c", 1, boolLabel(true, false), boolVerdict(yes, true, false, "")),
	}
	m := summarise(outs).NotMentioned
	if m.Labelled != 3 || m.Said != 1 || m.SaidTotal != 2 {
		t.Errorf("not mentioned %+v, want 1 said of 3 labelled, 2 said in all", m)
	}
	wantRatio(t, "recall", m.Recall, 1.0/3)
	wantRatio(t, "precision", m.Precision, 0.5)
}

func TestRestatesRule(t *testing.T) {
	rule := engine.Rule{RuleText: "The agreement provides the following: Receiving Party shall not reverse engineer any objects which embody Disclosing Party's Confidential Information."}
	tests := []struct {
		rationale string
		want      bool
	}{
		{"Receiving Party shall not reverse engineer any objects.", true},
		{"RECEIVING PARTY SHALL NOT REVERSE-ENGINEER objects!", true},
		{"The agreement provides that the Receiving Party shall not reverse engineer.", true},
		// 8 of 10 words are the rule's: the threshold itself restates.
		{"Receiving Party shall not reverse engineer any objects, section four.", true},
		// 7 of 10 do not.
		{"Section four: Receiving Party shall not reverse engineer any prototypes.", false},
		{"Section 4 forbids decompiling the software the discloser hands over.", false},
		{"", false},
		{"...", false},
	}
	ruleSet := ruleWords(rule)
	for _, tt := range tests {
		if got := restatesRule(tt.rationale, ruleSet); got != tt.want {
			t.Errorf("restatesRule(%q) = %t, want %t", tt.rationale, got, tt.want)
		}
	}
	// The not-applicable text is the rule's too.
	alt := ruleWords(engine.Rule{RuleText: "The term is stated.", NotApplicableText: "No standstill at all."})
	if !restatesRule("No standstill.", alt) {
		t.Error("a rationale made of the alternate's words does not restate the rule")
	}
	if got := words("Party's 3-year term"); strings.Join(got, " ") != "party s 3 year term" {
		t.Errorf("words = %q", got)
	}
}

func TestEndsSentence(t *testing.T) {
	tests := []struct {
		text string
		want bool
	}{
		{"It says so.", true},
		{"Does it?", true},
		{"It does!", true},
		{"It says \"so.\"", true},
		{"It says so (section 4).", true},
		{"It says so.)  \n", true},
		{"It says so…", true},
		{"It says so", false},
		{"It says so,", false},
		{"It says: ", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := endsSentence(tt.text); got != tt.want {
			t.Errorf("endsSentence(%q) = %t, want %t", tt.text, got, tt.want)
		}
	}
}

// Rationales are judged over the answered verdicts that have one; those
// without are counted apart.
func TestRationaleMetrics(t *testing.T) {
	lab := boolLabel(true, false)
	lab.RuleWords = ruleWords(engine.Rule{RuleText: "The agreement names its governing law."})
	yes := ptr(true)
	outs := []Outcome{
		scoreVerdict("c", 1, lab, boolVerdict(yes, true, false, "The agreement names its governing law.")),
		scoreVerdict("c", 1, lab, boolVerdict(yes, true, false, "Section 9 picks the laws of Ohio")),
		scoreVerdict("c", 1, lab, boolVerdict(yes, true, false, "Section 9 picks the laws of Ohio.")),
		scoreVerdict("c", 1, lab, boolVerdict(yes, true, false, "  ")),
		scoreVerdict("c", 1, lab, nil),
	}
	m := summarise(outs).Rationales
	if m.Rationales != 3 || m.Empty != 1 || m.Restating != 1 || m.Unended != 1 {
		t.Errorf("rationales %+v, want 3 with 1 restating and 1 unended, 1 empty", m)
	}
	wantRatio(t, "restating share", m.RestatingShare, 1.0/3)
	wantRatio(t, "unended share", m.UnendedShare, 1.0/3)
	if !outs[0].RationaleRestates || !outs[1].RationaleUnended || outs[3].RationaleUnended {
		t.Errorf("outcome flags: %+v", outs[:4])
	}
}

// Evidence overlapping the gold span is counted per verdict: of the
// verdicts whose label has gold spans (answered or not), those with a quote
// overlapping one.
func TestVerdictsOverlappingGold(t *testing.T) {
	gold := []Span{{Document: "d", Page: 1, Start: 10, End: 20}, {Document: "d", Page: 1, Start: 40, End: 50}}
	at := func(start, end int) verdict.Evidence {
		return verdict.Evidence{SourceOrigin: "d", SourcePageNumber: 1, CitedPageNumber: 1, Anchored: true, StartOffset: ptr(start), EndOffset: ptr(end)}
	}
	withGold := boolLabel(true, false)
	withGold.Gold = gold
	v := func(evs ...verdict.Evidence) *engine.Verdict {
		x := boolVerdict(ptr(true), true, false, "")
		x.Evidences = evs
		return x
	}
	outs := []Outcome{
		scoreVerdict("c", 1, withGold, v(at(12, 15))),             // hit
		scoreVerdict("c", 1, withGold, v(at(0, 5), at(45, 60))),   // one of two quotes hits
		scoreVerdict("c", 1, withGold, v(at(25, 35))),             // between the spans
		scoreVerdict("c", 1, withGold, v()),                       // no quote
		scoreVerdict("c", 1, withGold, nil),                       // unanswered
		scoreVerdict("c", 1, boolLabel(false, true), v(at(0, 5))), // no gold: not counted
	}
	ev := summarise(outs).Evidence
	if ev.WithGold != 5 || ev.WithGoldHit != 2 {
		t.Errorf("%d of %d verdicts with gold overlapping it, want 2 of 5", ev.WithGoldHit, ev.WithGold)
	}
	wantRatio(t, "verdicts overlapping gold", ev.VerdictsOverlapping, 0.4)
}

func TestNewSeries(t *testing.T) {
	if s := newSeries([]*float64{ptr(0.5), nil}); s != nil {
		t.Errorf("a run with nothing counted: %+v, want none", s)
	}
	s := newSeries([]*float64{ptr(0.5), ptr(0.7), ptr(0.6)})
	if s.Min != 0.5 || s.Max != 0.7 || math.Abs(s.Mean-0.6) > 1e-9 || math.Abs(s.SampleStdDev-0.1) > 1e-9 {
		t.Errorf("series %+v, want 0.5–0.7, mean 0.6, sample sd 0.1", s)
	}
	if one := newSeries([]*float64{ptr(0.5)}); one.SampleStdDev != 0 {
		t.Errorf("one run: sample sd %v, want 0", one.SampleStdDev)
	}
}

// rubricAnswers are the baseline's three answers to a case of the test
// dataset: pass for law and term, score for years.
func rubricAnswers(law, term bool, years int) []llmfake.Reply {
	return []llmfake.Reply{
		rubricReply(`{"reason": "Clause 1.", "pass": ` + boolJSON(law) + `, "score": 1}`),
		rubricReply(`{"reason": "Clause 2.", "pass": ` + boolJSON(term) + `, "score": 1}`),
		rubricReply(`{"reason": "Clause 3.", "pass": true, "score": ` + string(rune('0'+years)) + `}`),
	}
}

func boolJSON(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// marginRuns scripts runs of the test dataset, the engine always right and
// the baseline answering each run as given: law and term of case a (both
// labelled pass), then of case b (both labelled fail).
func marginRuns(t *testing.T, baseline ...[4]bool) *Report {
	t.Helper()
	var replies []llmfake.Reply
	for _, b := range baseline {
		engine := allCorrect()
		replies = append(replies, engine[0])
		replies = append(replies, rubricAnswers(b[0], b[1], 3)...)
		replies = append(replies, engine[1])
		replies = append(replies, rubricAnswers(b[2], b[3], 0)...)
	}
	_, llm := newFake(t, replies...)
	return run(t, loadTest(t), llm, len(baseline), BaselinePerRule)
}

// The engine's margin over the baseline is the difference of their
// balanced accuracies, with its spread over runs and whether the runs can
// tell it from none.
func TestMarginOverBaseline(t *testing.T) {
	allPass, right := [4]bool{true, true, true, true}, [4]bool{true, true, false, false}
	tests := []struct {
		name     string
		runs     [][4]bool
		margin   float64
		perRun   []float64
		within   *bool
		baseline float64
	}{
		{"one run", [][4]bool{allPass}, 0.5, nil, nil, 0.5},
		{"the same margin every run", [][4]bool{allPass, allPass}, 0.5, []float64{0.5, 0.5}, ptr(false), 0.5},
		{"a margin the runs cannot tell from none", [][4]bool{allPass, right}, 0.25, []float64{0.5, 0}, ptr(true), 0.75},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := marginRuns(t, tt.runs...)
			wantRatio(t, "baseline balanced accuracy", rep.System(SystemBaseline).Overall.Boolean.BalancedAccuracy, tt.baseline)
			if len(rep.Margins) != 1 || rep.Margins[0].System != SystemEngine {
				t.Fatalf("margins %+v, want the engine's", rep.Margins)
			}
			m := rep.Margins[0]
			wantRatio(t, "margin", m.BalancedAccuracy, tt.margin)
			if m.WallRatio == nil || *m.WallRatio <= 0 {
				t.Errorf("wall ratio %v, want one", m.WallRatio)
			}
			if tt.perRun == nil {
				if m.Runs != nil || m.WithinSpread != nil || m.WallRatioRuns != nil {
					t.Errorf("one run has no spread: %+v", m)
				}
				return
			}
			if m.Runs == nil || len(m.Runs.Runs) != len(tt.perRun) || m.WallRatioRuns == nil || len(m.WallRatioRuns.Runs) != len(tt.perRun) {
				t.Fatalf("margin runs %+v, wall ratio runs %+v; want %d runs", m.Runs, m.WallRatioRuns, len(tt.perRun))
			}
			for i, want := range tt.perRun {
				if math.Abs(m.Runs.Runs[i]-want) > 1e-9 {
					t.Errorf("run %d margin %v, want %v", i+1, m.Runs.Runs[i], want)
				}
			}
			if m.WithinSpread == nil || *m.WithinSpread != *tt.within {
				t.Errorf("within spread %v, want %t", m.WithinSpread, *tt.within)
			}
			sp := rep.System(SystemEngine).Spread
			if sp == nil || sp.BalancedAccuracy == nil || sp.WallSeconds == nil || len(sp.WallSeconds.Runs) != len(tt.perRun) {
				t.Errorf("engine spread %+v, want balanced accuracy and wall time run by run", sp)
			}
		})
	}
	// Without a baseline there is no margin.
	_, llm := newFake(t, allCorrect()...)
	if rep := run(t, loadTest(t), llm, 1, ""); rep.Margins != nil {
		t.Errorf("margins without a baseline: %+v", rep.Margins)
	}
}

// The new figures are in the table and in the JSON.
func TestHeadlineFiguresReported(t *testing.T) {
	files := testFiles()
	// Case b's law clause is not in the agreement: label it so.
	files["dataset.yaml"] = strings.Replace(files["dataset.yaml"], "      - rule_id: law\n        boolean_output: false\n",
		"      - rule_id: law\n        boolean_output: false\n        data_sufficiency: false\n", 1)
	ds, err := Load(writeDataset(t, files))
	if err != nil {
		t.Fatal(err)
	}
	if l := ds.Cases[1].Labels[0]; !l.Insufficient || len(l.RuleWords) == 0 {
		t.Fatalf("label %+v, want insufficient with the rule's words", l)
	}
	allPass, right := [4]bool{true, true, true, true}, [4]bool{true, true, false, false}
	var replies []llmfake.Reply
	for _, b := range [][4]bool{allPass, right} {
		engine := allCorrect()
		replies = append(replies, engine[0], rubricAnswers(b[0], b[1], 3)[0], rubricAnswers(b[0], b[1], 3)[1], rubricAnswers(b[0], b[1], 3)[2])
		replies = append(replies, engine[1])
		replies = append(replies, rubricAnswers(b[2], b[3], 0)...)
	}
	_, llm := newFake(t, replies...)
	rep := run(t, ds, llm, 2, BaselinePerRule)
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"boolean balanced (pass, fail recall)", "100.0% (100.0%, 100.0%)",
		"not mentioned said", "0.0% (0/2)", // the scripted engine says data_sufficiency true
		"rationales restating the rule", "not ending a sentence",
		"verdicts with gold overlapping it", "100.0% (4/4)",
		"balanced accuracy min–max (sample sd)", "not mentioned said min–max (sample sd)", "wall time min–max (sample sd)",
		"engine over the baseline: balanced accuracy +25.0 pp (runs +50.0, +0.0 pp; sample sd 35.4 pp: within the spread",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"balanced_accuracy":`, `"not_mentioned":{"labelled":2`, `"rationales":{`, `"verdicts_overlapping_gold":`,
		`"margins_over_baseline":[{"system":"engine"`, `"within_spread":true`, `"wall_ratio":`, `"wall_seconds":{"runs":[`, `"expected_data_sufficiency":false`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}

// The baseline asks as promptfoo's llm-rubric does: one call per rule, at
// temperature 0, promptfoo's grading instruction as the system message, the
// input as <Output> and the rule as <Rubric>.
func TestBaselineAsksAsPromptfooDoes(t *testing.T) {
	ds := loadTest(t)
	engine := allCorrect()
	replies := []llmfake.Reply{engine[0]}
	replies = append(replies, rubricAnswers(true, true, 3)...)
	replies = append(replies, engine[1])
	replies = append(replies, rubricAnswers(false, false, 0)...)
	fake, llm := newFake(t, replies...)
	run(t, ds, llm, 1, BaselinePerRule)
	reqs := fake.Requests()
	if len(reqs) != 8 {
		t.Fatalf("%d calls, want 2 of the engine and 3 of the baseline per case", len(reqs))
	}
	rules := ds.Cases[0].Ruleset.AllRules()
	for i, req := range []llmfake.Call{reqs[1], reqs[2], reqs[3]} {
		system, user := req.Messages[0].Content, req.Messages[1].Content
		if !strings.HasPrefix(system, "You are grading output according to a user-specified rubric. If the statement in the rubric is true, then the output passes the test. You respond with a JSON object with this structure: {reason: string, pass: boolean, score: number}\n\nExamples:\n\n<Output>Hello world</Output>\n<Rubric>Content contains a greeting</Rubric>\n") {
			t.Errorf("call %d: the system message is not promptfoo's grading prompt:\n%s", i, system)
		}
		if req.Temperature == nil || *req.Temperature != 0 {
			t.Errorf("call %d: temperature %v, want 0 sent", i, req.Temperature)
		}
		if !strings.HasPrefix(user, "<Output>\n<------- Start of Document: a.txt") {
			t.Errorf("call %d: the material is not the <Output>:\n%s", i, user)
		}
		rubric := "\n</Output>\n<Rubric>\n" + rules[i].RuleText + "\n</Rubric>"
		if !strings.Contains(user, rubric) {
			t.Errorf("call %d: the user message lacks %q:\n%s", i, rubric, user)
		}
	}
	if user := reqs[1].Messages[1].Content; !strings.HasSuffix(user, "</Rubric>") {
		t.Errorf("a boolean rule's rubric is the rule alone:\n%s", user)
	}
	if user := reqs[3].Messages[1].Content; !strings.Contains(user, "exactly one of: 0, 1, 2, 3, 4, 5") || !strings.Contains(user, `"not_applicable"`) {
		t.Errorf("a numerical rule with an alternate names its scores and the alternate:\n%s", user)
	}
}

func TestPurposeSummary(t *testing.T) {
	for _, tc := range []struct {
		name string
		by   map[engine.CallPurpose]PurposeCost
		want string
	}{
		{"none", nil, "-"},
		{"in the order calls come", map[engine.CallPurpose]PurposeCost{
			engine.PurposeCheck:     {Calls: 17, Time: 97 * time.Second},
			engine.PurposeJudge:     {Calls: 17, Time: 176400 * time.Millisecond},
			engine.PurposeRationale: {Calls: 4, Time: 52 * time.Second},
		}, "judge 17 (2m56s), rationale 4 (52s), check 17 (1m37s)"},
		{"an unknown purpose last, an empty one as other", map[engine.CallPurpose]PurposeCost{
			"":                  {Calls: 1, Time: time.Second},
			"triage":            {Calls: 2, Time: 2 * time.Second},
			engine.PurposeJudge: {Calls: 3, Time: 3 * time.Second},
		}, "judge 3 (3s), other 1 (1s), triage 2 (2s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := purposeSummary(tc.by); got != tc.want {
				t.Errorf("purposeSummary = %q, want %q", got, tc.want)
			}
		})
	}
}
