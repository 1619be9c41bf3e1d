// Package llmfake is a scripted OpenAI-compatible chat completions server for
// tests. It answers POST {URL}/chat/completions with the replies it was given,
// in order, records every request it saw, and can refuse chosen response
// formats the way servers without structured output do.
package llmfake

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// Reply is one scripted answer. The zero Reply is a 200 with empty content.
type Reply struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Header is added to the response (e.g. Retry-After).
	Header map[string]string
	// Content is the assistant message of a 200 reply.
	Content string
	// NoChoices sends a 200 with an empty choices list.
	NoChoices bool
	// Model is the model reported back; empty echoes the request's model.
	Model string
	// Usage is reported on a 200 reply.
	PromptTokens, CompletionTokens, CachedTokens int
	// Error fills an OpenAI-style error body when Status is 400 or more.
	Error *Error
	// Body, when set, is sent verbatim instead of any generated body.
	Body string
	// Delay holds the reply back; it ends early when the client goes away.
	Delay time.Duration
	// Hold, when set, holds the reply back until it is closed (or the client
	// goes away), after any Delay.
	Hold <-chan struct{}
	// Truncate sends half of the body and then drops the connection.
	Truncate bool
	// ValueProbs, for a request that asks for log-probabilities, are the
	// probabilities the model gave the verdict values of Content: the
	// value after each "boolean_output" or "numerical_output" key, in
	// order, takes the next one (the last repeats). The rest of the
	// answer is sent as tokens of probability 1. Without ValueProbs no
	// log-probabilities are sent.
	ValueProbs []float64
}

// Error is the "error" object of an OpenAI error response.
type Error struct {
	Message string `json:"message"`
	Type    string `json:"type,omitempty"`
	Code    string `json:"code,omitempty"`
	Param   string `json:"param,omitempty"`
}

// Call is what the server saw of one chat completion request.
type Call struct {
	Header   http.Header
	Model    string
	Messages []Message
	// Format is response_format.type; "grammar" for a request that carried
	// a grammar (llama.cpp's field) instead; "" for neither.
	Format string
	// Grammar is the GBNF grammar a request carried.
	Grammar     string
	SchemaName  string
	Schema      json.RawMessage
	Strict      bool
	Temperature *float64
	// MaxTokens is max_tokens; MaxCompletionTokens is max_completion_tokens.
	MaxTokens, MaxCompletionTokens int
	// LogProbs and TopLogProbs are logprobs and top_logprobs.
	LogProbs    bool
	TopLogProbs int
	// Raw is the request body as sent.
	Raw []byte
}

// Message is one chat message of a recorded request.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Server is a running fake. Create it with New and Close it when done.
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	queue    []Reply
	fallback Reply
	answer   func(Call) Reply
	refuse   map[string]bool
	requests []Call
	// forget drops each request once answered instead of recording it.
	forget bool
}

// New starts a fake on a loopback port. Until told otherwise it answers every
// request with a 200 whose content is "{}".
func New() *Server {
	s := &Server{fallback: Reply{Content: "{}"}, refuse: map[string]bool{}}
	s.srv = httptest.NewServer(s.handler())
	return s
}

// Listen is New on a listener of the caller's choosing: a fake that runs as
// a process of its own, on a known port. The server takes l over.
func Listen(l net.Listener) *Server {
	s := &Server{fallback: Reply{Content: "{}"}, refuse: map[string]bool{}}
	s.srv = httptest.NewUnstartedServer(s.handler())
	_ = s.srv.Listener.Close()
	s.srv.Listener = l
	s.srv.Start()
	return s
}

// Forget stops recording requests (Requests and CountByFormat then see none
// of the later ones) and lets go of each request's body and messages once its
// reply is chosen, before any Delay or Hold: a fake that is sent large
// prompts must not keep them.
func (s *Server) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget = true
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	// Readiness probes list the models, as they would on a real server.
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]string{{"id": "fake-model", "object": "model"}}})
	})
	return mux
}

// URL is the base URL to configure a client with (it ends in /v1).
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// Enqueue adds replies to be sent, one per request, in order.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// SetDefault sets the reply sent once the queue is empty.
func (s *Server) SetDefault(r Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = r
}

// Answer makes the server compute the reply to every request from the
// request itself once the queue is empty, instead of sending the default: a
// scripted model that reads its prompt, for requests whose order is not
// known (concurrent calls). answer runs concurrently with itself.
func (s *Server) Answer(answer func(Call) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = answer
}

// RefuseFormats makes the server answer 400 to any request whose
// response_format.type is one of formats ("grammar": that carries a
// grammar), before the queue is consulted, with a message like the one
// llama.cpp-style servers send (OpenAI's for an unknown field, for a
// grammar).
func (s *Server) RefuseFormats(formats ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range formats {
		s.refuse[f] = true
	}
}

// Requests returns a copy of the requests seen so far, oldest first.
func (s *Server) Requests() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.requests...)
}

// CountByFormat counts the requests seen so far by response_format.type
// ("" for none).
func (s *Server) CountByFormat() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := map[string]int{}
	for _, r := range s.requests {
		counts[r.Format]++
	}
	return counts
}

