package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/internal/synthdoc"
	"rulevalidator/verdict"
	"rulevalidator/verdictcache"
)

// cachedEngine is a planning engine on m with an in-process verdict cache,
// counting the lookups by outcome.
func cachedEngine(t *testing.T, m *reader, cfg engine.Config) (*engine.Engine, *verdictcache.Memory, *lookupCounts) {
	t.Helper()
	cache, err := verdictcache.NewMemory(verdictcache.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	counts := &lookupCounts{n: map[string]int{}}
	cfg.Cache = cache
	cfg.Hooks.CacheLookup = counts.add
	cfg.Hooks.CacheTokensSaved = func(_ string, n int) { counts.add("tokens_saved", n) }
	return newPlanningEngine(t, m, cfg), cache, counts
}

type lookupCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *lookupCounts) add(outcome string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[outcome] += n
}

func (c *lookupCounts) get(outcome string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[outcome]
}

// contractRules are ten rules, each decided by a sentence of the contract.
func contractRules(version string) (*engine.Ruleset, *engine.Inputs, *reader) {
	rs := &engine.Ruleset{ID: "msa", Version: version}
	m := &reader{need: map[string]string{}}
	var page strings.Builder
	for i := range 10 {
		id := fmt.Sprintf("rule-%d", i)
		sentence := fmt.Sprintf("Clause %d: the supplier keeps obligation number %d in force.", i, i)
		page.WriteString(sentence + "\n")
		m.need[id] = sentence
		rs.Rules = append(rs.Rules, engine.Rule{RuleID: id, Name: "Rule " + strconv.Itoa(i), RuleText: fmt.Sprintf("The supplier keeps obligation %d.", i)})
	}
	in := &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "contract.pdf", Pages: []string{page.String()}}}}
	return rs, in, m
}

// withoutCacheMarks is v as judged afresh would have it.
func withoutCacheMarks(vs []engine.Verdict) []engine.Verdict {
	out := slices.Clone(vs)
	for i := range out {
		out[i].Cached = nil
	}
	return out
}

// TestCacheAnswersARepeatWithoutTheModel: the same rules on the same material
// are answered from the cache, with no model call, the same verdicts (the
// cache marks aside), each naming the request it was judged under, and the
// hits counted.
func TestCacheAnswersARepeatWithoutTheModel(t *testing.T) {
	rs, in, m := contractRules("1")
	e, _, counts := cachedEngine(t, m, engine.Config{})
	ctx := context.Background()
	first, err := e.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in, Tenant: "contoso", RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.requests) != 1 || first.Usage.LLMCalls != 1 {
		t.Fatalf("first request: %d model requests, usage %+v; want 1", len(m.requests), first.Usage)
	}
	for _, v := range first.Rules {
		if v.Cached != nil || !v.DataSufficiency {
			t.Fatalf("first request: verdict %+v", v)
		}
	}
	second, err := e.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in, Tenant: "contoso", RequestID: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.requests) != 1 || second.Usage != (verdict.Usage{}) {
		t.Errorf("second request: %d model requests in all, usage %+v; want no call", len(m.requests), second.Usage)
	}
	for _, v := range second.Rules {
		if v.Cached == nil || v.Cached.RequestID != "r1" || v.Cached.JudgedAt.IsZero() {
			t.Errorf("verdict %s: cached %+v, want judged under r1", v.RuleID, v.Cached)
		}
	}
	if a, b := jsonString(t, first.Rules), jsonString(t, withoutCacheMarks(second.Rules)); a != b {
		t.Errorf("verdicts differ:\nfirst  %s\nsecond %s", a, b)
	}
	if a, b := jsonString(t, first.Aggregate), jsonString(t, second.Aggregate); a != b {
		t.Errorf("aggregates differ: %s, %s", a, b)
	}
	if c := engine.CountVerdicts(second.Rules); c.Cached != 10 {
		t.Errorf("counts %+v, want 10 cached", c)
	}
	if counts.get(engine.CacheMiss) != 10 || counts.get(engine.CacheHit) != 10 || counts.get("tokens_saved") == 0 {
		t.Errorf("lookups %v, want 10 misses, then 10 hits saving tokens", counts.n)
	}
}

