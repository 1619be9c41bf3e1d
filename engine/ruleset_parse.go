package engine

import (
	"fmt"
	"slices"
	"strings"

	"rulevalidator/engine/ruleexpr"
	"rulevalidator/internal/jsonyaml"
	"rulevalidator/verdict"
)

// rulesetParser turns a decoded document into a Ruleset, recording unknown
// fields and values of the wrong type.
type rulesetParser struct {
	rulesetID string
	problems  []*RulesetError
	// group and groupOrder place the nested ruleset being read (see
	// RulesetError); groups counts the nested rulesets read so far.
	group      string
	groupOrder int
	nextOrder  int
	groups     int
	// rulesetTypeErr and ruleTypeErr note where a value had the wrong type,
	// so semantic checks that would only echo it can be dropped: a
	// ruleset-level one drops the checks of its group (the top level: of
	// all), a rule's the checks of that rule (keyed by ruleKey).
	rulesetTypeErr bool
	groupTypeErr   map[int]bool
	ruleTypeErr    map[string]bool
}

// ruleKey names rule i of the group placed at order.
func ruleKey(order, i int) string { return fmt.Sprintf("%d/%d", order, i) }

func (p *rulesetParser) add(ruleIndex int, ruleID, field, format string, args ...any) {
	p.problems = append(p.problems, &RulesetError{
		RulesetID: p.rulesetID, Group: p.group, groupOrder: p.groupOrder, RuleIndex: ruleIndex, RuleID: ruleID, Field: field,
		Problem: fmt.Sprintf(format, args...),
	})
}

// typeErr records a value of the wrong type.
func (p *rulesetParser) typeErr(ruleIndex int, ruleID, field, want string, got any) {
	if ruleIndex < 0 {
		// Only these ruleset-level values shape the checks of every rule.
		if field == "" || field == "type" || field == "rules" || strings.HasPrefix(field, "global_numerical_rule_config") {
			if p.groupOrder == 0 {
				p.rulesetTypeErr = true
			} else {
				p.groupTypeErr[p.groupOrder] = true
			}
		}
	} else {
		p.ruleTypeErr[ruleKey(p.groupOrder, ruleIndex)] = true
	}
	problem := fmt.Sprintf("must be %s (got %s)", want, jsonyaml.TypeName(got))
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
		"numerical_aggregation", "generate_report", "cache", "review_below_confidence", "inputs", "nested_rulesets", "filter_criteria", "rules"}
	// A nested ruleset takes the fields that shape its own rules and its
	// aggregation; the rest belong to the request's ruleset as a whole.
	nestedFields = []string{"id", "name", "type", "global_numerical_rule_config", "boolean_aggregation",
		"numerical_aggregation", "nested_rulesets", "filter_criteria", "required", "weight", "rules"}
	ruleFields = []string{"rule_id", "rule_text", "type", "numerical_rule_config", "not_applicable_text", "name", "weight",
		"filter_criteria", "check", "review_below_confidence"}
)

// ruleset reads the top-level ruleset.
func (p *rulesetParser) ruleset(doc any) *Ruleset {
	rs := &Ruleset{}
	if !p.rulesetInto(doc, rs, 0) {
		return nil
	}
	return rs
}

