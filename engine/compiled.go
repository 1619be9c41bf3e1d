package engine

import (
	"container/list"
	"encoding/json"
	"sync"
)

// compiled is what every call for a ruleset sends before the material: its
// system prompt. Rendering it costs more than the rest of the engine's own
// work, and a ruleset from the registry is the same pointer for every
// request.
type compiled struct {
	system string
	rules  string // RulesPrompt of all the rules
	// The schemas' bodies, for all of the ruleset's rules: what is citable
	// is added per call (withCitable).
	schema, grammar json.RawMessage
}

func compile(rs *Ruleset, mode EvidenceMode) (*compiled, error) {
	schema, err := outputBody(rs.Rules, mode)
	if err != nil {
		return nil, err
	}
	grammar, err := grammarBody(rs.Rules, mode)
	if err != nil {
		return nil, err
	}
	return &compiled{system: SystemPrompt(rs, mode), rules: RulesPrompt(rs.Rules), schema: schema, grammar: grammar}, nil
}

// compiledCache remembers compiled rulesets by identity, least recently used
// first out. Rulesets must not change once validated; a reloaded one is a new
// pointer and compiles anew.
type compiledCache struct {
	mode  EvidenceMode
	mu    sync.Mutex
	max   int
	order *list.List // of *compiledEntry, front = most recent
	byRS  map[*Ruleset]*list.Element
}

type compiledEntry struct {
	rs *Ruleset
	c  *compiled
}

func newCompiledCache(max int, mode EvidenceMode) *compiledCache {
	return &compiledCache{mode: mode, max: max, order: list.New(), byRS: map[*Ruleset]*list.Element{}}
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

	c, err := compile(rs, cc.mode)
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
