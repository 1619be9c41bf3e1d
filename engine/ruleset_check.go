package engine

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"rulevalidator/verdict"
)

const problemNoScores = "numerical rule has no score set: give numerical_rule_config.possible_scores or a global_numerical_rule_config"

// check checks the whole tree of rs and resolves its defaults, then
// compiles its expressions (once: a ruleset already compiled keeps its
// tree).
func (rs *Ruleset) check() []*RulesetError {
	c := &treeCheck{root: rs, ruleIDs: map[string]string{}, groupIDs: map[string]string{}}
	c.group(rs, groupPlace{}, rs.Type, nil, false)
	checkInputs(rs, func(field, format string, args ...any) { c.add(groupPlace{}, -1, "", field, format, args...) })
	if total := c.rules; total > MaxRules {
		c.add(groupPlace{}, -1, "", "rules", "too many rules: %d (at most %d)", total, MaxRules)
	}
	if len(c.problems) == 0 && rs.needsTree() && (rs.tree == nil || rs.tree.owner != rs) {
		t, problems := buildTree(rs)
		if len(problems) > 0 {
			return problems
		}
		rs.tree = t
	}
	return c.problems
}

// groupPlace is where a (nested) ruleset sits: its path for messages, its
// place in reading order, its depth.
type groupPlace struct {
	path  string
	order int
	depth int
}

// treeCheck walks a ruleset's tree in reading order.
type treeCheck struct {
	root     *Ruleset
	problems []*RulesetError
	// ruleIDs and groupIDs say where each id was first seen.
	ruleIDs  map[string]string
	groupIDs map[string]string
	rules    int
	order    int
}

func (c *treeCheck) add(at groupPlace, ruleIndex int, ruleID, field, format string, args ...any) {
	c.problems = append(c.problems, &RulesetError{
		RulesetID: c.root.ID, Group: at.path, groupOrder: at.order, RuleIndex: ruleIndex, RuleID: ruleID, Field: field,
		Problem: fmt.Sprintf(format, args...),
	})
}

// group checks the (nested) ruleset rs at place at, whose rules inherit the
// type parentType and, when inherited is true, the score set global.
// It reports whether the group's tree holds a boolean rule.
func (c *treeCheck) group(rs *Ruleset, at groupPlace, parentType verdict.RuleType, global []int, inherited bool) (hasBoolean bool) {
	add := func(ruleIndex int, ruleID, field, format string, args ...any) {
		c.add(at, ruleIndex, ruleID, field, format, args...)
	}
	c.groupSettings(rs, at, parentType)
	globalOK := inherited
	if rs.GlobalNumericalRuleConfig != nil || !at.nested() {
		global, globalOK = rs.globalScores(add)
	}
	// global is nil when globalOK is false.
	if !globalOK {
		global = nil
	}

	var needGlobal []string // rule ids of numerical rules that use the global score set
	c.rules += len(rs.Rules)
	for i := range rs.Rules {
		c.ruleFields(rs, at, i)
		isBoolean, usesGlobal := c.ruleType(rs, at, i, global, globalOK, inherited)
		hasBoolean = hasBoolean || isBoolean
		if usesGlobal {
			needGlobal = append(needGlobal, rs.Rules[i].RuleID)
		}
	}
	c.globalRange(rs, at, needGlobal)

	before := c.rules
	for i := range rs.NestedRulesets {
		child := &rs.NestedRulesets[i]
		c.order++
		place := groupPlace{path: joinGroupPath(at.path, i, child.ID), order: c.order, depth: at.depth + 1}
		if place.depth > MaxDepth {
			c.add(at, -1, "", "nested_rulesets", "nested deeper than %d levels (the limit)", MaxDepth)
			break
		}
		if c.group(child, place, rs.Type, global, globalOK) {
			hasBoolean = true
		}
	}
	if len(rs.Rules) == 0 && c.rules == before {
		add(-1, "", "rules", "no rules: give at least one")
	}
	if rs.Required && !hasBoolean {
		add(-1, "", "required", "a gate needs boolean rules, which pass or fail; this nested ruleset has none")
	}
	return hasBoolean
}

// nested says whether the place is a nested ruleset's, not the root's.
func (at groupPlace) nested() bool { return at.depth > 0 }

