package opsassets

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"rulevalidator/internal/tracing"
)

// TestJaegerScriptRendersALoopbackConfig: ops/jaeger.sh writes a config that takes
// OTLP/HTTP, keeps traces in memory and serves the query API, every listener on loopback
// on the ports asked for and no other; url and otlp name them. Nothing is built.
func TestJaegerScriptRendersALoopbackConfig(t *testing.T) {
	dir := t.TempDir()
	env := []string{
		"RULEVALIDATOR_CACHE=" + dir, "RULEVALIDATOR_RUN=" + filepath.Join(dir, "run"),
		"JAEGER_UI_PORT=26686", "JAEGER_OTLP_PORT=24318", "JAEGER_GRPC_PORT=26685", "JAEGER_MAX_TRACES=500",
	}
	path := strings.TrimSpace(lastLine(run(t, time.Minute, env, "bash", "ops/jaeger.sh", "render")))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Service struct {
			Extensions []string `yaml:"extensions"`
			Pipelines  map[string]struct {
				Receivers  []string `yaml:"receivers"`
				Processors []string `yaml:"processors"`
				Exporters  []string `yaml:"exporters"`
			} `yaml:"pipelines"`
			Telemetry struct {
				Metrics struct {
					Level string `yaml:"level"`
				} `yaml:"metrics"`
			} `yaml:"telemetry"`
		} `yaml:"service"`
		Extensions map[string]yaml.Node `yaml:"extensions"`
		Receivers  map[string]yaml.Node `yaml:"receivers"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	traces := cfg.Service.Pipelines["traces"]
	if !slices.Equal(traces.Receivers, []string{"otlp"}) || !slices.Equal(traces.Exporters, []string{"jaeger_storage_exporter"}) {
		t.Errorf("traces pipeline %+v, want OTLP into the storage exporter", traces)
	}
	if !slices.Equal(cfg.Service.Extensions, []string{"jaeger_storage", "jaeger_query"}) || cfg.Service.Telemetry.Metrics.Level != "none" {
		t.Errorf("extensions %v, metrics level %q: want storage and query only, and no metrics listener",
			cfg.Service.Extensions, cfg.Service.Telemetry.Metrics.Level)
	}
	if !strings.Contains(string(data), "max_traces: 500") || !strings.Contains(string(data), "memory:") {
		t.Errorf("the storage is not memory bounded by JAEGER_MAX_TRACES:\n%s", data)
	}
	var endpoints []string
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == "endpoint" {
			endpoints = append(endpoints, strings.TrimSpace(v))
		}
	}
	slices.Sort(endpoints)
	if want := []string{"127.0.0.1:24318", "127.0.0.1:26685", "127.0.0.1:26686"}; !slices.Equal(endpoints, want) {
		t.Errorf("listeners %v, want %v", endpoints, want)
	}
	if got := strings.TrimSpace(run(t, time.Minute, env, "bash", "ops/jaeger.sh", "url")); got != "http://127.0.0.1:26686" {
		t.Errorf("url = %q", got)
	}
	if got := strings.TrimSpace(run(t, time.Minute, env, "bash", "ops/jaeger.sh", "otlp")); got != "http://127.0.0.1:24318" {
		t.Errorf("otlp = %q", got)
	}

	cmd := exec.CommandContext(t.Context(), "bash", "ops/jaeger.sh", "bogus")
	cmd.Dir, cmd.Env = root, append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "ops/jaeger.sh start") {
		t.Errorf("an unknown command: exit %d (%v), want 2 and the usage:\n%s", code, err, out)
	}
	bad := append(slices.Clone(env), "JAEGER_UI_PORT=x")
	cmd = exec.CommandContext(t.Context(), "bash", "ops/jaeger.sh", "render")
	cmd.Dir, cmd.Env = root, append(os.Environ(), bad...)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "JAEGER_UI_PORT") {
		t.Errorf("JAEGER_UI_PORT=x: %v, want a refusal naming it:\n%s", err, out)
	}
}

// TestJaegerScript starts the Jaeger that ops/jaeger.sh install built (skipped when it has
// not been: the build is long, and no test makes it), exports a span to it as serve does,
// reads the trace back from its query API, and checks that stop leaves no process behind.
func TestJaegerScript(t *testing.T) {
	requireTool(t, "curl", "apt-get install curl")
	cache := os.Getenv("RULEVALIDATOR_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			t.Skipf("no cache directory: %v", err)
		}
		cache = filepath.Join(base, "rulevalidator")
	}
	if _, err := os.Stat(filepath.Join(cache, "jaeger", "bin", "jaeger")); err != nil {
		t.Skipf("Jaeger is not built (%v); `bash ops/jaeger.sh install` builds it", err)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	ui, otlp, grpc := freePort(t), freePort(t), freePort(t)
	env := []string{
		"RULEVALIDATOR_CACHE=" + cache, "RULEVALIDATOR_RUN=" + runDir,
		"JAEGER_UI_PORT=" + strconv.Itoa(ui), "JAEGER_OTLP_PORT=" + strconv.Itoa(otlp), "JAEGER_GRPC_PORT=" + strconv.Itoa(grpc),
	}
	script := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", append([]string{"ops/jaeger.sh"}, args...)...)
		cmd.Dir, cmd.Env = root, append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	pidFile := filepath.Join(runDir, "jaeger.pid")
	t.Cleanup(func() {
		if _, err := os.Stat(pidFile); err == nil {
			if out, err := script("stop"); err != nil {
				t.Errorf("ops/jaeger.sh stop: %v\n%s", err, out)
			}
		}
	})
	if out, err := script("start"); err != nil {
		t.Fatalf("ops/jaeger.sh start: %v\n%s", err, out)
	}
	if out, err := script("status"); err != nil {
		t.Fatalf("ops/jaeger.sh status: %v\n%s", err, out)
	}

	tp, shutdown, err := tracing.Setup(t.Context(), func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": fmt.Sprintf("http://127.0.0.1:%d", otlp), "OTEL_SERVICE_NAME": "jaeger-script-test"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("test").Start(t.Context(), "process requests")
	traceID := span.SpanContext().TraceID().String()
	span.End()
	if err := shutdown(t.Context()); err != nil {
		t.Fatalf("exporting to Jaeger: %v", err)
	}
	api := fmt.Sprintf("http://127.0.0.1:%d/api/traces/%s", ui, traceID)
	var names []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && len(names) == 0; time.Sleep(300 * time.Millisecond) {
		names = traceSpans(api)
	}
	if !slices.Equal(names, []string{"process requests"}) {
		t.Errorf("Jaeger has the spans %v of trace %s, want the one exported", names, traceID)
	}

	pidText, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatalf("pid file %s: %v", pidFile, err)
	}
	if out, err := script("stop"); err != nil {
		t.Fatalf("ops/jaeger.sh stop: %v\n%s", err, out)
	}
	if processRuns(pid) {
		t.Errorf("jaeger (pid %d) still runs after stop", pid)
	}
	for _, port := range []int{ui, otlp, grpc} {
		if conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			conn.Close()
			t.Errorf("port %d still answers after stop", port)
		}
	}
}

// traceSpans is the names of the spans Jaeger's query API returns for a trace; none
// while it does not know it.
func traceSpans(url string) []string {
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Data []struct {
			Spans []struct {
				OperationName string `json:"operationName"`
			} `json:"spans"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return nil
	}
	var names []string
	for _, d := range body.Data {
		for _, s := range d.Spans {
			names = append(names, s.OperationName)
		}
	}
	return names
}
