package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/internal/s3test"
	"rulevalidator/internal/synthdoc"
	"rulevalidator/objstore"
	"rulevalidator/schemas"
)

// The verdict cache on the real broker and S3, with the scripted model counting the calls.

// cacheEnv is a serve environment whose service keeps its verdict cache in a bucket of its own.
type cacheEnv struct {
	*serveEnv
	store                 *objstore.Store
	endpoint, access, key string
}

func newCacheEnv(t *testing.T) *cacheEnv {
	t.Helper()
	endpoint, access, key := s3test.Endpoint(t)
	return &cacheEnv{serveEnv: newServeEnv(t, 1), store: s3test.Store(t), endpoint: endpoint, access: access, key: key}
}

// s3Args are the object storage flags of serve, with secret as the secret key.
func (e *cacheEnv) s3Args(secret string) []string {
	return []string{"--s3-endpoint", e.endpoint, "--s3-access-key", e.access, "--s3-secret-key", secret, "--s3-bucket", e.store.Bucket()}
}

// cacheRequest is the example's inputs, the same for every id (no ticket: the material is the
// same), judged against the ruleset id at version for tenant.
func cacheRequest(t *testing.T, id, tenantID, rulesetID, version string) *schemas.Request {
	t.Helper()
	req := exampleRequest(t, id)
	in := exampleInputs(t)
	req.Message = ptr(in.Message)
	req.TenantID = tenantID
	req.RulesetRef = &schemas.RulesetRef{ID: rulesetID}
	if version != "" {
		req.RulesetRef.Version = ptr(version)
	}
	return req
}

// requestVerdicts decodes the verdict events of request id, in rule order.
func requestVerdicts(t *testing.T, e *serveEnv, l *topicLog, tenantID, id string) []*schemas.VerdictEvent {
	t.Helper()
	var out []*schemas.VerdictEvent
	for _, m := range l.snapshot() {
		v := e.verdict(t, m)
		if v.RequestID == id && v.TenantID == tenantID {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b *schemas.VerdictEvent) int { return a.RuleIndex - b.RuleIndex })
	return out
}

// withoutMarks is v without its cache mark and times: what a fresh judgement would publish.
func withoutMarks(v *schemas.VerdictEvent) schemas.VerdictEvent {
	c := *v
	c.Cached, c.StartedAt, c.CompletedAt = nil, time.Time{}, time.Time{}
	return c
}

