package pipeline

import (
	"context"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/registry"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// fakeEngine answers with a fixed result or error; the point here is how the
// pipeline classifies what the engine says.
type fakeEngine struct {
	res *engine.Result
	err error
}

func (f fakeEngine) Evaluate(context.Context, engine.Task) (*engine.Result, error) {
	return f.res, f.err
}

func ptr[T any](v T) *T { return &v }

func TestResultCacheBounds(t *testing.T) {
	c := newResultCache(2, 1<<20)
	c.put("a", nil)
	c.put("b", nil)
	c.put("c", nil)
	if _, ok := c.get("a"); ok || c.len() != 2 {
		t.Errorf("oldest entry kept, %d entries", c.len())
	}
	off := newResultCache(-1, 1<<20)
	off.put("a", nil)
	if _, ok := off.get("a"); ok {
		t.Error("a disabled cache remembered a result")
	}

	// By bytes: the least recently used go first, a result replaced gives
	// its bytes back, and one larger than the bound is not kept at all.
	sized := func(n int) *published { return &published{msgs: []stream.Record{{Value: make([]byte, n)}}} }
	b := newResultCache(10, 100)
	b.put("a", sized(40))
	b.put("b", sized(40))
	b.get("a")
	b.put("c", sized(40)) // 120 bytes: b, the least recently used, goes
	if _, ok := b.get("b"); ok || b.len() != 2 || b.bytes != 80 {
		t.Errorf("after a third 40-byte result: b kept %v, %d entries, %d bytes", ok, b.len(), b.bytes)
	}
	b.put("a", sized(10))
	b.put("huge", sized(101))
	if _, ok := b.get("huge"); ok || b.len() != 2 || b.bytes != 50 {
		t.Errorf("after replacing a and offering a huge result: huge kept %v, %d entries, %d bytes", ok, b.len(), b.bytes)
	}
	b.remove("a")
	if b.len() != 1 || b.bytes != 40 {
		t.Errorf("after removing a: %d entries, %d bytes", b.len(), b.bytes)
	}
}

// oneRuleFixture is what most pipeline tests start from: a resolver holding the one-rule
// ruleset "rs", a result passing its rule, and the plain wire format.
func oneRuleFixture(t *testing.T) (*registry.Static, *engine.Result, *schemas.Serde) {
	t.Helper()
	static, err := registry.NewStatic(&engine.Ruleset{ID: "rs", Version: "1", Rules: []engine.Rule{{RuleID: "r1", RuleText: "text"}}})
	if err != nil {
		t.Fatal(err)
	}
	serde, err := schemas.NewSerde(context.Background(), schemas.SerdeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return static, passResult(), serde
}