// TestCacheAsksOnlyTheChangedRule: a new ruleset version that changes one
// rule of ten asks the model for that rule alone, and the verdicts come back
// in ruleset order with the display names of the new version.
func TestCacheAsksOnlyTheChangedRule(t *testing.T) {
	rs, in, m := contractRules("1")
	e, _, _ := cachedEngine(t, m, engine.Config{})
	ctx := context.Background()
	if _, err := e.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in, Tenant: "contoso", RequestID: "r1"}); err != nil {
		t.Fatal(err)
	}
	v2, _, _ := contractRules("2")
	v2.Rules[3].RuleText = "The supplier keeps obligation 3 at all times."
	v2.Rules[5].Name = "Renamed"
	res, err := e.Evaluate(ctx, engine.Task{Ruleset: v2, Inputs: in, Tenant: "contoso", RequestID: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.requests) != 2 {
		t.Fatalf("%d model requests, want 2 (one a request)", len(m.requests))
	}
	asked := ruleIDLine.FindAllStringSubmatch(m.requests[1].Messages[1].Content, -1)
	if len(asked) != 1 || asked[0][1] != `"rule-3"` {
		t.Errorf("the second request asked for %v, want rule-3 only", asked)
	}
	if res.Usage.LLMCalls != 1 || res.Usage.PlannedCalls != 1 {
		t.Errorf("usage %+v, want one call", res.Usage)
	}
	for i, v := range res.Rules {
		if v.RuleID != v2.Rules[i].RuleID || v.Name != v2.Rules[i].Name {
			t.Errorf("verdict %d: %s %q, want %s %q", i, v.RuleID, v.Name, v2.Rules[i].RuleID, v2.Rules[i].Name)
		}
		if (v.Cached == nil) != (i == 3) {
			t.Errorf("verdict %s: cached %+v", v.RuleID, v.Cached)
		}
	}
}

// TestCacheKeepsTenantsApart: another tenant's request on the same document
// and ruleset is judged afresh.
func TestCacheKeepsTenantsApart(t *testing.T) {
	rs, in, m := contractRules("1")
	e, _, _ := cachedEngine(t, m, engine.Config{})
	for _, tenant := range []string{"contoso", "fabrikam"} {
		res, err := e.Evaluate(context.Background(), engine.Task{Ruleset: rs, Inputs: in, Tenant: tenant, RequestID: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		if c := engine.CountVerdicts(res.Rules); c.Cached != 0 {
			t.Errorf("tenant %s: %d verdicts from the cache", tenant, c.Cached)
		}
	}
	if len(m.requests) != 2 {
		t.Errorf("%d model requests, want one per tenant", len(m.requests))
	}
}

// TestCacheOptOut: a request or a ruleset that opts out is judged afresh and
// stores nothing.
func TestCacheOptOut(t *testing.T) {
	rs, in, m := contractRules("1")
	e, cache, _ := cachedEngine(t, m, engine.Config{})
	ctx := context.Background()
	if _, err := e.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in, Tenant: "contoso", RequestID: "r1", NoCache: true}); err != nil {
		t.Fatal(err)
	}
	if cache.Len() != 0 {
		t.Errorf("a request that opted out stored %d verdicts", cache.Len())
	}
	if _, err := e.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in, Tenant: "contoso", RequestID: "r2"}); err != nil {
		t.Fatal(err)
	}
	off := *rs
	off.Cache = new(bool)
	res, err := e.Evaluate(ctx, engine.Task{Ruleset: &off, Inputs: in, Tenant: "contoso", RequestID: "r3"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.requests) != 3 || engine.CountVerdicts(res.Rules).Cached != 0 {
		t.Errorf("%d model requests, %d cached verdicts; want every request asked", len(m.requests), engine.CountVerdicts(res.Rules).Cached)
	}
}

