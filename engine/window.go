package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// This file is the context window of each model: configured, learned from the server once
// per model by one shared probe, or named by the server when it refused a prompt as too long.

const (
	// windowProbeRetry is how long a failed context-window probe is
	// remembered before the server is asked again.
	windowProbeRetry = 5 * time.Minute
	// windowProbeTimeout bounds one context-window probe, shared by the
	// requests waiting for it.
	windowProbeTimeout = 30 * time.Second
)

// ContextWindower is implemented by LLMs that can ask the server how many
// tokens a model's context window holds. The engine asks once per model when
// Config.ContextTokens is not set.
type ContextWindower interface {
	ContextWindow(ctx context.Context, model string) (int, error)
}

// contextWindows remembers, per model, the context window the server
// reported. One probe per model runs at a time, however many requests need
// the window meanwhile. It is safe for concurrent use.
type contextWindows struct {
	mu    sync.Mutex
	known map[string]windowEntry
	probe singleflight.Group
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
// The server is asked once per model (again windowProbeRetry after a probe
// that learned nothing), by one probe that the requests needing the window
// meanwhile share: it runs detached from any one of them, and each stops
// waiting when its own ctx ends. A probe that fails permanently (a refused
// API key) fails the requests: their own calls would fail the same way.
func (e *Engine) contextTokens(ctx context.Context, model string) (int, error) {
	if e.cfg.ContextTokens > 0 {
		return e.cfg.ContextTokens, nil
	}
	cw, ok := e.llm.(ContextWindower)
	if !ok {
		return DefaultContextTokens, nil
	}
	if n, known := e.windows.lookup(model); known {
		return n, nil
	}
	shared := context.WithoutCancel(ctx)
	probed := e.windows.probe.DoChan(model, func() (any, error) { return e.probeWindow(shared, cw, model) })
	select {
	case r := <-probed:
		if r.Err != nil {
			return 0, r.Err
		}
		return r.Val.(int), nil
	case <-ctx.Done():
		return 0, fmt.Errorf("engine: waiting for model %q's context window: %w", model, context.Cause(ctx))
	}
}

// lookup is model's window when no probe is due: learned, or assumed after
// a recent probe that learned nothing.
func (w *contextWindows) lookup(model string) (tokens int, known bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	entry, seen := w.known[model]
	switch {
	case entry.tokens > 0:
		return entry.tokens, true
	case seen && time.Since(entry.at) < windowProbeRetry:
		return DefaultContextTokens, true
	}
	return 0, false
}

// probeWindow asks the server for model's window and remembers the answer.
func (e *Engine) probeWindow(ctx context.Context, cw ContextWindower, model string) (int, error) {
	w := e.windows
	if n, known := w.lookup(model); known { // a probe just ended
		return n, nil
	}
	w.mu.Lock()
	_, seen := w.known[model]
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, windowProbeTimeout)
	defer cancel()
	n, err := cw.ContextWindow(ctx, model)
	if err != nil {
		if isPermanent(err) {
			return 0, fmt.Errorf("engine: asking the server for model %q's context window: %w", model, err)
		}
		n = 0
		if !seen {
			e.cfg.Logger.InfoContext(ctx, "engine: context window not reported by the server; assuming the default (set it with the context-tokens setting)",
				"model", model, "assumed", DefaultContextTokens, "err", err)
		}
	}
	w.mu.Lock()
	if cur := w.known[model]; cur.tokens == 0 { // a window learned meanwhile wins
		w.known[model] = windowEntry{tokens: n, at: time.Now()}
	}
	w.mu.Unlock()
	if n > 0 {
		return n, nil
	}
	return DefaultContextTokens, nil
}

// learn remembers a window the server named in a refusal; it is not asked
// again.
func (w *contextWindows) learn(model string, tokens int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known[model] = windowEntry{tokens: tokens, at: time.Now()}
}

// contextLimit is the context window a server named when it refused a prompt as too long for
// it, if err is such a refusal (a ContextWindowError).
func contextLimit(err error) (int, bool) {
	var cw ContextWindowError
	if !errors.As(err, &cw) {
		return 0, false
	}
	n := cw.ContextWindow()
	return n, n > 0
}
