package metrics

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"rulevalidator/internal/opsscript"
	"strings"
	"testing"
)

// requirePromtool returns promtool's path, or skips the test saying why; with
// RULEVALIDATOR_REQUIRE_INTEGRATION=1 it fails instead.
func requirePromtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err == nil {
		return path
	}
	msg := "promtool is not on PATH (" + err.Error() + "); install it with `bash ops/tools.sh install prometheus`"
	opsscript.Unavailable(t, "promtool", "%s", msg)
	return ""
}

// TestPromtoolAcceptsTheExposition runs Prometheus's own checker over what
// the metrics endpoint serves.
func TestPromtoolAcceptsTheExposition(t *testing.T) {
	promtool := requirePromtool(t)
	m, reg := newMetrics(t)
	exercise(m)
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}

	cmd := exec.CommandContext(t.Context(), promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	if msg := strings.TrimSpace(string(out)); msg != "" {
		t.Errorf("promtool check metrics passed but reported:\n%s", msg)
	}
}
