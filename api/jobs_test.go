package api

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"rulevalidator/schemas"
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

func verdict(tenant, requestID, ruleID string, index int) schemas.VerdictEvent {
	return schemas.VerdictEvent{
		EventID: schemas.VerdictEventID(tenant, requestID, ruleID), RequestID: requestID, TenantID: tenant,
		RuleID: ruleID, RuleType: schemas.RuleBoolean, RuleIndex: index, RuleCount: 2,
	}
}

func summary(tenant, requestID string, status schemas.Status, rules int) schemas.SummaryEvent {
	return schemas.SummaryEvent{EventID: requestID, RequestID: requestID, TenantID: tenant, Status: status, Counts: schemas.Counts{Rules: rules}}
}

func TestJobStoreEventsSettleStatus(t *testing.T) {
	s := NewJobStore(JobStoreConfig{})
	status := func() JobStatus {
		t.Helper()
		j, ok := s.Get("acme", "r1")
		if !ok {
			t.Fatal("job r1 not kept")
		}
		return j.Status
	}
	s.RecordVerdict(verdict("acme", "r1", "b", 1))
	if got := status(); got != JobRunning {
		t.Errorf("after one verdict: %s, want running", got)
	}
	s.RecordSummary(summary("acme", "r1", schemas.StatusCompleted, 2))
	if got := status(); got != JobRunning {
		t.Errorf("summary counting 2 rules, 1 verdict in: %s, want running", got)
	}
	s.RecordVerdict(verdict("acme", "r1", "b", 1)) // redelivered
	if got := status(); got != JobRunning {
		t.Errorf("after a redelivered verdict: %s, want running", got)
	}
	s.RecordVerdict(verdict("acme", "r1", "a", 0))
	j, _ := s.Get("acme", "r1")
	if j.Status != JobCompleted || len(j.Verdicts) != 2 || j.Verdicts[0].RuleID != "a" || j.Verdicts[1].RuleID != "b" {
		t.Errorf("after every verdict: %s with %+v, want completed with a, b in rule order", j.Status, j.Verdicts)
	}
	if _, ok := s.Get("globex", "r1"); ok {
		t.Error("another tenant sees acme's job")
	}

	s.RecordSummary(summary("acme", "r2", schemas.StatusFailed, 0))
	if j, _ := s.Get("acme", "r2"); j.Status != JobFailed {
		t.Errorf("failed summary: %s", j.Status)
	}
}

func TestJobStoreCreateIsIdempotent(t *testing.T) {
	s := NewJobStore(JobStoreConfig{})
	first, created := s.Create(Job{TenantID: "acme", RequestID: "r1", Status: JobPending, CallbackURL: "https://a.example/"})
	if !created {
		t.Fatal("first Create did not create")
	}
	again, created := s.Create(Job{TenantID: "acme", RequestID: "r1", Status: JobPending, CallbackURL: "https://b.example/"})
	if created || again.CallbackURL != first.CallbackURL {
		t.Errorf("second Create: created=%v, job %+v; want the first job", created, again)
	}
	if _, created := s.Create(Job{TenantID: "globex", RequestID: "r1"}); !created {
		t.Error("the same request id for another tenant was not created")
	}
	s.Finish("acme", "r1", summary("acme", "r1", schemas.StatusFailed, 0), nil, true)
	if _, created := s.Create(Job{TenantID: "acme", RequestID: "r1", Status: JobPending}); !created {
		t.Error("a retryable failed job was not replaced")
	}
}

func TestJobStoreBounds(t *testing.T) {
	c := &clock{now: time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)}
	s := NewJobStore(JobStoreConfig{MaxEntries: 3, TTL: time.Hour, Now: c.Now})
	for i := range 5 {
		s.Create(Job{TenantID: "acme", RequestID: fmt.Sprint("r", i)})
		c.Advance(time.Minute)
	}
	if s.Len() != 3 {
		t.Errorf("%d jobs kept, want 3", s.Len())
	}
	for i, want := range []bool{false, false, true, true, true} {
		if _, ok := s.Get("acme", fmt.Sprint("r", i)); ok != want {
			t.Errorf("r%d kept=%v, want %v (oldest dropped first)", i, ok, want)
		}
	}
	c.Advance(time.Hour - 3*time.Minute + time.Second) // r2 is now 1h1s old, r4 58m1s
	if _, ok := s.Get("acme", "r2"); ok {
		t.Error("r2 kept past its TTL")
	}
	if _, ok := s.Get("acme", "r4"); !ok {
		t.Error("r4 dropped before its TTL")
	}
	s.Delete("acme", "r4")
	if _, ok := s.Get("acme", "r4"); ok {
		t.Error("r4 kept after Delete")
	}
}
