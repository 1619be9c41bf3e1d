package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/judging"
	"rulevalidator/verdict"
)

// Systems a report can hold.
const (
	SystemEngine   = "engine"
	SystemBaseline = "baseline"
)

// BaselinePerRule is the one baseline there is: one call per rule with the
// whole input, answered in the llm-rubric style (pass, score, reason).
const BaselinePerRule = "per-rule"

// Options say how to run an evaluation.
type Options struct {
	// LLM is the model port both systems call (required).
	LLM engine.LLM
	// Engine configures the engine; Model is required and is the baseline's
	// model too. Its Hooks are kept and called as well.
	Engine engine.Config
	// Runs is how many times every case is judged (default 1).
	Runs int
	// Baseline is "" (none) or BaselinePerRule.
	Baseline string
	// CompareEvidence lists other evidence modes to judge the engine in
	// beside Engine.Evidence, each reported as the system
	// SystemEngine+":"+mode (e.g. "engine:quote"), in the same run.
	CompareEvidence []engine.EvidenceMode
	// Progress, when set, is told after each case of each run.
	Progress func(system string, run int, caseID string, took time.Duration, err error)
	// Recheck, when set, has the engine judge nothing: its verdicts are
	// this recorded report's (one run, the cite evidence mode), each asked
	// the verify check again with Engine's settings (Confidence must be
	// verify), so that a check's settings are measured for the cost of the
	// checks. It takes no Baseline, CompareEvidence or Runs over 1, and every
	// case of the dataset must be in the report.
	Recheck *Report
	// Attempts, when set, counts the HTTP attempts behind LLM's calls (its
	// Observe is the client's openai.Config.OnAttempt); the cost then
	// counts every attempt, and its tokens are summed over them.
	Attempts *Attempts
}

// Report is the outcome of an evaluation.
type Report struct {
	Dataset string `json:"dataset"`
	Model   string `json:"model"`
	Runs    int    `json:"runs"`
	Cases   int    `json:"cases"`
	// Rules is the number of labelled verdicts per run.
	Rules   int            `json:"labelled_rules"`
	Systems []SystemReport `json:"systems"`
	// Margins are each other system's margin over the baseline; absent
	// without one.
	Margins []Margin `json:"margins_over_baseline,omitempty"`
}

// System returns the named system's report, or nil.
func (r *Report) System(name string) *SystemReport {
	for i := range r.Systems {
		if r.Systems[i].Name == name {
			return &r.Systems[i]
		}
	}
	return nil
}

// SystemReport is how one system did.
type SystemReport struct {
	Name    string       `json:"name"`
	Overall Metrics      `json:"overall"`
	PerRule []RuleReport `json:"per_rule"`
	PerCase []CaseReport `json:"per_case"`
	Cost    Cost         `json:"cost"`
	// Reasks counts the engine's corrective re-asks by reason (one per
	// problem named in a correction); nil for the baseline, which re-asks
	// nothing.
	Reasks map[string]int `json:"reasks_by_reason,omitempty"`
	Spread *Spread        `json:"spread,omitempty"`
	// Overrule is what other --overrule-passes-below thresholds would have
	// made of the engine's boolean verdicts; only with --confidence verify.
	Overrule *OverruleSweep `json:"overrule_sweep,omitempty"`
	Errors   []CaseFailure  `json:"errors,omitempty"`
	// Outcomes are the scored verdicts, case by case, run by run.
	Outcomes []Outcome `json:"outcomes"`
}

// RuleReport is one rule's metrics over every case and run.
type RuleReport struct {
	RuleID  string           `json:"rule_id"`
	Type    verdict.RuleType `json:"type"`
	Metrics Metrics          `json:"metrics"`
}

// CaseReport is one case's metrics over every rule and run, and its cost.
type CaseReport struct {
	Case    string  `json:"case"`
	Metrics Metrics `json:"metrics"`
	Cost    Cost    `json:"cost"`
}

// CaseFailure is a case whose judging failed in one run; its verdicts count
// as unanswered.
type CaseFailure struct {
	Case  string `json:"case"`
	Run   int    `json:"run"`
	Error string `json:"error"`
}

