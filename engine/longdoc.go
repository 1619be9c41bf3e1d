package engine

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"rulevalidator/engine/plan"
)

// Defaults of the token budget.
const (
	// DefaultContextTokens is the context window assumed when neither the
	// configuration nor the server says: small enough for the models people
	// run themselves, so that a request is split rather than refused.
	DefaultContextTokens = 8192
	// DefaultCallConcurrency is how many calls of one request run at once.
	DefaultCallConcurrency = 4
)

// ContextWindower is implemented by LLMs that can ask the server how many
// tokens a model's context window holds. The engine asks once per model when
// Config.ContextTokens is not set.
type ContextWindower interface {
	ContextWindow(ctx context.Context, model string) (int, error)
}

// Token arithmetic of a call besides the texts themselves.
const (
	// perMessageTokens covers a chat template's turn markers.
	perMessageTokens = 8
	// reaskTokens and reaskTokensPerRule bound a corrective message: its
	// fixed text, and the problems it names for one rule.
	reaskTokens        = 64
	reaskTokensPerRule = 100
	// windowProbeRetry is how long a failed context-window probe is
	// remembered before the server is asked again.
	windowProbeRetry = 5 * time.Minute
)

// contextWindows remembers, per model, the context window the server
// reported. It is safe for concurrent use.
type contextWindows struct {
	mu    sync.Mutex
	known map[string]windowEntry
}

type windowEntry struct {
	tokens int // 0: the server did not say
	at     time.Time
}

func newContextWindows() *contextWindows {
	return &contextWindows{known: map[string]windowEntry{}}
}

// contextTokens is model's context window: configured, else learned from
// the server (reported, or named in a refusal), else DefaultContextTokens.
func (e *Engine) contextTokens(ctx context.Context, model string) int {
	if e.cfg.ContextTokens > 0 {
		return e.cfg.ContextTokens
	}
	w := e.windows
	w.mu.Lock()
	entry, seen := w.known[model]
	w.mu.Unlock()
	if entry.tokens > 0 {
		return entry.tokens
	}
	cw, ok := e.llm.(ContextWindower)
	if !ok || seen && time.Since(entry.at) < windowProbeRetry {
		return DefaultContextTokens
	}
	n, err := cw.ContextWindow(ctx, model)
	if err != nil {
		n = 0
		if !seen {
			e.cfg.Logger.Info("engine: context window not reported by the server; assuming the default (set it with the context-tokens setting)",
				"model", model, "assumed", DefaultContextTokens, "error", err)
		}
	}
	w.mu.Lock()
	if cur := w.known[model]; cur.tokens == 0 { // a window learned meanwhile wins
		w.known[model] = windowEntry{tokens: n, at: time.Now()}
	}
	w.mu.Unlock()
	if n > 0 {
		return n
	}
	return DefaultContextTokens
}

// learn remembers a window the server named in a refusal; it is not asked
// again.
func (w *contextWindows) learn(model string, tokens int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known[model] = windowEntry{tokens: tokens, at: time.Now()}
}

// budget is the token arithmetic of one request's calls.
type budget struct {
	window   int     // context window
	maxTok   int     // Config.MaxTokens (0: the server's default)
	ratio    float64 // the model's correction of plan.Count
	perRule  int     // expected answer tokens per rule
	reserved int     // answer tokens kept when planning
}

func (e *Engine) budgetFor(ctx context.Context, model string) (budget, error) {
	b := budget{
		window:  e.contextTokens(ctx, model),
		maxTok:  e.cfg.MaxTokens,
		ratio:   e.est.PromptRatio(model),
		perRule: e.est.AnswerTokensPerRule(model),
	}
	b.reserved = b.maxTok
	if b.reserved == 0 {
		b.reserved = min(max(b.window/4, 256), 4096)
	}
	if b.reserved >= b.window {
		return b, fmt.Errorf("engine: the answer budget of %d tokens (max tokens) leaves no room for a prompt in the context window of %d tokens", b.reserved, b.window)
	}
	return b, nil
}

func (b budget) tokens(s string) int { return plan.Scale(plan.Count(s), b.ratio) }

