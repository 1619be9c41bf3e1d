package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// Instructions says how the instructions (role, rules, output contract) are
// sent to the model.
type Instructions string

const (
	// InstructionsSystem sends them as a system message, the data as the
	// user message. Prompt caches hit on the system message.
	InstructionsSystem Instructions = "system"
	// InstructionsUser folds them into the start of the user message, before
	// the data, for servers and chat templates that drop or reject the system
	// role. The data stay inside the neutralised markers as ever.
	InstructionsUser Instructions = "user"
	// InstructionsAuto finds out once per model whether the system role
	// reaches the model, from the prompt tokens the server counts with and
	// without a system message (a code-word probe only where the server
	// reports none), and folds the instructions when it does not.
	InstructionsAuto Instructions = "auto"
)

// buildPrompt is the first messages of a conversation.
func buildPrompt(mode Instructions, system, user string) []Message {
	if mode == InstructionsUser {
		return []Message{{Role: "user", Content: system + foldSeparator + user}}
	}
	return []Message{{Role: "system", Content: system}, {Role: "user", Content: user}}
}

// How auto decides. The server's own prompt token count says whether its
// chat template renders a system message: the same short question is asked
// without a system message and then with one holding a distinctive text, for
// one token of answer each. When the template renders the system message,
// the prompt with it is longer by about the text's tokens; when it drops the
// message, the two prompts are the same. The count is the same on every run,
// whatever the model would answer. Only a server that reports no prompt
// tokens, or a count that says neither, is asked the code word: the model
// can only answer with it if it saw the system message.
const (
	countSystem = "Reference list, nothing to act on: amber heron, basalt lantern, cobalt meadow, damask quarry, " +
		"ember willow, flint orchard, garnet harbour, hazel turbine, indigo causeway, juniper ledger, " +
		"kestrel foundry, linden parapet, marble cistern, nutmeg gantry, opal trellis, pewter sluice."
	countUser = "Reply with the single word ready."

	probeCodeWord = "OCELOT-5172"
	probeSystem   = "The code word is " + probeCodeWord + ". Whenever you are asked for the code word, answer with the code word and nothing else."
	probeUser     = "What is the code word? Answer with the code word only."
)

// systemTokensCounted is the least growth of the prompt, in tokens, that
// shows the system text was rendered: half its words, where tokenizers make
// at least one token per plain word. The margin absorbs a template that puts
// a default system message in when none is given and replaces it with the
// given one.
func systemTokensCounted() int { return len(strings.Fields(countSystem)) / 2 }

// instructionModes remembers, per model, how instructions reach it. It is
// safe for concurrent use: one decision per model runs at a time, and
// callers asking meanwhile wait for its outcome.
type instructionModes struct {
	mu    sync.Mutex
	known map[string]*modeDecision
}

type modeDecision struct {
	done chan struct{}
	mode Instructions
	// settled is false while the instructions are folded only because the
	// server could not be asked.
	settled bool
	// err is a permanent failure of the decision's calls; the requests
	// waiting for the decision fail with it too.
	err error
}

// instructionMode is how to send instructions to model under the engine's
// setting, asking the server the first time auto needs to know. settled is
// false when the instructions are folded only for now, the server not
// having answered: verdicts judged so are not what the setting names, and
// are not kept in the verdict cache. An error is one the request's own call
// would get as well (a refused API key, an unknown model): the request
// fails with it and the next one asks again.
func (e *Engine) instructionMode(ctx context.Context, model string) (mode Instructions, settled bool, err error) {
	if e.cfg.Instructions != InstructionsAuto {
		return e.cfg.Instructions, true, nil
	}
	m := e.modes
	m.mu.Lock()
	d, ok := m.known[model]
	if !ok {
		d = &modeDecision{done: make(chan struct{})}
		m.known[model] = d
		m.mu.Unlock()
		defer close(d.done)
		mode, remember, err := e.decideMode(ctx, model)
		d.mode, d.settled, d.err = mode, remember, err
		if !remember {
			m.mu.Lock()
			delete(m.known, model)
			m.mu.Unlock()
		}
		return mode, remember, err
	}
	m.mu.Unlock()
	select {
	case <-d.done:
		return d.mode, d.settled, d.err
	case <-ctx.Done():
		return "", false, ctx.Err()
	}
}

// decideMode finds out how instructions reach model (see countSystem). A
// server that answers the question without a system message and fails it
// with one refuses the system role: the instructions are folded. When the
// server cannot be asked at all, folding is the choice that works on every
// server: it is used for now and the server is asked again later.
func (e *Engine) decideMode(ctx context.Context, model string) (mode Instructions, remember bool, err error) {
	log := e.cfg.Logger.With("model", model)
	bare, err := e.probeCall(ctx, model, []Message{{Role: "user", Content: countUser}}, 1)
	if err != nil {
		return e.undecided(ctx, log, model, err)
	}
	with, err := e.probeCall(ctx, model, buildPrompt(InstructionsSystem, countSystem, countUser), 1)
	if err != nil {
		if refusesSystem(ctx, err) {
			log.WarnContext(ctx, "the model server refuses system messages; sending instructions in the user message",
				"instructions", InstructionsUser, "decided_by", "refusal", "err", err)
			return InstructionsUser, true, nil
		}
		return e.undecided(ctx, log, model, err)
	}
	counts := []any{"prompt_tokens_with_system", with.Usage.PromptTokens, "prompt_tokens_without", bare.Usage.PromptTokens}
	added := with.Usage.PromptTokens - bare.Usage.PromptTokens
	switch {
	case bare.Usage.PromptTokens <= 0 || with.Usage.PromptTokens <= 0:
		log.InfoContext(ctx, "the model server reports no prompt tokens; asking the model a code word to find out whether it sees system messages", counts...)
	case added >= systemTokensCounted():
		log.InfoContext(ctx, "the chat template renders system messages; sending instructions as a system message",
			append([]any{"instructions", InstructionsSystem, "decided_by", "prompt_tokens"}, counts...)...)
		return InstructionsSystem, true, nil
	case added == 0:
		log.InfoContext(ctx, "the chat template drops system messages; sending instructions in the user message",
			append([]any{"instructions", InstructionsUser, "decided_by", "prompt_tokens"}, counts...)...)
		return InstructionsUser, true, nil
	default:
		log.InfoContext(ctx, "the prompt tokens do not show whether system messages are rendered; asking the model a code word", counts...)
	}
	return e.codeWordProbe(ctx, log, model)
}

