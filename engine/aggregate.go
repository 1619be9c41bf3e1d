package engine

import (
	"fmt"
	"math"
	"strings"

	"rulevalidator/verdict"
)

// aggregate combines verdicts with the ruleset's modes. A ruleset without
// boolean (numerical) rules has no boolean (numerical) aggregate.
//
// Boolean: not-applicable rules are left out of the denominator. all = every
// applicable rule passed (vacuously true when none applies), any = at least one
// passed, majority = more than half of the applicable rules passed.
//
// Numerical: rules that are not applicable, lack sufficient data or have no
// score are left out. Score is nil when nothing was counted; min and max are
// the lowest and highest score counted.
func aggregate(rs *Ruleset, verdicts []Verdict) verdict.Aggregate {
	weights := make(map[string]float64, len(rs.Rules))
	var hasBool, hasNum bool
	for _, r := range rs.Rules {
		weights[r.RuleID] = r.WeightOrDefault()
		if r.Type == verdict.Numerical {
			hasNum = true
		} else {
			hasBool = true
		}
	}
	var m members
	for _, v := range verdicts {
		m.addVerdict(v, weights[v.RuleID])
	}
	return m.combine(rs, hasBool, hasNum)
}

// members are what one (nested) ruleset combines: its applicable boolean
// verdicts (or groups) and its counted scores.
type members struct {
	applicable, passed int
	scores             []weighted
}

type weighted struct{ score, weight float64 }

// addVerdict counts one rule's verdict.
func (m *members) addVerdict(v Verdict, weight float64) {
	switch v.Outcome() {
	case OutcomePass:
		m.passed++
		m.applicable++
	case OutcomeFail:
		m.applicable++
	}
	if v.Type == verdict.Numerical && !v.NotApplicable && v.DataSufficiency && v.NumericalOutput != nil {
		m.scores = append(m.scores, weighted{float64(*v.NumericalOutput), weight})
	}
}

// combine is the aggregate of m by rs's modes; hasBool and hasNum say
// whether the ruleset holds boolean and numerical rules at all.
func (m *members) combine(rs *Ruleset, hasBool, hasNum bool) verdict.Aggregate {
	var agg verdict.Aggregate
	if hasBool {
		b := &verdict.BooleanAggregate{Mode: orDefault(rs.BooleanAggregation, verdict.AggregateAll), Applicable: m.applicable, PassedCount: m.passed}
		switch b.Mode {
		case verdict.AggregateAny:
			b.Passed = b.PassedCount > 0
		case verdict.AggregateMajority:
			b.Passed = 2*b.PassedCount > b.Applicable
		default:
			b.Passed = b.PassedCount == b.Applicable
		}
		agg.Boolean = b
	}
	if hasNum {
		n := &verdict.NumericalAggregate{Mode: orDefault(rs.NumericalAggregation, verdict.AggregateMean), Counted: len(m.scores)}
		if n.Counted > 0 {
			var sum, weightedSum, weightSum float64
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, s := range m.scores {
				sum += s.score
				weightedSum += s.weight * s.score
				weightSum += s.weight
				lo, hi = min(lo, s.score), max(hi, s.score)
			}
			var score float64
			switch n.Mode {
			case verdict.AggregateSum:
				score = sum
			case verdict.AggregateWeightedMean:
				score = weightedSum / weightSum
			case verdict.AggregateMin:
				score = lo
			case verdict.AggregateMax:
				score = hi
			default:
				score = sum / float64(n.Counted)
			}
			n.Score = &score
		}
		agg.Numerical = n
	}
	return agg
}

// aggregateTree combines the verdicts of a tree ruleset (in tree order)
// group by group, from the innermost out: each nested group is one member
// of its parent, and a required group that fails fails its parent whatever
// the parent's mode. excluded gives, per group, why a filter left it out.
// It returns the ruleset's aggregate and every nested group's result.
func (t *tree) aggregate(verdicts []Verdict, excluded map[*groupNode]string) (verdict.Aggregate, []verdict.GroupResult) {
	results := make([]verdict.GroupResult, len(t.groups))
	index := make(map[*groupNode]int, len(t.groups))
	for i, g := range t.groups {
		index[g] = i
	}
	type shape struct{ hasBool, hasNum bool }
	var walk func(g *groupNode) shape
	walk = func(g *groupNode) shape {
		var m members
		var sh shape
		res := &results[index[g]]
		res.ID, res.Path, res.Name, res.Required = g.rs.ID, g.path, g.rs.Name, g.rs.Required
		res.RuleIDs = []string{}
		applies := false
		for i := g.start; i < g.own; i++ {
			r := t.rules[i].rule
			res.RuleIDs = append(res.RuleIDs, r.RuleID)
			if r.Type == verdict.Numerical {
				sh.hasNum = true
			} else {
				sh.hasBool = true
			}
			m.addVerdict(verdicts[i], r.WeightOrDefault())
			applies = applies || !verdicts[i].NotApplicable
		}
		var gated []string
		for _, child := range g.children {
			csh := walk(child)
			sh.hasBool, sh.hasNum = sh.hasBool || csh.hasBool, sh.hasNum || csh.hasNum
			cr := results[index[child]]
			if cr.NotApplicable {
				continue
			}
			applies = true
			if b := cr.Aggregate.Boolean; b != nil {
				m.applicable++
				if b.Passed {
					m.passed++
				} else if child.rs.Required {
					gated = append(gated, child.path)
				}
			}
			if n := cr.Aggregate.Numerical; n != nil && n.Score != nil {
				m.scores = append(m.scores, weighted{*n.Score, child.rs.WeightOrDefault()})
			}
		}
		res.Aggregate = m.combine(g.rs, sh.hasBool, sh.hasNum)
		if len(gated) > 0 && res.Aggregate.Boolean != nil {
			res.Aggregate.Boolean.Passed = false
			res.GatedBy = gated
		}
		switch reason, ok := excluded[g]; {
		case ok:
			res.NotApplicable, res.Reason = true, reason
		case !applies:
			res.NotApplicable, res.Reason = true, "none of its rules applies"
		}
		return sh
	}
	walk(t.groups[0])
	root := results[0].Aggregate
	return root, results[1:]
}

// WeightOrDefault is a nested ruleset's weight, 1 when unset.
func (rs *Ruleset) WeightOrDefault() float64 {
	if rs.Weight == nil {
		return 1
	}
	return *rs.Weight
}

// describeGroup names a group for reasons: the ruleset, or nested ruleset
// "payment".
func describeGroup(g *groupNode) string {
	if g.parent == nil {
		return "the ruleset"
	}
	return fmt.Sprintf("nested ruleset %q", strings.ReplaceAll(g.path, "/", " > "))
}

func orDefault[T ~string](v, def T) T {
	if v == "" {
		return def
	}
	return v
}

// AggregateVerdicts combines verdicts with rs's modes, as Evaluate does: the
// one aggregation, also of verdicts a person corrected.
func AggregateVerdicts(rs *Ruleset, verdicts []Verdict) verdict.Aggregate {
	return aggregate(rs, verdicts)
}