// Cost is what judging took: model calls and tokens as the server reported
// them, and wall time.
type Cost struct {
	// Calls counts the calls the judge made; FailedCalls those that failed.
	Calls       int `json:"calls"`
	FailedCalls int `json:"failed_calls"`
	// AttemptsObserved says the HTTP attempts were counted (see
	// Options.Attempts); the fields below it are then filled in.
	// Attempts counts every HTTP request sent for the calls: each retry and
	// each response-format fallback is one; FailedAttempts those that got
	// no usable answer, FormatRefusals among them those whose response
	// format the server refused.
	AttemptsObserved bool `json:"http_attempts_observed"`
	Attempts         int  `json:"http_attempts"`
	FailedAttempts   int  `json:"failed_http_attempts"`
	FormatRefusals   int  `json:"format_refusals"`
	// Tokens as the server reported them, summed over every HTTP attempt
	// when attempts are observed, else over the calls.
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	CachedTokens     int `json:"cached_tokens"`
	// ModelTime sums the times of the HTTP attempts, when observed (calls
	// made at once each count in full; the waits between retries not at
	// all); Wall is the time judging took.
	ModelTime time.Duration `json:"model_time_ns"`
	Wall      time.Duration `json:"wall_ns"`
	// RulesFiltered and RulesChecked count the verdicts the ruleset's
	// filters and checks decided without the model: what they saved.
	RulesFiltered int `json:"rules_filtered"`
	RulesChecked  int `json:"rules_checked"`
	// ByPurpose splits the calls by what they were for (engine.CallPurpose:
	// judge, reask, rationale, check, ...): where the model time went.
	ByPurpose map[engine.CallPurpose]PurposeCost `json:"by_purpose,omitempty"`
}

// PurposeCost is what the calls of one purpose took. Time is each call's
// time as the judge waited for it, its client's retries included; calls
// made at once each count in full.
type PurposeCost struct {
	Calls            int           `json:"calls"`
	FailedCalls      int           `json:"failed_calls"`
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	Time             time.Duration `json:"time_ns"`
}

func (p PurposeCost) add(o PurposeCost) PurposeCost {
	return PurposeCost{
		Calls: p.Calls + o.Calls, FailedCalls: p.FailedCalls + o.FailedCalls,
		PromptTokens: p.PromptTokens + o.PromptTokens, CompletionTokens: p.CompletionTokens + o.CompletionTokens,
		Time: p.Time + o.Time,
	}
}

func (c Cost) add(o Cost) Cost {
	return Cost{
		Calls: c.Calls + o.Calls, FailedCalls: c.FailedCalls + o.FailedCalls,
		AttemptsObserved: c.AttemptsObserved || o.AttemptsObserved,
		Attempts:         c.Attempts + o.Attempts, FailedAttempts: c.FailedAttempts + o.FailedAttempts, FormatRefusals: c.FormatRefusals + o.FormatRefusals,
		PromptTokens: c.PromptTokens + o.PromptTokens, CompletionTokens: c.CompletionTokens + o.CompletionTokens,
		CachedTokens: c.CachedTokens + o.CachedTokens, ModelTime: c.ModelTime + o.ModelTime, Wall: c.Wall + o.Wall,
		RulesFiltered: c.RulesFiltered + o.RulesFiltered, RulesChecked: c.RulesChecked + o.RulesChecked,
		ByPurpose: addByPurpose(c.ByPurpose, o.ByPurpose),
	}
}

// Spread is how much the runs differ.
type Spread struct {
	// RunAccuracy is each run's overall accuracy.
	RunAccuracy []float64 `json:"run_accuracy"`
	Min         float64   `json:"min"`
	Max         float64   `json:"max"`
	Mean        float64   `json:"mean"`
	// StdDev is the population standard deviation of RunAccuracy;
	// SampleStdDev the sample one (divided by runs − 1), the estimate of how
	// far another run may land.
	StdDev       float64 `json:"stddev"`
	SampleStdDev float64 `json:"sample_stddev"`
	// AnsweredPairs counts the (case, rule) pairs answered in at least one
	// run; AgreeingPairs those among them whose verdict (output and
	// not-applicable flag) was the same in every run, an unanswered run
	// counting as a different verdict. Agreement is their ratio, nil when
	// no pair was answered: a pair unanswered in every run is not
	// agreement.
	AnsweredPairs int      `json:"answered_pairs"`
	AgreeingPairs int      `json:"agreeing_pairs"`
	Agreement     *float64 `json:"agreement"`

	// The other headline figures run by run: balanced accuracy, "not
	// mentioned" said, verdicts with gold spans overlapped, rationales
	// restating the rule and not ending a sentence (shares), and wall time
	// (seconds). Each is nil when some run had nothing to count.
	BalancedAccuracy    *Series `json:"balanced_accuracy,omitempty"`
	NotMentionedSaid    *Series `json:"not_mentioned_said,omitempty"`
	VerdictsOverlapping *Series `json:"verdicts_overlapping_gold,omitempty"`
	RationalesRestating *Series `json:"rationales_restating,omitempty"`
	RationalesUnended   *Series `json:"rationales_unended,omitempty"`
	WallSeconds         *Series `json:"wall_seconds,omitempty"`
}

