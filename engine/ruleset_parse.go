package engine

import (
	"fmt"
	"strings"
)

// rulesetParser turns a decoded document into a Ruleset, recording unknown
// fields and values of the wrong type.
type rulesetParser struct {
	rulesetID string
	problems  []*RulesetError
	// rulesetTypeErr and ruleTypeErr note where a value had the wrong type,
	// so semantic checks that would only echo it can be dropped.
	rulesetTypeErr bool
	ruleTypeErr    map[int]bool
}

func (p *rulesetParser) add(ruleIndex int, ruleID, field, format string, args ...any) {
	p.problems = append(p.problems, &RulesetError{
		RulesetID: p.rulesetID, RuleIndex: ruleIndex, RuleID: ruleID, Field: field,
		Problem: fmt.Sprintf(format, args...),
	})
}

// typeErr records a value of the wrong type.
func (p *rulesetParser) typeErr(ruleIndex int, ruleID, field, want string, got any) {
	if ruleIndex < 0 {
		// Only these ruleset-level values shape the checks of every rule.
		if field == "" || field == "type" || field == "rules" || strings.HasPrefix(field, "global_numerical_rule_config") {
			p.rulesetTypeErr = true
		}
	} else {
		p.ruleTypeErr[ruleIndex] = true
	}
	problem := fmt.Sprintf("must be %s (got %s)", want, DescribeJSONType(got))
	if want == "a string" && yamlNumber(got) {
		problem += `; quote it in YAML, e.g. "1.0"`
	}
	p.add(ruleIndex, ruleID, field, "%s", problem)
}

// yamlNumber says whether v is a number as YAML decodes it (JSON numbers are
// json.Number), for the hint that an unquoted version or id is a number.
func yamlNumber(v any) bool {
	switch v.(type) {
	case int, int64, uint64, float64:
		return true
	}
	return false
}

var (
	rulesetFields = []string{"id", "version", "type", "global_numerical_rule_config", "boolean_aggregation",
		"numerical_aggregation", "generate_report", "cache", "review_below_confidence", "nested_rulesets", "filter_criteria", "rules"}
	ruleFields = []string{"rule_id", "rule_text", "type", "numerical_rule_config", "not_applicable_text", "name", "weight", "review_below_confidence"}
)

func (p *rulesetParser) ruleset(doc any) *Ruleset {
	obj, ok := doc.(map[string]any)
	if !ok {
		p.typeErr(-1, "", "", "an object", doc)
		return nil
	}
	rs := &Ruleset{}
	// The id first, so that every message can name the ruleset.
	if v, ok := obj["id"]; ok {
		if s, ok := v.(string); ok {
			rs.ID = s
			p.rulesetID = s
		}
	}
	str := func(field string, v any) string {
		s, ok := v.(string)
		if !ok {
			p.typeErr(-1, "", field, "a string", v)
		}
		return s
	}
	for _, key := range sortedMapKeys(obj) {
		v := obj[key]
		switch key {
		case "id":
			str(key, v)
		case "version":
			rs.Version = str(key, v)
		case "type":
			rs.Type = RuleType(str(key, v))
		case "boolean_aggregation":
			rs.BooleanAggregation = BooleanAggregation(str(key, v))
		case "numerical_aggregation":
			rs.NumericalAggregation = NumericalAggregation(str(key, v))
		case "generate_report":
			b, ok := v.(bool)
			if !ok {
				p.typeErr(-1, "", key, "true or false", v)
			}
			rs.GenerateReport = b
		case "cache":
			b, ok := v.(bool)
			if !ok {
				p.typeErr(-1, "", key, "true or false", v)
			}
			rs.Cache = &b
		case "review_below_confidence":
			t, ok := numberValue(v)
			if !ok {
				p.typeErr(-1, "", key, "a number from 0 to 1", v)
				continue
			}
			rs.ReviewBelowConfidence = &t
		case "nested_rulesets":
			rs.NestedRulesets = v
		case "filter_criteria":
			rs.FilterCriteria = v
		case "global_numerical_rule_config":
			rs.GlobalNumericalRuleConfig = p.globalConfig(v)
		case "rules":
			items, ok := v.([]any)
			if !ok {
				p.typeErr(-1, "", key, "an array", v)
				continue
			}
			rs.Rules = make([]Rule, len(items))
			for i, item := range items {
				p.rule(i, item, &rs.Rules[i])
			}
		default:
			p.add(-1, "", "", "unknown field %q (known: %s)", key, strings.Join(rulesetFields, ", "))
		}
	}
	return rs
}