// groupSettings checks the ruleset's own settings and resolves their
// defaults: its type (a nested ruleset's is its parent's), its
// aggregations, and a nested ruleset's id and weight.
func (c *treeCheck) groupSettings(rs *Ruleset, at groupPlace, parentType verdict.RuleType) {
	add := func(field, format string, args ...any) {
		c.add(at, -1, "", field, format, args...)
	}
	nested := at.nested()
	switch {
	case rs.Type == "" && nested:
		rs.Type = parentType
	case rs.Type == "":
		rs.Type = verdict.Boolean
	case rs.Type == verdict.Boolean, rs.Type == verdict.Numerical:
	default:
		add("type", "unknown rule type %q (want boolean or numerical)", rs.Type)
	}
	switch rs.BooleanAggregation {
	case "":
		rs.BooleanAggregation = verdict.AggregateAll
	case verdict.AggregateAll, verdict.AggregateAny, verdict.AggregateMajority:
	default:
		add("boolean_aggregation", "unknown aggregation %q (want all, any or majority)", rs.BooleanAggregation)
	}
	switch rs.NumericalAggregation {
	case "":
		rs.NumericalAggregation = verdict.AggregateMean
	case verdict.AggregateMean, verdict.AggregateSum, verdict.AggregateWeightedMean, verdict.AggregateMin, verdict.AggregateMax:
	default:
		add("numerical_aggregation", "unknown aggregation %q (want mean, sum, weighted_mean, min or max)", rs.NumericalAggregation)
	}
	if nested {
		if problem := ruleIDProblem(rs.ID); problem != "" {
			add("id", "%s (a nested ruleset needs an id: it names the group's result)", problem)
		} else if first, dup := c.groupIDs[rs.ID]; dup {
			add("id", "duplicate nested ruleset id: %s has it too", first)
		} else {
			c.groupIDs[rs.ID] = at.path
		}
		if rs.Weight == nil {
			one := 1.0
			rs.Weight = &one
		} else if w := *rs.Weight; !(w > 0) || math.IsInf(w, 0) {
			add("weight", "must be a finite number greater than 0 (got %v)", w)
		}
	}

	if t := rs.ReviewBelowConfidence; t != nil && !validThreshold(*t) {
		add("review_below_confidence", "must be a number from 0 to 1 (got %v)", *t)
	}
}

// ruleFields checks rule i's id, texts, weight and review threshold, and
// gives it the default weight.
func (c *treeCheck) ruleFields(rs *Ruleset, at groupPlace, i int) {
	r := &rs.Rules[i]
	add := func(field, format string, args ...any) {
		c.add(at, i, r.RuleID, field, format, args...)
	}
	if problem := ruleIDProblem(r.RuleID); problem != "" {
		add("rule_id", "%s", problem)
	} else if first, dup := c.ruleIDs[r.RuleID]; dup {
		add("rule_id", "duplicate rule_id: %s has it too", first)
	} else {
		c.ruleIDs[r.RuleID] = rulePlace(at.path, i)
	}

	if strings.TrimSpace(r.RuleText) == "" {
		add("rule_text", "missing or blank")
	} else if n := utf8.RuneCountInString(r.RuleText); n > MaxRuleTextChars {
		add("rule_text", "too long: %d characters (at most %d)", n, MaxRuleTextChars)
	}
	if n := utf8.RuneCountInString(r.NotApplicableText); n > MaxRuleTextChars {
		add("not_applicable_text", "too long: %d characters (at most %d)", n, MaxRuleTextChars)
	}
	if r.Check != "" && r.NotApplicableText != "" {
		add("not_applicable_text", "a rule judged by its check has no alternate rule; say when it applies with filter_criteria")
	}

	if r.Weight == nil {
		one := 1.0
		r.Weight = &one
	} else if w := *r.Weight; !(w > 0) || math.IsInf(w, 0) {
		add("weight", "must be a finite number greater than 0 (got %v)", w)
	}

	if t := r.ReviewBelowConfidence; t != nil && !validThreshold(*t) {
		add("review_below_confidence", "must be a number from 0 to 1 (got %v)", *t)
	}
}

