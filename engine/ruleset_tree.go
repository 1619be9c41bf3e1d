package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"rulevalidator/engine/ruleexpr"
	"rulevalidator/verdict"
)

// tree is the compiled form of a ruleset with nested rulesets, filters or
// checks, built once by Validate: every rule in tree order (a group's own
// rules, then its nested rulesets' in turn) and every expression compiled.
// A ruleset without any of them has none, and is judged as it always was.
type tree struct {
	owner *Ruleset
	env   *ruleexpr.Env
	rules []treeRule
	// groups lists the groups in reading order; groups[0] is the ruleset
	// itself.
	groups []*groupNode

	// subsets remembers the rulesets of the rules asked of the model, by
	// which rules they hold: the same pointer for the same rules, so that
	// their prompt is compiled once (compiledCache is by identity).
	mu      sync.Mutex
	subsets map[string]*Ruleset
}

// maxSubsets bounds tree.subsets; past it a subset is built per request.
const maxSubsets = 64

// groupNode is one (nested) ruleset of a tree.
type groupNode struct {
	rs *Ruleset
	// path is the ids from the top level down, "" for the top level
	// itself: "liability/caps".
	path     string
	filter   *ruleexpr.Program
	parent   *groupNode
	children []*groupNode
	// The group's own rules are tree.rules[start:own], its whole tree's
	// tree.rules[start:end].
	start, own, end int
}

// treeRule is one rule of a tree.
type treeRule struct {
	rule          *Rule
	group         *groupNode
	filter, check *ruleexpr.Program
}

// needsTree says whether rs uses nested rulesets, filters or checks.
func (rs *Ruleset) needsTree() bool {
	if len(rs.NestedRulesets) > 0 || rs.FilterCriteria != "" {
		return true
	}
	for _, r := range rs.Rules {
		if r.FilterCriteria != "" || r.Check != "" {
			return true
		}
	}
	return false
}

// buildTree compiles a checked ruleset's tree; its problems are the
// expressions that do not compile.
func buildTree(rs *Ruleset) (*tree, []*RulesetError) {
	t := &tree{owner: rs, subsets: map[string]*Ruleset{}}
	var problems []*RulesetError
	env, err := ruleexpr.NewEnv(rs.Inputs)
	if err != nil {
		return nil, []*RulesetError{{RulesetID: rs.ID, RuleIndex: -1, Field: "inputs", Problem: err.Error()}}
	}
	t.env = env
	compile := func(at groupPlace, ruleIndex int, ruleID, field, src string, want ruleexpr.Result) *ruleexpr.Program {
		if src == "" {
			return nil
		}
		p, err := env.Compile(src, want)
		if err == nil {
			return p
		}
		e := &RulesetError{RulesetID: rs.ID, Group: at.path, groupOrder: at.order, RuleIndex: ruleIndex, RuleID: ruleID,
			Field: field, Expression: src, Line: 1, Column: 1, Problem: err.Error()}
		var ce *ruleexpr.Error
		if errors.As(err, &ce) {
			e.Line, e.Column, e.Problem = ce.Line, ce.Column, ce.Message
		}
		problems = append(problems, e)
		return nil
	}
	order := 0
	var walk func(g *Ruleset, at groupPlace, parent *groupNode, path string) *groupNode
	walk = func(g *Ruleset, at groupPlace, parent *groupNode, path string) *groupNode {
		node := &groupNode{rs: g, path: path, parent: parent, start: len(t.rules)}
		node.filter = compile(at, -1, "", "filter_criteria", g.FilterCriteria, ruleexpr.ResultBool)
		t.groups = append(t.groups, node)
		for i := range g.Rules {
			r := &g.Rules[i]
			want := ruleexpr.ResultBool
			if r.Type == verdict.Numerical {
				want = ruleexpr.ResultNumber
			}
			t.rules = append(t.rules, treeRule{rule: r, group: node,
				filter: compile(at, i, r.RuleID, "filter_criteria", r.FilterCriteria, ruleexpr.ResultBool),
				check:  compile(at, i, r.RuleID, "check", r.Check, want)})
		}
		node.own = len(t.rules)
		for i := range g.NestedRulesets {
			child := &g.NestedRulesets[i]
			order++
			childPath := child.ID
			if path != "" {
				childPath = path + "/" + child.ID
			}
			place := groupPlace{path: joinGroupPath(at.path, i, child.ID), order: order, depth: at.depth + 1}
			node.children = append(node.children, walk(child, place, node, childPath))
		}
		node.end = len(t.rules)
		return node
	}
	walk(rs, groupPlace{}, nil, "")
	if len(problems) > 0 {
		return nil, problems
	}
	return t, nil
}

// checkInputs checks the declaration of named inputs.
func checkInputs(rs *Ruleset, add func(field, format string, args ...any)) {
	for name, typ := range rs.Inputs {
		switch {
		case strings.TrimSpace(name) == "":
			add("inputs", "an input name must not be blank")
		case !typ.Valid():
			types := make([]string, len(ruleexpr.Types))
			for i, t := range ruleexpr.Types {
				types[i] = string(t)
			}
			add("inputs."+name, "unknown type %q (want one of %s)", typ, strings.Join(types, ", "))
		}
	}
}

// modelRuleset is the ruleset the model is asked about when only the rules
// at indexes (tree order) need it: the same pointer for the same rules.
func (t *tree) modelRuleset(indexes []int) *Ruleset {
	var key strings.Builder
	for _, i := range indexes {
		fmt.Fprintf(&key, "%d,", i)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if rs, ok := t.subsets[key.String()]; ok {
		return rs
	}
	root := t.owner
	rs := &Ruleset{ID: root.ID, Version: root.Version, Type: root.Type, BooleanAggregation: root.BooleanAggregation,
		NumericalAggregation: root.NumericalAggregation, Rules: make([]Rule, len(indexes))}
	for k, i := range indexes {
		rs.Rules[k] = *t.rules[i].rule
	}
	if len(t.subsets) < maxSubsets {
		t.subsets[key.String()] = rs
	}
	return rs
}

// AllRules lists every rule of the ruleset in tree order: its own rules,
// then each nested ruleset's in turn, as a result lists their verdicts. For
// a ruleset without nested rulesets it is Rules itself.
func (rs *Ruleset) AllRules() []Rule {
	if len(rs.NestedRulesets) == 0 {
		return rs.Rules
	}
	out := slices.Clone(rs.Rules)
	for i := range rs.NestedRulesets {
		out = append(out, rs.NestedRulesets[i].AllRules()...)
	}
	return out
}
