package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestOpsEndpoints(t *testing.T) {
	id := newIdentity(t)
	s, err := New(Config{
		Verifier:     id.verifier,
		Logger:       quietLogger(),
		ReadyTimeout: 100 * time.Millisecond,
		Readiness: []Check{
			{Name: "broker", Probe: func(context.Context) error { return nil }},
			{Name: "storage", Probe: func(context.Context) error { return errors.New("dial tcp 127.0.0.1:7070: connection refused") }},
			{Name: "model", Probe: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
			{Name: "registry", Probe: func(context.Context) error { panic("registry probe bug") }},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	metricsPage := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("# metrics\n")) })
	ts := httptest.NewServer(s.OpsHandler(metricsPage))
	t.Cleanup(ts.Close)

	if r := call(t, http.MethodGet, ts.URL+"/healthz", "", nil); r.status != http.StatusOK || string(r.body) != "{\"status\":\"ok\"}\n" {
		t.Errorf("/healthz: %s", r)
	}
	if r := call(t, http.MethodGet, ts.URL+"/metrics", "", nil); r.status != http.StatusOK || string(r.body) != "# metrics\n" {
		t.Errorf("/metrics: %s", r)
	}
	if r := call(t, http.MethodPost, ts.URL+"/healthz", "", nil); r.status != http.StatusMethodNotAllowed || r.errorCode() != CodeMethodNotAllowed {
		t.Errorf("POST /healthz: %s", r)
	}

	r := call(t, http.MethodGet, ts.URL+"/readyz", "", nil)
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with failing checks: %s", r)
	}
	var body readiness
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	want := readiness{Status: "not_ready", Checks: []checkResult{
		{Name: "broker", Status: "ok"},
		{Name: "storage", Status: "failed", Error: "dial tcp 127.0.0.1:7070: connection refused"},
		{Name: "model", Status: "failed", Error: "no answer within 100ms"},
		{Name: "registry", Status: "failed", Error: "check panicked: registry probe bug"},
	}}
	if got, _ := json.Marshal(body); string(got) != mustJSON(t, want) {
		t.Errorf("/readyz body\n got %s\nwant %s", got, mustJSON(t, want))
	}
}

func TestReadyWhenAllChecksPass(t *testing.T) {
	id := newIdentity(t)
	s, err := New(Config{Verifier: id.verifier, Logger: quietLogger(), Readiness: []Check{
		{Name: "broker", Probe: func(context.Context) error { return nil }},
		{Name: "storage", Probe: func(context.Context) error { return nil }},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.OpsHandler(nil))
	t.Cleanup(ts.Close)
	if r := call(t, http.MethodGet, ts.URL+"/readyz", "", nil); r.status != http.StatusOK {
		t.Errorf("/readyz: %s", r)
	}
	if r := call(t, http.MethodGet, ts.URL+"/metrics", "", nil); r.status != http.StatusNotFound {
		t.Errorf("/metrics without a handler: %s", r)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNewHTTPServerTimeouts(t *testing.T) {
	srv := NewHTTPServer(":0", http.NotFoundHandler())
	if srv.ReadHeaderTimeout != 5*time.Second || srv.ReadTimeout != time.Minute || srv.WriteTimeout != 5*time.Minute ||
		srv.IdleTimeout != 2*time.Minute || srv.MaxHeaderBytes != 64<<10 {
		t.Errorf("timeouts %v %v %v %v, max header bytes %d", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
}

// Without a Verifier the public routes are not served at all.
func TestNoVerifierDisablesPublicRoutes(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/validations/abc", "/rule-validation-reports/abcdefghijklmnopqrstuvwxyz"} {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, rec.Code)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	id := newIdentity(t)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"bad check", Config{Verifier: id.verifier, Readiness: []Check{{Name: "broker"}}}, "api: Readiness[0] needs a Name and a Probe"},
		{"negative body limit", Config{Verifier: id.verifier, MaxBodyBytes: -1}, "api: MaxBodyBytes -1 must be positive"},
	} {
		if _, err := New(tc.cfg); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
