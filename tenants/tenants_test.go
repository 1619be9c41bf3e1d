package tenants

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		file string
		want *Config
	}{
		{
			name: "the documented example",
			file: `
default: {weight: 1}
tenants:
  acme:   {weight: 3, max_in_flight: 8, requests_per_minute: 600}
  trial:  {weight: 1, max_in_flight: 1, requests_per_minute: 10}
`,
			want: &Config{Default: Limits{Weight: 1}, Tenants: map[string]Limits{
				"acme":  {Weight: 3, MaxInFlight: 8, RequestsPerMinute: 600},
				"trial": {Weight: 1, MaxInFlight: 1, RequestsPerMinute: 10},
			}},
		},
		{
			name: "a tenant's entry takes what it leaves out from the default; null lifts a limit",
			file: `
default: {weight: 2, max_in_flight: 4, requests_per_minute: 60}
tenants:
  acme: {weight: 5}
  big:  {max_in_flight: null, requests_per_minute: null}
  same:
`,
			want: &Config{Default: Limits{Weight: 2, MaxInFlight: 4, RequestsPerMinute: 60}, Tenants: map[string]Limits{
				"acme": {Weight: 5, MaxInFlight: 4, RequestsPerMinute: 60},
				"big":  {Weight: 2},
				"same": {Weight: 2, MaxInFlight: 4, RequestsPerMinute: 60},
			}},
		},
		{
			name: "without a default every tenant weighs 1, uncapped and unlimited",
			file: "tenants: {acme: {requests_per_minute: 6}}",
			want: &Config{Default: Limits{Weight: 1}, Tenants: map[string]Limits{"acme": {Weight: 1, RequestsPerMinute: 6}}},
		},
		{
			name: "token budgets, from the default; null lifts one",
			file: `
default: {tokens_per_day: 1000000, on_exceed: reject}
tenants:
  acme:  {tokens_per_hour: 3000}
  big:   {tokens_per_day: null}
`,
			want: &Config{Default: Limits{Weight: 1, TokensPerDay: 1_000_000, OnExceed: OnExceedReject}, Tenants: map[string]Limits{
				"acme": {Weight: 1, TokensPerHour: 3000, TokensPerDay: 1_000_000, OnExceed: OnExceedReject},
				"big":  {Weight: 1, OnExceed: OnExceedReject},
			}},
		},
		{
			name: "an empty mapping",
			file: "{}",
			want: DefaultConfig(),
		},
		{
			name: "JSON, and whole numbers written with a fraction",
			file: `{"default": {"weight": 2.0}, "tenants": {"acme": {"max_in_flight": 3}}}`,
			want: &Config{Default: Limits{Weight: 2}, Tenants: map[string]Limits{"acme": {Weight: 2, MaxInFlight: 3}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.file))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestConfigFor(t *testing.T) {
	cfg, err := Parse([]byte("default: {weight: 2}\ntenants: {acme: {weight: 3}}"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.For("acme"); got.Weight != 3 {
		t.Errorf("For(acme) = %+v, want weight 3", got)
	}
	for _, tenant := range []string{"other", ""} {
		if got := cfg.For(tenant); got != cfg.Default {
			t.Errorf("For(%q) = %+v, want the default %+v", tenant, got, cfg.Default)
		}
	}
}

// TestParseRefuses: every problem is reported, each naming where it lies.
func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // each a problem, in order
	}{
		{"empty", "  \n", []string{"the file is empty; write {} to give every tenant the defaults"}},
		{"syntax", "default: {weight: 1\ntenants: x", []string{"invalid YAML: line"}},
		{"not a mapping", "- acme", []string{"the file must be a mapping with the keys default and tenants (got an array)"}},
		{"unknown top-level key", "defaults: {weight: 2}", []string{`unknown key "defaults" (known: default, tenants)`}},
		{"tenants not a mapping", "tenants: [acme]", []string{"tenants: must be a mapping of tenant ids to their limits (got an array)"}},
		{"an entry not a mapping", "tenants: {acme: 3}", []string{"tenants.acme: must be a mapping of weight, max_in_flight, requests_per_minute, tokens_per_hour, tokens_per_day, on_exceed (got a number)"}},
		{
			"unknown keys, named",
			"tenants: {acme: {weight: 2, max_inflight: 3, rpm: 4}}",
			[]string{
				`tenants.acme: unknown key "max_inflight" (known: weight, max_in_flight, requests_per_minute, tokens_per_hour, tokens_per_day, on_exceed)`,
				`tenants.acme: unknown key "rpm" (known: weight, max_in_flight, requests_per_minute, tokens_per_hour, tokens_per_day, on_exceed)`,
			},
		},
		{
			"on_exceed is reject or delay; budgets are whole numbers from 1",
			"default: {tokens_per_day: 0, on_exceed: delay}\ntenants: {acme: {tokens_per_hour: 1.5, on_exceed: wait}}",
			[]string{
				"default.tokens_per_day: must be a whole number from 1 to 1000000000000 (got 0); for no limit, leave the key out or give null",
				"tenants.acme.on_exceed: must be reject or delay (got wait)",
				"tenants.acme.tokens_per_hour: must be a whole number from 1 to 1000000000000 (got 1.5)",
			},
		},
		{
			"numbers out of range or not whole",
			"default: {weight: 0}\ntenants:\n  a: {weight: 1001}\n  b: {max_in_flight: 0}\n  c: {requests_per_minute: 1.5}\n  d: {requests_per_minute: \"600\"}\n  e: {weight: null}\n  f: {max_in_flight: -2}",
			[]string{
				"default.weight: must be a whole number from 1 to 1000 (got 0)",
				"tenants.a.weight: must be a whole number from 1 to 1000 (got 1001)",
				"tenants.b.max_in_flight: must be a whole number from 1 to 1000000 (got 0); for no limit, leave the key out or give null",
				"tenants.c.requests_per_minute: must be a whole number from 1 to 1000000 (got 1.5)",
				"tenants.d.requests_per_minute: must be a whole number from 1 to 1000000 (got a string)",
				"tenants.e.weight: must be a whole number from 1 to 1000 (got null); leave it out for the default",
				"tenants.f.max_in_flight: must be a whole number from 1 to 1000000 (got -2)",
			},
		},
		{
			"tenant ids the token verifier would refuse",
			"tenants:\n  \"\": {weight: 2}\n  \"a\\tb\": {weight: 2}\n  " + strings.Repeat("x", 257) + ": {weight: 2}",
			[]string{
				"tenants.: the tenant id is empty",
				"tenants.a\tb: the tenant id holds control characters",
				"the tenant id is 257 bytes, over the limit of 256",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.file))
			if err == nil {
				t.Fatalf("Parse = %+v, want an error", cfg)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v, want a *ParseError", err, err)
			}
			if len(pe.Problems) != len(tt.want) {
				t.Fatalf("problems %q, want %d: %q", pe.Problems, len(tt.want), tt.want)
			}
			for i, want := range tt.want {
				if !strings.Contains(pe.Problems[i], want) {
					t.Errorf("problem %d = %q, want it to say %q", i, pe.Problems[i], want)
				}
			}
		})
	}
}

