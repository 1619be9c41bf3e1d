package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"rulevalidator/engine/plan"
	"rulevalidator/verdict"
)

// This file plans a request's calls within its budget (one call when everything fits, else
// calls on the passages most relevant to their rules) and takes from the verdict cache what
// the plan's calls were judged to before.

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
	// A request that fits one call of every rule is rendered with them and
	// sent as it is. With at most RulesPerCall rules a call, it is rendered
	// without them (each call adds its own) and the whole material fits
	// when its largest call does: the material, that call's rules and their
	// answers. Counted as one call of every rule, an agreement that one
	// rule's call holds with room to spare was judged in excerpts, a call
	// of its own for each rule, each reading its excerpt afresh where calls
	// on the whole material share it as a prefix.
	callRules, rulesText := len(rs.Rules), first.rules
	if n := e.cfg.RulesPerCall; n > 0 && n < len(rs.Rules) {
		callRules, rulesText = n, longestRules(rs.Rules, n)
		whole = r.whole("")
	} else {
		whole = r.whole(first.rules)
	}
	materialText := whole.withoutRules().user
	// plan.Count never exceeds a text's length in bytes: a request that
	// fits by bytes needs no counting.
	// A call of one rule on the whole material may show the rule's nearest
	// passages again (nearRule): room is kept for them.
	near := nearAllowance(b, e.cfg.Evidence, e.cfg.NearestPassages)
	fitsBytes := b.fits(plan.Scale(len(first.system)+len(materialText)+len(rulesText), b.ratio)+3*perMessageTokens+near, callRules)
	if fitsBytes || b.fits(b.tokens(first.system)+b.tokens(materialText)+b.tokens(rulesText)+3*perMessageTokens+near, callRules) {
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

// longestRules is the rules prompt of the n rules of rules whose entries
// are longest: the most rules text a call of n rules can carry.
func longestRules(rules []Rule, n int) string {
	entries := make([]string, len(rules))
	for i, r := range rules {
		entries[i] = RulesPrompt([]Rule{r})
	}
	slices.SortFunc(entries, func(a, b string) int { return len(b) - len(a) })
	return strings.Join(entries[:n], "")
}

// splitCalls cuts every call of p into calls of at most n rules (n 0: as
// planned), each on the same material, keeping p.CallOf right. The
// material of a call that is cut was rendered without its rules (planCalls).
func splitCalls(p *plan.Plan, n int) {
	if n <= 0 {
		return
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
	p.Calls = out
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
func considered(docs []Document, pages map[int][]int) []verdict.DocumentPages {
	out := []verdict.DocumentPages{}
	for d, doc := range docs {
		if ps := pages[d]; len(ps) > 0 {
			out = append(out, verdict.DocumentPages{Document: doc.Name, Pages: ps})
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