// fits reports whether one call with every rule and the whole prompt fits:
// the prompt and the answers within the window, and the answers within
// max tokens when that is set.
func (b budget) fits(promptTokens, rules int) bool {
	answers := rules * b.perRule
	if b.maxTok > 0 {
		return promptTokens <= b.window-b.maxTok && answers <= b.maxTok
	}
	return promptTokens+answers <= b.window
}

// judge judges every rule of rs on in: in one conversation when it fits the
// model's budget, as today; otherwise by a plan of several conversations,
// each on the passages most relevant to its rules. When the server refuses
// a call as too long for a context window it names, smaller than the one
// assumed, the window is remembered for the model and the request judged
// again within it.
func (e *Engine) judge(ctx context.Context, model string, rs *Ruleset, in *Inputs, an *anchoring) ([]Verdict, Usage, error) {
	verdicts, usage, err := e.judgeWithin(ctx, model, rs, in, an)
	if err == nil || e.cfg.ContextTokens > 0 {
		return verdicts, usage, err
	}
	n, ok := contextLimit(err)
	if !ok || n >= e.contextTokens(ctx, model) {
		return verdicts, usage, err
	}
	e.cfg.Logger.Warn("engine: the server's context window is smaller than assumed; judging again within it (set it with the context-tokens setting)",
		"model", model, "context_tokens", n)
	e.windows.learn(model, n)
	verdicts, again, err := e.judgeWithin(ctx, model, rs, in, an)
	total := usage.Add(again)
	total.PlannedCalls = again.PlannedCalls // the plan the verdicts come from
	return verdicts, total, err
}

// contextLimit reads the context window from a server's refusal of a
// prompt too long for it, as llama-cpp-python ("exceed context window of
// 2048"), OpenAI and vLLM ("maximum context length is 8192 tokens") word it.
func contextLimit(err error) (int, bool) {
	if !errors.Is(err, ErrLLMRejected) {
		return 0, false
	}
	m := contextLimitPattern.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, false
	}
	n, convErr := strconv.Atoi(m[1])
	return n, convErr == nil && n > 0
}

var contextLimitPattern = regexp.MustCompile(`(?i)(?:context window of|maximum context length is|n_ctx[ =:"]+)\s*(\d+)`)

// judgeWithin is judge within the context window known now.
func (e *Engine) judgeWithin(ctx context.Context, model string, rs *Ruleset, in *Inputs, an *anchoring) ([]Verdict, Usage, error) {
	b, err := e.budgetFor(ctx, model)
	if err != nil {
		return nil, Usage{}, err
	}
	first, err := e.compiled.get(rs)
	if err != nil {
		return nil, Usage{}, err
	}
	user := UserPrompt(in)
	// plan.Count never exceeds a text's length in bytes: a request that
	// fits by bytes needs no counting.
	fitsBytes := b.fits(plan.Scale(len(first.system)+len(user), b.ratio)+3*perMessageTokens, len(rs.Rules))
	if fitsBytes || b.fits(b.tokens(first.system)+b.tokens(user)+3*perMessageTokens, len(rs.Rules)) {
		e.observePlan(model, 1)
		verdicts, usage, err := e.converseWith(ctx, model, rs, rs.Rules, user, an)
		usage.PlannedCalls = 1
		return verdicts, usage, err
	}
	return e.judgePlanned(ctx, model, rs, in, an, b)
}

func (e *Engine) observePlan(model string, calls int) {
	if e.cfg.Hooks.PlannedCalls != nil {
		e.cfg.Hooks.PlannedCalls(model, calls)
	}
}