func TestParseErrorText(t *testing.T) {
	one := &ParseError{Problems: []string{"a: bad"}}
	if got := one.Error(); got != "a: bad" {
		t.Errorf("one problem: %q", got)
	}
	two := &ParseError{Problems: []string{"a: bad", "b: worse"}}
	if got, want := two.Error(), "2 problems: a: bad; b: worse"; got != want {
		t.Errorf("two problems: %q, want %q", got, want)
	}
}

// TestExampleFileParses: the example the operations docs point to is a valid tenants file.
func TestExampleFileParses(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "ops", "tenants.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data)
	if err != nil {
		t.Fatalf("ops/tenants.example.yaml: %v", err)
	}
	want := map[string]Limits{
		"acme":   {Weight: 3, MaxInFlight: 8, RequestsPerMinute: 600},
		"trial":  {Weight: 1, MaxInFlight: 1, RequestsPerMinute: 10, TokensPerDay: 200_000, OnExceed: OnExceedReject},
		"batch":  {Weight: 2},
		"steady": {Weight: 1, RequestsPerMinute: 120, TokensPerHour: 2_000_000, OnExceed: OnExceedDelay},
	}
	if !reflect.DeepEqual(cfg.Tenants, want) || cfg.Default != (Limits{Weight: 1, RequestsPerMinute: 120}) {
		t.Errorf("ops/tenants.example.yaml reads as %+v", cfg)
	}
}
