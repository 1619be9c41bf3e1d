package plan

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"rulevalidator/internal/synthdoc"
)

// benchRequest is 20 rules, one per topic, over a 100-page contract of about
// 450 tokens a page.
func benchRequest() ([]Document, []Rule, Budget) {
	docs := []Document{{Name: "contract.pdf", Pages: synthdoc.Pages(100, 2000, 7)}}
	var rules []Rule
	for i, topic := range synthdoc.Topics[:20] {
		text := synthdoc.RuleText(topic)
		rules = append(rules, Rule{ID: fmt.Sprint("rule-", i), Query: text, PromptTokens: Count(text) + 20})
	}
	// The local model's window, a quarter kept for the answer.
	return docs, rules, Budget{Context: 8192, Answer: 2048, Fixed: 700, AnswerPerRule: DefaultAnswerTokensPerRule, PerChunk: 8, PerDocument: 30}
}

// BenchmarkPlanInputTokens reports the planned calls' input tokens against
// two alternatives: judging each rule alone on the whole document (naive), and
// one call with every rule and the whole document (which would need a window
// of that size).
func BenchmarkPlanInputTokens(b *testing.B) {
	docs, rules, bud := benchRequest()
	doc := 0
	for _, p := range docs[0].Pages {
		doc += Count(p) + bud.PerChunk
	}
	doc += bud.PerDocument
	ruleTokens := 0
	for _, r := range rules {
		ruleTokens += r.PromptTokens
	}
	naive := 0
	for _, r := range rules {
		naive += bud.Fixed + r.PromptTokens + doc
	}
	single := bud.Fixed + ruleTokens + doc

	var p *Plan
	for b.Loop() {
		var err error
		if p, err = Make(docs, rules, bud, 1); err != nil {
			b.Fatal(err)
		}
	}
	planned := 0
	for _, c := range p.Calls {
		planned += c.Tokens
	}
	b.ReportMetric(float64(len(p.Calls)), "calls")
	b.ReportMetric(float64(planned), "plan-tokens")
	b.ReportMetric(float64(naive), "naive-tokens")
	b.ReportMetric(float64(single), "single-tokens")
	b.ReportMetric(float64(planned)/float64(naive), "plan/naive")
	b.ReportMetric(float64(planned)/float64(single), "plan/single")
}

// BenchmarkPlanOneMegabyte measures planning 20 rules over a 1 MB document.
// Besides wall time it reports the process's CPU time per plan, which a
// machine shared with other work inflates less, and, measured side by side
// in the same loop, the time of strings.Fields over the same text: the
// cheapest split into words the standard library has, as a yardstick of the
// machine.
func BenchmarkPlanOneMegabyte(b *testing.B) {
	_, rules, bud := benchRequest()
	docs := []Document{{Name: "big.pdf", Pages: synthdoc.Pages(500, 2000, 8)}}
	size := 0
	for _, p := range docs[0].Pages {
		size += len(p)
	}
	text := strings.Join(docs[0].Pages, "\f")
	b.SetBytes(int64(size))
	var planning, fields time.Duration
	var cpu time.Duration
	words := 0
	for b.Loop() {
		c0, t0 := cpuTime(), time.Now()
		if _, err := Make(docs, rules, bud, 1); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		cpu += cpuTime() - c0
		words += len(strings.Fields(text))
		fields += time.Since(t1)
		planning += t1.Sub(t0)
	}
	if words == 0 {
		b.Fatal("no words")
	}
	n := float64(b.N)
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "plan-cpu-ns/op")
	b.ReportMetric(float64(planning.Nanoseconds())/n, "plan-ns/op")
	b.ReportMetric(float64(fields.Nanoseconds())/n, "fields-ns/op")
	b.ReportMetric(float64(planning)/float64(fields), "plan/fields")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