// rulesetInto reads a ruleset, nested at depth (0: the top level), into rs.
// It reports false when doc is not an object.
func (p *rulesetParser) rulesetInto(doc any, rs *Ruleset, depth int) bool {
	obj, ok := doc.(map[string]any)
	if !ok {
		p.typeErr(-1, "", "", "an object", doc)
		return false
	}
	// The id first, so that every message can name the ruleset.
	if v, ok := obj["id"]; ok {
		if s, ok := v.(string); ok {
			rs.ID = s
			if depth == 0 {
				p.rulesetID = s
			}
		}
	}
	known := rulesetFields
	if depth > 0 {
		known = nestedFields
	}
	str := func(field string, v any) string {
		s, ok := v.(string)
		if !ok {
			p.typeErr(-1, "", field, "a string", v)
		}
		return s
	}
	boolean := func(field string, v any) bool {
		b, ok := v.(bool)
		if !ok {
			p.typeErr(-1, "", field, "true or false", v)
		}
		return b
	}
	for _, key := range jsonyaml.SortedKeys(obj) {
		v := obj[key]
		if !slices.Contains(known, key) {
			if slices.Contains(rulesetFields, key) {
				p.add(-1, "", key, "only the top-level ruleset takes %s (a nested ruleset takes: %s)", key, strings.Join(nestedFields, ", "))
			} else {
				p.add(-1, "", "", "unknown field %q (known: %s)", key, strings.Join(known, ", "))
			}
			continue
		}
		switch key {
		case "id":
			str(key, v)
		case "name":
			rs.Name = str(key, v)
		case "required":
			rs.Required = boolean(key, v)
		case "weight":
			w, ok := numberValue(v)
			if !ok {
				p.typeErr(-1, "", key, "a finite number", v)
				continue
			}
			rs.Weight = &w
		case "inputs":
			rs.Inputs = p.inputs(v)
		case "version":
			rs.Version = str(key, v)
		case "type":
			rs.Type = verdict.RuleType(str(key, v))
		case "boolean_aggregation":
			rs.BooleanAggregation = verdict.BooleanAggregation(str(key, v))
		case "numerical_aggregation":
			rs.NumericalAggregation = verdict.NumericalAggregation(str(key, v))
		case "generate_report":
			rs.GenerateReport = boolean(key, v)
		case "cache":
			b := boolean(key, v)
			rs.Cache = &b
		case "review_below_confidence":
			t, ok := numberValue(v)
			if !ok {
				p.typeErr(-1, "", key, "a number from 0 to 1", v)
				continue
			}
			rs.ReviewBelowConfidence = &t
		case "nested_rulesets":
			rs.NestedRulesets = p.nested(v, depth)
		case "filter_criteria":
			rs.FilterCriteria = str(key, v)
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
		}
	}
	return true
}

// nested reads the nested rulesets of a ruleset at depth.
func (p *rulesetParser) nested(v any, depth int) []Ruleset {
	items, ok := v.([]any)
	if !ok {
		p.typeErr(-1, "", "nested_rulesets", "an array of rulesets", v)
		return nil
	}
	if depth+1 > MaxDepth {
		p.add(-1, "", "nested_rulesets", "nested deeper than %d levels (the limit)", MaxDepth)
		return nil
	}
	if p.groups+len(items) > MaxGroups {
		p.add(-1, "", "nested_rulesets", "too many nested rulesets: more than %d in the whole ruleset", MaxGroups)
		return nil
	}
	p.groups += len(items)
	out := make([]Ruleset, len(items))
	parent, parentOrder := p.group, p.groupOrder
	for i, item := range items {
		id := ""
		if obj, ok := item.(map[string]any); ok {
			id, _ = obj["id"].(string)
		}
		p.nextOrder++
		p.group, p.groupOrder = joinGroupPath(parent, i, id), p.nextOrder
		p.rulesetInto(item, &out[i], depth+1)
	}
	p.group, p.groupOrder = parent, parentOrder
	return out
}

// joinGroupPath names nested ruleset i of the group at parent.
func joinGroupPath(parent string, i int, id string) string {
	step := fmt.Sprintf("nested_rulesets[%d]", i)
	if id != "" {
		step += fmt.Sprintf(" (%q)", id)
	}
	if parent == "" {
		return step
	}
	return parent + " > " + step
}

// inputs reads the declaration of named inputs: name to type.
func (p *rulesetParser) inputs(v any) map[string]ruleexpr.Type {
	obj, ok := v.(map[string]any)
	if !ok {
		p.typeErr(-1, "", "inputs", "an object of input names to types", v)
		return nil
	}
	out := make(map[string]ruleexpr.Type, len(obj))
	for _, name := range jsonyaml.SortedKeys(obj) {
		s, ok := obj[name].(string)
		if !ok {
			p.typeErr(-1, "", "inputs."+name, "a string", obj[name])
			continue
		}
		out[name] = ruleexpr.Type(s)
	}
	return out
}

func (p *rulesetParser) globalConfig(v any) *GlobalNumericalRuleConfig {
	const field = "global_numerical_rule_config"
	obj, ok := v.(map[string]any)
	if !ok {
		p.typeErr(-1, "", field, "an object", v)
		return nil
	}
	g := &GlobalNumericalRuleConfig{}
	for _, key := range jsonyaml.SortedKeys(obj) {
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
	for _, key := range jsonyaml.SortedKeys(obj) {
		v := obj[key]
		switch key {
		case "rule_id":
			str(key, v)
		case "rule_text":
			r.RuleText = str(key, v)
		case "type":
			r.Type = verdict.RuleType(str(key, v))
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
		case "filter_criteria":
			r.FilterCriteria = str(key, v)
		case "check":
			r.Check = str(key, v)
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
	for _, key := range jsonyaml.SortedKeys(obj) {
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
