package engine

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"rulevalidator/verdict"
)

const (
	// DefaultConfidenceSamples is how many answers the samples source
	// compares by default: the judged one and four more.
	DefaultConfidenceSamples = 5
	// MaxConfidenceSamples caps them: each is a call.
	MaxConfidenceSamples = 20
	// DefaultSampleTemperature samples the model's own distribution.
	DefaultSampleTemperature = 1
)

// checkSampling reports a samples setting out of range; zero values take
// the defaults.
func checkSampling(samples int, temperature float32) error {
	if samples != 0 && (samples < 2 || samples > MaxConfidenceSamples) {
		return fmt.Errorf("engine: ConfidenceSamples %d must be from 2 to %d: the judged answer and at least one more", samples, MaxConfidenceSamples)
	}
	if temperature < 0 || temperature > 2 {
		return fmt.Errorf("engine: SampleTemperature %v must be above 0 and at most 2", temperature)
	}
	return nil
}

// question is a judging call as first asked: what the samples source asks
// again.
type question struct {
	messages        []Message
	schema, grammar []byte
}

// sampleConfidences asks q again ConfidenceSamples-1 times at the sampling
// temperature and sets the confidence of each of rules' verdicts to the
// share of the answers, the verdict's own included, that give its value
// (agreeingValue). A sample's answer is checked for its shape only, rule by
// rule; a rule no sample answered well keeps no confidence, rather than
// the 1 its lone answer would make. A failed call fails the conversation,
// as any call does.
func (e *Engine) sampleConfidences(ctx context.Context, model string, q question, rules []Rule, verdicts map[string]Verdict) (verdict.Usage, error) {
	var (
		mu      sync.Mutex
		usage   verdict.Usage
		answers = make(map[string][]Verdict, len(rules))
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(e.cfg.CallConcurrency, 1))
	for range e.cfg.ConfidenceSamples - 1 {
		g.Go(func() error {
			resp, err := e.ask(gctx, PurposeSample, model, q.messages, q.schema, q.grammar, len(rules), e.cfg.SampleTemperature)
			mu.Lock()
			defer mu.Unlock()
			usage = usage.Add(resp.Usage)
			if err != nil {
				return err
			}
			good, _ := checkAnswer(resp.Content, rules)
			for id, v := range good {
				answers[id] = append(answers[id], v)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return usage, err
	}
	for _, r := range rules {
		v, ok := verdicts[r.RuleID]
		samples := answers[r.RuleID]
		if !ok || len(samples) == 0 {
			continue
		}
		agree := 1 // the verdict's own answer
		for _, s := range samples {
			if agreeingValue(v, s) {
				agree++
			}
		}
		p := float64(agree) / float64(len(samples)+1)
		v.Confidence = &p
		verdicts[r.RuleID] = v
	}
	return usage, nil
}

// agreeingValue reports whether two answers to a rule give the same value:
// both not applicable, or both applicable with the same boolean or score.
func agreeingValue(a, b Verdict) bool {
	if a.NotApplicable || b.NotApplicable {
		return a.NotApplicable == b.NotApplicable
	}
	switch {
	case a.BooleanOutput != nil && b.BooleanOutput != nil:
		return *a.BooleanOutput == *b.BooleanOutput
	case a.NumericalOutput != nil && b.NumericalOutput != nil:
		return *a.NumericalOutput == *b.NumericalOutput
	}
	return false
}
