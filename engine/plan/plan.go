// Package plan decides how a request too big for one model call is judged:
// it estimates tokens, splits documents into page-aligned chunks, picks for
// each rule the chunks most relevant to it (BM25), and groups rules whose
// passages overlap into calls whose prompts fit the context window and whose
// answers fit the answer budget. It does no I/O and knows nothing of the
// model's API.
package plan

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// ErrTooSmall: the context window cannot hold even one rule with the parts of
// the request every call carries.
var ErrTooSmall = errors.New("context window too small")

// Rule is what the planner needs of a rule.
type Rule struct {
	ID string
	// Query is the text passages are retrieved by: the rule text and its
	// not-applicable text.
	Query string
	// PromptTokens is what the rule's entry adds to the system prompt.
	PromptTokens int
}

// Budget is the token arithmetic of one call.
type Budget struct {
	// Context is the model's context window: prompt and answer together.
	Context int
	// Answer is the part of the window kept for the answer (the answer's
	// max_tokens).
	Answer int
	// Fixed is what every call's prompt holds besides rule entries and
	// document text: the system prompt's frame and output contract, the user
	// message's frame, named inputs, text input and message, the chat
	// template and the excerpt notes.
	Fixed int
	// AnswerPerRule is the answer tokens one rule's verdict is expected to
	// take.
	AnswerPerRule int
	// PerChunk is the overhead of one chunk in the prompt (its page marker).
	PerChunk int
	// PerDocument is the overhead of one document (its start and end markers
	// and description).
	PerDocument int
}

// Prompt is the room for the prompt: the context less the answer.
func (b Budget) Prompt() int { return b.Context - b.Answer }

// RulesPerCall is how many rules one answer can hold.
func (b Budget) RulesPerCall() int {
	if b.AnswerPerRule <= 0 {
		return 1 << 30
	}
	return max(1, b.Answer/b.AnswerPerRule)
}

func (b Budget) validate() error {
	switch {
	case b.Context <= 0:
		return fmt.Errorf("plan: context window %d must be positive", b.Context)
	case b.Answer <= 0 || b.Answer >= b.Context:
		return fmt.Errorf("plan: answer budget %d must be positive and below the context window of %d", b.Answer, b.Context)
	case b.Fixed < 0 || b.AnswerPerRule < 0 || b.PerChunk < 0 || b.PerDocument < 0:
		return errors.New("plan: token overheads must not be negative")
	}
	return nil
}

// Call is one planned model call.
type Call struct {
	// Rules are indexes into the planned rules, in ruleset order.
	Rules []int
	// Chunks are indexes into Plan.Chunks, in document order.
	Chunks []int
	// Partial is true when the chunks are not all of the documents.
	Partial bool
	// Tokens is the estimated prompt of the call.
	Tokens int
}

// Plan is how a request is judged: a list of calls.
type Plan struct {
	Chunks []Chunk
	Calls  []Call
	// Cut marks, by rule index, the rules for which a relevant passage did
	// not fit the budget.
	Cut []bool
	// CallOf is, by rule index, the index of the call that judges the rule.
	CallOf []int
}

// Pages lists, per document index, the pages (1-based, ascending) that call
// c holds.
func (p *Plan) Pages(c int) map[int][]int {
	out := map[int][]int{}
	for _, i := range p.Calls[c].Chunks {
		ch := p.Chunks[i]
		pages := out[ch.Doc]
		if len(pages) == 0 || pages[len(pages)-1] != ch.Page {
			out[ch.Doc] = append(pages, ch.Page)
		}
	}
	return out
}

// Relevance: a chunk is relevant to a rule when its score is at least this
// share of the rule's best chunk's score. Lower takes in more context per rule
// at the cost of more and larger calls.
const relevantShare = 0.3

// Make plans calls judging rules over docs within b. Texts are estimated by
// Count scaled by ratio (the model's correction, see Estimator.PromptRatio).
// A rule whose relevant chunks do not all fit is still judged, on the most
// relevant ones, and marked Cut; so is a rule that matches no chunk at all,
// which is judged on the beginning of the documents.
func Make(docs []Document, rules []Rule, b Budget, ratio float64) (*Plan, error) {
	if err := b.validate(); err != nil {
		return nil, err
	}
	if len(rules) == 0 {
		return nil, errors.New("plan: no rules")
	}
	room, err := roomFor(docs, rules, b)
	if err != nil {
		return nil, err
	}
	queries := make([]string, len(rules))
	for i, r := range rules {
		queries[i] = r.Query
	}
	ix := newIndex(queries)
	chunks := chunk(docs, chunkSize(rules, b, room), ratio, ix)
	p := &Plan{Chunks: chunks, Cut: make([]bool, len(rules)), CallOf: make([]int, len(rules))}
	pl := &planner{chunks: chunks, b: b, room: room}
	for i := range chunks {
		pl.total += pl.cost(i)
	}
	selected := pl.selectPassages(rules, ix, p.Cut)
	groups := pl.groupCalls(rules, selected, p.CallOf)
	p.Calls = pl.calls(groups)
	return p, nil
}

