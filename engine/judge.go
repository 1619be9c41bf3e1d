package engine

import (
	"context"
	"slices"

	"golang.org/x/sync/errgroup"

	"rulevalidator/engine/plan"
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
	// Every call of the request sends its instructions the same way, decided
	// once; a call all of whose rules hit needs no decision.
	var mode Instructions
	settled := true
	if calls > 0 {
		e.observePlan(model, calls)
		if mode, settled, err = e.instructionMode(ctx, model); err != nil {
			return nil, Usage{}, err
		}
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
			v, u, err := e.converse(gctx, model, mode, rs, rules, m, an)
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
	if e.cfg.Confidence == ConfidenceVerify {
		// After every call of the request: a check shows other text than
		// the material, and a server that caches one prompt would read the
		// documents again for the next call.
		var judged []judgedVerdict
		for c := range p.Calls {
			for i, ri := range asked[c] {
				judged = append(judged, judgedVerdict{rs.Rules[ri], &outcomes[c].verdicts[i]})
			}
		}
		u, err := e.verifyConfidences(ctx, model, mode, judged)
		usage = usage.Add(u)
		if err != nil {
			return nil, usage, err
		}
	}

	verdicts := make([]Verdict, len(rs.Rules))
	for c, call := range p.Calls {
		// A verdict names the pages it was judged on only when the request
		// was split: a single call saw everything.
		var pages []DocumentPages
		if len(p.Chunks) > 0 {
			pages = considered(docs, p.Pages(c))
		}
		if cr != nil && settled && len(asked[c]) > 0 {
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
