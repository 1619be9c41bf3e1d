package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		w.Write([]byte(`{"status":"x"}`))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	getenv := func(k string) string {
		if k == "RULEVALIDATOR_OPS_ADDR" {
			return addr
		}
		return ""
	}
	for _, tt := range []struct {
		status int
		want   int
	}{{http.StatusOK, exitOK}, {http.StatusServiceUnavailable, exitFailure}} {
		status = tt.status
		var out, errOut bytes.Buffer
		if got := run(context.Background(), []string{"healthcheck"}, &out, &errOut, getenv); got != tt.want {
			t.Errorf("status %d: exit %d, want %d (%s)", tt.status, got, tt.want, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if got := run(context.Background(), []string{"healthcheck", "--url", "http://127.0.0.1:1/readyz"}, &out, &errOut, getenv); got != exitFailure {
		t.Errorf("unreachable: exit %d", got)
	}
}
