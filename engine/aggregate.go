package engine

// aggregate combines verdicts with the ruleset's modes. A ruleset without
// boolean (numerical) rules has no boolean (numerical) aggregate.
//
// Boolean: not-applicable rules are left out of the denominator. all = every
// applicable rule passed (vacuously true when none applies), any = at least one
// passed, majority = more than half of the applicable rules passed.
//
// Numerical: rules that are not applicable, lack sufficient data or have no
// score are left out. Score is nil when nothing was counted.
func aggregate(rs *Ruleset, verdicts []Verdict) Aggregate {
	weights := make(map[string]float64, len(rs.Rules))
	var hasBool, hasNum bool
	for _, r := range rs.Rules {
		weights[r.RuleID] = r.WeightOrDefault()
		if r.Type == Numerical {
			hasNum = true
		} else {
			hasBool = true
		}
	}
	var agg Aggregate
	if hasBool {
		b := &BooleanAggregate{Mode: orDefault(rs.BooleanAggregation, AggregateAll)}
		for _, v := range verdicts {
			switch v.Outcome() {
			case OutcomePass:
				b.PassedCount++
				b.Applicable++
			case OutcomeFail:
				b.Applicable++
			}
		}
		switch b.Mode {
		case AggregateAny:
			b.Passed = b.PassedCount > 0
		case AggregateMajority:
			b.Passed = 2*b.PassedCount > b.Applicable
		default:
			b.Passed = b.PassedCount == b.Applicable
		}
		agg.Boolean = b
	}
	if hasNum {
		n := &NumericalAggregate{Mode: orDefault(rs.NumericalAggregation, AggregateMean)}
		var sum, weighted, weightSum float64
		for _, v := range verdicts {
			if v.Type != Numerical || v.NotApplicable || !v.DataSufficiency || v.NumericalOutput == nil {
				continue
			}
			s := float64(*v.NumericalOutput)
			n.Counted++
			sum += s
			weighted += weights[v.RuleID] * s
			weightSum += weights[v.RuleID]
		}
		if n.Counted > 0 {
			var score float64
			switch n.Mode {
			case AggregateSum:
				score = sum
			case AggregateWeightedMean:
				score = weighted / weightSum
			default:
				score = sum / float64(n.Counted)
			}
			n.Score = &score
		}
		agg.Numerical = n
	}
	return agg
}

func orDefault[T ~string](v, def T) T {
	if v == "" {
		return def
	}
	return v
}

// AggregateVerdicts combines verdicts with rs's modes, as Evaluate does: the
// one aggregation, also of verdicts a person corrected.
func AggregateVerdicts(rs *Ruleset, verdicts []Verdict) Aggregate { return aggregate(rs, verdicts) }
