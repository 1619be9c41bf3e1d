package ruleexpr

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// hostile is a request a tenant shaped to exhaust the service: a long
// string and a long list.
func hostile(sBytes int) Activation {
	l := make([]any, 1000)
	for i := range l {
		l[i] = int64(i)
	}
	return Activation{Inputs: map[string]any{"s": strings.Repeat("a", sBytes), "l": l}}
}

func TestPatternsRefusedAtLoad(t *testing.T) {
	tests := []struct {
		name, src  string
		line, col  int
		messageHas string
	}{
		{"pattern read from an input", `inputs.s.matches(inputs.s)`, 1, 18, "must be a string literal"},
		{"global form", `matches(inputs.s, inputs.s)`, 1, 19, "must be a string literal"},
		{"pattern computed from literals", "inputs.s != \"\" &&\n  inputs.s.matches(\"a\" + inputs.s)", 2, 20, "must be a string literal"},
		{"pattern too long", `inputs.s.matches("` + strings.Repeat("a", MaxPatternChars+1) + `")`, 1, 18, "257 characters long; patterns are at most 256"},
		{"not RE2", `inputs.s.matches("(a)\\1")`, 1, 18, "not a valid RE2 regular expression"},
		{"does not parse", `inputs.s.matches("(a")`, 1, 18, "missing closing )"},
		{"program too large", `inputs.s.matches("[a-z]{1000}")`, 1, 18, "compiles to 1002 instructions; patterns compile to at most 128"},
		{"in a comprehension", `documents.exists(d, d.name.matches(d.role))`, 1, 36, "must be a string literal"},
	}
	env, err := NewEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := env.Compile(tc.src, ResultBool)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Compile(%.60q) = %v; want an *Error", tc.src, err)
			}
			if ce.Line != tc.line || ce.Column != tc.col || !strings.Contains(ce.Message, tc.messageHas) {
				t.Errorf("Compile(%.60q) = %v; want line %d, column %d, %q", tc.src, ce, tc.line, tc.col, tc.messageHas)
			}
		})
	}
}

func TestCostEstimatedAtLoad(t *testing.T) {
	env, err := NewEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{
		`inputs.l.all(x, inputs.l.all(y, inputs.l.all(z, x + y + z >= 0)))`,
		`inputs.l.map(x, inputs.l.map(y, inputs.s + inputs.s)).size() > 0`,
		`documents.all(a, documents.all(b, documents.all(c, a.name + b.name + c.name != "")))`,
	} {
		_, err := env.Compile(src, ResultBool)
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(ce.Message, "exceeds the limit of 1000000") {
			t.Errorf("Compile(%q) = %v; want an *Error over the cost limit", src, err)
		}
	}
	// Ordinary expressions load: loops over inputs, nested once.
	for _, src := range []string{
		`inputs.l.all(x, inputs.l.exists(y, x == y))`,
		`inputs.l.filter(x, x > 100).size() > 2`,
		`inputs.first + " " + inputs.last == "Ada Lovelace"`,
		`documents.exists(d, d.name.contains("SCC") && d.name.matches("(?i)\\.pdf$"))`,
		`inputs.iban.matches("^[A-Z]{2}[0-9]{2}[A-Z0-9]{1,30}$")`,
	} {
		if _, err := env.Compile(src, ResultBool); err != nil {
			t.Errorf("Compile(%q): %v", src, err)
		}
	}
}

// TestAttacksEndFast: what the load-time estimate lets through, or would
// refuse, the runtime limits stop with ErrEval, quickly.
func TestAttacksEndFast(t *testing.T) {
	tests := []struct {
		name, src string
		sBytes    int
		errHas    string
	}{
		{"constant pattern over 1 MB", `inputs.s.matches("(a|b)*c")`, 1 << 20,
			"matches over a string of 1048576 bytes; expressions match strings of at most 65536"},
		{"global form over 600 KB", `matches(inputs.s, "^a")`, 600 << 10,
			"matches over a string of 614400 bytes; expressions match strings of at most 65536"},
		{"match in a loop", `inputs.l.exists(x, inputs.s.matches("^(a|b)*c$"))`, 60 << 10, "cost limit"},
		{"concatenation in a loop", `inputs.l.map(x, inputs.s + inputs.s + inputs.s).size() > 0`, 100_000, "cost limit"},
		{"concatenation over a literal list", `[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(x, inputs.s + inputs.s).size() > 0`, 100_000, "cost limit"},
		{"nested comprehensions", `inputs.l.map(x, inputs.l.map(y, inputs.s + inputs.s)).size() > 0`, 100_000, "cost limit"},
		{"conversions copying the input", `inputs.l.exists(x, duration(inputs.s) == duration("1s"))`, 600 << 10, "cost limit"},
		// The cost limit stops it, or the deadline under the race detector
		// on a loaded machine.
		{"loops nested three deep", `inputs.l.all(x, inputs.l.all(y, inputs.l.all(z, x + y + z >= 0)))`, 1, ""},
	}
	env, err := NewEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Without the estimate: these are the runtime limits' to stop.
			p := compileUnestimated(t, env, tc.src)
			bound := env.Bind(hostile(tc.sBytes))
			start := time.Now()
			_, err := p.Bool(t.Context(), bound)
			if !errors.Is(err, ErrEval) || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("Bool = %v; want an ErrEval with %q", err, tc.errHas)
			}
			// A generous bound: the race detector slows evaluation down.
			if d := time.Since(start); d > 2*EvalTimeout {
				t.Errorf("took %s", d)
			}
		})
	}
}

