package engine

import (
	"context"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/sync/errgroup"

	"rulevalidator/engine/plan"
	"rulevalidator/internal/tracing"
	"rulevalidator/verdict"
)

// This file orchestrates a request's calls: plan them (planning.go) within the token budget
// (budget.go) of the model's context window (window.go), take what the verdict cache holds,
// converse with the model for the rest, and merge the verdicts.

// judge judges every rule of rs on in: in one conversation when it fits the
// model's budget, as today; otherwise by a plan of several conversations,
// each on the passages most relevant to its rules. When the server refuses
// a call as too long for a context window it names, smaller than the one
// assumed, the window is remembered for the model and the request judged
// again within it.
func (e *Engine) judge(ctx context.Context, model string, rs *Ruleset, in *Inputs, an *anchoring, cr *cacheRun) ([]Verdict, verdict.Usage, error) {
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
	e.cfg.Logger.WarnContext(ctx, "engine: the server's context window is smaller than assumed; judging again within it (set it with the context-tokens setting)",
		"model", model, "context_tokens", n)
	e.windows.learn(model, n)
	verdicts, again, err := e.judgeWithin(ctx, model, rs, in, an, cr)
	total := usage.Add(again)
	total.PlannedCalls = again.PlannedCalls // the plan the verdicts come from
	return verdicts, total, err
}

// judgeWithin is judge within the context window known now: plan the
// request's calls (one call when everything fits), render each call's
// material, take from the verdict cache (cr, nil: none) the verdicts of
// rules judged on the same material before, converse with the model call by
// call for the other rules (at most Config.CallConcurrency at once; a call
// all of whose rules hit is not made), and merge the verdicts in ruleset
// order.
func (e *Engine) judgeWithin(ctx context.Context, model string, rs *Ruleset, in *Inputs, an *anchoring, cr *cacheRun) ([]Verdict, verdict.Usage, error) {
	rc, err := e.prepareCalls(ctx, model, rs, in, an, cr)
	if err != nil {
		return nil, verdict.Usage{}, err
	}
	calls := rc.toMake()
	// Every call of the request sends its instructions the same way, decided
	// once; a call all of whose rules hit needs no decision.
	var mode Instructions
	settled := true
	if calls > 0 {
		e.observePlan(model, calls)
		if mode, settled, err = e.instructionMode(ctx, model); err != nil {
			return nil, verdict.Usage{}, err
		}
	}

	outcomes, err := e.makeCalls(ctx, model, mode, rs, an, rc)
	var usage verdict.Usage
	for _, o := range outcomes {
		usage = usage.Add(o.usage)
	}
	usage.PlannedCalls = calls
	if err != nil {
		return nil, usage, err
	}
	if e.cfg.Confidence == ConfidenceVerify {
		// After every call of the request: a check shows other text than
		// the material, and a server that caches one prompt would read the
		// documents again for the next call.
		u, err := e.verifyConfidences(ctx, model, mode, an, rc.judged(rs, outcomes))
		usage = usage.Add(u)
		if err != nil {
			return nil, usage, err
		}
	}
	return rc.merge(rs, an, cr, settled, outcomes), usage, nil
}

// requestCalls is a request's calls as planned: the plan, what each call
// shows the model and which rules it asks about.
type requestCalls struct {
	p *plan.Plan
	r renderer
	// whole is the material of a call that shows the documents whole.
	whole material
	docs  []Document
	// bounds are the documents' page bounds, for excerpts; nil when no
	// call shows one.
	bounds [][][2]int
	// mats holds, per call, the excerpts rendered for the cache's keys,
	// for the calls still to make; nil without a cache.
	mats []material
	// asked is, per call, the rules the model is asked about: all of the
	// call's, less those the cache holds.
	asked [][]int
}

// callOutcome is what one call gave: the verdicts of the rules it asked
// about, in order, and what it used.
type callOutcome struct {
	verdicts []Verdict
	usage    verdict.Usage
}

