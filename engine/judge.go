package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"rulevalidator/engine/plan"
)

// Defaults of the token budget.
const (
	// DefaultContextTokens is the context window assumed when neither the
	// configuration nor the server says: small enough for the models people
	// run themselves, so that a request is split rather than refused.
	DefaultContextTokens = 8192
	// DefaultCallConcurrency is how many calls of one request run at once.
	DefaultCallConcurrency = 4
)

// ContextWindower is implemented by LLMs that can ask the server how many
// tokens a model's context window holds. The engine asks once per model when
// Config.ContextTokens is not set.
type ContextWindower interface {
	ContextWindow(ctx context.Context, model string) (int, error)
}

// Token arithmetic of a call besides the texts themselves.
const (
	// perMessageTokens covers a chat template's turn markers.
	perMessageTokens = 8
	// reaskTokens and reaskTokensPerRule bound a corrective message: its
	// fixed text, and the problems it names for one rule.
	reaskTokens        = 64
	reaskTokensPerRule = 100
	// citeOverhead is what the ids before each passage add to a
	// document's tokens in cite mode, at most: a passage is a sentence of
	// some 30 tokens or more, its id and brackets about 7.
	citeOverhead = 1.25
	// windowProbeRetry is how long a failed context-window probe is
	// remembered before the server is asked again.
	windowProbeRetry = 5 * time.Minute
	// windowProbeTimeout bounds one context-window probe, shared by the
	// requests waiting for it.
	windowProbeTimeout = 30 * time.Second
)

// contextWindows remembers, per model, the context window the server
// reported. One probe per model runs at a time, however many requests need
// the window meanwhile. It is safe for concurrent use.
type contextWindows struct {
	mu    sync.Mutex
	known map[string]windowEntry
	probe singleflight.Group
}

type windowEntry struct {
	tokens int // 0: the server did not say
	at     time.Time
}

func newContextWindows() *contextWindows {
	return &contextWindows{known: map[string]windowEntry{}}
}

// contextTokens is model's context window: configured, else learned from
// the server (reported, or named in a refusal), else DefaultContextTokens.
// The server is asked once per model (again windowProbeRetry after a probe
// that learned nothing), by one probe that the requests needing the window
// meanwhile share: it runs detached from any one of them, and each stops
// waiting when its own ctx ends. A probe that fails permanently (a refused
// API key) fails the requests: their own calls would fail the same way.
func (e *Engine) contextTokens(ctx context.Context, model string) (int, error) {
	if e.cfg.ContextTokens > 0 {
		return e.cfg.ContextTokens, nil
	}
	cw, ok := e.llm.(ContextWindower)
	if !ok {
		return DefaultContextTokens, nil
	}
	if n, known := e.windows.lookup(model); known {
		return n, nil
	}
	shared := context.WithoutCancel(ctx)
	probed := e.windows.probe.DoChan(model, func() (any, error) { return e.probeWindow(shared, cw, model) })
	select {
	case r := <-probed:
		if r.Err != nil {
			return 0, r.Err
		}
		return r.Val.(int), nil
	case <-ctx.Done():
		return 0, fmt.Errorf("engine: waiting for model %q's context window: %w", model, context.Cause(ctx))
	}
}

// lookup is model's window when no probe is due: learned, or assumed after
// a recent probe that learned nothing.
func (w *contextWindows) lookup(model string) (tokens int, known bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	entry, seen := w.known[model]
	switch {
	case entry.tokens > 0:
		return entry.tokens, true
	case seen && time.Since(entry.at) < windowProbeRetry:
		return DefaultContextTokens, true
	}
	return 0, false
}

// probeWindow asks the server for model's window and remembers the answer.
func (e *Engine) probeWindow(ctx context.Context, cw ContextWindower, model string) (int, error) {
	w := e.windows
	if n, known := w.lookup(model); known { // a probe just ended
		return n, nil
	}
	w.mu.Lock()
	_, seen := w.known[model]
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, windowProbeTimeout)
	defer cancel()
	n, err := cw.ContextWindow(ctx, model)
	if err != nil {
		if isPermanent(err) {
			return 0, fmt.Errorf("engine: asking the server for model %q's context window: %w", model, err)
		}
		n = 0
		if !seen {
			e.cfg.Logger.Info("engine: context window not reported by the server; assuming the default (set it with the context-tokens setting)",
				"model", model, "assumed", DefaultContextTokens, "error", err)
		}
	}
	w.mu.Lock()
	if cur := w.known[model]; cur.tokens == 0 { // a window learned meanwhile wins
		w.known[model] = windowEntry{tokens: n, at: time.Now()}
	}
	w.mu.Unlock()
	if n > 0 {
		return n, nil
	}
	return DefaultContextTokens, nil
}

