package ruleexpr

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

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

// tooCostly says why an expression estimated at cost n is refused.
func tooCostly(n uint64) string {
	const hint = "loops over inputs, nested loops and concatenations in loops cost the most"
	if n == math.MaxUint64 {
		return fmt.Sprintf("its cost cannot be bounded (at most %d): %s", MaxCost, hint)
	}
	return fmt.Sprintf("estimated cost up to %d exceeds the limit of %d: %s", n, MaxCost, hint)
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
