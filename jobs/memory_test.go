package jobs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"rulevalidator/judging"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func verdictEvent(tenant, requestID, ruleID string, index int) schemas.VerdictEvent {
	return schemas.VerdictEvent{
		EventID: schemas.VerdictEventID(tenant, requestID, ruleID), RequestID: requestID, TenantID: tenant,
		RuleID: ruleID, RuleType: verdict.Boolean, RuleIndex: index, RuleCount: 2,
	}
}

func summary(tenant, requestID string, status schemas.Status, rules int) schemas.SummaryEvent {
	return schemas.SummaryEvent{EventID: requestID, RequestID: requestID, TenantID: tenant, Status: status, Counts: schemas.Counts{Rules: rules}}
}

func TestMemoryStoreEventsSettleStatus(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(MemoryStoreConfig{})
	status := func() Status {
		t.Helper()
		j, ok, _ := s.Get(ctx, "acme", "r1")
		if !ok {
			t.Fatal("job r1 not kept")
		}
		return j.Status
	}
	s.RecordVerdict(verdictEvent("acme", "r1", "b", 1))
	if got := status(); got != Running {
		t.Errorf("after one verdict: %s, want running", got)
	}
	s.RecordSummary(summary("acme", "r1", schemas.StatusCompleted, 2))
	if got := status(); got != Running {
		t.Errorf("summary counting 2 rules, 1 verdict in: %s, want running", got)
	}
	s.RecordVerdict(verdictEvent("acme", "r1", "b", 1)) // redelivered
	if got := status(); got != Running {
		t.Errorf("after a redelivered verdict: %s, want running", got)
	}
	s.RecordVerdict(verdictEvent("acme", "r1", "a", 0))
	j, _, _ := s.Get(ctx, "acme", "r1")
	if j.Status != Completed || len(j.Verdicts) != 2 || j.Verdicts[0].RuleID != "a" || j.Verdicts[1].RuleID != "b" {
		t.Errorf("after every verdict: %s with %+v, want completed with a, b in rule order", j.Status, j.Verdicts)
	}
	if _, ok, _ := s.Get(ctx, "globex", "r1"); ok {
		t.Error("another tenant sees acme's job")
	}

	s.RecordSummary(summary("acme", "r2", schemas.StatusFailed, 0))
	if j, _, _ := s.Get(ctx, "acme", "r2"); j.Status != Failed {
		t.Errorf("failed summary: %s", j.Status)
	}
}

func TestMemoryStoreCreateIsIdempotent(t *testing.T) {
	s := NewMemoryStore(MemoryStoreConfig{})
	testCreateIsIdempotent(t, s, func(_ *schemas.Request, out judging.Events) {
		// What the job feed does with the events.
		for _, v := range out.Verdicts {
			s.RecordVerdict(v)
		}
		s.RecordSummary(out.Summary)
	})
}

// testCreateIsIdempotent checks what every Store must do: a request id is
// created once per tenant, another tenant's id is its own, the result the
// pipeline records (finish) is what Get answers, a finished job is not
// created again, and Delete forgets.
func testCreateIsIdempotent(t *testing.T, s Store, finish func(*schemas.Request, judging.Events)) {
	t.Helper()
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	first, created, err := s.Create(ctx, Job{TenantID: "acme", RequestID: "r1", Status: Pending, SubmittedAt: at, CallbackURL: "https://a.example/"})
	if err != nil || !created {
		t.Fatalf("first Create: created=%v, %v", created, err)
	}
	again, created, err := s.Create(ctx, Job{TenantID: "acme", RequestID: "r1", Status: Pending, CallbackURL: "https://b.example/"})
	if err != nil || created || again.CallbackURL != first.CallbackURL || !again.SubmittedAt.Equal(at) {
		t.Errorf("second Create: created=%v, job %+v, %v; want the first job", created, again, err)
	}
	if _, created, err := s.Create(ctx, Job{TenantID: "globex", RequestID: "r1", Status: Pending}); err != nil || !created {
		t.Errorf("the same request id for another tenant: created=%v, %v", created, err)
	}
	cb := first.CallbackURL
	req := &schemas.Request{TenantID: "acme", RequestID: "r1", SubmittedAt: at, Options: schemas.Options{CallbackURL: &cb}}
	finish(req, judging.Events{
		Summary:  summary("acme", "r1", schemas.StatusCompleted, 2),
		Verdicts: []schemas.VerdictEvent{verdictEvent("acme", "r1", "a", 0), verdictEvent("acme", "r1", "b", 1)},
	})
	j, ok, err := s.Get(ctx, "acme", "r1")
	if err != nil || !ok || j.Status != Completed || j.Summary == nil || j.CallbackURL != cb || !j.SubmittedAt.Equal(at) ||
		len(j.Verdicts) != 2 || j.Verdicts[0].RuleID != "a" || j.Verdicts[1].RuleID != "b" {
		t.Errorf("completed job: %+v (ok %v, %v)", j, ok, err)
	}
	if _, created, _ := s.Create(ctx, Job{TenantID: "acme", RequestID: "r1", Status: Pending}); created {
		t.Error("a completed job was replaced")
	}
	if j, _, _ := s.Get(ctx, "globex", "r1"); j.Status != Pending || j.Summary != nil {
		t.Errorf("globex's job changed with acme's: %+v", j)
	}
	if err := s.Delete(ctx, "acme", "r1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Get(ctx, "acme", "r1"); ok || err != nil {
		t.Errorf("after Delete: ok %v, %v", ok, err)
	}
	if _, ok, _ := s.Get(ctx, "globex", "r1"); !ok {
		t.Error("deleting acme's job removed globex's")
	}
}

func TestMemoryStoreBounds(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)}
	s := NewMemoryStore(MemoryStoreConfig{MaxEntries: 3, TTL: time.Hour, Now: c.Now})
	for i := range 5 {
		s.Create(ctx, Job{TenantID: "acme", RequestID: fmt.Sprint("r", i)})
		c.Advance(time.Minute)
	}
	if s.Len() != 3 {
		t.Errorf("%d jobs kept, want 3", s.Len())
	}
	for i, want := range []bool{false, false, true, true, true} {
		if _, ok, _ := s.Get(ctx, "acme", fmt.Sprint("r", i)); ok != want {
			t.Errorf("r%d kept=%v, want %v (oldest dropped first)", i, ok, want)
		}
	}
	c.Advance(time.Hour - 3*time.Minute + time.Second) // r2 is now 1h1s old, r4 58m1s
	if _, ok, _ := s.Get(ctx, "acme", "r2"); ok {
		t.Error("r2 kept past its TTL")
	}
	if _, ok, _ := s.Get(ctx, "acme", "r4"); !ok {
		t.Error("r4 dropped before its TTL")
	}
	s.Delete(ctx, "acme", "r4")
	if _, ok, _ := s.Get(ctx, "acme", "r4"); ok {
		t.Error("r4 kept after Delete")
	}
}
