package reviews

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/jobs"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// completedJob is a completed validation of tenant acme on two boolean
// rules, both passed, citing passage d1p1s1; "insured" has a confidence of
// 0.3.
func completedJob(requestID string) jobs.Job {
	pass := true
	at := t0.Add(-time.Minute)
	verdict := func(ruleID string, index int, confidence *float64) schemas.VerdictEvent {
		return schemas.VerdictEvent{
			EventID: schemas.VerdictEventID("acme", requestID, ruleID), RequestID: requestID, TenantID: "acme",
			RulesetID: "contract-check", RuleID: ruleID, RuleType: verdict.Boolean, RuleIndex: index, RuleCount: 2,
			BooleanOutput: &pass, DataSufficiency: true, Confidence: confidence, CompletedAt: at,
			Evidences: []verdict.Evidence{{Text: "Signed on 1 March 2025.", SourceOrigin: "contract.txt", SourcePageNumber: 1, PassageID: "d1p1s1"}},
		}
	}
	return jobs.Job{
		TenantID: "acme", RequestID: requestID, Status: jobs.Completed,
		Summary:  &schemas.SummaryEvent{EventID: requestID, RequestID: requestID, TenantID: "acme", Status: schemas.StatusCompleted, Counts: schemas.Counts{Rules: 2}},
		Verdicts: []schemas.VerdictEvent{verdict("signed", 0, nil), verdict("insured", 1, new(0.3))},
	}
}

// recordingPublisher records the review events published, or fails each
// publish with fail when it is set.
type recordingPublisher struct {
	mu     sync.Mutex
	fail   error
	events []*schemas.ReviewEvent
}

func (p *recordingPublisher) PublishReview(_ context.Context, ev *schemas.ReviewEvent) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return p.fail
	}
	p.events = append(p.events, ev)
	return nil
}

func (p *recordingPublisher) setFail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = err
}

// published lists the ids of the events published so far, and the events.
func (p *recordingPublisher) published() ([]string, []*schemas.ReviewEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, len(p.events))
	for i, ev := range p.events {
		ids[i] = ev.EventID
	}
	return ids, slices.Clone(p.events)
}

// countingObserver records what it is told.
type countingObserver struct {
	mu   sync.Mutex
	seen []string
}

func (o *countingObserver) ObserveReview(ruleType, decision string, agreed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a := "disagreed"
	if agreed {
		a = "agreed"
	}
	o.seen = append(o.seen, ruleType+" "+decision+" "+a)
}

func (o *countingObserver) told() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.seen)
}

