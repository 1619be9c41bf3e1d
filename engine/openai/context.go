package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"rulevalidator/engine"
	"rulevalidator/internal/tlserr"
	"rulevalidator/internal/tracing"
)

// ErrContextUnknown: the server does not say how large the model's context
// window is.
var ErrContextUnknown = errors.New("openai: the server does not report the context window")

var _ engine.ContextWindower = (*Client)(nil)

// ContextWindow asks the server how many tokens model's context window holds
// (prompt and answer together). It knows where the common servers say:
// llama.cpp's GET /props (n_ctx of the running server), and GET /models
// entries that carry max_model_len (vLLM), context_length or
// max_context_length. Servers that say nothing (the OpenAI API,
// llama-cpp-python) yield ErrContextUnknown; callers fall back to
// configuration. A server that refuses this service (its API key, 401 or
// 403, or its TLS certificate) answers every call the same way: that is
// returned at once, as Chat returns it, permanent (see Permanent).
func (c *Client) ContextWindow(ctx context.Context, model string) (int, error) {
	base := strings.TrimRight(c.cfg.BaseURL, "/")
	// /props lives at the server root, next to /v1.
	n, propsErr := c.getContextField(ctx, strings.TrimSuffix(base, "/v1")+"/props", propsContext)
	if propsErr == nil {
		return n, nil
	}
	if refused, ok := errors.AsType[*chatError](propsErr); ok {
		return 0, refused
	}
	n, modelsErr := c.getContextField(ctx, base+"/models", func(body []byte) (int, bool) { return modelsContext(body, model) })
	if modelsErr == nil {
		return n, nil
	}
	if refused, ok := errors.AsType[*chatError](modelsErr); ok {
		return 0, refused
	}
	return 0, fmt.Errorf("%w (%w; %w)", ErrContextUnknown, propsErr, modelsErr)
}

// getContextField GETs url and reads the context window from its JSON body
// with field. A refusal of this service (401, 403, an untrusted
// certificate) is a *chatError, classified as a chat call's would be.
func (c *Client) getContextField(ctx context.Context, url string, field func([]byte) (int, bool)) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, min(c.cfg.Timeout, defaultProbeTimeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	tracing.InjectHTTP(ctx, req.Header)
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		if tlserr.IsSetup(err) {
			f := &failure{kind: environment, fault: CauseTLS, cause: err, reason: "the server's TLS certificate was refused: " + err.Error()}
			return 0, f.chatError()
		}
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		f := &failure{status: resp.StatusCode}
		classifyStatus(f, serverError{message: errorMessage(body)}, attemptInfo{})
		return 0, f.chatError()
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	n, ok := field(body)
	if !ok {
		return 0, fmt.Errorf("GET %s: no context window in the answer", url)
	}
	return n, nil
}

// errorMessage is the message of an OpenAI-style error body, else the body
// itself, shortened.
func errorMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return bodySnippet(body)
}

// defaultProbeTimeout bounds one discovery request: it runs before a
// request's first call and must not hold it up for long.
const defaultProbeTimeout = 10 * time.Second

// propsContext reads llama.cpp's /props: n_ctx under
// default_generation_settings (older versions put it at the top level).
func propsContext(body []byte) (int, bool) {
	var props struct {
		NCtx     int `json:"n_ctx"`
		Defaults struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if json.Unmarshal(body, &props) != nil {
		return 0, false
	}
	if n := props.Defaults.NCtx; n > 0 {
		return n, true
	}
	return props.NCtx, props.NCtx > 0
}

// modelsContext reads the entry for model of a /models list (the only entry
// when there is one and none matches: local servers serve one model under an
// alias).
func modelsContext(body []byte, model string) (int, bool) {
	var list struct {
		Data []struct {
			ID               string `json:"id"`
			MaxModelLen      int    `json:"max_model_len"`
			ContextLength    int    `json:"context_length"`
			MaxContextLength int    `json:"max_context_length"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &list) != nil {
		return 0, false
	}
	for i, m := range list.Data {
		if m.ID != model && !(len(list.Data) == 1 && i == 0) {
			continue
		}
		for _, n := range []int{m.MaxModelLen, m.ContextLength, m.MaxContextLength} {
			if n > 0 {
				return n, true
			}
		}
	}
	return 0, false
}
