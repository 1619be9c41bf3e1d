package engine

import "testing"

func TestCompiledCacheReusesAndEvicts(t *testing.T) {
	cc := newCompiledCache(2, EvidenceCite)
	a, b, c := testRuleset(), testRuleset(), testRuleset()
	first, err := cc.get(a)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := cc.get(a)
	if first != again {
		t.Error("the same ruleset compiled twice")
	}
	if first.system != SystemPrompt(a, EvidenceCite) {
		t.Error("cached system prompt differs from a fresh rendering")
	}
	cc.get(b)
	cc.get(c) // evicts a, the least recently used
	if ok := cc.lru.Contains(a); ok || cc.lru.Len() != 2 {
		t.Errorf("cache holds %d entries, a present: %v", cc.lru.Len(), ok)
	}
}