// TestServeCacheReplayAfterRestart (done-when 1): the same request replayed after every replica
// restarted (a new consumer group reads the topic again) makes no model call and publishes the
// same verdicts, each marked as cached under the request that judged it, the summary counting
// them; the entries are in object storage under the tenant's prefix.
func TestServeCacheReplayAfterRestart(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t)
	verdictLog := e.watch(t, e.verdicts, 1)
	summaryLog := e.watch(t, e.summaries, 1)
	req := cacheRequest(t, "replayed", tenant, exampleRulesetID, "")
	e.produceRequests(t, req)

	first := e.startInProcess(t, e.s3Args(e.key)...)
	waitUntil(t, waitLimit, "the first summary", func() bool { return summaryLog.len() >= 1 })
	e.waitCommittedToEnd(t)
	if code := first.stop(t); code != exitOK {
		t.Fatalf("serve exited %d", code)
	}
	calls := len(e.llm.Requests())
	if calls != 1 {
		t.Fatalf("%d model calls for the first request, want 1", calls)
	}
	var keys []string
	if err := e.store.List(t.Context(), "verdicts/"+tenant+"/"+exampleRulesetID+"/", func(k string) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(exampleModelRuleIDs) {
		t.Errorf("object storage holds %d entries under verdicts/%s/%s/, want %d: %v", len(keys), tenant, exampleRulesetID, len(exampleModelRuleIDs), keys)
	}

	// Every replica restarted, and the stream replayed from its start.
	e.startInProcess(t, append(e.s3Args(e.key), "--group-id", e.group+"-replay")...)
	waitUntil(t, waitLimit, "the replayed request's summary", func() bool { return summaryLog.len() >= 2 })
	waitUntil(t, waitLimit, "the replayed verdicts", func() bool { return verdictLog.len() >= 2*len(exampleRuleIDs) })
	if n := len(e.llm.Requests()); n != calls {
		t.Errorf("%d model calls after the replay, want %d: the replay asked the model", n, calls)
	}
	vs := requestVerdicts(t, e.serveEnv, verdictLog, tenant, "replayed")
	if len(vs) != 2*len(exampleRuleIDs) {
		t.Fatalf("%d verdicts, want %d", len(vs), 2*len(exampleRuleIDs))
	}
	for i := 0; i < len(vs); i += 2 {
		fresh, cached := vs[i], vs[i+1]
		if !slices.Contains(exampleModelRuleIDs, fresh.RuleID) {
			// Decided by a check or a filter, afresh on every request.
			if fresh.Cached != nil || cached.Cached != nil {
				t.Errorf("rule %s, decided without the model, is marked cached", fresh.RuleID)
			}
			continue
		}
		if fresh.Cached != nil {
			fresh, cached = cached, fresh
		}
		if fresh.Cached != nil || cached.Cached == nil || cached.Cached.RequestID != "replayed" || cached.Cached.JudgedAt.IsZero() {
			t.Errorf("rule %s: cache marks %+v and %+v, want one fresh and one cached under request replayed", fresh.RuleID, fresh.Cached, cached.Cached)
			continue
		}
		if !cached.Cached.JudgedAt.Before(cached.StartedAt) && !cached.Cached.JudgedAt.Equal(fresh.StartedAt) {
			t.Logf("rule %s: judged at %s, replayed at %s", fresh.RuleID, cached.Cached.JudgedAt, cached.StartedAt)
		}
		if a, b := withoutMarks(fresh), withoutMarks(cached); !jsonEqual(t, a, b) {
			t.Errorf("rule %s: replayed verdict differs:\n%s\n%s", fresh.RuleID, jsonText(t, a), jsonText(t, b))
		}
	}
	var counts []schemas.Counts
	for _, m := range summaryLog.snapshot() {
		counts = append(counts, e.summary(t, m).Counts)
	}
	if counts[0].Cached != 0 || counts[1].Cached != len(exampleModelRuleIDs) {
		t.Errorf("summary counts %+v, want 0 then %d cached", counts, len(exampleModelRuleIDs))
	}
	if s := e.summary(t, summaryLog.snapshot()[1]); s.Usage.LLMCalls != 0 || s.Usage.PromptTokens != 0 {
		t.Errorf("replayed summary usage %+v, want no model call", s.Usage)
	}
}

// tenRules is a ruleset of ten boolean rules, version version, rule 3's text changed when
// changed is set.
func tenRules(version string, changed bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "id: ten-rules\nversion: %q\nrules:\n", version)
	for i := range 10 {
		text := fmt.Sprintf("The agreement addresses topic number %d of the review.", i)
		if changed && i == 3 {
			text = "The agreement addresses topic number 3 of the review, in writing."
		}
		fmt.Fprintf(&b, "  - rule_id: rule-%d\n    name: Rule %d (v%s)\n    rule_text: %s\n", i, i, version, text)
	}
	return b.String()
}

