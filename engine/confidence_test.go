package engine

import (
	"context"
	"math"
	"strings"
	"testing"
)

// tokens splits an answer into tokens at the given cuts, giving the token
// that starts at a cut in probs its log-probability and alternatives.
func tokensOf(content string, cuts []int, probs map[int]TokenLogProb) []TokenLogProb {
	var out []TokenLogProb
	at := 0
	for _, c := range append(cuts, len(content)) {
		if c <= at {
			continue
		}
		t, ok := probs[at]
		if !ok {
			t = TokenLogProb{}
		}
		t.Text = content[at:c]
		out = append(out, t)
		at = c
	}
	return out
}

func ln(p float64) float64 { return math.Log(p) }

func TestValueConfidences(t *testing.T) {
	rules := testRuleset().Rules // cap, term (boolean), score (1..3)
	lone := `{"rationale":"Capped at fees.","evidences":[],"not_applicable":false,"data_sufficiency":true,"boolean_output":true}`
	loneAt := strings.Index(lone, "true}")
	several := `{"rules":[{"rule_id":"term","rationale":"x.","boolean_output": false},{"rule_id":"score","rationale":"y.","numerical_output":3}]}`
	falseAt, scoreAt := strings.Index(several, " false"), strings.Index(several, "3}")
	tests := []struct {
		name    string
		content string
		tokens  []TokenLogProb
		pending []Rule
		want    map[string]float64
	}{{
		name:    "lone rule, the other boolean weighed",
		content: lone,
		tokens: tokensOf(lone, []int{loneAt, loneAt + 4}, map[int]TokenLogProb{
			loneAt: {LogProb: ln(0.6), Top: []TokenAlternative{{"true", ln(0.6)}, {"false", ln(0.3)}, {"```", ln(0.1)}}},
		}),
		pending: rules[:1],
		want:    map[string]float64{"cap": 0.6 / 0.9},
	}, {
		name:    "a token holding the space before the value, and a score among scores",
		content: several,
		tokens: tokensOf(several, []int{falseAt, falseAt + 6, scoreAt, scoreAt + 1}, map[int]TokenLogProb{
			falseAt: {LogProb: ln(0.9), Top: []TokenAlternative{{" false", ln(0.9)}, {" true", ln(0.05)}, {" True", ln(0.05)}}},
			scoreAt: {LogProb: ln(0.5), Top: []TokenAlternative{{"3", ln(0.5)}, {"2", ln(0.25)}, {"9", ln(0.25)}}},
		}),
		pending: rules[1:],
		want:    map[string]float64{"term": 0.9 / 0.95, "score": 0.5 / 0.75},
	}, {
		name:    "no tokens: no confidence",
		content: lone,
		pending: rules[:1],
		want:    map[string]float64{},
	}, {
		name:    "a rule id that was not asked",
		content: strings.Replace(several, `"term"`, `"other"`, 1),
		tokens: tokensOf(several, []int{falseAt, falseAt + 6}, map[int]TokenLogProb{
			falseAt: {LogProb: ln(0.9)},
		}),
		pending: rules[1:],
		want:    map[string]float64{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := valueConfidences(tt.content, tt.tokens, tt.pending)
			if len(got) != len(tt.want) {
				t.Fatalf("confidences %v, want %v", got, tt.want)
			}
			for id, w := range tt.want {
				if g, ok := got[id]; !ok || math.Abs(g-w) > 1e-9 {
					t.Errorf("%s: confidence %v, want %v", id, g, w)
				}
			}
		})
	}
}

// TestEvaluateCarriesConfidence: a verdict's confidence comes from the
// answer's log-probabilities, asked for on every judging call; none is
// invented where the server gives none, and none is asked when it is off.
func TestEvaluateCarriesConfidence(t *testing.T) {
	content := answer(t, boolRule("cap", true, capQuote), boolRule("term", false), numRule("score", 2, capQuote))
	at := strings.Index(content, `"boolean_output":true`) + len(`"boolean_output":`)
	tokens := tokensOf(content, []int{at, at + 4}, map[int]TokenLogProb{
		at: {LogProb: ln(0.8), Top: []TokenAlternative{{"true", ln(0.8)}, {"false", ln(0.2)}}},
	})
	for _, tt := range []struct {
		name     string
		source   ConfidenceSource
		tokens   []TokenLogProb
		wantAsk  bool
		wantConf []float64 // -1: none
	}{
		{"logprobs", ConfidenceLogProbs, tokens, true, []float64{0.8, 1, 1}}, // the tokens around cap's value are certain
		{"server gives none", ConfidenceLogProbs, nil, true, []float64{-1, -1, -1}},
		{"off", ConfidenceOff, nil, false, []float64{-1, -1, -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			llm := &scriptedLLM{replies: []scriptedReply{{content: content, tokens: tt.tokens}}}
			res, err := newTestEngine(t, llm, Config{Confidence: tt.source}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()})
			if err != nil {
				t.Fatal(err)
			}
			if got := llm.calls[0].LogProbs; got != tt.wantAsk {
				t.Errorf("log-probabilities asked: %v, want %v", got, tt.wantAsk)
			}
			for i, v := range res.Rules {
				switch want := tt.wantConf[i]; {
				case want < 0 && v.Confidence != nil:
					t.Errorf("%s: confidence %v, want none", v.RuleID, *v.Confidence)
				case want >= 0 && (v.Confidence == nil || math.Abs(*v.Confidence-want) > 1e-9):
					t.Errorf("%s: confidence %v, want %v", v.RuleID, v.Confidence, want)
				}
			}
		})
	}
}

