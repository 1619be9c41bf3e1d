package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"rulevalidator/verdict"
)

// The verdict cache: a rule judged on the same material, under the same
// settings and for the same tenant, is not asked again. The engine computes
// the keys (VerdictKey), since only it knows what each call shows; the store
// behind the VerdictCache port (package verdictcache) keeps the entries.
//
// What is cached: every verdict of a request whose calls all succeeded, as
// the engine accepted it, kept with problems after the re-asks or clean: it
// is what that material and those settings gave, and a replay publishes it
// again instead of paying for a different draw. Not cached: verdicts of a
// request that failed, and of a request or ruleset that opted out. What a
// request adds to a verdict (its display name, the pages considered, the
// mark of a rule judged on an excerpt cut by the budget) is not part of the
// entry and is set afresh.

// ErrCacheUnavailable marks a verdict cache that could not be read: the
// store's failure, not the request's (the failure table holds such a
// request, as for any storage fault).
var ErrCacheUnavailable = errors.New("verdict cache unavailable")

// VerdictCache keeps verdicts by the key of what decided them. It must be
// safe for concurrent use.
type VerdictCache interface {
	// Get returns the entries held under keys, by key. A key it does not
	// hold, or holds past its time to live, is absent from the map: that is
	// a miss, not an error. An error means the store could not be asked.
	Get(ctx context.Context, scope CacheScope, keys []string) (map[string]CachedVerdict, error)
	// Put stores entries, each replacing any entry under its key.
	Put(ctx context.Context, scope CacheScope, entries []CachedVerdict) error
}

// CacheScope is whose entries a lookup or a store reads and writes: a
// tenant's, for one ruleset id (the ruleset's ID, whatever its version).
// Stores keep scopes apart (and the tenant is part of every key besides).
type CacheScope struct {
	Tenant    string
	RulesetID string
}

// CachedVerdict is one verdict as the cache keeps it.
type CachedVerdict struct {
	Key    string `json:"key"`
	RuleID string `json:"rule_id"`
	// Verdict is as the engine accepted it, clean or kept with problems; the
	// offsets of its evidence count from the start of the evidence's page,
	// so that a verdict judged on unchanged pages of a revised document
	// still points at its words.
	Verdict   Verdict   `json:"verdict"`
	Model     string    `json:"model"`
	JudgedAt  time.Time `json:"judged_at"`
	RequestID string    `json:"request_id"`
	// Tokens is the verdict's share of the model tokens (prompt and
	// completion) of the calls that judged it: what a hit saves.
	Tokens int `json:"tokens"`
}

// Outcomes of a cache lookup, per rule, as Hooks.CacheLookup counts them.
const (
	CacheHit  = "hit"  // the verdict was taken from the cache
	CacheMiss = "miss" // the cache held none: the rule was asked
	// CacheStale: the cache held a verdict whose evidence is no longer
	// verbatim where it pointed (the document changed outside the material
	// the rule saw); the rule was asked.
	CacheStale = "stale"
)

// cacheRun is one request's use of the verdict cache.
type cacheRun struct {
	cache     VerdictCache
	scope     CacheScope
	requestID string
	now       time.Time
	// Per rule index, set by judgeWithin: the key, the entry found (nil:
	// the rule is asked), the verdict judged and its tokens.
	keys   []string
	hits   []*CachedVerdict
	fresh  []*Verdict
	tokens []int
}

// CachesVerdicts says whether requests on rs take verdicts from the
// verdict cache and store theirs in it: true unless the ruleset opts out
// (cache: false).
func (rs *Ruleset) CachesVerdicts() bool { return rs.Cache == nil || *rs.Cache }

// cacheRunFor is req's use of the cache; nil when there is none, or when
// the request or its ruleset opts out.
func (e *Engine) cacheRunFor(req Task) *cacheRun {
	if e.cfg.Cache == nil || req.NoCache || !req.Ruleset.CachesVerdicts() {
		return nil
	}
	return &cacheRun{cache: e.cfg.Cache, scope: CacheScope{Tenant: req.Tenant, RulesetID: req.Ruleset.ID}, requestID: req.RequestID, now: e.cfg.now()}
}

// reset readies cr for a judgement of n rules (again, after a refusal that
// taught the context window).
func (cr *cacheRun) reset(n int) {
	cr.keys, cr.hits, cr.fresh, cr.tokens = make([]string, n), make([]*CachedVerdict, n), make([]*Verdict, n), make([]int, n)
}

// lookup finds the cached verdicts of rs's rules under cr.keys, keeping only
// those whose evidence still points at its words in docs.
func (e *Engine) lookup(ctx context.Context, cr *cacheRun, model string, rs *Ruleset, docs []Document) error {
	found, err := cr.cache.Get(ctx, cr.scope, cr.keys)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCacheUnavailable, err)
	}
	counts := map[string]int{}
	var idx *docIndex
	for i, key := range cr.keys {
		entry, ok := found[key]
		if !ok || entry.RuleID != rs.Rules[i].RuleID {
			counts[CacheMiss]++
			continue
		}
		if idx == nil {
			idx = newDocIndex(docs)
		}
		v, ok := idx.absolute(entry.Verdict)
		if !ok {
			counts[CacheStale]++
			continue
		}
		entry.Verdict = v
		cr.hits[i] = &entry
		counts[CacheHit]++
		if e.cfg.Hooks.CacheTokensSaved != nil && entry.Tokens > 0 {
			e.cfg.Hooks.CacheTokensSaved(model, entry.Tokens)
		}
	}
	if e.cfg.Hooks.CacheLookup != nil {
		for outcome, n := range counts {
			e.cfg.Hooks.CacheLookup(outcome, n)
		}
	}
	return nil
}

