package reviewexport

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/eval"
	"rulevalidator/internal/s3test"
	"rulevalidator/jobs"
	"rulevalidator/judging"
	"rulevalidator/reviews"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
	"rulevalidator/verdictcache"
)

const exportRuleset = `{"id": "nda", "rules": [
	{"rule_id": "mutual", "rule_text": "Are both parties bound?"},
	{"rule_id": "term", "type": "numerical", "rule_text": "How many years does confidentiality last?", "numerical_rule_config": {"possible_scores": [0, 1, 2, 3, 5]}},
	{"rule_id": "law", "rule_text": "Is the governing law named?"}]}`

// storeJudged stores a validation as the serve pipeline does: the job, what
// it judged, and its verdicts needing review.
func storeJudged(t *testing.T, ctx context.Context, results reviews.ResultStore, requestID string, completed time.Time) {
	t.Helper()
	rs, err := engine.ParseRuleset([]byte(exportRuleset))
	if err != nil {
		t.Fatal(err)
	}
	in := &engine.Inputs{PrimaryDocs: []engine.Document{{Name: requestID + ".pdf", Pages: []string{
		"This agreement binds the Recipient only. The Discloser has no duty.",
		"Confidentiality lasts two years from the date hereof. This agreement is governed by the laws of Ohio."}}}}
	pass, three := true, 3
	res := &engine.Result{RulesetID: rs.ID, Model: "scripted", Rules: []engine.Verdict{
		{RuleID: "mutual", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: &pass, Confidence: new(0.4)},
		{RuleID: "term", Type: verdict.Numerical, DataSufficiency: true, NumericalOutput: &three, Confidence: new(0.6)},
		{RuleID: "law", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: &pass, Confidence: new(0.99)},
	}}
	inline := exportRuleset
	req := &schemas.Request{RequestID: requestID, TenantID: "acme", InlineRuleset: &inline}
	out := judging.Events{
		Verdicts: judging.NewVerdictEvents(req, rs, res, "", completed.Add(-time.Second), completed),
		Summary:  judging.NewSummary(req, rs, res, "", nil, completed.Add(-time.Second), completed),
		Material: in, Ruleset: rs,
	}
	if err := results.StoreResult(ctx, req, out); err != nil {
		t.Fatal(err)
	}
}

// oracle answers every call with the labels of the one case whose document
// the call shows: the perfect judge.
type oracle struct{ ds *eval.Dataset }

func (o oracle) Chat(_ context.Context, req engine.ChatRequest) (engine.ChatResponse, error) {
	user := req.Messages[len(req.Messages)-1].Content
	var rules []map[string]any
	for _, c := range o.ds.Cases {
		if !strings.Contains(user, c.Inputs.PrimaryDocs[0].Name) {
			continue
		}
		for _, l := range c.Labels {
			r := map[string]any{"rule_id": l.RuleID, "data_sufficiency": true, "rationale": "The labelled answer, as the reviewer gave it.",
				"not_applicable": l.NotApplicable, "evidences": []any{}}
			if l.Boolean != nil {
				r["boolean_output"] = *l.Boolean
			}
			if l.Numerical != nil {
				r["numerical_output"] = *l.Numerical
			}
			rules = append(rules, r)
		}
	}
	content, _ := json.Marshal(map[string]any{"rules": rules})
	return engine.ChatResponse{Content: string(content), Format: req.Format, Model: req.Model, Usage: verdict.Usage{LLMCalls: 1}}, nil
}