// TestEvaluateSamplesConfidence: the samples source asks the first call's
// question again at the sampling temperature, and a verdict's confidence is
// the share of the answers, its own included, that give its value; a sample
// that fails the shape of one rule leaves that rule's share to the others,
// and a rule no sample answered keeps none.
func TestEvaluateSamplesConfidence(t *testing.T) {
	judged := answer(t, boolRule("cap", true, capQuote), boolRule("term", false), numRule("score", 2, capQuote))
	na := boolRule("term", false)
	na["not_applicable"] = true
	replies := []scriptedReply{
		{content: judged},
		{content: answer(t, boolRule("cap", true), boolRule("term", false), numRule("score", 3))},
		{content: answer(t, boolRule("cap", false), na, numRule("score", 2))},
		{content: answer(t, boolRule("cap", true), boolRule("term", false), numRule("score", 7))}, // 7 is no allowed score
	}
	llm := &scriptedLLM{replies: replies}
	cfg := Config{Confidence: ConfidenceSamples, ConfidenceSamples: 4, SampleTemperature: 0.7, CallConcurrency: 2}
	res, err := newTestEngine(t, llm, cfg).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()})
	if err != nil {
		t.Fatal(err)
	}
	if len(llm.calls) != 4 {
		t.Fatalf("%d calls, want the judged one and 3 samples", len(llm.calls))
	}
	for i, c := range llm.calls {
		want := float32(0)
		if i > 0 {
			want = 0.7
		}
		if c.Temperature == nil || *c.Temperature != want {
			t.Errorf("call %d: temperature %v, want %v", i, c.Temperature, want)
		}
		if c.LogProbs {
			t.Errorf("call %d asked for log-probabilities", i)
		}
		if i > 0 && c.Messages[len(c.Messages)-1].Content != llm.calls[0].Messages[len(llm.calls[0].Messages)-1].Content {
			t.Errorf("sample %d asked something else than the judged call", i)
		}
	}
	// The samples come back in any order; the shares do not depend on it.
	want := map[string]float64{"cap": 3.0 / 4, "term": 3.0 / 4, "score": 2.0 / 3}
	for _, v := range res.Rules {
		if v.Confidence == nil || math.Abs(*v.Confidence-want[v.RuleID]) > 1e-9 {
			t.Errorf("%s: confidence %v, want %v", v.RuleID, v.Confidence, want[v.RuleID])
		}
	}
	if res.Usage.LLMCalls != 4 {
		t.Errorf("usage counts %d calls, want 4", res.Usage.LLMCalls)
	}
}

func TestEvaluateSamplesConfidenceNoneWithoutSamples(t *testing.T) {
	judged := answer(t, boolRule("cap", true, capQuote), boolRule("term", false), numRule("score", 2, capQuote))
	llm := &scriptedLLM{replies: []scriptedReply{{content: judged}, {content: "not an answer"}}}
	res, err := newTestEngine(t, llm, Config{Confidence: ConfidenceSamples, ConfidenceSamples: 2}).Evaluate(context.Background(), Task{Ruleset: testRuleset(), Inputs: testInputs()})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Rules {
		if v.Confidence != nil {
			t.Errorf("%s: confidence %v from its own answer alone, want none", v.RuleID, *v.Confidence)
		}
	}
}

func TestCheckSampling(t *testing.T) {
	for _, tt := range []struct {
		samples int
		temp    float32
		ok      bool
	}{{0, 0, true}, {2, 1, true}, {MaxConfidenceSamples, 2, true}, {1, 1, false}, {MaxConfidenceSamples + 1, 1, false}, {5, -0.1, false}, {5, 2.1, false}} {
		if err := checkSampling(tt.samples, tt.temp); (err == nil) != tt.ok {
			t.Errorf("checkSampling(%d, %v) = %v, want ok %v", tt.samples, tt.temp, err, tt.ok)
		}
	}
}