// TestRecordPublishesOnlyOnceStored: a review is stored, counted once and
// published; posted again it is stored once and published again with the
// same event; refused (the store's conditional add finds another review
// under its id; an invalid review) it is never published; stored with the
// publish failing it is kept, and the retry publishes the stored review's
// event.
func TestRecordPublishesOnlyOnceStored(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore(MemoryStoreConfig{})
	pub, obs := &recordingPublisher{}, &countingObserver{}
	rc := &Recorder{Store: store, Publisher: pub, Observer: obs, Now: func() time.Time { return t0 }}
	job := completedJob("req-pub")
	confirm := Review{ReviewID: "rv-1", RuleID: "signed", Decision: Confirm, PassageIDs: []string{"d1p1s1"}, Reviewer: "alice"}
	const eventID = "acme/req-pub/signed/rv-1"

	stored, created, err := rc.Record(ctx, job, confirm)
	if err != nil || !created {
		t.Fatalf("Record = %+v, %v, %v", stored, created, err)
	}
	if ids, _ := pub.published(); !slices.Equal(ids, []string{eventID}) {
		t.Fatalf("published %v, want [%s]", ids, eventID)
	}
	again, created, err := rc.Record(ctx, job, confirm)
	if err != nil || created || !again.ReviewedAt.Equal(stored.ReviewedAt) {
		t.Fatalf("Record again = %+v, %v, %v; want the stored review, not created", again, created, err)
	}
	if ids, _ := pub.published(); !slices.Equal(ids, []string{eventID, eventID}) {
		t.Fatalf("published %v after the same review again, want the same event twice", ids)
	}

	for _, tc := range []struct {
		name   string
		review Review
		want   func(error) bool
	}{
		{"the same id, another review", Review{ReviewID: "rv-1", RuleID: "signed", Decision: Override, BooleanOutput: new(false), Reviewer: "alice"},
			func(err error) bool { return errors.Is(err, ErrConflict) }},
		{"an invalid review", Review{ReviewID: "rv-2", RuleID: "signed", Decision: Override, Reviewer: "alice"},
			func(err error) bool { var fe *FieldError; return errors.As(err, &fe) && fe.Field == "boolean_output" }},
	} {
		if _, _, err := rc.Record(ctx, job, tc.review); !tc.want(err) {
			t.Errorf("%s: Record = %v", tc.name, err)
		}
		if ids, _ := pub.published(); len(ids) != 2 {
			t.Errorf("%s: published %v; a refused review must not be", tc.name, ids)
		}
	}

	// The broker fails after the store: an error, the review kept.
	pub.setFail(errors.New("broker down"))
	second := Review{ReviewID: "rv-3", RuleID: "insured", Decision: Override, BooleanOutput: new(false), Note: "Lapsed.", Reviewer: "alice"}
	rc.Now = func() time.Time { return t0.Add(time.Minute) }
	_, _, err = rc.Record(ctx, job, second)
	var fe *FieldError
	if err == nil || errors.As(err, &fe) || errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "broker down") {
		t.Fatalf("Record with the broker down = %v, want the publisher's error", err)
	}
	kept, err := store.List(ctx, "acme", "req-pub")
	if err != nil || len(kept) != 2 || kept[1].ReviewID != "rv-3" {
		t.Fatalf("stored reviews %+v, %v; want rv-3 kept", kept, err)
	}
	// The retry publishes it: the stored review's event.
	pub.setFail(nil)
	rc.Now = func() time.Time { return t0.Add(2 * time.Minute) }
	if _, created, err := rc.Record(ctx, job, second); err != nil || created {
		t.Fatalf("retry: %v, %v; want the stored review, not created", created, err)
	}
	ids, events := pub.published()
	if !slices.Equal(ids, []string{eventID, eventID, "acme/req-pub/insured/rv-3"}) {
		t.Fatalf("published %v after the retry", ids)
	}
	if ev := events[2]; !ev.ReviewedAt.Equal(kept[1].ReviewedAt) || ev.Note != "Lapsed." || ev.FinalOutcome != "fail" ||
		ev.ModelOutcome != "pass" || *ev.ModelConfidence != 0.3 || ev.Reviewer != "alice" || ev.TenantID != "acme" {
		t.Errorf("event %+v, want the stored review's", ev)
	}
	// Counted once each, when first stored (the failed publish included).
	if got := obs.told(); !slices.Equal(got, []string{"boolean confirm agreed", "boolean override disagreed"}) {
		t.Errorf("observed %v", got)
	}
}

// concurrentPost is a review store in which, just before each Add, another
// post of the same review id with another review lands first (on another
// replica, say): the race only the store's conditional add settles.
type concurrentPost struct{ Store }

func (s concurrentPost) Add(ctx context.Context, tenant string, r Review) (Review, bool, error) {
	other := r
	other.Note = "the other post's review"
	if _, _, err := s.Store.Add(ctx, tenant, other); err != nil {
		return Review{}, false, err
	}
	return s.Store.Add(ctx, tenant, r)
}

// TestRecordLosingARaceIsNotPublished: a review that loses the race for its
// id to another one is refused by the conditional store and never published
// nor counted, though no review held the id when it was checked.
func TestRecordLosingARaceIsNotPublished(t *testing.T) {
	pub, obs := &recordingPublisher{}, &countingObserver{}
	rc := &Recorder{Store: concurrentPost{NewMemoryStore(MemoryStoreConfig{})}, Publisher: pub, Observer: obs}
	r := Review{ReviewID: "rv-1", RuleID: "signed", Decision: Confirm, PassageIDs: []string{"d1p1s1"}, Reviewer: "alice"}
	if _, _, err := rc.Record(context.Background(), completedJob("req-race"), r); !errors.Is(err, ErrConflict) {
		t.Fatalf("Record = %v, want ErrConflict", err)
	}
	if ids, _ := pub.published(); len(ids) != 0 {
		t.Errorf("published %v: a review refused as a conflict must not be", ids)
	}
	if got := obs.told(); len(got) != 0 {
		t.Errorf("observed %v: a review refused as a conflict must not be counted", got)
	}
}