func TestLongStringsStillRead(t *testing.T) {
	env, err := NewEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	bound := env.Bind(hostile(600 << 10))
	for _, src := range []string{
		`size(inputs.s) > 0`,
		`!inputs.s.contains("x")`,
		`inputs.s.startsWith("aaa") && inputs.s.endsWith("a")`,
		`size(inputs.s) > 0 && !inputs.s.contains("x") && inputs.s.startsWith("a")`,
		`inputs.s.matches("^a") || true`,
	} {
		p, err := env.Compile(src, ResultBool)
		if err != nil {
			t.Fatalf("Compile(%q): %v", src, err)
		}
		if ok, err := p.Bool(t.Context(), bound); !ok || err != nil {
			t.Errorf("Bool(%q) = %v, %v; want true", src, ok, err)
		}
	}
	// A string within MaxMatchBytes is matched, in both forms.
	short := env.Bind(Activation{Inputs: map[string]any{"s": strings.Repeat("ab", MaxMatchBytes/2)}})
	for _, src := range []string{`inputs.s.matches("^(ab)+$")`, `matches(inputs.s, "^(ab)+$")`} {
		p, err := env.Compile(src, ResultBool)
		if err != nil {
			t.Fatalf("Compile(%q): %v", src, err)
		}
		if ok, err := p.Bool(t.Context(), short); !ok || err != nil {
			t.Errorf("Bool(%q) = %v, %v; want true", src, ok, err)
		}
	}
}

// TestConcatenationAllocates: a concatenation bomb stops within a few MB of
// allocation, where it allocated gigabytes before runtime costs charged
// concatenation by size.
func TestConcatenationAllocates(t *testing.T) {
	const limit = 64 << 20
	env, err := NewEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	bound := env.Bind(hostile(100_000))
	for _, src := range []string{
		`inputs.l.map(x, inputs.s + inputs.s + inputs.s).size() > 0`,
		`inputs.l.map(x, inputs.l.map(y, inputs.s + inputs.s + inputs.s)).size() > 0`,
		`inputs.l.map(x, string(bytes(inputs.s + inputs.s))).size() > 0`,
		// The error of each failed conversion quotes the input.
		`inputs.l.exists(x, duration(inputs.s) == duration("1s"))`,
	} {
		p := compileUnestimated(t, env, src)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := p.Bool(t.Context(), bound)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrEval) {
			t.Errorf("Bool(%q) = %v; want an ErrEval", src, err)
		}
		n := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %v after %.1f MB", src, err, float64(n)/(1<<20))
		if n > limit {
			t.Errorf("Bool(%q) allocated %d MB; want at most %d", src, n>>20, limit>>20)
		}
	}
}

func TestEvaluationUnderDeadline(t *testing.T) {
	env, err := NewEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := compileUnestimated(t, env, `inputs.l.all(x, inputs.l.all(y, x + y >= 0))`)
	bound := env.Bind(hostile(1))
	expired, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := p.Bool(expired, bound); !errors.Is(err, ErrEval) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("past the deadline: %v; want an ErrEval and DeadlineExceeded", err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, _, err := p.Number(cancelled, bound); !errors.Is(err, ErrEval) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v; want an ErrEval and Canceled", err)
	}
}

// compileUnestimated compiles src without the load-time cost estimate, to
// test the limits at run time.
func compileUnestimated(t *testing.T, env *Env, src string) *Program {
	t.Helper()
	ast, iss := env.env.Compile(src)
	if iss != nil && iss.Err() != nil {
		t.Fatalf("Compile(%q): %v", src, iss.Err())
	}
	p, err := env.program(src, ast, ResultBool, false)
	if err != nil {
		t.Fatalf("Compile(%q): %v", src, err)
	}
	return p
}
