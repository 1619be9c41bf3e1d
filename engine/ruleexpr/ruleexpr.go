// Package ruleexpr compiles and evaluates the CEL expressions of a ruleset:
// applicability filters (filter_criteria) and checks that need no model
// (check). An expression is parsed and type-checked once, when the ruleset is
// loaded, and evaluated per request over an Activation: the request's named
// inputs, its documents' names, media types and page counts, its options and
// its tenant. It knows nothing of how a request is encoded.
package ruleexpr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
)

// Limits on one expression. Rulesets come from every tenant, so they keep a
// ruleset's load and a request's evaluation bounded in CPU, memory and time
// whoever wrote the ruleset.
const (
	// MaxChars bounds an expression's source, in characters.
	MaxChars = 4096
	// MaxCost bounds one evaluation, in CEL's cost units (about one per
	// operation and element visited, a tenth per byte of string read, one
	// per byte of string concatenated; see runtimeCost), and an
	// expression's cost as estimated at load (see loadCost). A million
	// units is some tens of milliseconds of CPU and 1 MB of
	// concatenated strings, and lets an expression read a string of
	// megabytes a few times (size, contains, startsWith).
	MaxCost = 1_000_000
	// MaxPatternChars bounds the pattern of matches, in characters.
	// Patterns must be string literals, so that they are checked and
	// compiled once, at load.
	MaxPatternChars = 256
	// MaxPatternProgram bounds the instructions of a pattern's compiled
	// RE2 program. Matching takes up to one step per byte and instruction,
	// and a short pattern can compile to a long program ([a-z]{1000}).
	MaxPatternProgram = 128
	// MaxMatchBytes bounds a string matched against a pattern: with
	// MaxPatternProgram, one match is at most about 8M steps.
	MaxMatchBytes = 64 << 10
	// EvalTimeout bounds one evaluation, within the request's own
	// deadline. The cost limit should stop an expression long before it.
	EvalTimeout = time.Second
	// interruptEvery is how many comprehension iterations run between
	// checks of the deadline.
	interruptEvery = 10
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

// tooCostly says why an expression estimated at cost n is refused.
func tooCostly(n uint64) string {
	const hint = "loops over inputs, nested loops and concatenations in loops cost the most"
	if n == math.MaxUint64 {
		return fmt.Sprintf("its cost cannot be bounded (at most %d): %s", MaxCost, hint)
	}
	return fmt.Sprintf("estimated cost up to %d exceeds the limit of %d: %s", n, MaxCost, hint)
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

// pattern is a checked, compiled pattern of matches.
type pattern struct {
	re *regexp.Regexp
	// insts is the size of its RE2 program, in instructions.
	insts int
}

// checkPatterns checks every pattern of matches (s.matches(re) and
// matches(s, re)): a string literal, at most MaxPatternChars long, valid
// RE2 compiling to at most MaxPatternProgram instructions. It gives them
// compiled, by pattern.
func checkPatterns(a *celast.AST) (map[string]*pattern, error) {
	patterns := map[string]*pattern{}
	var bad *Error
	celast.PreOrderVisit(a.Expr(), celast.NewExprVisitor(func(x celast.Expr) {
		if bad != nil || x.Kind() != celast.CallKind || x.AsCall().FunctionName() != overloads.Matches {
			return
		}
		args := x.AsCall().Args()
		if len(args) == 0 {
			return
		}
		// The pattern is the last argument in both forms.
		arg := args[len(args)-1]
		fail := func(format string, v ...any) {
			loc := a.SourceInfo().GetStartLocation(startOf(arg).ID())
			bad = &Error{Line: max(loc.Line(), 1), Column: loc.Column() + 1, Message: fmt.Sprintf(format, v...)}
		}
		if arg.Kind() != celast.LiteralKind {
			fail("the pattern of matches must be a string literal, so that it is checked when the ruleset is loaded")
			return
		}
		lit, ok := arg.AsLiteral().(types.String)
		if !ok {
			return // not a string: the type checker has refused it
		}
		src := string(lit)
		if n := utf8.RuneCountInString(src); n > MaxPatternChars {
			fail("the pattern of matches is %d characters long; patterns are at most %d", n, MaxPatternChars)
			return
		}
		if _, ok := patterns[src]; ok {
			return
		}
		re, err := regexp.Compile(src)
		if err != nil {
			fail("the pattern of matches is not a valid RE2 regular expression: %v", err)
			return
		}
		insts, err := types.RegexProgramSize(src)
		if err != nil {
			fail("the pattern of matches is not a valid RE2 regular expression: %v", err)
			return
		}
		if insts > MaxPatternProgram {
			fail("the pattern of matches compiles to %d instructions; patterns compile to at most %d (a repetition such as {100} counts as often as it repeats)", insts, MaxPatternProgram)
			return
		}
		patterns[src] = &pattern{re: re, insts: insts}
	}))
	if bad != nil {
		return nil, bad
	}
	return patterns, nil
}

// startOf is the leftmost part of x. A selection, a member call or a
// binary operator is located at its dot or its operator; an error about
// the whole expression points at where it starts.
func startOf(x celast.Expr) celast.Expr {
	for {
		switch x.Kind() {
		case celast.SelectKind:
			x = x.AsSelect().Operand()
		case celast.CallKind:
			c := x.AsCall()
			switch fn := c.FunctionName(); {
			case c.IsMemberFunction():
				x = c.Target()
			case (strings.HasPrefix(fn, "_") || fn == operators.In) && len(c.Args()) > 0:
				x = c.Args()[0]
			default:
				return x
			}
		default:
			return x
		}
	}
}

// matchesOptimization replaces every call of matches, whose pattern is a
// checked literal, with one that refuses a string over MaxMatchBytes and
// runs the pattern compiled at load.
func matchesOptimization(patterns map[string]*pattern) *interpreter.RegexOptimization {
	return &interpreter.RegexOptimization{
		Function:   overloads.Matches,
		RegexIndex: 1, // the target of s.matches(re) is the first argument
		Factory: func(call interpreter.InterpretableCall, src string) (interpreter.InterpretableCall, error) {
			p, ok := patterns[src]
			if !ok {
				return nil, fmt.Errorf("matches: pattern %q was not checked", src)
			}
			return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(), func(args ...ref.Val) ref.Val {
				if len(args) != 2 {
					return types.NoSuchOverloadErr()
				}
				s, ok := args[0].(types.String)
				if !ok {
					return types.MaybeNoSuchOverloadErr(args[0])
				}
				if len(s) > MaxMatchBytes {
					return types.NewErr("matches over a string of %d bytes; expressions match strings of at most %d", len(s), MaxMatchBytes)
				}
				return types.Bool(p.re.MatchString(string(s)))
			}), nil
		},
	}
}

// matchCost is the cost of matching n bytes with a program of insts
// instructions: cel-go's string traversal cost, once per instruction.
func matchCost(n uint64, insts int) uint64 {
	return cost.SafeMultiplyByFactor(cost.SafeMultiply(n+1, uint64(insts)), cost.StringTraversalCostFactor)
}

// standardTrackers are cel-go's runtime charges for its standard functions.
var standardTrackers = cost.StandardOverloadTrackers()

// runtimeCost charges a call what cel-go charges it (its standard model,
// or 1), raised where cel-go undercharges an attacker's input. cel-go
// charges 1 for a call it dispatches at run time, on an argument of type
// dyn as every input is (inputs.s + inputs.s, x in inputs.l), and for
// conversions that parse or copy a string (int(s), duration(s), bytes(s)).
// Here:
//   - every call costs at least a scan of its strings and bytes, a tenth
//     per byte;
//   - concatenating strings or bytes costs one per byte of the result: it
//     allocates it;
//   - x in list costs one per element of the list;
//   - matches costs matchCost of its program, not of its pattern's length.
type runtimeCost struct {
	patterns map[string]*pattern
}

func (c runtimeCost) CallCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64 {
	n := cost.CallCost
	if track, ok := standardTrackers[overloadID]; ok {
		if std := track(args, result); std != nil {
			n = *std
		}
	}
	var read uint64
	for _, a := range args {
		read += byteSize(a)
	}
	n = max(n, cost.SafeMultiplyByFactor(read, cost.StringTraversalCostFactor))
	switch function {
	case operators.Add:
		n = max(n, byteSize(result))
	case operators.In:
		if len(args) == 2 {
			if l, ok := args[1].(traits.Lister); ok {
				if size, ok := l.Size().(types.Int); ok {
					n = max(n, uint64(size))
				}
			}
		}
	case overloads.Matches:
		if len(args) == 2 {
			s, _ := args[0].(types.String)
			src, _ := args[1].(types.String)
			if p, ok := c.patterns[string(src)]; ok {
				n = max(n, matchCost(uint64(len(s)), p.insts))
			}
		}
	}
	return &n
}

// byteSize is the length of a string or bytes, and 0 for any other value.
func byteSize(v ref.Val) uint64 {
	switch v := v.(type) {
	case types.String:
		return uint64(len(v))
	case types.Bytes:
		return uint64(len(v))
	}
	return 0
}

// The sizes assumed at load for what an expression reads: those of an
// ordinary large request. A request may hold more (its inputs up to the
// engine's MaxInputBytes), so the estimate is no guarantee: it refuses at
// load what would run over MaxCost on such a request (loops nested over
// inputs, concatenations in loops), and the runtime limits stop the rest.
// Inputs are of type dyn, so one size stands for a string's bytes and a
// list's elements alike: it is set for lists, and the estimate says little
// of the work on long strings, which runtimeCost charges by size.
const (
	// estInputs is the number of named inputs.
	estInputs = 64
	// estValue is the size of a named input, or of a value in one.
	estValue = 128
	// estDocuments is the number of documents.
	estDocuments = 100
	// estDocumentField is a document's name, media type or role.
	estDocumentField = 256
	// estOptions is the number of options; estOption an option's value.
	estOptions = 8
	estOption  = 2 << 10
	// estTenant is a tenant's name.
	estTenant = 256
)

// loadCost estimates an expression's cost at load: the sizes of what it
// reads (above) and, over cel-go's standard model (which prices a call on
// dyn arguments as its costliest overload), the charges runtimeCost raises
// for concatenation and matches. Its other raises depend on sizes the
// estimate does not know; they are charged at run time.
type loadCost struct {
	patterns map[string]*pattern
}

func (loadCost) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	path := n.Path()
	if len(path) == 0 {
		return nil
	}
	var size uint64
	switch path[0] {
	case VarInputs:
		size = estValue
		if len(path) == 1 {
			size = estInputs
		}
	case VarDocuments:
		switch len(path) {
		case 1:
			size = estDocuments
		case 2:
			size = 4 // name, media_type, role, pages
		default:
			size = estDocumentField
		}
	case VarOptions:
		size = estOption
		if len(path) == 1 {
			size = estOptions
		}
	case VarTenant:
		size = estTenant
	default:
		return nil
	}
	return &cost.SizeEstimate{Min: 0, Max: size}
}