// TestCacheKeepsVerdictsWithProblems: a verdict kept with problems after
// the re-asks ran out is the verdict the material and settings gave, and is
// cached like a clean one: a replay publishes it again, its problems and
// note included, without asking the model.
func TestCacheKeepsVerdictsWithProblems(t *testing.T) {
	rs, in, m := contractRules("1")
	m.flawFirst = true // the first rule's answer lacks its rationale: kept with problems when no re-ask is allowed
	e, cache, _ := cachedEngine(t, m, engine.Config{OutputRetries: -1})
	ctx := context.Background()
	first, err := e.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in, Tenant: "contoso", RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Rules[0].Problems) == 0 {
		t.Fatalf("the first verdict has no problems: %+v", first.Rules[0])
	}
	if cache.Len() != 10 {
		t.Errorf("%d verdicts cached, want all 10", cache.Len())
	}
	again, err := e.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in, Tenant: "contoso", RequestID: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.requests) != 1 {
		t.Errorf("%d model requests, want the first only", len(m.requests))
	}
	kept := again.Rules[0]
	if kept.Cached == nil || len(kept.Problems) == 0 || strings.Join(kept.Problems, "|") != strings.Join(first.Rules[0].Problems, "|") || kept.SufficiencyNote != first.Rules[0].SufficiencyNote {
		t.Errorf("cached verdict %+v, want the first one's problems and note, marked cached", kept)
	}
}

// failingCache is a verdict cache whose store is down.
type failingCache struct{}

var errStoreDown = errors.New("store down")

func (failingCache) Get(context.Context, engine.CacheScope, []string) (map[string]engine.CachedVerdict, error) {
	return nil, errStoreDown
}

func (failingCache) Put(context.Context, engine.CacheScope, []engine.CachedVerdict) error {
	return errStoreDown
}

// TestCacheUnavailable: a cache that cannot be read fails the request
// before any model call, as ErrCacheUnavailable wrapping the store's error.
func TestCacheUnavailable(t *testing.T) {
	rs, in, m := contractRules("1")
	e := newPlanningEngine(t, m, engine.Config{Cache: failingCache{}})
	_, err := e.Evaluate(context.Background(), engine.Task{Ruleset: rs, Inputs: in, Tenant: "contoso", RequestID: "r1"})
	if !errors.Is(err, engine.ErrCacheUnavailable) || !errors.Is(err, errStoreDown) {
		t.Errorf("error %v, want ErrCacheUnavailable wrapping the store's", err)
	}
	if len(m.requests) != 0 {
		t.Errorf("%d model requests, want none", len(m.requests))
	}
}