// wireRequest is the part of a chat completion request the fake records.
type wireRequest struct {
	Model          string    `json:"model"`
	Messages       []Message `json:"messages"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"json_schema"`
	} `json:"response_format"`
	Grammar             string   `json:"grammar"`
	Temperature         *float64 `json:"temperature"`
	MaxTokens           int      `json:"max_tokens"`
	MaxCompletionTokens int      `json:"max_completion_tokens"`
	LogProbs            bool     `json:"logprobs"`
	TopLogProbs         int      `json:"top_logprobs"`
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away
	}
	var wire wireRequest
	if err := json.Unmarshal(raw, &wire); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody(Error{Message: "llmfake: request body is not JSON: " + err.Error(), Type: "invalid_request_error"}))
		return
	}
	rec := Call{
		Header:              r.Header.Clone(),
		Model:               wire.Model,
		Messages:            wire.Messages,
		Temperature:         wire.Temperature,
		MaxTokens:           wire.MaxTokens,
		MaxCompletionTokens: wire.MaxCompletionTokens,
		LogProbs:            wire.LogProbs,
		TopLogProbs:         wire.TopLogProbs,
		Grammar:             wire.Grammar,
		Raw:                 raw,
	}
	if wire.Grammar != "" {
		rec.Format = "grammar"
	}
	if rf := wire.ResponseFormat; rf != nil {
		rec.Format = rf.Type
		if js := rf.JSONSchema; js != nil {
			rec.SchemaName, rec.Schema, rec.Strict = js.Name, js.Schema, js.Strict
		}
	}

	s.mu.Lock()
	forget := s.forget
	if !forget {
		s.requests = append(s.requests, rec)
	}
	var reply Reply
	answer := s.answer
	switch {
	case s.refuse[rec.Format] && rec.Format == "grammar":
		reply = Reply{Status: http.StatusBadRequest, Error: &Error{ // as OpenAI refuses a field it does not know
			Message: "Unrecognized request argument supplied: grammar",
			Type:    "invalid_request_error",
		}}
		answer = nil
	case s.refuse[rec.Format]:
		reply = Reply{Status: http.StatusBadRequest, Error: &Error{
			Message: fmt.Sprintf("response_format type %q is not supported by this server", rec.Format),
			Type:    "invalid_request_error",
			Param:   "response_format",
		}}
		answer = nil
	case len(s.queue) > 0:
		reply, s.queue = s.queue[0], s.queue[1:]
		answer = nil
	case answer == nil:
		reply = s.fallback
	}
	s.mu.Unlock()
	if answer != nil {
		reply = answer(rec)
	}
	if forget {
		rec = Call{Model: rec.Model}
	}
	s.send(w, r, rec, reply)
}

func (s *Server) send(w http.ResponseWriter, r *http.Request, req Call, reply Reply) {
	if reply.Delay > 0 {
		select {
		case <-time.After(reply.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if reply.Hold != nil {
		select {
		case <-reply.Hold:
		case <-r.Context().Done():
			return
		}
	}
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	body := []byte(reply.Body)
	if reply.Body == "" {
		body = mustJSON(replyBody(req, reply, status))
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	if !reply.Truncate {
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	// Promise the whole body, send half, then hang up mid-response.
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body[:len(body)/2])
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	panic(http.ErrAbortHandler)
}

func replyBody(req Call, reply Reply, status int) any {
	if status >= http.StatusBadRequest {
		e := Error{Message: http.StatusText(status)}
		if reply.Error != nil {
			e = *reply.Error
		}
		return errorBody(e)
	}
	model := reply.Model
	if model == "" {
		model = req.Model
	}
	choices := []any{}
	if !reply.NoChoices {
		choice := map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": reply.Content},
			"finish_reason": "stop",
		}
		if req.LogProbs && len(reply.ValueProbs) > 0 {
			choice["logprobs"] = map[string]any{"content": valueTokens(reply.Content, reply.ValueProbs)}
		}
		choices = append(choices, choice)
	}
	return map[string]any{
		"id":      "chatcmpl-llmfake",
		"object":  "chat.completion",
		"created": 0,
		"model":   model,
		"choices": choices,
		"usage": map[string]any{
			"prompt_tokens":         reply.PromptTokens,
			"completion_tokens":     reply.CompletionTokens,
			"total_tokens":          reply.PromptTokens + reply.CompletionTokens,
			"prompt_tokens_details": map[string]any{"cached_tokens": reply.CachedTokens},
		},
	}
}

// verdictValue finds the value after a verdict's key in an answer.
var verdictValue = regexp.MustCompile(`"(?:boolean_output|numerical_output)"\s*:\s*(true|false|-?[0-9]+)`)

// valueTokens splits content into tokens the way ValueProbs describes: each
// verdict value a token of its own with its probability and one
// alternative (the other boolean, or another score) sharing the rest, and
// the text around them tokens of probability 1.
func valueTokens(content string, probs []float64) []map[string]any {
	var tokens []map[string]any
	text := func(s string) {
		if s != "" {
			tokens = append(tokens, map[string]any{"token": s, "logprob": 0.0, "top_logprobs": []map[string]any{{"token": s, "logprob": 0.0}}})
		}
	}
	at := 0
	for i, m := range verdictValue.FindAllStringSubmatchIndex(content, -1) {
		p := probs[min(i, len(probs)-1)]
		value := content[m[2]:m[3]]
		other := "false"
		switch {
		case value == "false":
			other = "true"
		case value != "true":
			other = "1"
			if value == "1" {
				other = "0"
			}
		}
		text(content[at:m[2]])
		tokens = append(tokens, map[string]any{
			"token": value, "logprob": math.Log(p),
			"top_logprobs": []map[string]any{{"token": value, "logprob": math.Log(p)}, {"token": other, "logprob": math.Log(max(1-p, 1e-9))}},
		})
		at = m[3]
	}
	text(content[at:])
	return tokens
}

func errorBody(e Error) any { return map[string]any{"error": e} }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(mustJSON(v))
}

// mustJSON marshals values built from maps, strings and numbers only, which
// cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{"error":{"message":"llmfake: cannot encode reply"}}`)
	}
	return b
}
