package openai

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestContextWindow(t *testing.T) {
	tests := []struct {
		name   string
		props  string // body of /props; "" answers 404
		models string // body of /v1/models; "" answers 404
		model  string
		want   int
	}{
		{name: "llama.cpp props", props: `{"default_generation_settings":{"n_ctx":4096},"total_slots":1}`, want: 4096},
		{name: "older llama.cpp props", props: `{"n_ctx":2048}`, want: 2048},
		{name: "vLLM models", models: `{"data":[{"id":"a","max_model_len":32768},{"id":"b","max_model_len":8192}]}`, model: "b", want: 8192},
		{name: "single aliased model", models: `{"data":[{"id":"alias","context_length":16384}]}`, model: "other", want: 16384},
		{name: "props wins over models", props: `{"default_generation_settings":{"n_ctx":1024}}`, models: `{"data":[{"id":"m","max_model_len":9999}]}`, model: "m", want: 1024},
		{name: "llama-cpp-python says nothing", models: `{"object":"list","data":[{"id":"gemma-3-270m","object":"model","owned_by":"me","permissions":[]}]}`, model: "gemma-3-270m"},
		{name: "other model only", models: `{"data":[{"id":"x","max_model_len":1},{"id":"y","max_model_len":2}]}`, model: "z"},
		{name: "not JSON", props: `<html>`, models: `nope`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			serve := func(path, body string) {
				mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get("Authorization") != "Bearer k" {
						t.Errorf("%s: no API key sent", path)
					}
					if body == "" {
						http.NotFound(w, r)
						return
					}
					_, _ = w.Write([]byte(body))
				})
			}
			serve("/props", tt.props)
			serve("/v1/models", tt.models)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			c, err := New(Config{BaseURL: srv.URL + "/v1", APIKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.ContextWindow(context.Background(), tt.model)
			if tt.want == 0 {
				if !errors.Is(err, ErrContextUnknown) {
					t.Fatalf("got %d, %v; want ErrContextUnknown", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestContextWindowServerDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, err := New(Config{BaseURL: url + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ContextWindow(context.Background(), "m"); !errors.Is(err, ErrContextUnknown) {
		t.Fatalf("got %v, want ErrContextUnknown", err)
	}
}

// A refused key is the answer to every call: the probe returns it at once,
// permanent, without asking /models too.
func TestContextWindowRefusedKey(t *testing.T) {
	var models bool
	mux := http.NewServeMux()
	mux.HandleFunc("GET /props", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) })
	mux.HandleFunc("GET /v1/models", func(http.ResponseWriter, *http.Request) { models = true })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := New(Config{BaseURL: srv.URL + "/v1", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ContextWindow(context.Background(), "m")
	var ce *chatError
	if !errors.As(err, &ce) || !ce.Permanent() || ce.FaultCause() != CauseModelAuth || errors.Is(err, ErrContextUnknown) {
		t.Fatalf("got %v, want the refused key, permanent", err)
	}
	if models {
		t.Error("/models was asked after the key was refused")
	}
}