// ruleType checks rule i's type, which defaults to the ruleset's, and a
// numerical rule's score set: its own (sorted, duplicates dropped), else
// the global one when it is known (global, globalOK). isBoolean says the
// rule is boolean; usesGlobal that it needs the ruleset's global range,
// which globalRange then checks is complete.
func (c *treeCheck) ruleType(rs *Ruleset, at groupPlace, i int, global []int, globalOK, inherited bool) (isBoolean, usesGlobal bool) {
	r := &rs.Rules[i]
	add := func(field, format string, args ...any) {
		c.add(at, i, r.RuleID, field, format, args...)
	}
	if r.Type == "" && (rs.Type == verdict.Boolean || rs.Type == verdict.Numerical) {
		r.Type = rs.Type
	}
	switch r.Type {
	case verdict.Boolean:
		isBoolean = true
		if r.NumericalRuleConfig != nil {
			add("numerical_rule_config", "only numerical rules take a numerical_rule_config; this rule is boolean")
		}
	case verdict.Numerical:
		switch {
		case r.NumericalRuleConfig != nil && r.NumericalRuleConfig.PossibleScores != nil:
			scores := r.NumericalRuleConfig.PossibleScores
			switch {
			case len(scores) == 0:
				add("numerical_rule_config.possible_scores", "must not be empty")
			case len(scores) > MaxScores:
				add("numerical_rule_config.possible_scores", "too many scores: %d (at most %d)", len(scores), MaxScores)
			case !sortedUnique(scores):
				scores = slices.Clone(scores)
				slices.Sort(scores)
				r.NumericalRuleConfig.PossibleScores = slices.Compact(scores)
			}
		case globalOK:
			if r.NumericalRuleConfig == nil {
				r.NumericalRuleConfig = &NumericalRuleConfig{}
			}
			r.NumericalRuleConfig.PossibleScores = slices.Clone(global)
		case rs.GlobalNumericalRuleConfig == nil && !inherited:
			add("numerical_rule_config.possible_scores", "%s", problemNoScores)
		default:
			usesGlobal = true
		}
	case "":
		// The ruleset type is unknown and already reported.
	default:
		add("type", "unknown rule type %q (want boolean or numerical)", r.Type)
	}
	return isBoolean, usesGlobal
}

// globalRange reports a global range left incomplete: it is only required
// to be complete once a rule uses it (needGlobal, by rule id).
func (c *treeCheck) globalRange(rs *Ruleset, at groupPlace, needGlobal []string) {
	if g := rs.GlobalNumericalRuleConfig; len(needGlobal) > 0 && g != nil {
		for _, f := range []struct {
			name  string
			value *int
		}{{"min_score", g.MinScore}, {"max_score", g.MaxScore}} {
			if f.value == nil {
				c.add(at, -1, "", "global_numerical_rule_config."+f.name, "missing, and needed by the numerical rules without possible_scores: %s", strings.Join(needGlobal, ", "))
			}
		}
	}
}

// rulePlace names rule i of the group at path, for messages.
func rulePlace(path string, i int) string {
	if path == "" {
		return fmt.Sprintf("rules[%d]", i)
	}
	return fmt.Sprintf("%s rules[%d]", path, i)
}

// sortedUnique says whether scores ascend strictly, as Validate leaves them.
func sortedUnique(scores []int) bool {
	for i := 1; i < len(scores); i++ {
		if scores[i-1] >= scores[i] {
			return false
		}
	}
	return true
}

// globalScores materialises the global range. ok is false when the config is
// absent, incomplete or invalid; invalid values are reported through add.
func (rs *Ruleset) globalScores(add func(int, string, string, string, ...any)) (scores []int, ok bool) {
	g := rs.GlobalNumericalRuleConfig
	if g == nil {
		return nil, false
	}
	increment := 1
	valid := true
	if g.Increment != nil {
		increment = *g.Increment
		if increment <= 0 {
			add(-1, "", "global_numerical_rule_config.increment", "must be greater than 0 (got %d)", increment)
			valid = false
		}
	}
	if g.MinScore == nil || g.MaxScore == nil {
		return nil, false
	}
	lo, hi := *g.MinScore, *g.MaxScore
	if lo > hi {
		add(-1, "", "global_numerical_rule_config", "min_score %d is greater than max_score %d", lo, hi)
		return nil, false
	}
	if !valid {
		return nil, false
	}
	// Unsigned arithmetic: hi-lo may not fit in an int.
	count := (uint64(hi)-uint64(lo))/uint64(increment) + 1
	if count > MaxScores {
		add(-1, "", "global_numerical_rule_config", "range %d..%d by %d gives %d scores (at most %d)", lo, hi, increment, count, MaxScores)
		return nil, false
	}
	scores = make([]int, 0, count)
	for s, k := lo, uint64(0); k < count; s, k = s+increment, k+1 {
		scores = append(scores, s)
	}
	return scores, true
}

// ruleIDProblem says what is wrong with a rule id, or "" when it is fine. Ids
// are shown to the model and form event ids (request_id/rule_id).
func ruleIDProblem(id string) string {
	if id == "" {
		return "missing"
	}
	if n := utf8.RuneCountInString(id); n > MaxRuleIDChars {
		return fmt.Sprintf("too long: %d characters (at most %d)", n, MaxRuleIDChars)
	}
	for _, c := range id {
		if unicode.IsControl(c) {
			return fmt.Sprintf("must not contain control characters (found %q)", c)
		}
		if c == '/' {
			return `must not contain "/" (event ids are request_id/rule_id)`
		}
	}
	first, _ := utf8.DecodeRuneInString(id)
	last, _ := utf8.DecodeLastRuneInString(id)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return "must not start or end with white space"
	}
	return ""
}
