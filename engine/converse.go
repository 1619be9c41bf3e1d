package engine

import (
	"context"
	"encoding/json"
	"time"

	"rulevalidator/verdict"
)

// converse runs one conversation: it asks the model, its instructions sent
// as mode says, to judge rules (all of rs.Rules, or a subset of them) on m
// (all of the request's material, or an excerpt of it), then re-asks for
// the rules whose answers failed the checks, merging what was accepted. an
// resolves evidence against the whole request's documents; share one per
// request across its conversations.
// The verdicts come back in the order of rules, their evidence resolved.
//
// An answer is accepted once it has the right shape (checkAnswer) and says
// something (checkContent). When the re-ask budget runs out and the only
// problems left are content problems, each such rule keeps its best answer,
// marked with its problems (keepBest); any shape problem left is an
// OutputError.
func (e *Engine) converse(ctx context.Context, model string, mode Instructions, rs *Ruleset, rules []Rule, m material, an *anchoring) ([]Verdict, verdict.Usage, error) {
	first, err := e.compiledFor(rs, rules)
	if err != nil {
		return nil, verdict.Usage{}, err
	}
	citable := m.ids
	if e.cfg.Evidence == EvidenceQuote {
		citable = an.origins()
	}
	grammarCitable := groundingIDs(citable, e.cfg.Evidence)
	// The material first, the rules after it: every call of a request
	// shares the instructions and the material as a prefix.
	// The rules are written for the rules asked, after the material: a
	// material rendered with its call's rules is asked for fewer when some
	// came from the cache or are re-asked.
	materialText := m.withoutRules().user
	messages := buildPrompt(mode, first.system, withRules(m, e.rulesPromptFor(rules, m, an)))
	pending := rules
	a := answers{
		accepted:    make(map[string]Verdict, len(rules)),
		best:        map[string]candidate{},
		unexplained: map[string]candidate{},
	}
	var usage verdict.Usage
	var asked question // the first call, which the samples source asks again
	for attempt := 0; ; attempt++ {
		schema, grammar, err := e.answerFormat(first, pending, attempt, citable, grammarCitable)
		if err != nil {
			return nil, usage, err
		}
		if attempt == 0 {
			asked = question{messages: messages, schema: schema, grammar: grammar}
		}
		purpose := PurposeJudge
		if attempt > 0 {
			purpose = PurposeReask
		}
		resp, err := e.ask(ctx, purpose, model, messages, schema, grammar, len(pending), e.cfg.Temperature)
		usage = usage.Add(resp.Usage)
		if err != nil {
			return nil, usage, err
		}

		good, problems := checkAnswer(resp.Content, pending)
		confidence := valueConfidences(resp.Content, resp.Tokens, pending)
		if problems, err = a.take(an, pending, good, confidence, problems); err != nil {
			return nil, usage, err
		}
		pending = stillPending(pending, a.accepted, a.unexplained)
		if len(pending) == 0 {
			break
		}
		if attempt >= e.cfg.OutputRetries {
			if !keepBest(pending, a.best, a.accepted) {
				return nil, usage, &OutputError{Attempts: attempt + 1, Problems: problems}
			}
			break
		}
		e.reasking(ctx, problems)
		// A re-ask is a fresh call for the pending rules with the latest
		// correction after them: it shares the instructions and material as
		// a prefix, and re-asks don't grow without bound.
		messages = buildPrompt(mode, first.system, materialText+e.rulesPromptFor(pending, m, an)+correctiveNote(problems, pending))
	}
	if len(a.unexplained) > 0 {
		u, err := e.explain(ctx, model, mode, first.system, materialText, rules, a.unexplained, an, a.accepted)
		usage = usage.Add(u)
		if err != nil {
			return nil, usage, err
		}
	}
	if e.cfg.Confidence == ConfidenceSamples {
		u, err := e.sampleConfidences(ctx, model, asked, rules, a.accepted)
		usage = usage.Add(u)
		if err != nil {
			return nil, usage, err
		}
	}
	return e.inOrder(rules, a.accepted), usage, nil
}

// answers is what a conversation has settled of its rules, by rule id.
type answers struct {
	accepted map[string]Verdict
	// best holds content-flawed answers, the fewest problems kept.
	best map[string]candidate
	// unexplained holds verdicts whose only problem is their rationale:
	// they wait for a rationale-only re-ask (explain) once the others are
	// settled.
	unexplained map[string]candidate
}