func (c loadCost) EstimateCallCost(function, overloadID string, target *cost.AstNode, args []cost.AstNode) *cost.CallEstimate {
	if target != nil {
		args = append([]cost.AstNode{*target}, args...)
	}
	switch overloadID {
	case overloads.AddString, overloads.AddBytes:
		if len(args) != 2 {
			return nil
		}
		size := cost.EstimateSize(c, args[0]).Add(cost.EstimateSize(c, args[1]))
		return cost.NewCallEstimate(size.AsCost(), &size)
	case overloads.Matches, overloads.MatchesString:
		if len(args) != 2 {
			return nil
		}
		lit, ok := args[1].Expr().AsLiteral().(types.String)
		if !ok {
			return nil
		}
		p, ok := c.patterns[string(lit)]
		if !ok {
			return nil
		}
		// A longer string fails before it is matched.
		n := min(cost.EstimateSize(c, args[0]).Max, MaxMatchBytes)
		return cost.NewCallEstimate(cost.RangedCostEstimate(1, matchCost(n, p.insts)), nil)
	}
	return nil
}

// Document is what an expression sees of one document.
type Document struct {
	Name      string
	MediaType string
	// Role is "primary" or "auxiliary".
	Role  string
	Pages int
}

// Activation is what one request gives its expressions.
type Activation struct {
	// Inputs are the named inputs by name, as decoded from JSON (numbers
	// as json.Number or float64).
	Inputs    map[string]any
	Documents []Document
	// Options are the request's options that were set, by their JSON names.
	Options map[string]any
	Tenant  string
}

