package engine

import (
	"container/list"
	"encoding/json"
	"sync"
)

// compiled is what the first model call of a request needs from its ruleset
// alone: rendering it costs more than the rest of the engine's work, and a
// ruleset from the registry is the same pointer for every request.
type compiled struct {
	system  string
	schema  json.RawMessage
	grammar json.RawMessage
}

func compile(rs *Ruleset) (*compiled, error) {
	schema, err := OutputSchema(rs.Rules)
	if err != nil {
		return nil, err
	}
	grammar, err := GrammarSchema(rs.Rules)
	if err != nil {
		return nil, err
	}
	return &compiled{system: SystemPrompt(rs), schema: schema, grammar: grammar}, nil
}

// compiledCache remembers compiled rulesets by identity, least recently used
// first out. Rulesets must not change once validated; a reloaded one is a new
// pointer and compiles anew.
type compiledCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *compiledEntry, front = most recent
	byRS  map[*Ruleset]*list.Element
}

type compiledEntry struct {
	rs *Ruleset
	c  *compiled
}

func newCompiledCache(max int) *compiledCache {
	return &compiledCache{max: max, order: list.New(), byRS: map[*Ruleset]*list.Element{}}
}

func (cc *compiledCache) get(rs *Ruleset) (*compiled, error) {
	cc.mu.Lock()
	if el, ok := cc.byRS[rs]; ok {
		cc.order.MoveToFront(el)
		c := el.Value.(*compiledEntry).c
		cc.mu.Unlock()
		return c, nil
	}
	cc.mu.Unlock()

	c, err := compile(rs)
	if err != nil {
		return nil, err
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if _, ok := cc.byRS[rs]; !ok {
		cc.byRS[rs] = cc.order.PushFront(&compiledEntry{rs: rs, c: c})
		for cc.order.Len() > cc.max {
			last := cc.order.Back()
			cc.order.Remove(last)
			delete(cc.byRS, last.Value.(*compiledEntry).rs)
		}
	}
	return c, nil
}
