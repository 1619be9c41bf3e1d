// Package ruleexpr compiles and evaluates the CEL expressions of a ruleset:
// applicability filters (filter_criteria) and checks that need no model
// (check). An expression is parsed and type-checked once, when the ruleset is
// loaded, and evaluated per request over an Activation: the request's named
// inputs, its documents' names, media types and page counts, its options and
// its tenant. It knows nothing of how a request is encoded.
package ruleexpr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// The variables an expression reads.
const (
	VarInputs    = "inputs"
	VarDocuments = "documents"
	VarOptions   = "options"
	VarTenant    = "tenant"
)

// Type is the type a ruleset declares for a named input.
type Type string

// The types a named input may be declared with.
const (
	TypeString  Type = "string"
	TypeNumber  Type = "number"
	TypeInteger Type = "integer"
	TypeBoolean Type = "boolean"
	TypeList    Type = "list"
	TypeMap     Type = "map"
	TypeAny     Type = "any"
)

// Types lists the declarable types, for messages.
var Types = []Type{TypeString, TypeNumber, TypeInteger, TypeBoolean, TypeList, TypeMap, TypeAny}

// Valid says whether t is a declarable type.
func (t Type) Valid() bool { return slices.Contains(Types, t) }

// Result is what an expression must give.
type Result int

const (
	// ResultBool: true or false (a filter, or a boolean rule's check).
	ResultBool Result = iota
	// ResultNumber: an int, a double, or true/false (a numerical rule's
	// check; true is the highest allowed score, false the lowest).
	ResultNumber
)

// Error is an expression that does not compile. Line and Column (1-based,
// in characters) point into the expression's source.
type Error struct {
	Line, Column int
	Message      string
}

func (e *Error) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Message)
}

// Env compiles expressions against one ruleset's declared inputs.
type Env struct {
	env *cel.Env
	// declared is the ruleset's input declaration; nil when it has none,
	// and then any input name may be read.
	declared map[string]Type
}

// NewEnv is the environment of a ruleset whose named inputs are declared
// (nil: not declared, any name may be read).
func NewEnv(declared map[string]Type) (*Env, error) {
	env, err := cel.NewEnv(
		cel.Variable(VarInputs, cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable(VarDocuments, cel.ListType(cel.MapType(cel.StringType, cel.DynType))),
		cel.Variable(VarOptions, cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable(VarTenant, cel.StringType),
		cel.ParserRecursionLimit(64),
		cel.ParserExpressionSizeLimit(MaxChars),
	)
	if err != nil {
		return nil, err
	}
	return &Env{env: env, declared: declared}, nil
}

// Program is a compiled expression, ready to evaluate.
type Program struct {
	// Source is the expression as written.
	Source string
	// Reads lists the named inputs the expression reads by name, sorted.
	Reads []string
	prg   cel.Program
	want  Result
}

// Compile parses and type-checks src for a result of kind want, and checks
// that it reads only declared inputs when the ruleset declares them, that
// the patterns it matches are literals within the limits, and that its
// estimated cost is within MaxCost.
func (e *Env) Compile(src string, want Result) (*Program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Line: 1, Column: 1, Message: "empty expression"}
	}
	if n := utf8.RuneCountInString(src); n > MaxChars {
		return nil, &Error{Line: 1, Column: 1, Message: fmt.Sprintf("too long: %d characters (at most %d)", n, MaxChars)}
	}
	ast, iss := e.env.Compile(src)
	if iss != nil && iss.Err() != nil {
		errs := iss.Errors()
		first := errs[0]
		return nil, &Error{Line: max(first.Location.Line(), 1), Column: first.Location.Column() + 1, Message: first.Message}
	}
	return e.program(src, ast, want, true)
}

// program makes a checked expression a Program; estimate false skips the
// load-time cost estimate, for tests of the limits at run time.
func (e *Env) program(src string, ast *cel.Ast, want Result, estimate bool) (*Program, error) {
	out := ast.OutputType()
	switch {
	case out == cel.DynType:
	case want == ResultBool && out != cel.BoolType:
		return nil, &Error{Line: 1, Column: 1, Message: fmt.Sprintf("gives %s; it must give a bool", out)}
	case want == ResultNumber && out != cel.IntType && out != cel.DoubleType && out != cel.UintType && out != cel.BoolType:
		return nil, &Error{Line: 1, Column: 1, Message: fmt.Sprintf("gives %s; it must give a number (int or double) or a bool", out)}
	}
	reads, err := e.reads(ast.NativeRep())
	if err != nil {
		return nil, err
	}
	patterns, err := checkPatterns(ast.NativeRep())
	if err != nil {
		return nil, err
	}
	if estimate {
		est, err := e.env.EstimateCost(ast, loadCost{patterns})
		if err != nil {
			return nil, &Error{Line: 1, Column: 1, Message: fmt.Sprintf("its cost cannot be estimated: %v", err)}
		}
		if est.Max > MaxCost {
			return nil, &Error{Line: 1, Column: 1, Message: tooCostly(est.Max)}
		}
	}
	// Not cel.OptOptimize: it adds cel-go's own precompiled matches, which
	// would take the place of ours and its cap on the string matched.
	prg, err := e.env.Program(ast,
		cel.CostLimit(MaxCost),
		cel.CostTracking(runtimeCost{patterns}),
		cel.OptimizeRegex(matchesOptimization(patterns)),
		cel.InterruptCheckFrequency(interruptEvery),
	)
	if err != nil {
		return nil, &Error{Line: 1, Column: 1, Message: err.Error()}
	}
	return &Program{Source: src, Reads: reads, prg: prg, want: want}, nil
}

