package engine_test

import (
	"context"
	"fmt"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/engine/plan"
	"rulevalidator/internal/synthdoc"
)

// BenchmarkSplitRequestTokens judges 20 rules over a 100-page contract in
// the local model's 8192-token window with the scripted model, and reports
// the input tokens of the prompts actually sent (by plan.Count) against two
// alternatives rendered the same way: judging each rule alone on the whole
// document (naive), and one call with every rule and the whole document
// (which would need a window that large).
func BenchmarkSplitRequestTokens(b *testing.B) {
	rs := &engine.Ruleset{ID: "bench", Version: "1"}
	m := &reader{topics: map[string]string{}}
	for i, topic := range synthdoc.Topics[:20] {
		id := fmt.Sprint("rule-", i)
		rs.Rules = append(rs.Rules, engine.Rule{RuleID: id, RuleText: synthdoc.RuleText(topic)})
		m.topics[id] = topic.Title
	}
	if err := rs.Validate(); err != nil {
		b.Fatal(err)
	}
	in := &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "contract.pdf", Pages: synthdoc.Pages(100, 2000, 7)}}}

	var res *engine.Result
	for b.Loop() {
		m.mu.Lock()
		m.requests = m.requests[:0]
		m.mu.Unlock()
		// A fresh engine: the plan of a model not seen before, the same in
		// every iteration.
		e := newPlanningEngine(b, m, engine.Config{ContextTokens: 8192})
		var err error
		if res, err = e.Evaluate(context.Background(), engine.Task{Ruleset: rs, Inputs: in}); err != nil {
			b.Fatal(err)
		}
	}
	sent := 0
	for _, req := range m.requests {
		for _, msg := range req.Messages {
			sent += plan.Count(msg.Content) + 8
		}
	}
	user := plan.Count(engine.UserPrompt(in, engine.EvidenceCite)) + 8
	naive := 0
	for _, r := range rs.Rules {
		naive += plan.Count(engine.SystemPrompt(&engine.Ruleset{ID: rs.ID, Version: rs.Version, Rules: []engine.Rule{r}}, engine.EvidenceCite)) + 8 + user
	}
	single := plan.Count(engine.SystemPrompt(rs, engine.EvidenceCite)) + 8 + user
	b.ReportMetric(float64(res.Usage.PlannedCalls), "calls")
	b.ReportMetric(float64(sent), "sent-tokens")
	b.ReportMetric(float64(naive), "naive-tokens")
	b.ReportMetric(float64(single), "single-tokens")
	b.ReportMetric(float64(sent)/float64(naive), "sent/naive")
	b.ReportMetric(float64(sent)/float64(single), "sent/single")
}