// learn remembers a window the server named in a refusal; it is not asked
// again.
func (w *contextWindows) learn(model string, tokens int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known[model] = windowEntry{tokens: tokens, at: time.Now()}
}

// budget is the token arithmetic of one request's calls.
type budget struct {
	window   int     // context window
	maxTok   int     // Config.MaxTokens (0: the server's default)
	ratio    float64 // the model's correction of plan.Count
	perRule  int     // expected answer tokens per rule
	reserved int     // answer tokens kept when planning
}

func (e *Engine) budgetFor(ctx context.Context, model string) (budget, error) {
	window, err := e.contextTokens(ctx, model)
	if err != nil {
		return budget{}, err
	}
	b := budget{
		window:  window,
		maxTok:  e.cfg.MaxTokens,
		ratio:   e.est.PromptRatio(model),
		perRule: e.est.AnswerTokensPerRule(model),
	}
	b.reserved = b.maxTok
	if b.reserved == 0 {
		b.reserved = min(max(b.window/4, 256), 4096)
	}
	if b.reserved >= b.window {
		return b, fmt.Errorf("engine: the answer budget of %d tokens (max tokens) leaves no room for a prompt in the context window of %d tokens", b.reserved, b.window)
	}
	return b, nil
}

func (b budget) tokens(s string) int { return plan.Scale(plan.Count(s), b.ratio) }

// fits reports whether one call with every rule and the whole prompt fits:
// the prompt and the answers within the window, and the answers within
// max tokens when that is set.
func (b budget) fits(promptTokens, rules int) bool {
	answers := rules * b.perRule
	if b.maxTok > 0 {
		return promptTokens <= b.window-b.maxTok && answers <= b.maxTok
	}
	return promptTokens+answers <= b.window
}

// judge judges every rule of rs on in: in one conversation when it fits the
// model's budget, as today; otherwise by a plan of several conversations,
// each on the passages most relevant to its rules. When the server refuses
// a call as too long for a context window it names, smaller than the one
// assumed, the window is remembered for the model and the request judged
// again within it.
func (e *Engine) judge(ctx context.Context, model string, rs *Ruleset, in *Inputs, an *anchoring, cr *cacheRun) ([]Verdict, Usage, error) {
	verdicts, usage, err := e.judgeWithin(ctx, model, rs, in, an, cr)
	if err == nil || e.cfg.ContextTokens > 0 {
		return verdicts, usage, err
	}
	n, ok := contextLimit(err)
	if !ok {
		return verdicts, usage, err
	}
	if window, werr := e.contextTokens(ctx, model); werr != nil || n >= window {
		return verdicts, usage, err
	}
	e.cfg.Logger.Warn("engine: the server's context window is smaller than assumed; judging again within it (set it with the context-tokens setting)",
		"model", model, "context_tokens", n)
	e.windows.learn(model, n)
	verdicts, again, err := e.judgeWithin(ctx, model, rs, in, an, cr)
	total := usage.Add(again)
	total.PlannedCalls = again.PlannedCalls // the plan the verdicts come from
	return verdicts, total, err
}

// contextLimit is the context window a server named when it refused a prompt as too long for
// it, if err is such a refusal (a ContextWindowError).
func contextLimit(err error) (int, bool) {
	var cw ContextWindowError
	if !errors.As(err, &cw) {
		return 0, false
	}
	n := cw.ContextWindow()
	return n, n > 0
}