// Series is one figure run by run, and its spread.
type Series struct {
	Runs []float64 `json:"runs"`
	Min  float64   `json:"min"`
	Max  float64   `json:"max"`
	Mean float64   `json:"mean"`
	// SampleStdDev divides by runs − 1 (0 with one run).
	SampleStdDev float64 `json:"sample_stddev"`
}

// newSeries is the spread of values; nil when any is nil.
func newSeries(values []*float64) *Series {
	if len(values) == 0 {
		return nil
	}
	s := &Series{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, v := range values {
		if v == nil {
			return nil
		}
		s.Runs = append(s.Runs, *v)
		s.Min, s.Max = math.Min(s.Min, *v), math.Max(s.Max, *v)
		s.Mean += *v
	}
	n := float64(len(s.Runs))
	s.Mean /= n
	if n > 1 {
		squares := 0.0
		for _, v := range s.Runs {
			squares += (v - s.Mean) * (v - s.Mean)
		}
		s.SampleStdDev = math.Sqrt(squares / (n - 1))
	}
	return s
}

// addByPurpose sums two splits by purpose into a new one.
func addByPurpose(a, b map[engine.CallPurpose]PurposeCost) map[engine.CallPurpose]PurposeCost {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := make(map[engine.CallPurpose]PurposeCost, len(a)+len(b))
	for _, m := range []map[engine.CallPurpose]PurposeCost{a, b} {
		for k, v := range m {
			out[k] = out[k].add(v)
		}
	}
	return out
}

// meter counts the calls and tokens going through an LLM, and the HTTP
// attempts behind them when they are observed.
type meter struct {
	llm      engine.LLM
	attempts *Attempts
	mu       sync.Mutex
	c        Cost
}

func (m *meter) Chat(ctx context.Context, req engine.ChatRequest) (engine.ChatResponse, error) {
	start := time.Now()
	resp, err := m.llm.Chat(ctx, req)
	took := time.Since(start)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.c.Calls++
	p := PurposeCost{Calls: 1, Time: took}
	if err != nil {
		m.c.FailedCalls++
		p.FailedCalls = 1
	} else {
		m.c.PromptTokens += resp.Usage.PromptTokens
		m.c.CompletionTokens += resp.Usage.CompletionTokens
		m.c.CachedTokens += resp.Usage.CachedTokens
		p.PromptTokens, p.CompletionTokens = resp.Usage.PromptTokens, resp.Usage.CompletionTokens
	}
	if m.c.ByPurpose == nil {
		m.c.ByPurpose = map[engine.CallPurpose]PurposeCost{}
	}
	m.c.ByPurpose[req.Purpose] = m.c.ByPurpose[req.Purpose].add(p)
	return resp, err
}

// take returns the cost counted since the last take and starts afresh.
func (m *meter) take() Cost {
	m.mu.Lock()
	c := m.c
	m.c = Cost{}
	m.mu.Unlock()
	if m.attempts == nil {
		return c
	}
	a := m.attempts.take()
	c.AttemptsObserved = true
	c.Attempts, c.FailedAttempts, c.FormatRefusals = a.Attempts, a.FailedAttempts, a.FormatRefusals
	c.PromptTokens, c.CompletionTokens, c.CachedTokens = a.PromptTokens, a.CompletionTokens, a.CachedTokens
	c.ModelTime = a.ModelTime
	return c
}

// Attempts counts HTTP attempts as a client reports them: give Observe to
// openai.Config.OnAttempt and the Attempts to Options.Attempts. It is safe
// for concurrent use; the zero value is ready.
type Attempts struct {
	mu sync.Mutex
	c  Cost
}

// Observe counts one attempt.
func (a *Attempts) Observe(at openai.Attempt) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.c.Attempts++
	if at.Err != nil {
		a.c.FailedAttempts++
	}
	if at.FormatRefused {
		a.c.FormatRefusals++
	}
	a.c.PromptTokens += at.Usage.PromptTokens
	a.c.CompletionTokens += at.Usage.CompletionTokens
	a.c.CachedTokens += at.Usage.CachedTokens
	a.c.ModelTime += at.Took
}

