package main

import (
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
)

// TestReviewsExportCommand: reviews export writes, from object storage, a
// dataset eval loads, labelled with the reviewer's outcome; bad flags are
// refused.
func TestReviewsExportCommand(t *testing.T) {
	t.Parallel()
	endpoint, access, key := s3test.Endpoint(t)
	store := s3test.Store(t)
	ctx := t.Context()
	jobStore, err := jobs.NewObjectStore(store, jobs.ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	reviewStore, err := reviews.NewObjectStore(store, reviews.ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const ruleset = `{"id": "msa", "rules": [{"rule_id": "signed", "rule_text": "Is it signed?"}]}`
	rs, err := engine.ParseRuleset([]byte(ruleset))
	if err != nil {
		t.Fatal(err)
	}
	inline := ruleset
	req := &schemas.Request{RequestID: "r-1", TenantID: "contoso", InlineRuleset: &inline}
	yes := true
	res := &engine.Result{RulesetID: "msa", Model: "m", Rules: []engine.Verdict{{RuleID: "signed", Type: verdict.Boolean, DataSufficiency: true, BooleanOutput: &yes}}}
	now := time.Now()
	out := judging.Events{
		Verdicts: judging.NewVerdictEvents(req, rs, res, "", now, now), Summary: judging.NewSummary(req, rs, res, "", nil, now, now),
		Material: &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "msa.txt", Pages: []string{"Nobody signed this agreement."}}}}, Ruleset: rs,
	}
	if err := (reviews.ResultStore{Results: jobStore, Reviews: reviewStore}).StoreResult(ctx, req, out); err != nil {
		t.Fatal(err)
	}
	no := false
	if _, _, err := reviewStore.Add(ctx, "contoso", reviews.Review{ReviewID: "x", RequestID: "r-1", RuleID: "signed", Decision: reviews.Override,
		BooleanOutput: &no, PassageIDs: []string{"d1p1s1"}, Reviewer: "alice", ReviewedAt: now}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() + "/out"
	s3Args := []string{"--s3-endpoint", endpoint, "--s3-access-key", access, "--s3-secret-key", key, "--s3-bucket", store.Bucket()}
	var stdout, stderr strings.Builder
	if code := run(ctx, append(append([]string{"reviews", "export"}, s3Args...), "--tenant", "contoso", "--out", dir), &stdout, &stderr, noEnv); code != exitOK {
		t.Fatalf("reviews export: exit %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "wrote 1 case(s)") {
		t.Errorf("stdout: %q", stdout.String())
	}
	ds, err := eval.Load(dir)
	if err != nil {
		t.Fatalf("eval.Load: %v", err)
	}
	if l := ds.Cases[0].Labels[0]; *l.Boolean || len(l.Gold) != 1 || l.Gold[0].Text != "Nobody signed this agreement." {
		t.Errorf("label = %+v", l)
	}
	for _, args := range [][]string{
		{"reviews", "export", "--out", dir},
		{"reviews", "export", "--tenant", "contoso"},
		{"reviews", "export", "--tenant", "contoso", "--out", t.TempDir(), "--since", "yesterday", "--s3-endpoint", endpoint},
		{"reviews"},
	} {
		if code := run(ctx, args, &strings.Builder{}, &strings.Builder{}, noEnv); code != exitInvalid {
			t.Errorf("%v: exit %d, want %d", args, code, exitInvalid)
		}
	}
}