// Bound is an Activation converted once for CEL, to evaluate every
// expression of a request with.
type Bound struct {
	vars map[string]any
	// raw are the named inputs as given, for evidence.
	raw map[string]any
	// bad holds, per named input, why its value does not have its declared
	// type; an expression reading it fails.
	bad map[string]string
	// quoted holds what Value gave for each input asked for: every rule
	// reading an input quotes it, and a large one is written once.
	quoted map[string]string
}

// Bind converts a for evaluation. Numbers become CEL ints when they are
// whole and fit, doubles otherwise; an input declared a number is always a
// double, so that arithmetic on it does not depend on how it was written.
func (e *Env) Bind(a Activation) *Bound {
	b := &Bound{bad: map[string]string{}, raw: a.Inputs}
	inputs := make(map[string]any, len(a.Inputs))
	for name, v := range a.Inputs {
		typ := TypeAny
		if e.declared != nil {
			if t, ok := e.declared[name]; ok {
				typ = t
			}
		}
		cv, err := convert(v, typ)
		if err != nil {
			b.bad[name] = err.Error()
			continue
		}
		inputs[name] = cv
	}
	docs := make([]any, len(a.Documents))
	for i, d := range a.Documents {
		docs[i] = map[string]any{"name": d.Name, "media_type": d.MediaType, "role": d.Role, "pages": int64(d.Pages)}
	}
	options := map[string]any{}
	for k, v := range a.Options {
		if cv, err := convert(v, TypeAny); err == nil {
			options[k] = cv
		}
	}
	b.vars = map[string]any{VarInputs: inputs, VarDocuments: docs, VarOptions: options, VarTenant: a.Tenant}
	return b
}

