package openai

import (
	"cmp"
	"fmt"
	"regexp"
	"strconv"
)

// ContextLengthError is a server's refusal of a prompt too long for the model's context
// window, with what the server said of it: Limit, the window, and Requested, the prompt's
// tokens, each 0 where it did not say. The chat error wraps it beside engine.ErrLLMRejected
// (find it with errors.As); it is an engine.ContextWindowError, so the engine learns the
// window from it.
type ContextLengthError struct {
	Limit, Requested int
	err              error // what go-openai returned
}

func (e *ContextLengthError) Error() string {
	switch {
	case e.Limit > 0 && e.Requested > 0:
		return fmt.Sprintf("the prompt's %d tokens exceed the context window of %d", e.Requested, e.Limit)
	case e.Limit > 0:
		return fmt.Sprintf("the prompt exceeds the context window of %d tokens", e.Limit)
	case e.Requested > 0:
		return fmt.Sprintf("the prompt's %d tokens exceed the context window", e.Requested)
	}
	return "the prompt exceeds the context window"
}

func (e *ContextLengthError) Unwrap() error { return e.err }

// ContextWindow is the window the server named, 0 when it named none.
func (e *ContextLengthError) ContextWindow() int { return e.Limit }

// newContextLengthError reads the window and the prompt's size from what a server answered,
// as llama-cpp-python ("Requested tokens (6012) exceed context window of 2048"), OpenAI and
// vLLM ("maximum context length is 8192 tokens. However, your messages resulted in 9000
// tokens") and llama.cpp's server (n_ctx and n_prompt_tokens beside its message) put it.
func newContextLengthError(cause error, said ...string) *ContextLengthError {
	e := &ContextLengthError{err: cause}
	for _, s := range said {
		e.Limit = cmp.Or(e.Limit, firstNumber(contextLimitPattern, s))
		e.Requested = cmp.Or(e.Requested, firstNumber(promptTokensPattern, s))
	}
	return e
}

var (
	contextLimitPattern = regexp.MustCompile(`(?i)(?:context window of|maximum context length is|n_ctx[ =:"]+)\s*(\d+)`)
	promptTokensPattern = regexp.MustCompile(`(?i)(?:requested tokens \(|resulted in|you requested|n_prompt_tokens[ =:"]+)\s*(\d+)`)
)

// firstNumber is the number pattern's first group matches in s, 0 when none does.
func firstNumber(pattern *regexp.Regexp, s string) int {
	m := pattern.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 0 {
		return 0
	}
	return n
}
