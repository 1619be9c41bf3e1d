package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulevalidator/internal/llmfake"
	"rulevalidator/tenants"
)

// TestServeRefusesABadTenantsFile: a tenants file missing at start, or one that does not
// parse, stops serve as a setting to fix, naming the file and what is wrong, before it
// connects to anything.
func TestServeRefusesABadTenantsFile(t *testing.T) {
	dir := t.TempDir()
	invalid := filepath.Join(dir, "invalid.yaml")
	if err := os.WriteFile(invalid, []byte("tenants: {acme: {weight: 0}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"missing", filepath.Join(dir, "missing.yaml"), []string{"--tenants-file", "missing.yaml", "no such file"}},
		{"invalid", invalid, []string{"--tenants-file", "invalid.yaml", "tenants.acme.weight: must be a whole number from 1 to 1000 (got 0)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := llmfake.New()
			defer fake.Close()
			code, _, stderr := runCLI(t, fake, "serve", "--kafka-brokers", "127.0.0.1:1", "--tenants-file", tc.file)
			if code != exitInvalid {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitInvalid, stderr)
			}
			for _, want := range tc.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr)
				}
			}
		})
	}
}

// TestFairnessReadsTheTenantsFile: the consumer's weights and caps are the tenants file's,
// read through it at each call, so that a reload applies; without a file every tenant weighs
// the same, uncapped; --read-ahead 0 has no fair share at all.
func TestFairnessReadsTheTenantsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(path, []byte("tenants: {acme: {weight: 3, max_in_flight: 2}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := tenants.Open(path, tenants.FileOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cfg := serveConfig{readAhead: 16}
	f := cfg.fairness(file)
	if f == nil || f.ReadAhead != 16 || f.Weight == nil || f.MaxInFlight == nil {
		t.Fatalf("fairness = %+v, want read-ahead 16 with the file's weights and caps", f)
	}
	if f.Weight("acme") != 3 || f.MaxInFlight("acme") != 2 || f.Weight("other") != 1 || f.MaxInFlight("other") != 0 {
		t.Errorf("acme: weight %d, cap %d; other: weight %d, cap %d; want 3, 2, 1, 0",
			f.Weight("acme"), f.MaxInFlight("acme"), f.Weight("other"), f.MaxInFlight("other"))
	}
	if err := os.WriteFile(path, []byte("tenants: {acme: {weight: 5}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	file.Reload()
	if f.Weight("acme") != 5 || f.MaxInFlight("acme") != 0 {
		t.Errorf("after a reload: acme weight %d, cap %d; want 5, 0", f.Weight("acme"), f.MaxInFlight("acme"))
	}
	if f := cfg.fairness(nil); f == nil || f.Weight != nil || f.MaxInFlight != nil {
		t.Errorf("without a file: %+v, want equal weights and no caps", f)
	}
	if f := (&serveConfig{}).fairness(file); f != nil {
		t.Errorf("--read-ahead 0: %+v, want nil", f)
	}
}