// roomFor is the room a call's prompt has for rule entries and chunks: the
// prompt less what every call carries. It is ErrTooSmall when a rule does
// not fit in it beside a chunk.
func roomFor(docs []Document, rules []Rule, b Budget) (int, error) {
	room := b.Prompt() - b.Fixed - b.PerDocument*len(docs)
	for _, r := range rules {
		if room-r.PromptTokens < b.PerChunk+1 {
			return 0, fmt.Errorf("%w: %d tokens (%d kept for the answer) cannot hold rule %q (%d tokens) with the %d tokens every call carries",
				ErrTooSmall, b.Context, b.Answer, r.ID, r.PromptTokens, b.Fixed+b.PerDocument*len(docs))
		}
	}
	return room, nil
}

// chunkSize is the most tokens a chunk holds: a third of the room at most,
// so that a call holds several passages and rules can share calls, and
// small enough that every rule's call holds one beside the rule: a rule
// whose entry takes most of the room would otherwise be judged on nothing.
func chunkSize(rules []Rule, b Budget, room int) int {
	chunkMax := min(2048, room/3)
	for _, r := range rules {
		chunkMax = min(chunkMax, room-r.PromptTokens-b.PerChunk)
	}
	return max(32, chunkMax)
}

// planner is Make at work on the documents' chunks.
type planner struct {
	chunks []Chunk
	b      Budget
	room   int
	// total is what all the chunks cost in a call.
	total int
}

// cost is what chunk j costs in a call: its text and its marker.
func (pl *planner) cost(j int) int { return pl.chunks[j].Tokens + pl.b.PerChunk }

// selectPassages selects each rule's chunks, by index in document order,
// marking in cut the rules that could not have all their relevant ones.
func (pl *planner) selectPassages(rules []Rule, ix *index, cut []bool) [][]int {
	selected := make([][]int, len(rules))
	scores := make([]float64, len(pl.chunks))
	order := make([]int, 0, len(pl.chunks))
	for i, r := range rules {
		capacity := pl.room - r.PromptTokens
		if pl.total <= capacity { // the documents fit whole: no choice to make
			selected[i] = seq(len(pl.chunks))
			continue
		}
		ix.scores(i, scores)
		var best float64
		order, best = relevant(scores, order[:0])
		used := 0
		if best <= 0 {
			// Nothing matches: judge on the beginning of the documents.
			cut[i] = true
			for j := range pl.chunks {
				if used+pl.cost(j) > capacity {
					break
				}
				selected[i] = append(selected[i], j)
				used += pl.cost(j)
			}
		} else {
			for _, j := range order {
				if used+pl.cost(j) > capacity {
					cut[i] = true
					continue // a smaller relevant chunk may still fit
				}
				selected[i] = append(selected[i], j)
				used += pl.cost(j)
			}
		}
		slices.Sort(selected[i])
	}
	return selected
}

// relevant appends to order the chunks relevant to a rule by their scores,
// best first; ties in document order, so that the plan is deterministic.
// best is the best score; none is relevant when it is 0.
func relevant(scores []float64, order []int) (_ []int, best float64) {
	for _, sc := range scores {
		best = max(best, sc)
	}
	for j, sc := range scores {
		if best > 0 && sc >= relevantShare*best {
			order = append(order, j)
		}
	}
	slices.SortFunc(order, func(x, y int) int {
		if c := cmp.Compare(scores[y], scores[x]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	return order, best
}

// group is the rules of one call, its chunks, and the tokens of their
// entries and chunks.
type group struct {
	rules  []int
	chunks map[int]bool
	tokens int
}

// groupCalls groups the rules into calls: each rule joins the call it shares
// most passages with, as long as the call's prompt and answer still fit;
// failing that any call it fits in (one system prompt fewer), else a call
// of its own. callOf gets each rule's call.
func (pl *planner) groupCalls(rules []Rule, selected [][]int, callOf []int) []*group {
	var groups []*group
	perCall := pl.b.RulesPerCall()
	for i, r := range rules {
		bestG, bestOverlap, bestAdded := -1, -1, 0
		for g, gr := range groups {
			if len(gr.rules) >= perCall {
				continue
			}
			overlap, added := 0, r.PromptTokens
			for _, j := range selected[i] {
				if gr.chunks[j] {
					overlap++
				} else {
					added += pl.cost(j)
				}
			}
			if gr.tokens+added > pl.room {
				continue
			}
			if overlap > bestOverlap || overlap == bestOverlap && added < bestAdded {
				bestG, bestOverlap, bestAdded = g, overlap, added
			}
		}
		if bestG < 0 {
			groups = append(groups, &group{chunks: map[int]bool{}})
			bestG = len(groups) - 1
			bestAdded = r.PromptTokens
			for _, j := range selected[i] {
				bestAdded += pl.cost(j)
			}
		}
		gr := groups[bestG]
		gr.rules = append(gr.rules, i)
		for _, j := range selected[i] {
			gr.chunks[j] = true
		}
		gr.tokens += bestAdded
		callOf[i] = bestG
	}
	return groups
}

// calls makes each group a call, its chunks in document order and its
// tokens counted with what every call carries.
func (pl *planner) calls(groups []*group) []Call {
	var calls []Call
	for _, gr := range groups {
		c := Call{Rules: gr.rules, Tokens: pl.b.Fixed + gr.tokens}
		for j := range gr.chunks {
			c.Chunks = append(c.Chunks, j)
		}
		slices.Sort(c.Chunks)
		docsIn := map[int]bool{}
		for _, j := range c.Chunks {
			docsIn[pl.chunks[j].Doc] = true
		}
		c.Tokens += pl.b.PerDocument * len(docsIn)
		c.Partial = len(c.Chunks) < len(pl.chunks)
		calls = append(calls, c)
	}
	return calls
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