// answerFormat is the schema and grammar an attempt's answer must follow,
// with what it may cite. The first attempt's are compiled with the
// ruleset; a re-ask's name only the rules still pending.
func (e *Engine) answerFormat(first *compiled, pending []Rule, attempt int, citable, grammarCitable []string) (schema, grammar json.RawMessage, err error) {
	schemaPart, grammarPart := first.schema, first.grammar
	if attempt > 0 {
		if schemaPart, err = outputBody(pending, e.cfg.Evidence); err != nil {
			return nil, nil, err
		}
		if grammarPart, err = grammarBody(pending, e.cfg.Evidence); err != nil {
			return nil, nil, err
		}
	}
	if schema, err = withCitable(schemaPart, e.cfg.Evidence, citable); err != nil {
		return nil, nil, err
	}
	if grammar, err = withCitable(grammarPart, e.cfg.Evidence, grammarCitable); err != nil {
		return nil, nil, err
	}
	return schema, grammar, nil
}

// take sorts the well-formed verdicts of an answer (good, with their
// confidences) for the pending rules: accepted when their content holds,
// waiting for a rationale when that is all they lack, else kept when they
// are the best flawed answer so far. It gives the answer's problems with
// the content problems found.
func (a *answers) take(an *anchoring, pending []Rule, good map[string]Verdict, confidence map[string]float64, problems []Problem) ([]Problem, error) {
	for _, r := range pending {
		v, ok := good[r.RuleID]
		if !ok {
			continue
		}
		if p, ok := confidence[r.RuleID]; ok {
			v.Confidence = &p
		}
		cps, err := an.checkContent(r, &v)
		if err != nil {
			return problems, err
		}
		if len(cps) == 0 {
			a.accepted[r.RuleID] = v
			delete(a.best, r.RuleID)
			continue
		}
		if onlyRationale(cps) {
			a.unexplained[r.RuleID] = candidate{v, cps}
			delete(a.best, r.RuleID)
			continue
		}
		problems = append(problems, cps...)
		if c, ok := a.best[r.RuleID]; !ok || len(cps) <= len(c.problems) {
			a.best[r.RuleID] = candidate{v, cps}
		}
	}
	return problems, nil
}

// inOrder is the accepted verdicts in the order of rules, each quote's
// match shown to the Anchor hook.
func (e *Engine) inOrder(rules []Rule, accepted map[string]Verdict) []Verdict {
	out := make([]Verdict, 0, len(rules))
	for _, r := range rules {
		out = append(out, accepted[r.RuleID])
	}
	if observe := e.cfg.Hooks.Anchor; observe != nil {
		for _, v := range out {
			for _, ev := range v.Evidences {
				observe(ev.Match)
			}
		}
	}
	return out
}

// candidate is an answer that had the right shape but content problems.
type candidate struct {
	verdict  Verdict
	problems []Problem
}

// keepBest accepts, for every pending rule, its best content-flawed answer
// as the model gave it, with what was still wrong in the reader's terms
// (Problems): kept with problems is a mark of its own, not a judgement on
// the data, so its data_sufficiency is the model's and its value counts in
// the aggregates like any verdict's. It accepts nothing and reports false
// when some pending rule has no such answer (its problems were of shape).
func keepBest(pending []Rule, best map[string]candidate, accepted map[string]Verdict) bool {
	for _, r := range pending {
		if _, ok := best[r.RuleID]; !ok {
			return false
		}
	}
	for _, r := range pending {
		c := best[r.RuleID]
		v := c.verdict
		notes := make([]string, len(c.problems))
		for i, p := range c.problems {
			notes[i] = p.Note
			if notes[i] == "" {
				notes[i] = p.Detail
			}
		}
		v.Problems = notes
		accepted[r.RuleID] = v
	}
	return true
}

// compiledFor is the system prompt for judging rules of rs: from the cache
// when they are all of rs's rules, rendered afresh for a subset.
func (e *Engine) compiledFor(rs *Ruleset, rules []Rule) (*compiled, error) {
	if len(rules) == len(rs.Rules) && (len(rules) == 0 || &rules[0] == &rs.Rules[0]) {
		return e.compiled.get(rs)
	}
	return compile(&Ruleset{ID: rs.ID, Version: rs.Version, Rules: rules}, e.cfg.Evidence)
}

// stillPending is the rules neither accepted nor waiting for a rationale.
func stillPending(rules []Rule, accepted map[string]Verdict, unexplained map[string]candidate) []Rule {
	var out []Rule
	for _, r := range rules {
		_, ok := accepted[r.RuleID]
		_, waiting := unexplained[r.RuleID]
		if !ok && !waiting {
			out = append(out, r)
		}
	}
	return out
}

// rationaleRetries is the budget of rationale-only re-asks: one more than
// outputRetries, since each costs a sentence of output rather than a
// verdict, and none when re-asking is off.
func rationaleRetries(outputRetries int) int {
	if outputRetries <= 0 {
		return 0
	}
	return outputRetries + 1
}