func (a *Attempts) take() Cost {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.c
	a.c = Cost{}
	return c
}

// judge produces the verdicts of one case; a verdict missing from the map
// counts as unanswered.
// A judge gives a case's verdicts by rule id, and what the ruleset's filters
// and checks decided without the model (Usage.RulesFiltered, RulesChecked).
type judge func(ctx context.Context, c *Case) (map[string]*engine.Verdict, verdict.Usage, error)

// EvalTenant is the tenant the engine judges a dataset's cases for.
const EvalTenant = "eval"

// Run judges every case of ds opts.Runs times with the engine, and with the
// baseline when asked, and scores the verdicts. A case whose judging fails
// is recorded and scored as unanswered; Run stops early only when the model
// cannot be reached or ctx ends.
func Run(ctx context.Context, ds *Dataset, opts Options) (*Report, error) {
	if opts.LLM == nil {
		return nil, errors.New("eval: an LLM is required")
	}
	if opts.Engine.Model == "" {
		return nil, errors.New("eval: a model name is required")
	}
	if opts.Runs == 0 {
		opts.Runs = 1
	}
	if opts.Runs < 0 {
		return nil, fmt.Errorf("eval: runs %d must be positive", opts.Runs)
	}
	if opts.Baseline != "" && opts.Baseline != BaselinePerRule {
		return nil, fmt.Errorf("eval: unknown baseline %q (known: %s)", opts.Baseline, BaselinePerRule)
	}
	var recorded map[string][]Outcome
	if opts.Recheck != nil {
		if opts.Baseline != "" || len(opts.CompareEvidence) > 0 || opts.Runs > 1 {
			return nil, errors.New("eval: a recheck judges no baseline, no other evidence mode and one run")
		}
		if opts.Engine.Confidence != engine.ConfidenceVerify {
			return nil, errors.New("eval: a recheck asks the verify check: the engine's confidence must be verify")
		}
		var err error
		if recorded, err = recordedVerdicts(opts.Recheck); err != nil {
			return nil, fmt.Errorf("eval: recheck: %w", err)
		}
		for _, c := range ds.Cases {
			if _, ok := recorded[c.ID]; !ok {
				return nil, fmt.Errorf("eval: recheck: case %q is not in the recorded report", c.ID)
			}
		}
	}
	m := &meter{llm: opts.LLM, attempts: opts.Attempts}
	// Each engine counts its re-asks by reason; the caller's hook is kept.
	reasks := make([]map[string]int, 1+len(opts.CompareEvidence))
	newEngine := func(i int, mode engine.EvidenceMode) (*engine.Engine, error) {
		cfg := opts.Engine
		if mode != "" {
			cfg.Evidence = mode
		}
		counts := map[string]int{}
		reasks[i] = counts
		caller := cfg.Hooks.OutputRetry
		var mu sync.Mutex
		cfg.Hooks.OutputRetry = func(reason string) {
			mu.Lock()
			counts[reason]++
			mu.Unlock()
			if caller != nil {
				caller(reason)
			}
		}
		return engine.New(m, cfg)
	}
	eng, err := newEngine(0, "")
	if err != nil {
		return nil, err
	}
	others := make([]*engine.Engine, len(opts.CompareEvidence))
	for i, mode := range opts.CompareEvidence {
		if others[i], err = newEngine(i+1, mode); err != nil {
			return nil, err
		}
	}
	rep := &Report{Dataset: ds.Name, Model: opts.Engine.Model, Runs: opts.Runs, Cases: len(ds.Cases)}
	for _, c := range ds.Cases {
		rep.Rules += len(c.Labels)
	}

	systems := []struct {
		name  string
		judge judge
	}{{SystemEngine, engineJudge(eng)}}
	if recorded != nil {
		systems[0].judge = recheckJudge(eng, recorded)
	}
	for i, mode := range opts.CompareEvidence {
		systems = append(systems, struct {
			name  string
			judge judge
		}{SystemEngine + ":" + string(mode), engineJudge(others[i])})
	}
	if opts.Baseline == BaselinePerRule {
		maxTokens := opts.Engine.MaxTokens
		if maxTokens == 0 || maxTokens > baselineMaxTokens {
			maxTokens = baselineMaxTokens
		}
		b := &baseline{llm: m, model: opts.Engine.Model, maxTokens: maxTokens, temperature: opts.Engine.Temperature}
		systems = append(systems, struct {
			name  string
			judge judge
		}{SystemBaseline, b.judge})
	}
	// The systems take turns on every case, so the time each spends is
	// measured under the same load on a shared machine (and the same warm
	// or cold server), case by case.
	srs := make([]*SystemReport, len(systems))
	caseCosts := make([]map[string]Cost, len(systems))
	runWalls := make([][]time.Duration, len(systems))
	for i, s := range systems {
		srs[i] = &SystemReport{Name: s.name}
		caseCosts[i] = map[string]Cost{}
		runWalls[i] = make([]time.Duration, opts.Runs)
	}
	for run := 1; run <= opts.Runs; run++ {
		for _, c := range ds.Cases {
			for i, s := range systems {
				took, err := judgeCase(ctx, c, run, s.name, s.judge, m, opts, srs[i], caseCosts[i])
				if err != nil {
					return nil, err
				}
				runWalls[i][run-1] += took
			}
		}
	}
	rules, cases := ruleOrder(ds), make([]string, len(ds.Cases))
	for i, c := range ds.Cases {
		cases[i] = c.ID
	}
	for i, sr := range srs {
		summariseSystem(sr, rules, cases, caseCosts[i], opts.Runs, runWalls[i])
		if opts.Engine.Confidence == engine.ConfidenceVerify && sr.Name != SystemBaseline {
			sr.Overrule = overruleSweep(sr.Outcomes, opts.Engine.OverrulePassesBelow)
		}
		if i < len(reasks) {
			sr.Reasks = reasks[i]
		}
		rep.Systems = append(rep.Systems, *sr)
	}
	rep.Margins = margins(rep, runWalls)
	return rep, nil
}

