package llmfake

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
)

// Recorder is a reverse proxy in front of a real model server that keeps the
// messages of every chat completion request it forwards, so that a test can
// check what reached the server. Create it with NewRecorder and Close it.
type Recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	sent [][]Message
}

// NewRecorder starts a Recorder forwarding to baseURL (the server's OpenAI
// base URL, with or without its "/v1").
func NewRecorder(baseURL string) (*Recorder, error) {
	target, err := url.Parse(strings.TrimSuffix(strings.TrimRight(baseURL, "/"), "/v1"))
	if err != nil {
		return nil, err
	}
	rec := &Recorder{}
	forward := httputil.NewSingleHostReverseProxy(target)
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				Messages []Message `json:"messages"`
			}
			if json.Unmarshal(body, &req) == nil {
				rec.mu.Lock()
				rec.sent = append(rec.sent, req.Messages)
				rec.mu.Unlock()
			}
		}
		forward.ServeHTTP(w, r)
	}))
	return rec, nil
}

// URL is the Recorder's OpenAI base URL, ending in "/v1".
func (r *Recorder) URL() string { return r.srv.URL + "/v1" }

// Close stops the Recorder.
func (r *Recorder) Close() { r.srv.Close() }

// Sent is the messages of every chat completion request forwarded so far,
// in order.
func (r *Recorder) Sent() [][]Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]Message(nil), r.sent...)
}

// Reset forgets what was recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = nil
}