// judgeWithin is judge within the context window known now: plan the
// request's calls (one call when everything fits), render each call's
// material, take from the verdict cache (cr, nil: none) the verdicts of
// rules judged on the same material before, converse with the model call by
// call for the other rules (at most Config.CallConcurrency at once; a call
// all of whose rules hit is not made), and merge the verdicts in ruleset
// order.
func (e *Engine) judgeWithin(ctx context.Context, model string, rs *Ruleset, in *Inputs, an *anchoring, cr *cacheRun) ([]Verdict, Usage, error) {
	b, err := e.budgetFor(ctx, model)
	if err != nil {
		return nil, Usage{}, err
	}
	r := renderer{in: in}
	if e.cfg.Evidence == EvidenceCite {
		r.ps = an.passages()
	}
	p, whole, err := e.planCalls(rs, in, r, b)
	if err != nil {
		return nil, Usage{}, err
	}
	if splitCalls(p, e.cfg.RulesPerCall) {
		whole = r.whole("") // each call adds its own rules
	}

	docs := in.Documents()
	// Page bounds are for excerpts only: counting every page's code points
	// is a pass over the documents that a single call does not need.
	var bounds [][][2]int
	if slices.ContainsFunc(p.Calls, func(c plan.Call) bool { return c.Partial }) {
		bounds = pageBounds(docs)
	}
	// asked is, per call, the rules the model is asked about: all of the
	// call's, less those the cache holds. mats holds the excerpts rendered
	// for the cache's keys, for the calls still to make.
	asked := make([][]int, len(p.Calls))
	var mats []material
	if cr != nil {
		if mats, err = e.fromCache(ctx, cr, model, rs, docs, p, r, whole, bounds); err != nil {
			return nil, Usage{}, err
		}
		for c, call := range p.Calls {
			for _, ri := range call.Rules {
				if cr.hits[ri] == nil {
					asked[c] = append(asked[c], ri)
				}
			}
		}
	} else {
		for c, call := range p.Calls {
			asked[c] = call.Rules
		}
	}
	calls := 0
	for _, a := range asked {
		if len(a) > 0 {
			calls++
		}
	}
	if calls > 0 {
		e.observePlan(model, calls)
	}

	type outcome struct {
		verdicts []Verdict
		usage    Usage
	}
	outcomes := make([]outcome, len(p.Calls))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.cfg.CallConcurrency)
	for c := range p.Calls {
		if len(asked[c]) == 0 {
			continue
		}
		g.Go(func() error {
			call := p.Calls[c]
			rules := rs.Rules // all of them: the compiled prompt is cached
			if len(asked[c]) < len(rs.Rules) {
				rules = make([]Rule, len(asked[c]))
				for i, ri := range asked[c] {
					rules[i] = rs.Rules[ri]
				}
			}
			// Only a call holding the documents whole shows them whole: an
			// excerpt's call must not pay for a copy of a long document.
			m := whole
			switch {
			case mats != nil && mats[c].user != "":
				m, mats[c] = mats[c], material{}
			case call.Partial:
				m = r.excerpt(docs, p, c, bounds)
			}
			v, u, err := e.converse(gctx, model, rs, rules, m, an)
			outcomes[c] = outcome{v, u}
			return err
		})
	}
	err = g.Wait()
	var usage Usage
	for _, o := range outcomes {
		usage = usage.Add(o.usage)
	}
	usage.PlannedCalls = calls
	if err != nil {
		return nil, usage, err
	}

	verdicts := make([]Verdict, len(rs.Rules))
	for c, call := range p.Calls {
		// A verdict names the pages it was judged on only when the request
		// was split: a single call saw everything.
		var pages []DocumentPages
		if len(p.Chunks) > 0 {
			pages = considered(docs, p.Pages(c))
		}
		if cr != nil && len(asked[c]) > 0 {
			// Each judged verdict's share of its call's tokens is what a
			// later hit on it saves.
			u := outcomes[c].usage
			share := (u.PromptTokens + u.CompletionTokens) / len(asked[c])
			for i, ri := range asked[c] {
				v := outcomes[c].verdicts[i]
				cr.fresh[ri], cr.tokens[ri] = &v, share
			}
		}
		judged := 0
		for _, ri := range call.Rules {
			var v Verdict
			if cr != nil && cr.hits[ri] != nil {
				v = cr.hit(ri, rs.Rules[ri])
			} else {
				v = outcomes[c].verdicts[judged]
				judged++
			}
			v.PagesConsidered = pages
			if p.Cut[ri] && call.Partial {
				cutByBudget(&v, an)
			}
			verdicts[ri] = v
		}
	}
	return verdicts, usage, nil
}

