package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"rulevalidator/internal/s3test"
	"rulevalidator/judging"
	"rulevalidator/schemas"
	"rulevalidator/usage"
	"rulevalidator/verdict"
)

// TestTokenBudgetRejectsPastIt: through the pipeline with a scripted model and the usage kept
// in the real S3, a tenant with tokens_per_hour 3000 (on_exceed reject) gets its first request
// judged (3100 tokens) and its later ones failed naming the budget, dead-lettered as
// quota_exceeded without asking the model; another tenant is unaffected.
func TestTokenBudgetRejectsPastIt(t *testing.T) {
	store, err := usage.New(s3test.Store(t), usage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	res := passResult()
	res.Usage = verdict.Usage{PromptTokens: 2500, CompletionTokens: 600, LLMCalls: 1}
	eng := &scriptedEngine{res: res}
	admission := &usage.Admission{Usage: store, Now: func() time.Time { return now },
		Budget: func(tenant string) usage.Budget {
			if tenant == "acme" {
				return usage.Budget{TokensPerHour: 3000}
			}
			return usage.Budget{}
		}}
	pub := &resultPublisher{}
	p, _, _ := handleFixture(t, eng, func(c *Config) {
		c.Publisher = pub
		c.Results = usage.ResultStore{Usage: store, Budgets: admission}
		c.Admit = admission.Admit
		c.Now = func() time.Time { return now }
	})
	handle := func(tenant, id string) error {
		req := &schemas.Request{RequestID: id, TenantID: tenant, RulesetRef: &schemas.RulesetRef{ID: "rs"}, TextInput: ptr("hello"), SubmittedAt: now}
		return p.Handle(context.Background(), requestMessage(t, p.cfg.Serde, req))
	}

	if err := handle("acme", "a1"); err != nil {
		t.Fatalf("acme's first request: %v", err)
	}
	for _, id := range []string{"a2", "a3"} {
		err := handle("acme", id)
		if reason, messageFault := judging.MessageFault(err); !messageFault || reason != string(schemas.ReasonQuotaExceeded) {
			t.Fatalf("acme's request %s past its budget: %v, want a message fault quota_exceeded", id, err)
		}
		if !strings.Contains(err.Error(), "tokens_per_hour is 3000") {
			t.Errorf("the error should name the budget: %v", err)
		}
	}
	for _, id := range []string{"o1", "o2"} {
		if err := handle("other", id); err != nil {
			t.Fatalf("another tenant's request %s: %v", id, err)
		}
	}
	if eng.calls != 3 {
		t.Errorf("the model was asked %d times, want 3 (acme's first, other's two)", eng.calls)
	}
	var failed []string
	for _, r := range pub.results {
		if r.Summary.Status == schemas.StatusFailed {
			if r.Summary.Error.Code != schemas.ReasonQuotaExceeded || !strings.Contains(r.Summary.Error.Message, "tokens_per_hour") {
				t.Errorf("failed summary %+v, want quota_exceeded naming tokens_per_hour", r.Summary.Error)
			}
			failed = append(failed, r.Summary.TenantID+"/"+r.Summary.RequestID)
		}
	}
	if strings.Join(failed, ",") != "acme/a2,acme/a3" {
		t.Errorf("failed summaries for %v, want acme's a2 and a3", failed)
	}
	r, err := store.Hours(context.Background(), "acme", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil || r.Total.Requests != 1 || r.Total.Tokens() != 3100 {
		t.Errorf("acme's usage %+v, %v; want the one request judged", r.Total, err)
	}
}

// TestAdmissionErrorHolds: usage that cannot be read is the environment's fault: the request
// is held, never dead-lettered, and the model is not asked.
func TestAdmissionErrorHolds(t *testing.T) {
	eng := &scriptedEngine{res: passResult()}
	p, _, m := handleFixture(t, eng, func(c *Config) {
		c.Admit = func(context.Context, string, string) error {
			return errors.New("usage: reading window: connection refused")
		}
	})
	err := p.Handle(context.Background(), m)
	if _, messageFault := judging.MessageFault(err); err == nil || messageFault {
		t.Fatalf("Handle = %v, want a transient error", err)
	}
	if eng.calls != 0 {
		t.Errorf("the model was asked %d times", eng.calls)
	}
}

// TestTokenBudgetDelayFailsWhenItMayNotWait: a tenant with on_exceed delay whose request the
// consumer does not let wait (consumer.MayDefer false: it holds as many of the tenant's as it
// may) has it failed as with reject, saying why it was not delayed, its status not marked.
func TestTokenBudgetDelayFailsWhenItMayNotWait(t *testing.T) {
	store, err := usage.New(s3test.Store(t), usage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	res := passResult()
	res.Usage = verdict.Usage{PromptTokens: 2500, CompletionTokens: 600, LLMCalls: 1}
	admission := &usage.Admission{Usage: store, Now: func() time.Time { return now },
		Budget: func(string) usage.Budget { return usage.Budget{TokensPerHour: 3000, Delay: true} }}
	marked := 0
	p, _, _ := handleFixture(t, &scriptedEngine{res: res}, func(c *Config) {
		c.Publisher = &resultPublisher{}
		c.Results = usage.ResultStore{Usage: store, Budgets: admission}
		c.Admit = admission.Admit
		c.Delayed = func(context.Context, *schemas.Request, time.Time, string) error { marked++; return nil }
		c.Now = func() time.Time { return now }
	})
	for i, id := range []string{"a1", "a2"} {
		req := &schemas.Request{RequestID: id, TenantID: "acme", RulesetRef: &schemas.RulesetRef{ID: "rs"}, TextInput: ptr("hello"), SubmittedAt: now}
		err := p.Handle(context.Background(), requestMessage(t, p.cfg.Serde, req))
		if i == 0 {
			if err != nil {
				t.Fatalf("the first request: %v", err)
			}
			continue
		}
		if reason, messageFault := judging.MessageFault(err); !messageFault || reason != string(schemas.ReasonQuotaExceeded) ||
			!strings.Contains(err.Error(), "it is not delayed") {
			t.Fatalf("past the budget, not let wait: %v; want quota_exceeded saying it is not delayed", err)
		}
	}
	if marked != 0 {
		t.Errorf("the status was marked delayed %d times, want none", marked)
	}
}

// TestSummaryCarriesTheRequestsCost: with a price table, a judged request's summary carries
// the price of its tokens; without one, none.
func TestSummaryCarriesTheRequestsCost(t *testing.T) {
	res := passResult()
	res.Usage = verdict.Usage{PromptTokens: 2_000_000, CompletionTokens: 100_000, LLMCalls: 1}
	for _, tc := range []struct {
		name  string
		price func(string, verdict.Usage) *float64
		want  *float64
	}{
		{"priced", func(model string, u verdict.Usage) *float64 {
			c := float64(u.PromptTokens)/1e6*0.5 + float64(u.CompletionTokens)/1e6*2
			return &c
		}, ptr(1.2)},
		{"no price table", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub := &resultPublisher{}
			p, _, m := handleFixture(t, &scriptedEngine{res: res}, func(c *Config) {
				c.Publisher = pub
				c.Price = tc.price
			})
			if err := p.Handle(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			got := pub.results[len(pub.results)-1].Summary.Usage.Cost
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("summary cost %v, want %v", got, tc.want)
			}
		})
	}
}