func engineJudge(eng *engine.Engine) judge {
	return func(ctx context.Context, c *Case) (map[string]*engine.Verdict, verdict.Usage, error) {
		// One tenant for the dataset: with a verdict cache (Options.Engine.Cache), a
		// case judged again asks only for what changed.
		res, err := judging.Evaluate(ctx, eng, c.Ruleset, c.Request, nil)
		if err != nil {
			return nil, verdict.Usage{}, err
		}
		out := make(map[string]*engine.Verdict, len(res.Rules))
		for i := range res.Rules {
			out[res.Rules[i].RuleID] = &res.Rules[i]
		}
		return out, res.Usage, nil
	}
}

// judgeCase has system name judge case c once (run run), adding the cost
// and the scored outcomes to sr and caseCost, and returns the time it took.
func judgeCase(ctx context.Context, c *Case, run int, name string, j judge, m *meter, opts Options, sr *SystemReport, caseCost map[string]Cost) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.take()
	start := time.Now()
	verdicts, usage, err := j(ctx, c)
	took := time.Since(start)
	cost := m.take()
	cost.Wall = took
	cost.RulesFiltered, cost.RulesChecked = usage.RulesFiltered, usage.RulesChecked
	caseCost[c.ID] = caseCost[c.ID].add(cost)
	sr.Cost = sr.Cost.add(cost)
	if opts.Progress != nil {
		opts.Progress(name, run, c.ID, took, err)
	}
	if err != nil {
		if errors.Is(err, engine.ErrLLMUnavailable) || ctx.Err() != nil {
			return took, fmt.Errorf("%s: case %q: %w", name, c.ID, err)
		}
		sr.Errors = append(sr.Errors, CaseFailure{Case: c.ID, Run: run, Error: err.Error()})
	}
	for _, lab := range c.Labels {
		sr.Outcomes = append(sr.Outcomes, scoreVerdict(c.ID, run, lab, verdicts[lab.RuleID]))
	}
	return took, nil
}