// fromCache computes the cache key of every rule of p, from the material
// its call shows, and looks the keys up in cr. It returns, per call, the
// excerpt rendered for a partial call some of whose rules missed, so that
// it is not rendered again.
func (e *Engine) fromCache(ctx context.Context, cr *cacheRun, model string, rs *Ruleset, docs []Document, p *plan.Plan, r renderer, whole material, bounds [][][2]int) ([]material, error) {
	cr.reset(len(rs.Rules))
	mats := make([]material, len(p.Calls))
	var wholeDigest string
	for c, call := range p.Calls {
		var digest string
		if call.Partial {
			mats[c] = r.excerpt(docs, p, c, bounds)
			digest = materialDigest(mats[c])
		} else {
			if wholeDigest == "" {
				wholeDigest = materialDigest(whole)
			}
			digest = wholeDigest
		}
		for _, ri := range call.Rules {
			cr.keys[ri] = e.verdictKey(cr.scope.Tenant, model, rs.Rules[ri], digest)
		}
	}
	if err := e.lookup(ctx, cr, model, rs, docs); err != nil {
		return nil, err
	}
	for c, call := range p.Calls {
		if !slices.ContainsFunc(call.Rules, func(ri int) bool { return cr.hits[ri] == nil }) {
			mats[c] = material{} // every rule hit: the call is not made
		}
	}
	return mats, nil
}

// planCalls is the plan of a request's calls: one call holding everything
// when it fits the budget (its material rendered, and returned as whole),
// else the plan of several calls on the passages most relevant to their
// rules (whole is then rendered only if some call holds every document).
func (e *Engine) planCalls(rs *Ruleset, in *Inputs, r renderer, b budget) (p *plan.Plan, whole material, err error) {
	first, err := e.compiled.get(rs)
	if err != nil {
		return nil, material{}, err
	}
	// Rendered with every rule: a request that fits one call sends it as it
	// is; one split into calls renders the documents again for its calls.
	whole = r.whole(first.rules)
	// plan.Count never exceeds a text's length in bytes: a request that
	// fits by bytes needs no counting.
	fitsBytes := b.fits(plan.Scale(len(first.system)+len(whole.user), b.ratio)+3*perMessageTokens, len(rs.Rules))
	if fitsBytes || b.fits(b.tokens(first.system)+b.tokens(whole.user)+3*perMessageTokens, len(rs.Rules)) {
		all := make([]int, len(rs.Rules))
		for i := range all {
			all[i] = i
		}
		return &plan.Plan{Calls: []plan.Call{{Rules: all}}, Cut: make([]bool, len(rs.Rules)), CallOf: make([]int, len(rs.Rules))}, whole, nil
	}
	whole = material{} // let it go: a split request's calls add their own rules
	p, err = e.makePlan(rs, r, in.Documents(), b)
	if err != nil {
		return nil, material{}, err
	}
	for _, c := range p.Calls {
		if !c.Partial {
			return p, r.whole(""), nil
		}
	}
	return p, material{}, nil
}

// splitCalls cuts every call of p into calls of at most n rules (n 0: as
// planned), each on the same material, keeping p.CallOf right. It reports
// whether any call was cut.
func splitCalls(p *plan.Plan, n int) bool {
	if n <= 0 {
		return false
	}
	var out []plan.Call
	for _, c := range p.Calls {
		for i := 0; i < len(c.Rules); i += n {
			part := c
			part.Rules = c.Rules[i:min(i+n, len(c.Rules))]
			for _, r := range part.Rules {
				p.CallOf[r] = len(out)
			}
			out = append(out, part)
		}
	}
	cut := len(out) != len(p.Calls)
	p.Calls = out
	return cut
}

func (e *Engine) observePlan(model string, calls int) {
	if e.cfg.Hooks.PlannedCalls != nil {
		e.cfg.Hooks.PlannedCalls(model, calls)
	}
}