// reasking reports the problems a re-ask is made for: counted by reason,
// and each logged at debug level as the model is told it.
func (e *Engine) reasking(ctx context.Context, problems []Problem) {
	for _, p := range problems {
		if e.cfg.Hooks.OutputRetry != nil {
			e.cfg.Hooks.OutputRetry(p.Reason)
		}
		e.cfg.Logger.DebugContext(ctx, "engine: re-asking", "rule_id", p.RuleID, "reason", p.Reason, "problem", p.Detail)
	}
}

// ask makes one call of a conversation and reports it to the hooks and the
// token estimator; pending is how many rules it asks about.
// temperature is the judge's, or the samples source's.
func (e *Engine) ask(ctx context.Context, purpose CallPurpose, model string, messages []Message, schema, grammar []byte, pending int, temperature float32) (ChatResponse, error) {
	resp, err := e.chat(ctx, ChatRequest{
		Purpose:       purpose,
		Model:         model,
		Messages:      messages,
		Format:        e.cfg.Format,
		SchemaName:    "rule_verdicts",
		Schema:        schema,
		GrammarSchema: grammar,
		Temperature:   Temperature(temperature),
		MaxTokens:     e.cfg.MaxTokens,
		LogProbs:      e.cfg.Confidence == ConfidenceLogProbs,
	})
	if err != nil {
		return resp, err
	}
	e.observeUsage(model, messages, pending, resp.Usage)
	return resp, nil
}

// chat makes one model call, whatever asks it (a judging call, the
// instruction decision, a verdict's check), and reports it to the LLMCall
// hook with its time.
func (e *Engine) chat(ctx context.Context, req ChatRequest) (ChatResponse, error) {
	start := time.Now()
	resp, err := e.llm.Chat(ctx, req)
	if e.cfg.Hooks.LLMCall != nil {
		e.cfg.Hooks.LLMCall(ctx, req.Model, req.Purpose, time.Since(start), resp.Usage, err)
	}
	return resp, err
}

// explain asks again, for verdicts whose only problem is their rationale,
// for the rationale alone: each verdict and its evidence stand, and the
// model is shown them, the cited passage in full, beside the rule. Asked to
// judge again, a small model writes a placeholder again as often as not;
// asked what one passage says, it writes a sentence about it, and a
// rationale is a fraction of a verdict's output. It has its own budget of
// re-asks (rationaleRetries); a verdict still without a rationale after it is kept with the
// problem, as any content problem is.
func (e *Engine) explain(ctx context.Context, model string, mode Instructions, system, materialText string, rules []Rule, unexplained map[string]candidate, an *anchoring, accepted map[string]Verdict) (verdict.Usage, error) {
	var usage verdict.Usage
	for attempt := 0; attempt < rationaleRetries(e.cfg.OutputRetries); attempt++ {
		var pending []Rule
		for _, r := range rules {
			if c, ok := unexplained[r.RuleID]; ok {
				pending = append(pending, r)
				e.reasking(ctx, c.problems)
			}
		}
		if len(pending) == 0 {
			break
		}
		schema, err := rationaleSchema(pending, false)
		if err != nil {
			return usage, err
		}
		grammar, err := rationaleSchema(pending, true)
		if err != nil {
			return usage, err
		}
		messages := buildPrompt(mode, system, materialText+rationaleNote(pending, unexplained))
		resp, err := e.ask(ctx, PurposeRationale, model, messages, schema, grammar, len(pending), e.cfg.Temperature)
		usage = usage.Add(resp.Usage)
		if err != nil {
			return usage, err
		}
		// A malformed answer leaves every verdict waiting for the next try.
		rationales, _ := checkRationales(resp.Content, pending)
		for _, r := range pending {
			text, ok := rationales[r.RuleID]
			if !ok {
				continue
			}
			c := unexplained[r.RuleID]
			v := c.verdict
			v.Rationale = text
			if p, ok := an.checkRationale(r, text, citedPassage(v)); !ok {
				c.verdict, c.problems = v, []Problem{p}
				unexplained[r.RuleID] = c
				continue
			}
			accepted[r.RuleID] = v
			delete(unexplained, r.RuleID)
		}
	}
	var left []Rule
	for _, r := range rules {
		if _, ok := unexplained[r.RuleID]; ok {
			left = append(left, r)
		}
	}
	keepBest(left, unexplained, accepted)
	return usage, nil
}

// withRules is the user message of a call on m asking rulesPrompt: m's own
// text when it was rendered with those rules at its end, else the material
// and the rules joined. A call's message lives as long as the call waits
// for the model: a copy of a long document per call would be memory that
// the bytes in flight do not count.
func withRules(m material, rulesPrompt string) string {
	if m.rules != "" && m.rules == rulesPrompt {
		return m.user
	}
	return m.withoutRules().user + rulesPrompt
}