// judgePlanned plans the request's calls, runs them concurrently under the
// per-request cap and merges their verdicts in ruleset order.
func (e *Engine) judgePlanned(ctx context.Context, model string, rs *Ruleset, in *Inputs, an *anchoring, b budget) ([]Verdict, Usage, error) {
	docs := in.Documents()
	p, err := e.makePlan(rs, in, docs, b)
	if err != nil {
		return nil, Usage{}, err
	}
	e.observePlan(model, len(p.Calls))

	bounds := pageBounds(docs)
	type outcome struct {
		verdicts []Verdict
		usage    Usage
	}
	outcomes := make([]outcome, len(p.Calls))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.cfg.CallConcurrency)
	for c := range p.Calls {
		g.Go(func() error {
			call := p.Calls[c]
			rules := make([]Rule, len(call.Rules))
			for i, r := range call.Rules {
				rules[i] = rs.Rules[r]
			}
			// Only a call holding the documents whole renders them whole: an
			// excerpt's call must not pay for a copy of a long document.
			var user string
			if call.Partial {
				user = excerptPrompt(in, docs, p, c, bounds)
			} else {
				user = UserPrompt(in)
			}
			v, u, err := e.converseWith(gctx, model, rs, rules, user, an)
			outcomes[c] = outcome{v, u}
			return err
		})
	}
	err = g.Wait()
	var usage Usage
	for _, o := range outcomes {
		usage = usage.Add(o.usage)
	}
	usage.PlannedCalls = len(p.Calls)
	if err != nil {
		return nil, usage, err
	}

	verdicts := make([]Verdict, len(rs.Rules))
	for c, call := range p.Calls {
		pages := considered(docs, p.Pages(c))
		for i, r := range call.Rules {
			v := outcomes[c].verdicts[i]
			v.PagesConsidered = pages
			if p.Cut[r] && call.Partial {
				cutByBudget(&v, an)
			}
			verdicts[r] = v
		}
	}
	return verdicts, usage, nil
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
func considered(docs []Document, pages map[int][]int) []DocumentPages {
	out := []DocumentPages{}
	for d, doc := range docs {
		if ps := pages[d]; len(ps) > 0 {
			out = append(out, DocumentPages{Document: doc.Name, Pages: ps})
		}
	}
	return out
}