// TestServeCacheAsksOnlyTheChangedRule (done-when 2): a ruleset version that changes one rule
// of ten asks the model for that rule only; the other nine come from the cache, in ruleset
// order, with the new version's names.
func TestServeCacheAsksOnlyTheChangedRule(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t)
	a := &ruleAnswerer{asked: map[string]int{}}
	e.llm.Answer(a.answer)
	for _, v := range []struct {
		file, version string
		changed       bool
	}{{"ten-1.yaml", "1", false}, {"ten-2.yaml", "2", true}} {
		if err := os.WriteFile(filepath.Join(e.rulesetsDir, v.file), []byte(tenRules(v.version, v.changed)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	verdictLog := e.watch(t, e.verdicts, 1)
	summaryLog := e.watch(t, e.summaries, 1)
	e.produceRequests(t, cacheRequest(t, "v1", tenant, "ten-rules", "1"))
	e.startInProcess(t, e.s3Args(e.key)...)
	waitUntil(t, waitLimit, "the first summary", func() bool { return summaryLog.len() >= 1 })
	e.produceRequests(t, cacheRequest(t, "v2", tenant, "ten-rules", "2"))
	waitUntil(t, waitLimit, "both summaries", func() bool { return summaryLog.len() >= 2 })
	waitUntil(t, waitLimit, "both requests' verdicts", func() bool { return verdictLog.len() >= 20 })

	if len(e.llm.Requests()) != 2 {
		t.Errorf("%d model calls, want 2 (one per request)", len(e.llm.Requests()))
	}
	for i := range 10 {
		id, want := fmt.Sprintf("rule-%d", i), 1
		if i == 3 {
			want = 2
		}
		if a.asked[id] != want {
			t.Errorf("%s asked %d times, want %d", id, a.asked[id], want)
		}
	}
	vs := requestVerdicts(t, e.serveEnv, verdictLog, tenant, "v2")
	for i, v := range vs {
		if v.RuleID != fmt.Sprintf("rule-%d", i) || v.RuleName == nil || *v.RuleName != fmt.Sprintf("Rule %d (v2)", i) {
			t.Errorf("verdict %d: %s %v", i, v.RuleID, v.RuleName)
		}
		if (v.Cached == nil) != (i == 3) || (v.Cached != nil && v.Cached.RequestID != "v1") {
			t.Errorf("verdict %s: cached %+v", v.RuleID, v.Cached)
		}
	}
	if s := e.summary(t, summaryLog.snapshot()[1]); s.Counts.Cached != 9 || s.Usage.LLMCalls != 1 {
		t.Errorf("v2 summary counts %+v usage %+v, want 9 cached and one call", s.Counts, s.Usage)
	}
}

// TestServeCacheRevisedPage (done-when 3): a long document judged in planned calls comes back
// with one page revised (and another page no call showed); the model is asked again only for
// the rules whose calls showed the revised page.
func TestServeCacheRevisedPage(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t)
	// Prompt tokens as the engine estimates them: the estimate, and the plan with it, stay.
	a := &ruleAnswerer{asked: map[string]int{}, counted: true}
	e.llm.Answer(a.answer)
	var rs strings.Builder
	rs.WriteString("id: long-review\nversion: \"1\"\nrules:\n")
	var ruleIDs []string
	for i, topic := range synthdoc.Topics[:8] {
		id := fmt.Sprintf("topic-%d", i)
		ruleIDs = append(ruleIDs, id)
		fmt.Fprintf(&rs, "  - rule_id: %s\n    rule_text: %q\n", id, synthdoc.RuleText(topic))
	}
	if err := os.WriteFile(filepath.Join(e.rulesetsDir, "long.yaml"), []byte(rs.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	pages := synthdoc.Pages(40, 2000, 7)
	longRequest := func(id string, pages []string) *schemas.Request {
		req := cacheRequest(t, id, tenant, "long-review", "1")
		req.PrimaryDocs = requestDocs([]engine.Document{{Name: "contract.pdf", Pages: pages}})
		req.AuxiliaryDocs, req.NamedInputs, req.Message = nil, nil, nil
		return req
	}
	verdictLog := e.watch(t, e.verdicts, 1)
	summaryLog := e.watch(t, e.summaries, 1)
	e.produceRequests(t, longRequest("rev-1", pages))
	p := e.startInProcess(t, append(e.s3Args(e.key), "--llm-context-tokens", "4096")...)
	waitUntil(t, waitLimit, "the first summary", func() bool { return summaryLog.len() >= 1 })
	waitUntil(t, waitLimit, "the first verdicts", func() bool { return verdictLog.len() >= len(ruleIDs) })
	if s := e.summary(t, summaryLog.snapshot()[0]); s.Usage.PlannedCalls < 2 {
		t.Fatalf("first request: usage %+v; the test needs a split request", s.Usage)
	}
	seenBy := map[int][]string{}
	for _, v := range requestVerdicts(t, e.serveEnv, verdictLog, tenant, "rev-1") {
		for _, p := range v.PagesConsidered[0].Pages {
			seenBy[p] = append(seenBy[p], v.RuleID)
		}
	}
	revised, unseen := 0, 0
	for p := 40; p >= 1; p-- {
		if n := len(seenBy[p]); n > 0 && n < len(ruleIDs) && revised == 0 {
			revised = p
		}
	}
	for p := 1; p < revised && unseen == 0; p++ {
		if len(seenBy[p]) == 0 {
			unseen = p
		}
	}
	if revised == 0 {
		t.Fatalf("no page seen by some rules only: %v", seenBy)
	}
	next := slices.Clone(pages)
	next[revised-1] += " Annex: the parties amended this section."
	if unseen > 0 {
		next[unseen-1] = "Intentionally left blank. " + next[unseen-1]
	}
	before := map[string]int{}
	for id, n := range a.asked {
		before[id] = n
	}
	e.produceRequests(t, longRequest("rev-2", next))
	waitUntil(t, waitLimit, "the revision's summary", func() bool { return summaryLog.len() >= 2 })
	var asked []string
	for id, n := range a.asked {
		if n > before[id] {
			asked = append(asked, id)
		}
	}
	slices.Sort(asked)
	want := slices.Clone(seenBy[revised])
	slices.Sort(want)
	if !slices.Equal(asked, want) {
		t.Errorf("page %d revised (and page %d, which no call showed): the model was asked about %v, want %v", revised, unseen, asked, want)
	}
	if s := e.summary(t, summaryLog.snapshot()[1]); s.Counts.Cached != len(ruleIDs)-len(want) {
		t.Errorf("revision summary counts %+v, want %d cached", s.Counts, len(ruleIDs)-len(want))
	}
	p.stop(t)
}

// TestServeCacheTenantsShareNothing (done-when 4): two tenants sending the same document and
// ruleset are each judged by the model, and their entries live under their own prefixes.
func TestServeCacheTenantsShareNothing(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t)
	verdictLog := e.watch(t, e.verdicts, 1)
	summaryLog := e.watch(t, e.summaries, 1)
	e.produceRequests(t, cacheRequest(t, "same", "contoso", exampleRulesetID, ""), cacheRequest(t, "same", "fabrikam", exampleRulesetID, ""))
	e.startInProcess(t, e.s3Args(e.key)...)
	waitUntil(t, waitLimit, "both summaries", func() bool { return summaryLog.len() >= 2 })
	waitUntil(t, waitLimit, "both tenants' verdicts", func() bool { return verdictLog.len() >= 2*len(exampleRuleIDs) })
	if n := len(e.llm.Requests()); n != 2 {
		t.Errorf("%d model calls, want one per tenant", n)
	}
	for _, m := range verdictLog.snapshot() {
		if v := e.verdict(t, m); v.Cached != nil {
			t.Errorf("tenant %s: verdict %s came from the cache (%+v)", v.TenantID, v.RuleID, v.Cached)
		}
	}
	for _, tn := range []string{"contoso", "fabrikam"} {
		n := 0
		if err := e.store.List(t.Context(), "verdicts/"+tn+"/", func(string) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n != len(exampleModelRuleIDs) {
			t.Errorf("tenant %s: %d entries under its prefix, want %d", tn, n, len(exampleModelRuleIDs))
		}
	}
}

// TestServeCacheOutageHolds (done-when 5): a verdict cache that cannot be read (object storage
// refusing the credentials) is an environment fault, as for reports: the request is held before
// any model call, /readyz names storage_auth, nothing is dead-lettered; it completes once the
// secret is right again.
func TestServeCacheOutageHolds(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t)
	ops := freeAddr(t)
	summaryLog := e.watch(t, e.summaries, 1)
	deadLog := e.watch(t, e.deadLetters, 1)
	e.produceRequests(t, cacheRequest(t, "outage", tenant, exampleRulesetID, ""))
	p := e.startInProcess(t, append(e.s3Args(e.key+"-rotated"), "--ops-addr", ops)...)
	waitHeld(t, "http://"+ops, "storage_auth")
	waitRetried(t, "http://"+ops, 2)
	if n, m, calls := deadLog.len(), summaryLog.len(), len(e.llm.Requests()); n != 0 || m != 0 || calls != 0 {
		t.Fatalf("with the cache unreadable: %d dead letters, %d summaries, %d model calls; want none", n, m, calls)
	}
	if code := p.stop(t); code != exitOK {
		t.Fatalf("serve exited %d on stop", code)
	}
	e.startInProcess(t, append(e.s3Args(e.key), "--ops-addr", ops)...)
	waitUntil(t, waitLimit, "the summary", func() bool { return summaryLog.len() >= 1 })
	if s := e.summary(t, summaryLog.snapshot()[0]); s.Status != schemas.StatusCompleted || len(e.llm.Requests()) != 1 {
		t.Errorf("summary %s after %d model calls, want completed after 1", jsonText(t, s), len(e.llm.Requests()))
	}
	if n := deadLog.len(); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
}

// TestServeCacheOptOut: a request with options.cache false is judged afresh and stores nothing.
func TestServeCacheOptOut(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t)
	summaryLog := e.watch(t, e.summaries, 1)
	first := cacheRequest(t, "opt-1", tenant, exampleRulesetID, "")
	second := cacheRequest(t, "opt-2", tenant, exampleRulesetID, "")
	first.Options.Cache, second.Options.Cache = ptr(false), ptr(false)
	e.produceRequests(t, first, second)
	e.startInProcess(t, e.s3Args(e.key)...)
	waitUntil(t, waitLimit, "both summaries", func() bool { return summaryLog.len() >= 2 })
	if n := len(e.llm.Requests()); n != 2 {
		t.Errorf("%d model calls, want 2: both requests opted out", n)
	}
	n := 0
	if err := e.store.List(t.Context(), "verdicts/", func(string) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d entries stored for requests that opted out", n)
	}
}

// TestCachePurgeCommand: cache purge deletes a tenant's entries of one ruleset, then all of
// them, and leaves other tenants' alone.
func TestCachePurgeCommand(t *testing.T) {
	t.Parallel()
	endpoint, access, key := s3test.Endpoint(t)
	store := s3test.Store(t)
	for _, k := range []string{"verdicts/contoso/msa/a.json", "verdicts/contoso/msa/b.json", "verdicts/contoso/nda/c.json", "verdicts/fabrikam/msa/a.json"} {
		if _, err := store.Put(t.Context(), k, []byte("{}"), "application/json", nil); err != nil {
			t.Fatal(err)
		}
	}
	purge := func(args ...string) (int, string) {
		var out, errOut strings.Builder
		code := run(t.Context(), append([]string{"cache", "purge", "--s3-endpoint", endpoint, "--s3-access-key", access, "--s3-secret-key", key, "--s3-bucket", store.Bucket()}, args...), &out, &errOut, noEnv)
		if code != exitOK {
			t.Errorf("cache purge %v: exit %d\n%s", args, code, errOut.String())
		}
		return code, out.String()
	}
	if _, out := purge("--tenant", "contoso", "--ruleset", "msa"); !strings.Contains(out, "deleted 2 verdict cache entries") {
		t.Errorf("purging contoso/msa: %q", out)
	}
	if _, out := purge("--tenant", "contoso"); !strings.Contains(out, "deleted 1 verdict cache entries") {
		t.Errorf("purging contoso: %q", out)
	}
	var left []string
	if err := store.List(t.Context(), "verdicts/", func(k string) error { left = append(left, k); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, []string{"verdicts/fabrikam/msa/a.json"}) {
		t.Errorf("left after the purges: %v, want fabrikam's entry only", left)
	}
	var errOut strings.Builder
	if code := run(t.Context(), []string{"cache", "purge", "--s3-endpoint", endpoint}, &strings.Builder{}, &errOut, noEnv); code != exitInvalid {
		t.Errorf("cache purge without --tenant: exit %d, want %d", code, exitInvalid)
	}
}
