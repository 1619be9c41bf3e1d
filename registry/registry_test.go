package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/internal/logbuf"
)

// testLogger returns a logger whose text output is kept, and shown when the test fails.
func testLogger(t *testing.T) (*slog.Logger, *logbuf.Buffer) {
	t.Helper()
	logs := &logbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log output:\n%s", logs)
		}
	})
	return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), logs
}

// newRuleset returns a valid one-rule ruleset whose rule text says which it is.
func newRuleset(id, version string) *engine.Ruleset {
	return &engine.Ruleset{
		ID: id, Version: version,
		Rules: []engine.Rule{{RuleID: "r1", RuleText: fmt.Sprintf("rule of %s version %s", id, version)}},
	}
}

// ruleText identifies which ruleset a resolver returned.
func ruleText(rs *engine.Ruleset) string {
	if rs == nil || len(rs.Rules) == 0 {
		return "<none>"
	}
	return rs.Rules[0].RuleText
}

func mustStatic(t *testing.T, rulesets ...*engine.Ruleset) *Static {
	t.Helper()
	s, err := NewStatic(rulesets...)
	if err != nil {
		t.Fatalf("NewStatic: %v", err)
	}
	return s
}

func TestStaticResolve(t *testing.T) {
	s := mustStatic(t,
		newRuleset("contract-review", "1.9.2"),
		newRuleset("contract-review", "1.10.0"),
		newRuleset("contract-review", ""),
		newRuleset("expense-policy", ""),
	)
	tests := []struct {
		id, version string
		want        string // rule text, or the error
	}{
		{"contract-review", "", "rule of contract-review version 1.10.0"},
		{"contract-review", "1.9.2", "rule of contract-review version 1.9.2"},
		{"expense-policy", "", "rule of expense-policy version "},
		{"contract-review", "9", `unknown ruleset "contract-review" version "9" (known versions: "", "1.9.2", "1.10.0")`},
		{"nope", "", `unknown ruleset "nope"`},
		{"nope", "1", `unknown ruleset "nope" version "1"`},
	}
	for _, tt := range tests {
		t.Run(tt.id+"@"+tt.version, func(t *testing.T) {
			rs, err := s.Resolve(context.Background(), tt.id, tt.version)
			if err != nil {
				if !errors.Is(err, ErrUnknownRuleset) {
					t.Errorf("error %v does not match ErrUnknownRuleset", err)
				}
				if err.Error() != tt.want {
					t.Errorf("error %q, want %q", err, tt.want)
				}
				return
			}
			if got := ruleText(rs); got != tt.want {
				t.Errorf("resolved %q, want %q", got, tt.want)
			}
		})
	}
	var listed []string
	for _, e := range s.List() {
		listed = append(listed, e.ID+"@"+e.Version+" from "+e.Source)
	}
	want := []string{"contract-review@ from static[2]", "contract-review@1.9.2 from static[0]", "contract-review@1.10.0 from static[1]", "expense-policy@ from static[3]"}
	if strings.Join(listed, "; ") != strings.Join(want, "; ") {
		t.Errorf("List() = %q, want %q", listed, want)
	}
}

func TestUnknownErrorListsTheHighestVersions(t *testing.T) {
	var rulesets []*engine.Ruleset
	for i := 1; i <= 12; i++ {
		rulesets = append(rulesets, newRuleset("many", fmt.Sprint(i)))
	}
	_, err := mustStatic(t, rulesets...).Resolve(context.Background(), "many", "13")
	want := `unknown ruleset "many" version "13" (known versions: "3", "4", "5", "6", "7", "8", "9", "10", "11", "12" and 2 lower)`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

func TestNewStaticRejects(t *testing.T) {
	invalid := newRuleset("bad", "1")
	invalid.Rules[0].RuleText = ""
	tests := []struct {
		name     string
		rulesets []*engine.Ruleset
		want     string
		invalid  bool // the error wraps engine.ErrInvalidRuleset
	}{
		{"nil", []*engine.Ruleset{newRuleset("a", "1"), nil}, "registry: rulesets[1] is nil", false},
		{"no id", []*engine.Ruleset{newRuleset("", "1")}, "registry: rulesets[0] has no id", false},
		{"invalid", []*engine.Ruleset{invalid}, `registry: rulesets[0]: ruleset "bad": rules[0] (rule_id "r1"): rule_text: missing or blank`, true},
		{"duplicate", []*engine.Ruleset{newRuleset("a", "1"), newRuleset("b", "1"), newRuleset("a", "1")},
			`registry: rulesets[0] and rulesets[2] are both ruleset "a" version "1"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewStatic(tt.rulesets...)
			if err == nil {
				t.Fatal("NewStatic accepted the rulesets")
			}
			if err.Error() != tt.want {
				t.Errorf("error %q, want %q", err, tt.want)
			}
			if got := errors.Is(err, engine.ErrInvalidRuleset); got != tt.invalid {
				t.Errorf("errors.Is(err, engine.ErrInvalidRuleset) = %v, want %v", got, tt.invalid)
			}
		})
	}
}

// failingResolver is a source that cannot answer at all.
type failingResolver struct{ err error }

func (f failingResolver) Resolve(context.Context, string, string) (*engine.Ruleset, error) {
	return nil, f.err
}

func TestChain(t *testing.T) {
	first := mustStatic(t, newRuleset("shared", "1"), newRuleset("only-first", "1"))
	second := mustStatic(t, newRuleset("shared", "2"), newRuleset("only-second", "1"))
	outage := errors.New("store unavailable")
	tests := []struct {
		name        string
		chain       Resolver
		id, version string
		want        string // rule text, or the error
		wantErr     error
	}{
		{"first wins", Chain(first, second), "shared", "", "rule of shared version 1", nil},
		{"falls through an unknown id", Chain(first, second), "only-second", "", "rule of only-second version 1", nil},
		{"falls through an unknown version", Chain(first, second), "shared", "2", "rule of shared version 2", nil},
		{"unknown everywhere", Chain(first, second), "nope", "", `unknown ruleset "nope"`, ErrUnknownRuleset},
		{"unknown version lists the versions every source knows",
			Chain(mustStatic(t), first, second, mustStatic(t, newRuleset("shared", "1"))), "shared", "9",
			`unknown ruleset "shared" version "9" (known versions: "1", "2")`, ErrUnknownRuleset},
		{"an outage stops the chain", Chain(failingResolver{outage}, second), "only-second", "", "store unavailable", outage},
		{"an outage after a hit is not reached", Chain(first, failingResolver{outage}), "only-first", "", "rule of only-first version 1", nil},
		{"empty chain", Chain(), "shared", "1", `unknown ruleset "shared" version "1"`, ErrUnknownRuleset},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := tt.chain.Resolve(context.Background(), tt.id, tt.version)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want one matching %v", err, tt.wantErr)
				}
				if err.Error() != tt.want {
					t.Errorf("error %q, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if got := ruleText(rs); got != tt.want {
				t.Errorf("resolved %q, want %q", got, tt.want)
			}
		})
	}
}