// codeWordProbe asks model the code word, a question only the system
// message answers: the fallback where the server's count says nothing.
func (e *Engine) codeWordProbe(ctx context.Context, log *slog.Logger, model string) (Instructions, bool, error) {
	resp, err := e.probeCall(ctx, model, buildPrompt(InstructionsSystem, probeSystem, probeUser), 16)
	switch {
	case err != nil:
		return e.undecided(ctx, log, model, err)
	case strings.Contains(strings.ToUpper(resp.Content), probeCodeWord):
		log.InfoContext(ctx, "the model sees system messages; sending instructions as a system message",
			"instructions", InstructionsSystem, "decided_by", "code_word")
		return InstructionsSystem, true, nil
	default:
		log.InfoContext(ctx, "the model did not follow a system message; sending instructions in the user message",
			"instructions", InstructionsUser, "decided_by", "code_word", "probe_answer", clipLog(resp.Content))
		return InstructionsUser, true, nil
	}
}

// undecided is the outcome of a question the server did not answer. The
// question is the engine's own, not the request's, so its failure says
// nothing about the request: the instructions are folded into the user
// message, which every server reads, and the request goes on. A server
// that rejected the question (a 400 to a plain question without rules)
// would reject it again, so the fold is kept; a refused API key or an
// unknown configured model ends the request as an environment fault, as
// its own call would; anything else folds for now, and a later request
// asks again.
func (e *Engine) undecided(ctx context.Context, log *slog.Logger, model string, err error) (Instructions, bool, error) {
	switch {
	case ctx.Err() == nil && errors.Is(err, ErrLLMRejected):
		log.WarnContext(ctx, "the server rejected the engine's question whether the model sees system messages; sending instructions in the user message",
			"instructions", InstructionsUser, "decided_by", "rejected_question", "err", err)
		return InstructionsUser, true, nil
	case ctx.Err() == nil && isPermanent(err):
		return "", false, fmt.Errorf("engine: asking model %q whether it sees system messages: %w", model, err)
	}
	log.WarnContext(ctx, "could not find out whether the model sees system messages; sending instructions in the user message until it can be asked",
		"instructions", InstructionsUser, "err", err)
	return InstructionsUser, false, nil
}

// permanentError is implemented by LLM errors that know whether the same call
// would fail the same way until the operator changes something (the openai
// adapter's: a refused API key, an unknown configured model, an untrusted
// certificate). Errors wrapping ErrLLMRejected are permanent without it.
type permanentError interface{ Permanent() bool }

func isPermanent(err error) bool {
	if errors.Is(err, ErrLLMRejected) {
		return true
	}
	var p permanentError
	return errors.As(err, &p) && p.Permanent()
}

// refusesSystem reports whether err, the failure of the question with a
// system message after the same question without one was answered, is the
// server refusing the system role: a rejection (the message is the only
// difference), or a server error that names the role (llama.cpp answers a
// chat template's "System role not supported" with a 500). A timeout or an
// outage says nothing about the role.
func refusesSystem(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, ErrLLMRejected) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return errors.Is(err, ErrLLMUnavailable) && (strings.Contains(msg, "system") || strings.Contains(msg, "role"))
}

// probeCall is one short, plain-text call of the decision, reported to the
// LLMCall hook like every model call but not counted in a request's usage.
// It waits as long as any call of the request (the client's call timeout):
// a server busy with other clients answers it late, not never, and a
// shorter wait would fold the instructions of a request whose own calls go
// through.
func (e *Engine) probeCall(ctx context.Context, model string, messages []Message, maxTokens int) (ChatResponse, error) {
	return e.chat(ctx, ChatRequest{Purpose: PurposeProbe, Model: model, Messages: messages, Format: FormatText, MaxTokens: maxTokens, Temperature: Temperature(e.cfg.Temperature)})
}

func clipLog(s string) string {
	if r := []rune(s); len(r) > 80 {
		return string(r[:80]) + "…"
	}
	return s
}

func (i Instructions) validate() error {
	switch i {
	case InstructionsSystem, InstructionsUser, InstructionsAuto:
		return nil
	}
	return fmt.Errorf("engine: Instructions %q is not one of system, user, auto", i)
}

func newInstructionModes() *instructionModes {
	return &instructionModes{known: map[string]*modeDecision{}}
}

func defaultLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}