// reads finds the named inputs an expression reads by name (inputs.NAME,
// inputs["NAME"], has(inputs.NAME), "NAME" in inputs) and refuses a name the
// ruleset does not declare, pointing at it.
func (e *Env) reads(a *celast.AST) ([]string, error) {
	seen := map[string]bool{}
	var unknown *Error
	// note records a name read; id's location plus shift (in characters)
	// is where the name is written.
	note := func(id int64, shift int, name string) {
		seen[name] = true
		if e.declared == nil || unknown != nil {
			return
		}
		if _, ok := e.declared[name]; !ok {
			loc := a.SourceInfo().GetStartLocation(id)
			unknown = &Error{Line: max(loc.Line(), 1), Column: loc.Column() + 1 + shift,
				Message: fmt.Sprintf("unknown input %q: the ruleset's inputs declare %s", name, declaredList(e.declared))}
		}
	}
	isInputs := func(x celast.Expr) bool {
		return x.Kind() == celast.IdentKind && x.AsIdent() == VarInputs
	}
	celast.PreOrderVisit(a.Expr(), celast.NewExprVisitor(func(x celast.Expr) {
		switch x.Kind() {
		case celast.SelectKind:
			if s := x.AsSelect(); isInputs(s.Operand()) {
				// A selection is located at its dot; the name follows it.
				note(x.ID(), 1, s.FieldName())
			}
		case celast.CallKind:
			c := x.AsCall()
			args := c.Args()
			if len(args) != 2 {
				return
			}
			var name celast.Expr
			switch c.FunctionName() {
			case "_[_]", "_[?_]":
				if isInputs(args[0]) {
					name = args[1]
				}
			case "@in":
				if isInputs(args[1]) {
					name = args[0]
				}
			}
			if name != nil && name.Kind() == celast.LiteralKind {
				if s, ok := name.AsLiteral().(types.String); ok {
					note(name.ID(), 0, string(s))
				}
			}
		}
	}))
	if unknown != nil {
		return nil, unknown
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func declaredList(declared map[string]Type) string {
	if len(declared) == 0 {
		return "none"
	}
	names := make([]string, 0, len(declared))
	for n := range declared {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// ErrEval marks an expression that failed on one request's values: an input
// it reads is missing or of another type, it matched a string over
// MaxMatchBytes, it ran over MaxCost, or it ran out of time.
var ErrEval = errors.New("expression failed")

// Bool evaluates a ResultBool program within ctx's deadline and
// EvalTimeout.
func (p *Program) Bool(ctx context.Context, b *Bound) (bool, error) {
	v, err := p.eval(ctx, b)
	if err != nil {
		return false, err
	}
	out, ok := v.(types.Bool)
	if !ok {
		return false, fmt.Errorf("%w: gave %s %v, not a bool", ErrEval, v.Type().TypeName(), v.Value())
	}
	return bool(out), nil
}

// Number evaluates a ResultNumber program within ctx's deadline and
// EvalTimeout: isBool says the program gave a bool (boolean), not a number.
func (p *Program) Number(ctx context.Context, b *Bound) (n float64, boolean, isBool bool, err error) {
	v, err := p.eval(ctx, b)
	if err != nil {
		return 0, false, false, err
	}
	switch x := v.(type) {
	case types.Int:
		return float64(x), false, false, nil
	case types.Uint:
		return float64(x), false, false, nil
	case types.Double:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return 0, false, false, fmt.Errorf("%w: gave %v, not a finite number", ErrEval, float64(x))
		}
		return float64(x), false, false, nil
	case types.Bool:
		return 0, bool(x), true, nil
	}
	return 0, false, false, fmt.Errorf("%w: gave %s %v, not a number", ErrEval, v.Type().TypeName(), v.Value())
}

func (p *Program) eval(ctx context.Context, b *Bound) (ref.Val, error) {
	for _, name := range p.Reads {
		if why, ok := b.bad[name]; ok {
			return nil, fmt.Errorf("%w: input %q %s", ErrEval, name, why)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, EvalTimeout)
	defer cancel()
	v, _, err := p.prg.ContextEval(ctx, b.vars)
	var stopped interpreter.EvalCancelledError
	switch {
	case err == nil:
		return v, nil
	case errors.As(err, &stopped) && stopped.Cause == interpreter.CostLimitExceeded:
		return nil, fmt.Errorf("%w: it ran over the cost limit of %d", ErrEval, MaxCost)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%w: it was stopped (expressions run at most %s): %w", ErrEval, EvalTimeout, context.Cause(ctx))
	}
	return nil, fmt.Errorf("%w: %s", ErrEval, err.Error())
}
