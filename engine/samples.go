package engine

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
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
// the 1 its lone answer would make. With MajorityVerdict, a rule whose
// samples give another value more often than the verdict's takes the first
// such sample that passes the content checks (an), and the confidence is
// that value's share. A failed call fails the conversation, as any call
// does.
func (e *Engine) sampleConfidences(ctx context.Context, model string, q question, rules []Rule, verdicts map[string]Verdict, an *anchoring) (Usage, error) {
	var (
		mu      sync.Mutex
		usage   Usage
		answers = make(map[string][]Verdict, len(rules))
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(e.cfg.CallConcurrency, 1))
	for range e.cfg.ConfidenceSamples - 1 {
		g.Go(func() error {
			resp, err := e.ask(gctx, model, q.messages, q.schema, q.grammar, len(rules), e.cfg.SampleTemperature)
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
		agree := 1 + agreeing(v, samples) // the verdict's own answer and the samples like it
		if e.cfg.MajorityVerdict {
			replaced, n, err := e.majority(r, v, agree, samples, an)
			if err != nil {
				return usage, err
			}
			v, agree = replaced, n
		}
		p := float64(agree) / float64(len(samples)+1)
		v.Confidence = &p
		verdicts[r.RuleID] = v
	}
	return usage, nil
}

// majority is the answer to rule r that MajorityVerdict keeps, and how many
// of the answers give its value: judged, which agree answers give, unless
// the samples give another value more often and one of them passes the
// content checks. Ties keep the judged answer.
func (e *Engine) majority(r Rule, judged Verdict, agree int, samples []Verdict, an *anchoring) (Verdict, int, error) {
	tried := make([]bool, len(samples))
	for {
		best, count := -1, agree
		for i, s := range samples {
			if tried[i] || agreeingValue(judged, s) {
				continue
			}
			if n := agreeing(s, samples); n > count {
				best, count = i, n
			}
		}
		if best < 0 {
			return judged, agree, nil
		}
		// The first sample of the winning value that passes the checks
		// stands for it; the value is tried once.
		for i, s := range samples {
			if !agreeingValue(samples[best], s) {
				continue
			}
			tried[i] = true
			candidate := s
			problems, err := an.checkContent(r, &candidate)
			if err != nil {
				return judged, agree, err
			}
			if len(problems) == 0 {
				e.cfg.Logger.Debug("engine: the samples' majority replaces the judged answer", "rule_id", r.RuleID, "answers", len(samples)+1, "agreeing", count)
				return candidate, count, nil
			}
		}
	}
}

// agreeing counts the answers that give v's value.
func agreeing(v Verdict, answers []Verdict) int {
	n := 0
	for _, a := range answers {
		if agreeingValue(v, a) {
			n++
		}
	}
	return n
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