// cutByBudget marks a verdict judged on passages cut by the budget as judged
// on insufficient data, unless its evidence supports it.
func cutByBudget(v *Verdict, an *anchoring) {
	if !v.DataSufficiency {
		return
	}
	for _, ev := range v.Evidences {
		if an.supports(ev) {
			return
		}
	}
	v.DataSufficiency = false
	v.SufficiencyNote = "judged on an excerpt: the passages most relevant to the rule did not all fit the model's context window, and no quoted evidence supports the verdict"
}

// considered names, document by document in request order, the pages a call
// held.
func considered(docs []Document, pages map[int][]int) []DocumentPages {
	out := []DocumentPages{}
	for d, doc := range docs {
		if ps := pages[d]; len(ps) > 0 {
			out = append(out, DocumentPages{Document: doc.Name, Pages: ps})
		}
	}
	return out
}

// makePlan measures the parts of the prompt every call carries and plans the
// calls.
func (e *Engine) makePlan(rs *Ruleset, r renderer, docs []Document, b budget) (*plan.Plan, error) {
	frame := SystemPrompt(&Ruleset{ID: rs.ID, Version: rs.Version}, e.cfg.Evidence) + RulesPrompt(nil)
	frameTokens := b.tokens(frame)
	// A corrective re-ask sends the prompt again with the answer being
	// corrected and the correction: each rule keeps room for its part of
	// them, so that a call that fits its first ask fits its re-asks.
	reask, reaskPerRule := 0, 0
	if e.cfg.OutputRetries > 0 {
		reask, reaskPerRule = reaskTokens, b.perRule+reaskTokensPerRule
	}
	rules := make([]plan.Rule, len(rs.Rules))
	for i, rule := range rs.Rules {
		entry := b.tokens(RulesPrompt([]Rule{rule}))
		rules[i] = plan.Rule{ID: rule.RuleID, Query: rule.RuleText + "\n" + rule.NotApplicableText, PromptTokens: max(entry, 1) + reaskPerRule}
	}
	pdocs := make([]plan.Document, len(docs))
	perDoc := 0
	for i, d := range docs {
		pdocs[i] = plan.Document{Name: d.Name, Pages: d.Pages}
		// Its markers, its description and its line in the excerpt note.
		name := markerName(d.Name)
		perDoc = max(perDoc, b.tokens(startMarker("Document", name)+endMarker("Document", name)+
			excerptDocLine(name, "auxiliary", len(d.Pages), nil)+excerptDescription("auxiliary", len(d.Pages), nil))+8)
	}
	others, _ := r.others()
	othersTokens := b.tokens(others)
	// The chat template, the excerpt note's fixed text and a margin for
	// what the estimate does not see (the schema in the prompt of some
	// servers).
	fixed := frameTokens + othersTokens + b.tokens(excerptHeader) + 4*perMessageTokens + b.window/32 + reask
	// A chunk's page marker, elision lines, and its page in the note and
	// the document's description.
	maxPages := 1
	for _, d := range docs {
		maxPages = max(maxPages, len(d.Pages))
	}
	n := strconv.Itoa(maxPages)
	perChunk := b.tokens(pageMarker(maxPages)+"\n"+elision+elision) + 2*b.tokens(", "+n+"-"+n)
	// In cite mode every passage of a chunk is shown behind its id, which
	// the chunk's own text does not count.
	chunkRatio := b.ratio
	if r.ps != nil {
		chunkRatio *= citeOverhead
	}
	pl, err := plan.Make(pdocs, rules, plan.Budget{
		Context:       b.window,
		Answer:        b.reserved,
		Fixed:         fixed,
		AnswerPerRule: b.perRule,
		PerChunk:      perChunk,
		PerDocument:   perDoc,
	}, chunkRatio)
	if errors.Is(err, plan.ErrTooSmall) {
		return nil, fmt.Errorf("%w: %w", ErrInputTooLarge, err)
	}
	return pl, err
}

// observeUsage teaches the estimator how the model's tokenizer compares with
// the estimate and how long its answers run.
func (e *Engine) observeUsage(model string, messages []Message, rules int, u Usage) {
	if u.PromptTokens > 0 && e.est.WantsPrompt(model) {
		counted := 0
		for _, m := range messages {
			counted += plan.Count(m.Content) + perMessageTokens
		}
		e.est.ObservePrompt(model, counted, u.PromptTokens)
	}
	e.est.ObserveAnswer(model, rules, u.CompletionTokens)
}