// TestRecordChecksAgainstTheVerdicts: a review names a rule of the
// validation, which must be completed, and cites passages of its material
// (or, where none was kept, those its verdicts cite); Record fills in what
// the reviewer does not give from the verdict and the clock.
func TestRecordChecksAgainstTheVerdicts(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore(MemoryStoreConfig{})
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	rc := &Recorder{Store: store, Now: func() time.Time { return at }}
	job := completedJob("req-check")
	ok := Review{ReviewID: "rv-1", RuleID: "insured", Decision: Confirm, Reviewer: "alice",
		// Whatever the caller sets here is the verdict's and the clock's.
		RequestID: "other", RulesetID: "other", RuleType: verdict.Numerical, ReviewedAt: t0}

	for _, tc := range []struct {
		name string
		job  func(jobs.Job) jobs.Job
		r    func(Review) Review
		want string
	}{
		{"no rule", nil, func(r Review) Review { r.RuleID = ""; return r }, "rule_id: missing"},
		{"an unknown rule", nil, func(r Review) Review { r.RuleID = "nope"; return r }, `rule_id: validation "req-check" has no rule "nope"`},
		{"a passage no verdict cites", nil, func(r Review) Review { r.PassageIDs = []string{"d1p2s1"}; return r }, `passage_ids[0]: "d1p2s1" is not a passage`},
	} {
		_, _, err := rc.Record(ctx, job, tc.r(ok))
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Record = %v, want a *FieldError %q", tc.name, err, tc.want)
		}
	}
	running := job
	running.Status, running.Summary = jobs.Running, nil
	if _, _, err := rc.Record(ctx, running, ok); !errors.Is(err, ErrNotCompleted) {
		t.Errorf("a running validation: Record = %v, want ErrNotCompleted", err)
	}
	if all, _ := store.List(ctx, "acme", "req-check"); len(all) != 0 {
		t.Fatalf("refused reviews were stored: %+v", all)
	}

	// With the material kept, its passages are the ones a reviewer cites.
	in := &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "contract.txt", Pages: []string{"Signed on 1 March 2025.", "The term is two years."}}}}
	if err := store.SaveMaterial(ctx, "acme", "req-check", Material{Inputs: in}); err != nil {
		t.Fatal(err)
	}
	cites := ok
	cites.PassageIDs = []string{"d1p2s1"}
	got, created, err := rc.Record(ctx, job, cites)
	if err != nil || !created {
		t.Fatalf("Record = %+v, %v, %v", got, created, err)
	}
	if got.RequestID != "req-check" || got.RulesetID != "contract-check" || got.RuleType != verdict.Boolean ||
		!got.ReviewedAt.Equal(at) || got.ReviewedAt.Location() != time.UTC || got.Reviewer != "alice" ||
		got.ModelVerdict.Outcome != engine.OutcomePass || *got.ModelVerdict.Confidence != 0.3 {
		t.Errorf("stored review = %+v", got)
	}
}

// TestRouteForReview: only the verdicts that need review join the queue,
// and routing them again changes nothing.
func TestRouteForReview(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore(MemoryStoreConfig{})
	job := completedJob("req-route")
	job.Verdicts[1].NeedsReview, job.Verdicts[1].ReviewReasons = true, []string{"low_confidence"}
	for range 2 {
		if err := RouteForReview(ctx, store, "acme", "req-route", job.Verdicts); err != nil {
			t.Fatal(err)
		}
	}
	items, err := store.Pending(ctx, "acme")
	if err != nil || len(items) != 1 || items[0].RuleID != "insured" || items[0].RequestID != "req-route" {
		t.Fatalf("Pending = %+v, %v; want insured alone", items, err)
	}
	if err := RouteForReview(ctx, store, "acme", "req-none", job.Verdicts[:1]); err != nil {
		t.Fatalf("routing no verdict that needs review: %v", err)
	}
}
