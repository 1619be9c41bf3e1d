package reviews

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/internal/s3test"
	"rulevalidator/verdict"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func review(id, requestID, ruleID string, d Decision) Review {
	r := Review{ReviewID: id, RequestID: requestID, RuleID: ruleID, Decision: d, Reviewer: "alice", ReviewedAt: t0,
		RulesetID: "rs", RuleType: verdict.Boolean, ModelVerdict: ModelVerdict{Outcome: engine.OutcomePass, BooleanOutput: new(true)}}
	if d == Override {
		r.BooleanOutput = new(false)
	}
	return r
}

func item(requestID, ruleID string, confidence *float64) Item {
	return Item{RequestID: requestID, RuleID: ruleID, RulesetID: "rs", Verdict: "pass", Confidence: confidence, ReviewReasons: []string{"low_confidence"}, JudgedAt: t0}
}

// testStoreContract is what every Store does, whatever keeps it.
func testStoreContract(t *testing.T, s Store) {
	ctx := context.Background()
	t.Run("a review posted twice is stored once", func(t *testing.T) {
		r := review("rv-1", "req-1", "a", Override)
		got, created, err := s.Add(ctx, "acme", r)
		if err != nil || !created || !got.SameAs(r) {
			t.Fatalf("Add = %+v, %v, %v", got, created, err)
		}
		again := r
		again.ReviewedAt = t0.Add(time.Hour) // a retry, later
		got, created, err = s.Add(ctx, "acme", again)
		if err != nil || created || !got.ReviewedAt.Equal(t0) {
			t.Fatalf("Add again = %+v, %v, %v; want the stored review, not created", got, created, err)
		}
		all, err := s.List(ctx, "acme", "req-1")
		if err != nil || len(all) != 1 {
			t.Fatalf("List = %+v, %v; want the one review", all, err)
		}
	})
	t.Run("the same id with another review is a conflict", func(t *testing.T) {
		r := review("rv-1", "req-1", "a", Confirm)
		if _, _, err := s.Add(ctx, "acme", r); !errors.Is(err, ErrConflict) {
			t.Fatalf("Add = %v, want ErrConflict", err)
		}
	})
	t.Run("a later review supersedes and keeps the history", func(t *testing.T) {
		r := review("rv-2", "req-1", "a", Confirm)
		r.ReviewedAt = t0.Add(time.Minute)
		if _, created, err := s.Add(ctx, "acme", r); err != nil || !created {
			t.Fatalf("Add = %v, %v", created, err)
		}
		all, _ := s.List(ctx, "acme", "req-1")
		if cur := Current(all, "a"); cur == nil || cur.ReviewID != "rv-2" {
			t.Errorf("current = %+v, want rv-2", cur)
		}
		if h := History(all, "a"); len(h) != 2 || h[0].ReviewID != "rv-1" {
			t.Errorf("history = %+v", h)
		}
	})
	t.Run("tenants are apart", func(t *testing.T) {
		if all, err := s.List(ctx, "globex", "req-1"); err != nil || len(all) != 0 {
			t.Errorf("another tenant's List = %+v, %v", all, err)
		}
		if _, created, err := s.Add(ctx, "globex", review("rv-1", "req-1", "a", Confirm)); err != nil || !created {
			t.Errorf("another tenant's review with the same id: %v, %v", created, err)
		}
	})
	t.Run("routed verdicts wait until reviewed", func(t *testing.T) {
		if err := s.Route(ctx, "acme", "req-2", []Item{item("req-2", "a", new(0.4)), item("req-2", "b", nil)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Route(ctx, "acme", "req-3", []Item{item("req-3", "a", new(0.2))}); err != nil {
			t.Fatal(err)
		}
		pending := func() []string {
			items, err := s.Pending(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, it := range items {
				ids = append(ids, it.RequestID+"/"+it.RuleID)
			}
			slices.Sort(ids)
			return ids
		}
		if got := pending(); !slices.Equal(got, []string{"req-2/a", "req-2/b", "req-3/a"}) {
			t.Errorf("pending = %v", got)
		}
		if _, _, err := s.Add(ctx, "acme", review("rv-9", "req-3", "a", Confirm)); err != nil {
			t.Fatal(err)
		}
		if got := pending(); !slices.Equal(got, []string{"req-2/a", "req-2/b"}) {
			t.Errorf("pending after a review = %v", got)
		}
		if items, _ := s.Pending(ctx, "globex"); len(items) != 0 {
			t.Errorf("another tenant's queue = %+v", items)
		}
	})
	t.Run("reviewed validations", func(t *testing.T) {
		var ids []string
		if err := s.Reviewed(ctx, "acme", func(id string, all []Review) error {
			ids = append(ids, fmt.Sprintf("%s:%d", id, len(all)))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []string{"req-1:2", "req-3:1"}) {
			t.Errorf("reviewed = %v", ids)
		}
	})
	t.Run("material", func(t *testing.T) {
		in := &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "a.txt", Pages: []string{"One.", "Two."}}}}
		rs := &engine.Ruleset{ID: "rs", Rules: []engine.Rule{{RuleID: "a", RuleText: "A?"}}}
		if err := s.SaveMaterial(ctx, "acme", "req-2", Material{Ruleset: rs, Inputs: in}); err != nil {
			t.Fatal(err)
		}
		got, found, err := s.Material(ctx, "acme", "req-2")
		if err != nil || !found || got.Inputs.PrimaryDocs[0].Pages[1] != "Two." || got.Ruleset.Rules[0].RuleText != "A?" {
			t.Errorf("Material = %+v, %v, %v", got, found, err)
		}
		if _, found, err := s.Material(ctx, "globex", "req-2"); err != nil || found {
			t.Errorf("another tenant's Material: found %v, %v", found, err)
		}
	})
	t.Run("concurrent reviews of one validation are all kept", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() {
				if _, _, err := s.Add(ctx, "acme", review(fmt.Sprintf("c-%d", i), "req-4", "a", Confirm)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if all, _ := s.List(ctx, "acme", "req-4"); len(all) != 6 {
			t.Errorf("%d reviews kept, want 6", len(all))
		}
	})
}

func TestMemoryStoreContract(t *testing.T) {
	testStoreContract(t, NewMemoryStore(MemoryStoreConfig{}))
}

func TestObjectStoreContract(t *testing.T) {
	s, err := NewObjectStore(s3test.Store(t), ObjectStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	testStoreContract(t, s)
}

func TestMemoryStoreForgetsTheOldest(t *testing.T) {
	s := NewMemoryStore(MemoryStoreConfig{MaxValidations: 2})
	ctx := context.Background()
	for _, id := range []string{"r1", "r2", "r3"} {
		if _, _, err := s.Add(ctx, "t", review("x", id, "a", Confirm)); err != nil {
			t.Fatal(err)
		}
	}
	if all, _ := s.List(ctx, "t", "r1"); len(all) != 0 {
		t.Errorf("r1 kept past the bound: %+v", all)
	}
	if all, _ := s.List(ctx, "t", "r3"); len(all) != 1 {
		t.Errorf("r3 lost: %+v", all)
	}
}