// convert makes a decoded JSON value a value CEL takes, checking it against
// its declared type.
func convert(v any, typ Type) (any, error) {
	switch x := v.(type) {
	case nil:
		if typ != TypeAny {
			return nil, fmt.Errorf("is null; declared %s", typ)
		}
		return types.NullValue, nil
	case json.Number:
		if typ == TypeNumber {
			f, err := x.Float64()
			return f, err
		}
		if n, err := x.Int64(); err == nil {
			return checkNumber(float64(n), n, true, typ)
		}
		f, err := x.Float64()
		if err != nil {
			return nil, err
		}
		return checkNumber(f, 0, false, typ)
	case float64:
		if typ == TypeNumber {
			return x, nil
		}
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return checkNumber(x, int64(x), true, typ)
		}
		return checkNumber(x, 0, false, typ)
	case int:
		return checkNumber(float64(x), int64(x), true, typ)
	case int64:
		return checkNumber(float64(x), x, true, typ)
	case string:
		if typ != TypeString && typ != TypeAny {
			return nil, fmt.Errorf("is a string; declared %s", typ)
		}
		return x, nil
	case bool:
		if typ != TypeBoolean && typ != TypeAny {
			return nil, fmt.Errorf("is a boolean; declared %s", typ)
		}
		return x, nil
	case []any:
		if typ != TypeList && typ != TypeAny {
			return nil, fmt.Errorf("is a list; declared %s", typ)
		}
		out := make([]any, len(x))
		for i, item := range x {
			cv, err := convert(item, TypeAny)
			if err != nil {
				return nil, err
			}
			out[i] = cv
		}
		return out, nil
	case map[string]any:
		if typ != TypeMap && typ != TypeAny {
			return nil, fmt.Errorf("is a map; declared %s", typ)
		}
		out := make(map[string]any, len(x))
		for k, item := range x {
			cv, err := convert(item, TypeAny)
			if err != nil {
				return nil, err
			}
			out[k] = cv
		}
		return out, nil
	}
	return nil, fmt.Errorf("has a value of type %T that expressions cannot read", v)
}

func checkNumber(f float64, n int64, whole bool, typ Type) (any, error) {
	switch typ {
	case TypeAny:
		if whole {
			return n, nil
		}
		return f, nil
	case TypeNumber:
		return f, nil
	case TypeInteger:
		if !whole {
			return nil, fmt.Errorf("is %v; declared integer", f)
		}
		return n, nil
	}
	return nil, fmt.Errorf("is a number; declared %s", typ)
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

// MaxQuotedBytes bounds what Value gives of one input: a check's rationale
// and evidence quote the inputs it read, and an input may be megabytes.
const MaxQuotedBytes = 1024

// Value is a named input as the request gave it, for the evidence of a
// check: its value written as JSON (a string as itself), clipped to
// MaxQuotedBytes with a note of its full size, and whether it was given at
// all. A Bound is not safe for concurrent use.
func (b *Bound) Value(name string) (text string, given bool) {
	v, ok := b.raw[name]
	if !ok {
		return "", false
	}
	if q, ok := b.quoted[name]; ok {
		return q, true
	}
	if s, ok := v.(string); ok {
		text = s
	} else if data, err := json.Marshal(v); err == nil {
		text = string(data)
	} else {
		text = fmt.Sprint(v)
	}
	text = clip(text, MaxQuotedBytes)
	if b.quoted == nil {
		b.quoted = map[string]string{}
	}
	b.quoted[name] = text
	return text, true
}

// clip cuts s to at most limit bytes at a character boundary, saying how
// long it was.
func clip(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… [clipped: %d bytes in all]", s[:cut], len(s))
}