func (p *rulesetParser) globalConfig(v any) *GlobalNumericalRuleConfig {
	const field = "global_numerical_rule_config"
	obj, ok := v.(map[string]any)
	if !ok {
		p.typeErr(-1, "", field, "an object", v)
		return nil
	}
	g := &GlobalNumericalRuleConfig{}
	for _, key := range sortedMapKeys(obj) {
		var dst **int
		switch key {
		case "min_score":
			dst = &g.MinScore
		case "max_score":
			dst = &g.MaxScore
		case "increment":
			dst = &g.Increment
		default:
			p.add(-1, "", field, "unknown field %q (known: min_score, max_score, increment)", key)
			continue
		}
		n, ok := integerValue(obj[key])
		if !ok {
			p.typeErr(-1, "", field+"."+key, "an integer", obj[key])
			continue
		}
		*dst = &n
	}
	return g
}

func (p *rulesetParser) rule(i int, v any, r *Rule) {
	obj, ok := v.(map[string]any)
	if !ok {
		p.typeErr(i, "", "", "an object", v)
		return
	}
	if id, ok := obj["rule_id"].(string); ok {
		r.RuleID = id
	}
	str := func(field string, v any) string {
		s, ok := v.(string)
		if !ok {
			p.typeErr(i, r.RuleID, field, "a string", v)
		}
		return s
	}
	for _, key := range sortedMapKeys(obj) {
		v := obj[key]
		switch key {
		case "rule_id":
			str(key, v)
		case "rule_text":
			r.RuleText = str(key, v)
		case "type":
			r.Type = RuleType(str(key, v))
		case "not_applicable_text":
			r.NotApplicableText = str(key, v)
		case "name":
			r.Name = str(key, v)
		case "weight":
			w, ok := numberValue(v)
			if !ok {
				p.typeErr(i, r.RuleID, key, "a finite number", v)
				continue
			}
			r.Weight = &w
		case "review_below_confidence":
			t, ok := numberValue(v)
			if !ok {
				p.typeErr(i, r.RuleID, key, "a number from 0 to 1", v)
				continue
			}
			r.ReviewBelowConfidence = &t
		case "numerical_rule_config":
			r.NumericalRuleConfig = p.numericalConfig(i, r.RuleID, v)
		default:
			p.add(i, r.RuleID, "", "unknown field %q (known: %s)", key, strings.Join(ruleFields, ", "))
		}
	}
}

func (p *rulesetParser) numericalConfig(i int, ruleID string, v any) *NumericalRuleConfig {
	const field = "numerical_rule_config"
	obj, ok := v.(map[string]any)
	if !ok {
		p.typeErr(i, ruleID, field, "an object", v)
		return nil
	}
	c := &NumericalRuleConfig{}
	for _, key := range sortedMapKeys(obj) {
		if key != "possible_scores" {
			p.add(i, ruleID, field, "unknown field %q (known: possible_scores)", key)
			continue
		}
		items, ok := obj[key].([]any)
		if !ok {
			p.typeErr(i, ruleID, field+".possible_scores", "an array of integers", obj[key])
			continue
		}
		// Non-nil even when empty: an explicit empty list is an error, not "use the global range".
		scores := make([]int, 0, len(items))
		for k, item := range items {
			n, ok := integerValue(item)
			if !ok {
				p.typeErr(i, ruleID, fmt.Sprintf("%s.possible_scores[%d]", field, k), "an integer", item)
				continue
			}
			scores = append(scores, n)
		}
		c.PossibleScores = scores
	}
	return c
}