// makePlan measures the parts of the prompt every call carries and plans the
// calls.
func (e *Engine) makePlan(rs *Ruleset, in *Inputs, docs []Document, b budget) (*plan.Plan, error) {
	frame := SystemPrompt(&Ruleset{ID: rs.ID, Version: rs.Version})
	frameTokens := b.tokens(frame)
	// A corrective re-ask sends the prompt again with the answer being
	// corrected and the correction: each rule keeps room for its part of
	// them, so that a call that fits its first ask fits its re-asks.
	reask, reaskPerRule := 0, 0
	if e.cfg.OutputRetries > 0 {
		reask, reaskPerRule = reaskTokens, b.perRule+reaskTokensPerRule
	}
	rules := make([]plan.Rule, len(rs.Rules))
	for i, r := range rs.Rules {
		entry := b.tokens(SystemPrompt(&Ruleset{ID: rs.ID, Version: rs.Version, Rules: []Rule{r}})) - frameTokens
		rules[i] = plan.Rule{ID: r.RuleID, Query: r.RuleText + "\n" + r.NotApplicableText, PromptTokens: max(entry, 1) + reaskPerRule}
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
	others := b.tokens(otherInputsPrompt(in))
	// The chat template, the excerpt note's fixed text and a margin for
	// what the estimate does not see (the schema in the prompt of some
	// servers).
	fixed := frameTokens + others + b.tokens(excerptHeader) + 4*perMessageTokens + b.window/32 + reask
	// A chunk's page marker, elision lines, and its page in the note and
	// the document's description.
	maxPages := 1
	for _, d := range docs {
		maxPages = max(maxPages, len(d.Pages))
	}
	n := strconv.Itoa(maxPages)
	perChunk := b.tokens(pageMarker(maxPages)+"\n"+elision+elision) + 2*b.tokens(", "+n+"-"+n)
	pl, err := plan.Make(pdocs, rules, plan.Budget{
		Context:       b.window,
		Answer:        b.reserved,
		Fixed:         fixed,
		AnswerPerRule: b.perRule,
		PerChunk:      perChunk,
		PerDocument:   perDoc,
	}, b.ratio)
	if errors.Is(err, plan.ErrTooSmall) {
		return nil, fmt.Errorf("%w: %w", ErrInputTooLarge, err)
	}
	return pl, err
}

// The excerpt note tells the model that it sees parts of the documents and
// where they come from.
const (
	excerptHeader = "This message holds excerpts of the documents, not all of them: the passages most relevant to the rules being judged. " +
		"Page numbers are those of the whole documents. Judge only on what is shown; when it does not hold enough information to judge a rule, set data_sufficiency to false.\n"
	elision = "[…]\n"
)

// excerptPrompt renders the user message of a partial call c of p: which
// pages of which document it holds, those pages under their own page numbers
// inside the documents' neutralised markers, and every named input, the text
// input and the message in full. bounds[d][n-1] is where page n of document
// d starts and ends in the document's text.
func excerptPrompt(in *Inputs, docs []Document, p *plan.Plan, c int, bounds [][][2]int) string {
	byDoc := make([][]plan.Chunk, len(docs))
	for _, i := range p.Calls[c].Chunks {
		ch := p.Chunks[i]
		byDoc[ch.Doc] = append(byDoc[ch.Doc], ch)
	}
	pages := p.Pages(c)
	role := func(d int) string {
		if d < len(in.PrimaryDocs) {
			return "primary"
		}
		return "auxiliary"
	}
	var b strings.Builder
	b.WriteString("Judge the following material against the rules.\n")
	b.WriteString(excerptHeader)
	for d, doc := range docs {
		b.WriteString(excerptDocLine(markerName(doc.Name), role(d), len(doc.Pages), pages[d]))
	}
	for d, doc := range docs {
		chunks := byDoc[d]
		if len(chunks) == 0 {
			continue
		}
		name := markerName(doc.Name)
		b.WriteString("\n" + startMarker("Document", name) + "\n")
		b.WriteString(excerptDescription(role(d), len(doc.Pages), pages[d]))
		// An elision line stands for each part of a page left out.
		var prev *plan.Chunk
		for i := range chunks {
			ch := &chunks[i]
			if prev == nil || ch.Page != prev.Page {
				if prev != nil && prev.End != bounds[d][prev.Page-1][1] {
					b.WriteString(elision)
				}
				b.WriteString(pageMarker(ch.Page) + "\n")
				if ch.Start != bounds[d][ch.Page-1][0] {
					b.WriteString(elision)
				}
			} else if prev.End != ch.Start {
				b.WriteString(elision)
			}
			b.WriteString(neutralize(ch.Text))
			if !strings.HasSuffix(ch.Text, "\n") {
				b.WriteString("\n")
			}
			prev = ch
		}
		if prev.End != bounds[d][prev.Page-1][1] {
			b.WriteString(elision)
		}
		b.WriteString(endMarker("Document", name) + "\n")
	}
	b.WriteString(otherInputsPrompt(in))
	return b.String()
}

// pageBounds is where each page of each document starts and ends, in code
// points of the document's text (its pages joined by form feeds).
func pageBounds(docs []Document) [][][2]int {
	out := make([][][2]int, len(docs))
	for d, doc := range docs {
		out[d] = make([][2]int, len(doc.Pages))
		at := 0
		for i, page := range doc.Pages {
			n := utf8.RuneCountInString(page)
			out[d][i] = [2]int{at, at + n}
			at += n + 1
		}
	}
	return out
}

// excerptDocLine is a document's line in the excerpt note.
func excerptDocLine(name, role string, total int, pages []int) string {
	held := pagesPhrase(pages)
	if len(pages) == 0 {
		held = "not included in this message"
	}
	return fmt.Sprintf("- %s (%s document, %d page%s): %s\n", strconv.Quote(name), role, total, plural(total), held)
}

// excerptDescription is the line under a partial document's start marker.
func excerptDescription(role string, total int, pages []int) string {
	return fmt.Sprintf("(%s document, %d page%s; this excerpt holds %s)\n", role, total, plural(total), pagesPhrase(pages))
}

// pagesPhrase is "page 4" or "pages 1, 4-6, 250".
func pagesPhrase(pages []int) string {
	if len(pages) == 1 {
		return "page " + strconv.Itoa(pages[0])
	}
	return "pages " + pageList(pages)
}

// pageList writes ascending page numbers with runs as ranges: "1, 4-6, 250".
func pageList(pages []int) string {
	var b strings.Builder
	for i := 0; i < len(pages); {
		j := i
		for j+1 < len(pages) && pages[j+1] == pages[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(pages[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(pages[j]))
		}
		i = j + 1
	}
	return b.String()
}

// observeUsage teaches the estimator how the model's tokenizer compares with
// the estimate and how long its answers run.
func (e *Engine) observeUsage(model string, messages []Message, rules int, u Usage) {
	counted := 0
	for _, m := range messages {
		counted += plan.Count(m.Content) + perMessageTokens
	}
	e.est.ObservePrompt(model, counted, u.PromptTokens)
	e.est.ObserveAnswer(model, rules, u.CompletionTokens)
}