// TestCacheAsksAgainOnlyForTheRevisedPage: a planned request whose document
// comes back with one page revised asks again only for the rules whose calls
// showed that page; the others come from the cache, their evidence pointing
// at the same words in the revised document.
func TestCacheAsksAgainOnlyForTheRevisedPage(t *testing.T) {
	pages := synthdoc.Pages(40, 2000, 7)
	rs := &engine.Ruleset{ID: "long", Version: "1"}
	m := &reader{need: map[string]string{}, topics: map[string]string{}}
	for i, topic := range synthdoc.Topics[:8] {
		id := fmt.Sprintf("topic-%d", i)
		rs.Rules = append(rs.Rules, engine.Rule{RuleID: id, RuleText: synthdoc.RuleText(topic)})
		m.topics[id] = topic.Title
	}
	in := func(pages []string) *engine.Inputs {
		return &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "contract.pdf", Pages: pages}}}
	}
	e, _, counts := cachedEngine(t, m, engine.Config{ContextTokens: 4096})
	ctx := context.Background()
	// The engine learns the model's tokens per estimated token from the
	// first request's usage and plans later ones with it: a warm-up request,
	// another tenant's so that its verdicts are not served below, lets the
	// two compared below be planned alike.
	if _, err := e.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in(pages), Tenant: "fabrikam", RequestID: "v0"}); err != nil {
		t.Fatal(err)
	}
	first, err := e.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in(pages), Tenant: "contoso", RequestID: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Usage.PlannedCalls < 2 {
		t.Fatalf("%d planned calls; the test needs a split request", first.Usage.PlannedCalls)
	}
	// A page that some rules' calls showed and others' did not.
	seenBy := map[int][]int{}
	for i, v := range first.Rules {
		for _, p := range v.PagesConsidered[0].Pages {
			seenBy[p] = append(seenBy[p], i)
		}
	}
	revised := 0
	for p := 40; p >= 1; p-- {
		if n := len(seenBy[p]); n > 0 && n < len(rs.Rules) {
			revised = p
			break
		}
	}
	if revised == 0 {
		t.Fatalf("no page seen by some rules only: %v", seenBy)
	}
	// An earlier page changes too, but no call showed it: later pages'
	// offsets move, their words do not.
	earlier := 0
	for p := 1; p < revised; p++ {
		if len(seenBy[p]) == 0 {
			earlier = p
			break
		}
	}
	next := slices.Clone(pages)
	next[revised-1] += " Annex: the parties amended this section."
	if earlier > 0 {
		next[earlier-1] = "Intentionally left blank. " + next[earlier-1]
	}
	before := len(m.requests)
	second, err := e.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in(next), Tenant: "contoso", RequestID: "v2"})
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	for _, req := range m.requests[before:] {
		for _, match := range ruleIDLine.FindAllStringSubmatch(req.Messages[1].Content, -1) {
			id, _ := strconv.Unquote(match[1])
			asked = append(asked, id)
		}
	}
	slices.Sort(asked)
	var want []string
	for _, i := range seenBy[revised] {
		want = append(want, rs.Rules[i].RuleID)
	}
	slices.Sort(want)
	if !slices.Equal(asked, want) {
		t.Errorf("page %d revised (page %d too, seen by none): asked %v, want %v (the rules whose calls showed it)", revised, earlier, asked, want)
	}
	text := []rune(strings.Join(next, "\f"))
	for i, v := range second.Rules {
		if (v.Cached == nil) != slices.Contains(want, v.RuleID) {
			t.Errorf("verdict %s: cached %+v", v.RuleID, v.Cached)
		}
		if v.RuleID != rs.Rules[i].RuleID || len(v.PagesConsidered) == 0 {
			t.Errorf("verdict %d: %s, pages %v", i, v.RuleID, v.PagesConsidered)
		}
		for _, ev := range v.Evidences {
			if ev.StartOffset != nil && string(text[*ev.StartOffset:*ev.EndOffset]) != ev.Text {
				t.Errorf("verdict %s: offsets [%d,%d) do not hold %q in the revised document", v.RuleID, *ev.StartOffset, *ev.EndOffset, ev.Text)
			}
		}
	}
	if counts.get(engine.CacheStale) != 0 {
		t.Errorf("lookups %v: a verdict taken as stale", counts.n)
	}
	t.Logf("%d calls planned; page %d revised, seen by %d of %d rules; second request: %d calls, %d hits",
		first.Usage.PlannedCalls, revised, len(want), len(rs.Rules), second.Usage.LLMCalls, engine.CountVerdicts(second.Rules).Cached)
}

// TestCacheExpires: a verdict older than the TTL is asked again.
func TestCacheExpires(t *testing.T) {
	rs, in, m := contractRules("1")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	cache, err := verdictcache.NewMemory(verdictcache.MemoryConfig{Policy: verdictcache.Policy{TTL: time.Hour, Now: clock}})
	if err != nil {
		t.Fatal(err)
	}
	e := newPlanningEngine(t, m, engine.Config{Cache: cache, Now: clock})
	ctx := context.Background()
	for i, at := range []time.Duration{0, 30 * time.Minute, 2 * time.Hour} {
		now = now.Add(at)
		if _, err := e.Evaluate(ctx, engine.Task{Ruleset: rs, Inputs: in, Tenant: "contoso", RequestID: fmt.Sprint("r", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.requests) != 2 {
		t.Errorf("%d model requests, want 2: the first, and one past the TTL", len(m.requests))
	}
}