// hit is the verdict cr took from the cache for rule, as this request shows
// it.
func (cr *cacheRun) hit(i int, rule Rule) Verdict {
	entry := cr.hits[i]
	v := entry.Verdict
	v.Name = rule.Name
	v.Cached = &verdict.CachedFrom{JudgedAt: entry.JudgedAt, RequestID: entry.RequestID}
	return v
}

// keepFresh records the verdicts a call judged for the rules asked (by
// index) for the cache. Each judged verdict's share of its call's tokens is
// what a later hit on it saves.
func (cr *cacheRun) keepFresh(asked []int, o callOutcome) {
	u := o.usage
	share := (u.PromptTokens + u.CompletionTokens) / len(asked)
	for i, ri := range asked {
		v := o.verdicts[i]
		cr.fresh[ri], cr.tokens[ri] = &v, share
	}
}

// store puts the verdicts cr judged into the cache. A failure is
// logged and counted, not returned: the verdicts are judged, and the next
// request asks for them again.
func (e *Engine) store(ctx context.Context, cr *cacheRun, model string, docs []Document) {
	var entries []CachedVerdict
	var idx *docIndex
	for i, v := range cr.fresh {
		if v == nil {
			continue
		}
		if idx == nil {
			idx = newDocIndex(docs)
		}
		rel, ok := idx.relative(*v)
		if !ok {
			continue
		}
		rel.Name, rel.PagesConsidered, rel.Cached = "", nil, nil
		entries = append(entries, CachedVerdict{Key: cr.keys[i], RuleID: v.RuleID, Verdict: rel, Model: model,
			JudgedAt: cr.now, RequestID: cr.requestID, Tokens: cr.tokens[i]})
	}
	if len(entries) == 0 {
		return
	}
	if err := cr.cache.Put(ctx, cr.scope, entries); err != nil {
		e.cfg.Logger.WarnContext(ctx, "engine: verdicts not stored in the verdict cache; they will be asked again",
			"request_id", cr.requestID, "tenant_id", cr.scope.Tenant, "verdicts", len(entries), "err", err)
		if e.cfg.Hooks.CacheStoreFailed != nil {
			e.cfg.Hooks.CacheStoreFailed()
		}
	}
}

// docIndex finds the pages of a request's documents by the names evidence
// gives.
type docIndex struct {
	docs   []Document
	byName map[string]int
	bounds [][][2]int // computed on first use
}

func newDocIndex(docs []Document) *docIndex {
	x := &docIndex{docs: docs, byName: make(map[string]int, len(docs))}
	for i, d := range docs {
		if _, dup := x.byName[d.Name]; !dup {
			x.byName[d.Name] = i
		}
	}
	return x
}

// page is where evidence's page starts and ends in its document, and the
// page's text; ok false when ev names no page of a document.
func (x *docIndex) page(ev verdict.Evidence) (start, end int, text string, ok bool) {
	d, found := x.byName[ev.SourceOrigin]
	if !found || ev.SourcePageNumber < 1 || ev.SourcePageNumber > len(x.docs[d].Pages) {
		return 0, 0, "", false
	}
	if x.bounds == nil {
		x.bounds = pageBounds(x.docs)
	}
	b := x.bounds[d][ev.SourcePageNumber-1]
	return b[0], b[1], x.docs[d].Pages[ev.SourcePageNumber-1], true
}

// relative is v with its evidence's offsets counted from their page's
// start; ok false when an evidence's offsets do not hold its text within
// its page (such a verdict is not cached).
func (x *docIndex) relative(v Verdict) (Verdict, bool) {
	return x.shift(v, -1)
}

// absolute is v, as cached, with its evidence's offsets counted from the
// start of its document again; ok false when an evidence's words are no
// longer there.
func (x *docIndex) absolute(v Verdict) (Verdict, bool) {
	return x.shift(v, 1)
}

// shift moves every evidence offset of v by its page's start (sign -1: to
// the page, 1: from it), checking that the offsets hold the evidence's text
// within its page.
func (x *docIndex) shift(v Verdict, sign int) (Verdict, bool) {
	if len(v.Evidences) == 0 {
		return v, true
	}
	evs := make([]verdict.Evidence, len(v.Evidences))
	copy(evs, v.Evidences)
	for i := range evs {
		ev := &evs[i]
		if ev.StartOffset == nil || ev.EndOffset == nil {
			continue
		}
		start, end, text, ok := x.page(*ev)
		if !ok {
			return v, false
		}
		s, t := *ev.StartOffset, *ev.EndOffset
		if sign < 0 {
			s, t = s-start, t-start
		}
		if s < 0 || t < s || t > end-start || runeSlice(text, s, t) != ev.Text {
			return v, false
		}
		if sign > 0 {
			s, t = s+start, t+start
		}
		ev.StartOffset, ev.EndOffset = &s, &t
	}
	v.Evidences = evs
	return v, true
}

// runeSlice is s's code points from start to end (end exclusive).
func runeSlice(s string, start, end int) string {
	i, from := 0, -1
	for at := range s {
		if i == start {
			from = at
		}
		if i == end {
			return s[from:at]
		}
		i++
	}
	if i == end && from >= 0 {
		return s[from:]
	}
	if i == end && start == end {
		return ""
	}
	return "\x00" // out of range: matches no text
}