// prepareCalls plans the request's calls within the model's budget and
// takes from the verdict cache (cr, nil: none) the verdicts it holds, so
// that each call asks only about the other rules.
func (e *Engine) prepareCalls(ctx context.Context, model string, rs *Ruleset, in *Inputs, an *anchoring, cr *cacheRun) (*requestCalls, error) {
	b, err := e.budgetFor(ctx, model)
	if err != nil {
		return nil, err
	}
	r := renderer{in: in}
	if e.cfg.Evidence == EvidenceCite {
		r.ps = an.passages()
	}
	_, span := e.startSpan(ctx, "plan")
	p, whole, err := e.planCalls(rs, in, r, b)
	if err == nil {
		if span.IsRecording() {
			span.SetAttributes(attribute.Int(attrCalls, len(p.Calls)), attribute.Int(attrRules, len(rs.Rules)))
		}
	}
	tracing.End(span, err)
	if err != nil {
		return nil, err
	}
	splitCalls(p, e.cfg.RulesPerCall)
	rc := &requestCalls{p: p, r: r, whole: whole, docs: in.Documents(), asked: make([][]int, len(p.Calls))}
	// Page bounds are for excerpts only: counting every page's code points
	// is a pass over the documents that a single call does not need.
	if slices.ContainsFunc(p.Calls, func(c plan.Call) bool { return c.Partial }) {
		rc.bounds = pageBounds(rc.docs)
	}
	if cr == nil {
		for c, call := range p.Calls {
			rc.asked[c] = call.Rules
		}
		return rc, nil
	}
	cctx, span := e.startSpan(ctx, "cache lookup")
	rc.mats, err = e.fromCache(cctx, cr, model, rs, rc.docs, p, r, whole, rc.bounds)
	if err == nil {
		if span.IsRecording() {
			span.SetAttributes(attribute.Int(attrRules, len(rs.Rules)), attribute.Int(attrCacheHits, cr.hitCount()))
		}
	}
	tracing.End(span, err)
	if err != nil {
		return nil, err
	}
	for c, call := range p.Calls {
		for _, ri := range call.Rules {
			if cr.hits[ri] == nil {
				rc.asked[c] = append(rc.asked[c], ri)
			}
		}
	}
	return rc, nil
}

// toMake is how many calls ask the model about a rule.
func (rc *requestCalls) toMake() int {
	calls := 0
	for _, a := range rc.asked {
		if len(a) > 0 {
			calls++
		}
	}
	return calls
}

// makeCalls converses with the model for each call that asks about a rule,
// at most Config.CallConcurrency at once. The outcomes are by call; a call
// not made has none.
func (e *Engine) makeCalls(ctx context.Context, model string, mode Instructions, rs *Ruleset, an *anchoring, rc *requestCalls) (_ []callOutcome, err error) {
	ctx, span := e.startSpan(ctx, "calls")
	if span.IsRecording() {
		span.SetAttributes(attribute.Int(attrCalls, rc.toMake()))
	}
	defer func() { tracing.End(span, err) }()
	p := rc.p
	outcomes := make([]callOutcome, len(p.Calls))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.cfg.CallConcurrency)
	for c := range p.Calls {
		if len(rc.asked[c]) == 0 {
			continue
		}
		g.Go(func() error {
			call := p.Calls[c]
			rules := rs.Rules // all of them: the compiled prompt is cached
			if len(rc.asked[c]) < len(rs.Rules) {
				rules = make([]Rule, len(rc.asked[c]))
				for i, ri := range rc.asked[c] {
					rules[i] = rs.Rules[ri]
				}
			}
			// Only a call holding the documents whole shows them whole: an
			// excerpt's call must not pay for a copy of a long document.
			m := rc.whole
			switch {
			case rc.mats != nil && rc.mats[c].user != "":
				m, rc.mats[c] = rc.mats[c], material{}
			case call.Partial:
				m = rc.r.excerpt(rc.docs, p, c, rc.bounds)
			}
			cctx, span := e.startSpan(gctx, "call")
			v, u, err := e.converse(cctx, model, mode, rs, rules, m, an)
			if span.IsRecording() {
				span.SetAttributes(attribute.Int(attrCall, c), attribute.Int(attrRules, len(rules)),
					attribute.Bool(attrPartial, call.Partial), attribute.Int(attrLLMCalls, u.LLMCalls))
			}
			tracing.End(span, err)
			outcomes[c] = callOutcome{v, u}
			return err
		})
	}
	return outcomes, g.Wait()
}

// judged is every verdict the model gave, with its rule, for checking
// confidences.
func (rc *requestCalls) judged(rs *Ruleset, outcomes []callOutcome) []judgedVerdict {
	var judged []judgedVerdict
	for c := range rc.p.Calls {
		for i, ri := range rc.asked[c] {
			judged = append(judged, judgedVerdict{rs.Rules[ri], &outcomes[c].verdicts[i]})
		}
	}
	return judged
}

// merge puts the verdicts of the calls and of the cache's hits in ruleset
// order, and gives the cache (when the instructions' mode was settled) the
// verdicts judged fresh.
func (rc *requestCalls) merge(rs *Ruleset, an *anchoring, cr *cacheRun, settled bool, outcomes []callOutcome) []Verdict {
	p := rc.p
	verdicts := make([]Verdict, len(rs.Rules))
	for c, call := range p.Calls {
		// A verdict names the pages it was judged on only when the request
		// was split: a single call saw everything.
		var pages []verdict.DocumentPages
		if len(p.Chunks) > 0 {
			pages = considered(rc.docs, p.Pages(c))
		}
		if cr != nil && settled && len(rc.asked[c]) > 0 {
			cr.keepFresh(rc.asked[c], outcomes[c])
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
	return verdicts
}
