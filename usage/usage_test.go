package usage_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"rulevalidator/internal/s3test"
	"rulevalidator/judging"
	"rulevalidator/schemas"
	"rulevalidator/usage"
	"rulevalidator/verdict"
)

func newStore(t *testing.T, opts usage.Options) *usage.Store {
	t.Helper()
	s, err := usage.New(s3test.Store(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var noon = time.Date(2026, 3, 4, 12, 30, 0, 0, time.UTC)

func TestTwoWritersRacingOnOneWindowAddUpExactly(t *testing.T) {
	s := newStore(t, usage.Options{})
	ctx := context.Background()
	const writers, each = 2, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				c := usage.Counts{InputTokens: 100, OutputTokens: 10, ModelCalls: 2, Requests: 1}
				if err := s.Record(ctx, "acme/eu", fmt.Sprintf("req-%d-%d", w, i), "m", noon, c); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r, err := s.Hours(ctx, "acme/eu", noon.Add(-time.Hour), noon.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := usage.Counts{InputTokens: 100 * writers * each, OutputTokens: 10 * writers * each, ModelCalls: 2 * writers * each, Requests: writers * each}
	if len(r.Hours) != 1 || r.Hours[0].Counts != want || r.Total.Counts != want {
		t.Fatalf("got %+v, want one hour and a total of %+v", r, want)
	}
	if !r.Hours[0].Hour.Equal(usage.Hour(noon)) {
		t.Errorf("hour %v, want %v", r.Hours[0].Hour, usage.Hour(noon))
	}
}

func TestARedeliveredRequestCountsOnce(t *testing.T) {
	s := newStore(t, usage.Options{})
	ctx := context.Background()
	c := usage.Counts{InputTokens: 1000, OutputTokens: 500, ModelCalls: 1, Requests: 1}
	for _, at := range []time.Time{noon, noon.Add(time.Minute), noon.Add(40 * time.Minute)} { // the last in the next hour
		if err := s.Record(ctx, "acme", "req-1", "m", at, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Record(ctx, "other", "req-1", "m", noon, c); err != nil { // same id, another tenant
		t.Fatal(err)
	}
	r, err := s.Hours(ctx, "acme", noon.Add(-24*time.Hour), noon.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.Total.Counts != c || len(r.Hours) != 1 {
		t.Fatalf("got %+v, want the request counted once: %+v", r, c)
	}
	other, err := s.Hours(ctx, "other", noon, noon.Add(time.Hour))
	if err != nil || other.Total.Tokens() != 1500 {
		t.Fatalf("Hours(other) = %+v, %v; want 1500 tokens", other, err)
	}
}

func TestCountedRequestIDsAreBounded(t *testing.T) {
	s := newStore(t, usage.Options{MaxCounted: 2})
	ctx := context.Background()
	c := usage.Counts{InputTokens: 1, Requests: 1}
	for _, id := range []string{"a", "b", "c", "a"} { // "a" has left the last two counted
		if err := s.Record(ctx, "t", id, "m", noon, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Record(ctx, "t", "c", "m", noon, c); err != nil { // still remembered
		t.Fatal(err)
	}
	r, err := s.Hours(ctx, "t", noon, noon.Add(time.Hour))
	if err != nil || r.Total.Tokens() != 4 {
		t.Fatalf("Hours = %+v, %v; want 4 tokens", r, err)
	}
}

func TestHoursRangeAndCost(t *testing.T) {
	s := newStore(t, usage.Options{Prices: usage.PriceTable{"m": {Input: 2, Output: 10}}})
	ctx := context.Background()
	day := noon.Truncate(24 * time.Hour)
	for i, at := range []time.Time{day.Add(-time.Minute), day.Add(time.Hour), day.Add(5 * time.Hour), day.Add(23 * time.Hour)} {
		if err := s.Record(ctx, "t", fmt.Sprint(i), "m", at, usage.Counts{InputTokens: 1_000_000, OutputTokens: 100_000, ModelCalls: 1, Requests: 1}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.Hours(ctx, "t", day, day.Add(6*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Hours) != 2 || r.Total.Requests != 2 || r.Total.Cost == nil || *r.Total.Cost != 6 {
		t.Fatalf("got %+v, want the two windows of the range costing 6", r)
	}
	// The day's budget counts the day's windows, not yesterday's.
	late := day.Add(23*time.Hour + time.Minute)
	var qe *usage.QuotaError
	if err := s.Reserve(ctx, "t", "x", usage.Budget{TokensPerDay: 3_300_000}, late, time.Minute); !errors.As(err, &qe) || qe.Window != "day" || qe.Spent != 3_300_000 {
		t.Fatalf("Reserve under a day's budget of 3,300,000 = %v, want the day's budget used up", err)
	}
	if err := s.Reserve(ctx, "t", "x", usage.Budget{TokensPerDay: 3_300_001, TokensPerHour: 1_100_001}, late, time.Minute); err != nil {
		t.Fatalf("Reserve a token under both budgets = %v", err)
	}
	for _, bad := range [][2]time.Time{{day, day}, {day, day.Add(-time.Hour)}, {day, day.Add(usage.MaxRange + time.Hour)}} {
		if _, err := s.Hours(ctx, "t", bad[0], bad[1]); !errors.Is(err, usage.ErrRange) {
			t.Errorf("Hours(%v, %v) = %v, want ErrRange", bad[0], bad[1], err)
		}
	}
	if _, err := s.Hours(ctx, "t", day, day.Add(usage.MaxRange+time.Hour)); err == nil || !strings.Contains(err.Error(), "31 days") {
		t.Errorf("the refusal should name the limit: %v", err)
	}
}

func TestResultStoreCountsJudgedRequestsAndAdmissionRefusesPastTheBudget(t *testing.T) {
	s := newStore(t, usage.Options{})
	ctx := context.Background()
	rs := usage.ResultStore{Usage: s}
	req := &schemas.Request{RequestID: "r1", TenantID: "acme"}
	judged := judging.Events{Summary: schemas.SummaryEvent{Status: schemas.StatusCompleted, Model: "m", CompletedAt: noon,
		Usage: verdict.Usage{PromptTokens: 2500, CompletionTokens: 600, LLMCalls: 2}}}
	refused := judging.Events{Summary: schemas.NewFailedSummary(&schemas.Request{RequestID: "r2", TenantID: "acme"}, schemas.ReasonQuotaExceeded, "over", noon, noon)}
	if err := rs.StoreResult(ctx, req, judged); err != nil {
		t.Fatal(err)
	}
	if err := rs.StoreResult(ctx, &schemas.Request{RequestID: "r2", TenantID: "acme"}, refused); err != nil {
		t.Fatal(err)
	}
	a := &usage.Admission{Usage: s, Now: func() time.Time { return noon },
		Budget: func(tenant string) usage.Budget {
			if tenant == "acme" {
				return usage.Budget{TokensPerHour: 3000}
			}
			return usage.Budget{}
		}}
	var qe *usage.QuotaError
	if err := a.Admit(ctx, "acme", "r3"); !errors.As(err, &qe) || qe.Spent != 3100 || !strings.Contains(err.Error(), "tokens_per_hour is 3000") {
		t.Fatalf("Admit(acme) = %v, want a QuotaError naming tokens_per_hour", err)
	}
	if err := a.Admit(ctx, "other", "o1"); err != nil {
		t.Fatalf("Admit(other) = %v", err)
	}
	a.Now = func() time.Time { return noon.Add(time.Hour) }
	if err := a.Admit(ctx, "acme", "r3"); err != nil {
		t.Fatalf("the next hour should admit: %v", err)
	}
	r, err := s.Hours(ctx, "acme", noon.Add(-time.Hour), noon.Add(time.Hour))
	if err != nil || r.Total.Requests != 1 {
		t.Fatalf("got %+v, %v; want the judged request only", r, err)
	}
}

// TestAReplayCountsApartFromItsFailedAttempt: a request that failed after calling the model
// (its tokens counted), dead-lettered and replayed within the hour, counts again when the
// replay is judged, once however often the replay is redelivered.
func TestAReplayCountsApartFromItsFailedAttempt(t *testing.T) {
	s := newStore(t, usage.Options{})
	ctx := context.Background()
	rs := usage.ResultStore{Usage: s}
	req := &schemas.Request{RequestID: "r1", TenantID: "acme"}
	failed := judging.Events{Summary: schemas.NewFailedSummary(req, schemas.ReasonInvalidOutput, "no valid answer", noon, noon)}
	failed.Summary.Usage = verdict.Usage{PromptTokens: 1000, CompletionTokens: 200, LLMCalls: 2}
	judged := judging.Events{Summary: schemas.SummaryEvent{Status: schemas.StatusCompleted, Model: "m", CompletedAt: noon.Add(10 * time.Minute),
		Usage: verdict.Usage{PromptTokens: 500, CompletionTokens: 100, LLMCalls: 1}}}
	if err := rs.StoreResult(ctx, req, failed); err != nil {
		t.Fatal(err)
	}
	replay := judging.WithReplay(ctx, 1)
	for range 2 { // the replay, then a redelivery of it
		if err := rs.StoreResult(replay, req, judged); err != nil {
			t.Fatal(err)
		}
	}
	if err := rs.StoreResult(ctx, req, judged); err != nil { // a redelivery of the original
		t.Fatal(err)
	}
	r, err := s.Hours(ctx, "acme", noon.Add(-time.Hour), noon.Add(time.Hour))
	if err != nil || r.Total.Requests != 2 || r.Total.Tokens() != 1800 {
		t.Fatalf("got %+v, %v; want the failed attempt and the replay, 1800 tokens", r, err)
	}
}

func TestParsePriceTable(t *testing.T) {
	tb, err := usage.ParsePriceTable([]byte("gpt-4o-mini: {input: 0.15, output: 0.6}\nlocal: {input: 0, output: 0}\n"))
	if err != nil || tb["gpt-4o-mini"] != (usage.Price{Input: 0.15, Output: 0.6}) || len(tb) != 2 {
		t.Fatalf("got %v, %v", tb, err)
	}
	_, err = usage.ParsePriceTable([]byte("a: {input: -1}\nb: {inptu: 1}\nc: 3\n"))
	for _, want := range []string{"a.input", `unknown key "inptu"`, "c: must be a mapping"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v should name %q", err, want)
		}
	}
	if c := (usage.PriceTable{"a": {}}).Cost(map[string]usage.Counts{"b": {InputTokens: 1}}); c != nil {
		t.Errorf("a model without a price should leave the cost out, got %v", *c)
	}
}

// admitWithin is Admit with a deadline: a request that waits for the budget held by
// others' reservations runs into it.
func admitWithin(a *usage.Admission, tenant, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	return a.Admit(ctx, tenant, id)
}

func TestABudgetAdmitsWhileTokensUsedAndReservedAreUnderIt(t *testing.T) {
	s := newStore(t, usage.Options{})
	ctx := context.Background()
	a := &usage.Admission{Usage: s, Now: func() time.Time { return noon }, Poll: 10 * time.Millisecond,
		Budget: func(string) usage.Budget { return usage.Budget{TokensPerHour: 3000} }}
	record := func(id string, tokens int64) {
		t.Helper()
		if err := s.Record(ctx, "acme", id, "m", noon, usage.Counts{InputTokens: tokens, Requests: 1}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		do   func()
		id   string
		want string // "", "waits" or "quota"
	}{
		// Nothing counted yet: the first request reserves the whole budget.
		{id: "r1"},
		{id: "r2", want: "waits"},
		{id: "r1"}, // a redelivery holds its reservation
		// 1000 counted: each request now reserves 1000, the largest so far.
		{do: func() { record("r1", 1000) }, id: "r2"},
		{id: "r3"},
		{id: "r4", want: "waits"},
		{do: func() { record("r2", 1000) }, id: "r4", want: "waits"},
		// A request that ends uncounted lets its reservation go.
		{do: func() {
			if err := a.Release(ctx, "acme", "r3"); err != nil {
				t.Fatal(err)
			}
		}, id: "r4"},
		{do: func() { record("r4", 1200) }, id: "r5", want: "quota"},
		{id: "r1"}, // counted already: admitted, to count nothing again
	}
	for i, st := range steps {
		if st.do != nil {
			st.do()
		}
		err := admitWithin(a, "acme", st.id)
		var qe *usage.QuotaError
		got := ""
		switch {
		case errors.As(err, &qe):
			got = "quota"
		case errors.Is(err, context.DeadlineExceeded):
			got = "waits"
		case err != nil:
			t.Fatalf("step %d (%s): %v", i, st.id, err)
		}
		if got != st.want {
			t.Fatalf("step %d: Admit(%s) = %q (%v), want %q", i, st.id, got, err, st.want)
		}
	}
}

func TestAReservationExpires(t *testing.T) {
	s := newStore(t, usage.Options{})
	now := noon
	a := &usage.Admission{Usage: s, Now: func() time.Time { return now }, Hold: time.Minute, Poll: 10 * time.Millisecond,
		Budget: func(string) usage.Budget { return usage.Budget{TokensPerHour: 3000} }}
	if err := admitWithin(a, "acme", "killed"); err != nil {
		t.Fatal(err)
	}
	if err := admitWithin(a, "acme", "next"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Admit = %v, want it to wait for the first request's reservation", err)
	}
	now = now.Add(time.Minute)
	if err := admitWithin(a, "acme", "next"); err != nil {
		t.Fatalf("the reservation of a replica gone should expire: %v", err)
	}
}

// TestTwoReplicasOvershootABudgetByOneRequestAtMost: replicas admitting and counting the
// requests of one tenant side by side stop within the budget plus one request.
func TestTwoReplicasOvershootABudgetByOneRequestAtMost(t *testing.T) {
	s := newStore(t, usage.Options{})
	const budget, tokens = 3000, 700
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for r := range 2 {
		a := &usage.Admission{Usage: s, Poll: 5 * time.Millisecond,
			Budget: func(string) usage.Budget { return usage.Budget{TokensPerHour: budget} }}
		for w := range 2 { // two slots a replica
			wg.Go(func() {
				for i := 0; ; i++ {
					id := fmt.Sprintf("r%d-w%d-%d", r, w, i)
					err := a.Admit(context.Background(), "acme", id)
					var qe *usage.QuotaError
					if errors.As(err, &qe) {
						return
					}
					if err != nil {
						errs <- err
						return
					}
					time.Sleep(time.Duration(1+i%3) * 5 * time.Millisecond) // judging
					if err := s.Record(context.Background(), "acme", id, "m", time.Now(), usage.Counts{InputTokens: tokens, Requests: 1}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	now := time.Now()
	r, err := s.Hours(context.Background(), "acme", now.Add(-2*time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Total.Tokens(); got < budget || got >= budget+tokens {
		t.Fatalf("%d tokens admitted (%d requests), want at least the budget %d and under one request more", got, r.Total.Requests, budget)
	}
}