// TestExportLoadsInEvalAndAnOracleScoresAll: reviewed validations exported
// from object storage make a dataset eval loads unchanged, labelled with the
// final outcomes and the reviewers' passages as gold evidence, on which a
// judge answering the labels scores 100%.
func TestExportLoadsInEvalAndAnOracleScoresAll(t *testing.T) {
	ctx := context.Background()
	objects := s3test.Store(t)
	store, err := reviews.NewObjectStore(objects, reviews.ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	jobStore, err := jobs.NewObjectStore(objects, jobs.ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	results := reviews.ResultStore{Results: jobStore, Reviews: store}
	day := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	storeJudged(t, ctx, results, "req:1", day)
	storeJudged(t, ctx, results, "req-2", day)
	storeJudged(t, ctx, results, "req-old", day.AddDate(0, -2, 0))
	storeJudged(t, ctx, results, "req-unreviewed", day)
	add := func(r reviews.Review) {
		t.Helper()
		r.ReviewedAt, r.Reviewer = day.Add(time.Hour), "alice"
		if _, _, err := store.Add(ctx, "acme", r); err != nil {
			t.Fatal(err)
		}
	}
	no, two := false, 2
	// req:1: mutual overridden to fail, resting on page 1; term overridden to 2, on page 2.
	add(reviews.Review{ReviewID: "a", RequestID: "req:1", RuleID: "mutual", Decision: reviews.Override, BooleanOutput: &no, PassageIDs: []string{"d1p1s1"}})
	add(reviews.Review{ReviewID: "b", RequestID: "req:1", RuleID: "term", Decision: reviews.Override, NumericalOutput: &two, PassageIDs: []string{"d1p2s1"}})
	// req-2: law confirmed.
	add(reviews.Review{ReviewID: "c", RequestID: "req-2", RuleID: "law", Decision: reviews.Confirm})
	add(reviews.Review{ReviewID: "d", RequestID: "req-old", RuleID: "law", Decision: reviews.Confirm})

	dir := t.TempDir() + "/dataset"
	got, err := Export(ctx, store, jobStore, Config{Tenant: "acme", Since: day.AddDate(0, 0, -7), RulesetID: "nda", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got.Cases != 2 {
		t.Fatalf("exported %d cases (skipped %v), want 2", got.Cases, got.Skipped)
	}
	ds, err := eval.Load(dir)
	if err != nil {
		t.Fatalf("eval does not load the export: %v", err)
	}
	byID := map[string]*eval.Case{}
	for _, c := range ds.Cases {
		byID[c.ID] = c
	}
	first := byID["req-1"]
	if first == nil || len(ds.Cases) != 2 {
		t.Fatalf("cases = %v", byID)
	}
	mutual, term, law := first.Labels[0], first.Labels[1], first.Labels[2]
	if *mutual.Boolean || len(mutual.Gold) != 1 || mutual.Gold[0].Page != 1 || *term.Numerical != 2 || term.Gold[0].Page != 2 || !*law.Boolean || len(law.Gold) != 0 {
		t.Errorf("labels of req-1 = %+v", first.Labels)
	}
	if _, err := Export(ctx, store, jobStore, Config{Tenant: "acme", Dir: dir}); err == nil {
		t.Error("an export over a dataset was accepted")
	}
	if _, err := Export(ctx, store, jobStore, Config{Tenant: "globex", Dir: t.TempDir()}); err == nil {
		t.Error("another tenant's export found something")
	}

	rep, err := eval.Run(ctx, ds, eval.Options{LLM: oracle{ds}, Engine: engine.Config{Model: "oracle", OutputRetries: -1, ContextTokens: 8192}})
	if err != nil {
		t.Fatal(err)
	}
	if o := rep.System(eval.SystemEngine).Overall; o.Correct != o.Verdicts || o.Verdicts != 6 {
		t.Errorf("the oracle scored %d of %d", o.Correct, o.Verdicts)
	}

	// A new version of the ruleset compared on the export: the rules it
	// leaves alone are taken from the cache the first run filled.
	revised, err := engine.ParseRuleset([]byte(strings.Replace(exportRuleset, "Is the governing law named?", "Does the agreement name its governing law?", 1)))
	if err != nil {
		t.Fatal(err)
	}
	next, err := eval.Revised(ds, revised)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := verdictcache.NewMemory(verdictcache.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	opts := eval.Options{LLM: oracle{ds}, Engine: engine.Config{Model: "oracle", OutputRetries: -1, ContextTokens: 8192, Cache: cache}}
	before, err := eval.Run(ctx, ds, opts)
	if err != nil {
		t.Fatal(err)
	}
	after, err := eval.Run(ctx, next, opts)
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := eval.Compare(before, after)
	if err != nil {
		t.Fatal(err)
	}
	if o := cmp.Overall; o.Flips != 0 || o.Reused != 4 || o.New.Correct != 6 || o.Old.Correct != 6 {
		t.Errorf("the export compared: %+v; want no flips, 4 verdicts reused (two rules of two cases), all right", o)
	}
}

// nestedRuleset has rules in nested rulesets, two levels deep.
const nestedRuleset = `{"id": "msa", "rules": [{"rule_id": "signed", "rule_text": "Is the agreement signed?"}],
	"nested_rulesets": [
		{"id": "liability", "rules": [{"rule_id": "cap", "rule_text": "Is liability capped?"}],
		 "nested_rulesets": [{"id": "insurance", "rules": [{"rule_id": "insured", "rule_text": "Does the supplier hold insurance?"}]}]},
		{"id": "term", "rules": [{"rule_id": "years", "type": "numerical", "rule_text": "How many years does it run?", "numerical_rule_config": {"possible_scores": [0, 1, 2, 3]}}]}]}`

// TestExportLabelsNestedRules: a validation of a ruleset with nested
// rulesets is exported with a label for every rule, in tree order, a
// nested rule's review included, and eval loads it.
func TestExportLabelsNestedRules(t *testing.T) {
	ctx := context.Background()
	rs, err := engine.ParseRuleset([]byte(nestedRuleset))
	if err != nil {
		t.Fatal(err)
	}
	store := reviews.NewMemoryStore(reviews.MemoryStoreConfig{})
	jobStore := jobs.NewMemoryStore(jobs.MemoryStoreConfig{})
	const requestID = "req-nested"
	in := &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "msa.pdf", Pages: []string{
		"Signed by both parties. Liability is capped at the fees paid.", "The supplier holds no insurance. The term is two years."}}}}
	yes, two := true, 2
	res := &engine.Result{RulesetID: rs.ID, Model: "scripted", Rules: []engine.Verdict{
		{RuleID: "signed", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: &yes, Confidence: new(0.9)},
		{RuleID: "cap", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: &yes, Confidence: new(0.8)},
		{RuleID: "insured", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: &yes, Confidence: new(0.3)},
		{RuleID: "years", Type: verdict.Numerical, DataSufficiency: true, NumericalOutput: &two, Confidence: new(0.7)},
	}}
	inline := nestedRuleset
	req := &schemas.Request{RequestID: requestID, TenantID: "acme", InlineRuleset: &inline}
	done := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, v := range judging.NewVerdictEvents(req, rs, res, "", done.Add(-time.Second), done) {
		jobStore.RecordVerdict(v)
	}
	jobStore.RecordSummary(judging.NewSummary(req, rs, res, "", nil, done.Add(-time.Second), done))
	if err := store.SaveMaterial(ctx, "acme", requestID, reviews.Material{Ruleset: rs, Inputs: in}); err != nil {
		t.Fatal(err)
	}
	no := false
	// The nested rule insured, two levels down, overridden to fail.
	if _, _, err := store.Add(ctx, "acme", reviews.Review{ReviewID: "a", RequestID: requestID, RuleID: "insured", Decision: reviews.Override,
		BooleanOutput: &no, Reviewer: "alice", ReviewedAt: done.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir() + "/dataset"
	got, err := Export(ctx, store, jobStore, Config{Tenant: "acme", Dir: dir})
	if err != nil || got.Cases != 1 {
		t.Fatalf("Export = %+v, %v; want 1 case", got, err)
	}
	var m eval.Manifest
	data, err := os.ReadFile(dir + "/dataset.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range m.Cases[0].Labels {
		ids = append(ids, l.RuleID)
	}
	if want := []string{"signed", "cap", "insured", "years"}; !slices.Equal(ids, want) {
		t.Fatalf("labels of rules %v, want %v (every rule, in tree order)", ids, want)
	}
	if insured := m.Cases[0].Labels[2]; insured.BooleanOutput == nil || *insured.BooleanOutput || !strings.HasPrefix(insured.Note, "override by alice") {
		t.Errorf("label of the nested rule insured = %+v, want the review's fail", insured)
	}
	if years := m.Cases[0].Labels[3]; years.NumericalOutput == nil || *years.NumericalOutput != 2 {
		t.Errorf("label of the nested rule years = %+v, want the model's 2", years)
	}
	if _, err := eval.Load(dir); err != nil {
		t.Errorf("eval does not load the export: %v", err)
	}
}

// TestExportLabelsWhatTheMaterialDoesNotSay: a boolean verdict whose final
// outcome says the material does not say (data_sufficiency false, confirmed
// or not reviewed) is labelled data_sufficiency false, eval's "not
// mentioned"; an override decides on sufficient data, and a rule that does
// not apply needs none.
func TestExportLabelsWhatTheMaterialDoesNotSay(t *testing.T) {
	rs, err := engine.ParseRuleset([]byte(`{"id": "nda", "rules": [{"rule_id": "mutual", "rule_text": "Are both parties bound?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	mat := reviews.Material{Ruleset: rs, Inputs: &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "a.pdf", Pages: []string{"Text."}}}}}
	pass := true
	tests := []struct {
		name    string
		verdict schemas.VerdictEvent
		review  *reviews.Review
		want    *bool
	}{
		{"not mentioned, not reviewed", schemas.VerdictEvent{RuleID: "mutual", RuleType: verdict.Boolean, DataSufficiency: false}, nil, new(false)},
		{"not mentioned, confirmed", schemas.VerdictEvent{RuleID: "mutual", RuleType: verdict.Boolean, DataSufficiency: false},
			&reviews.Review{RuleID: "mutual", Decision: reviews.Confirm}, new(false)},
		{"not mentioned, overridden", schemas.VerdictEvent{RuleID: "mutual", RuleType: verdict.Boolean, DataSufficiency: false},
			&reviews.Review{RuleID: "mutual", Decision: reviews.Override, BooleanOutput: &pass}, nil},
		{"judged on sufficient data", schemas.VerdictEvent{RuleID: "mutual", RuleType: verdict.Boolean, DataSufficiency: true, BooleanOutput: &pass}, nil, nil},
		{"not applicable", schemas.VerdictEvent{RuleID: "mutual", RuleType: verdict.Boolean, DataSufficiency: false, NotApplicable: true}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var all []reviews.Review
			if tt.review != nil {
				all = append(all, *tt.review)
			}
			labels, why := caseLabels(mat, []schemas.VerdictEvent{tt.verdict}, all)
			if why != "" || len(labels) != 1 {
				t.Fatalf("caseLabels: %v, %q", labels, why)
			}
			got := labels[0].DataSufficiency
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("data_sufficiency %v, want %v", got, tt.want)
			}
		})
	}
}
