package engine

import (
	"encoding/json"

	lru "github.com/hashicorp/golang-lru/v2"
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
	mode EvidenceMode
	lru  *lru.Cache[*Ruleset, *compiled]
}

func newCompiledCache(size int, mode EvidenceMode) *compiledCache {
	cache, _ := lru.New[*Ruleset, *compiled](max(size, 1)) // cannot fail: the size is positive
	return &compiledCache{mode: mode, lru: cache}
}

func (cc *compiledCache) get(rs *Ruleset) (*compiled, error) {
	if c, ok := cc.lru.Get(rs); ok {
		return c, nil
	}
	// Compiled outside the cache's lock: a ruleset compiled twice at once
	// costs a rendering, not a wait for every other ruleset.
	c, err := compile(rs, cc.mode)
	if err != nil {
		return nil, err
	}
	cc.lru.ContainsOrAdd(rs, c)
	return c, nil
}