// summariseSystem fills sr's overall, per-rule, per-case and spread figures
// from its outcomes, the rules and cases in the order given; runWalls is
// the wall time of each run.
func summariseSystem(sr *SystemReport, rules []ruleKey, cases []string, caseCost map[string]Cost, runs int, runWalls []time.Duration) {
	sr.Overall = summarise(sr.Outcomes)
	sr.PerRule, sr.PerCase = nil, nil
	for _, id := range rules {
		outs := filter(sr.Outcomes, func(o Outcome) bool { return o.RuleID == id.id })
		sr.PerRule = append(sr.PerRule, RuleReport{RuleID: id.id, Type: id.typ, Metrics: summarise(outs)})
	}
	for _, c := range cases {
		outs := filter(sr.Outcomes, func(o Outcome) bool { return o.Case == c })
		sr.PerCase = append(sr.PerCase, CaseReport{Case: c, Metrics: summarise(outs), Cost: caseCost[c]})
	}
	sr.Spread = nil
	if runs > 1 {
		sr.Spread = spread(sr.Outcomes, runs, runWalls)
	}
}

type ruleKey struct {
	id  string
	typ verdict.RuleType
}

// ruleOrder lists the labelled rules in the order they first appear.
func ruleOrder(ds *Dataset) []ruleKey {
	var keys []ruleKey
	seen := map[string]bool{}
	for _, c := range ds.Cases {
		for _, l := range c.Labels {
			if !seen[l.RuleID] {
				seen[l.RuleID] = true
				keys = append(keys, ruleKey{l.RuleID, l.Type})
			}
		}
	}
	return keys
}

func filter(outs []Outcome, keep func(Outcome) bool) []Outcome {
	var kept []Outcome
	for _, o := range outs {
		if keep(o) {
			kept = append(kept, o)
		}
	}
	return kept
}

func spread(outs []Outcome, runs int, runWalls []time.Duration) *Spread {
	s := &Spread{}
	var balanced, said, overlapping, restating, unended, wall []*float64
	for run := 1; run <= runs; run++ {
		m := summarise(filter(outs, func(o Outcome) bool { return o.Run == run }))
		acc := 0.0
		if m.Accuracy != nil {
			acc = *m.Accuracy
		}
		s.RunAccuracy = append(s.RunAccuracy, acc)
		balanced = append(balanced, m.Boolean.BalancedAccuracy)
		said = append(said, m.NotMentioned.Recall)
		overlapping = append(overlapping, m.Evidence.VerdictsOverlapping)
		restating = append(restating, m.Rationales.RestatingShare)
		unended = append(unended, m.Rationales.UnendedShare)
		if run <= len(runWalls) {
			secs := runWalls[run-1].Seconds()
			wall = append(wall, &secs)
		}
	}
	s.BalancedAccuracy, s.NotMentionedSaid, s.VerdictsOverlapping = newSeries(balanced), newSeries(said), newSeries(overlapping)
	s.RationalesRestating, s.RationalesUnended, s.WallSeconds = newSeries(restating), newSeries(unended), newSeries(wall)
	s.Min, s.Max = math.Inf(1), math.Inf(-1)
	for _, a := range s.RunAccuracy {
		s.Min, s.Max = math.Min(s.Min, a), math.Max(s.Max, a)
		s.Mean += a
	}
	n := float64(len(s.RunAccuracy))
	s.Mean /= n
	squares := 0.0
	for _, a := range s.RunAccuracy {
		squares += (a - s.Mean) * (a - s.Mean)
	}
	s.StdDev = math.Sqrt(squares / n)
	if n > 1 {
		s.SampleStdDev = math.Sqrt(squares / (n - 1))
	}

	type pair struct{ c, r string }
	first := map[pair]string{}
	same := map[pair]bool{}
	answered := map[pair]bool{}
	for _, o := range outs {
		k := pair{o.Case, o.RuleID}
		if o.Answered {
			answered[k] = true
		}
		v := verdictKey(o)
		if f, ok := first[k]; !ok {
			first[k], same[k] = v, true
		} else if f != v {
			same[k] = false
		}
	}
	for k := range answered {
		if same[k] {
			s.AgreeingPairs++
		}
	}
	s.AnsweredPairs = len(answered)
	s.Agreement = ratio(s.AgreeingPairs, s.AnsweredPairs)
	return s
}

// verdictKey renders what a verdict said, for comparing runs.
func verdictKey(o Outcome) string {
	switch {
	case !o.Answered:
		return "none"
	case o.Boolean != nil:
		return fmt.Sprintf("b=%t na=%t", *o.Boolean, o.NotApplicable)
	case o.Numerical != nil:
		return fmt.Sprintf("n=%d na=%t", *o.Numerical, o.NotApplicable)
	}
	return fmt.Sprintf("na=%t", o.NotApplicable)
}
