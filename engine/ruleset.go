package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Limits on a ruleset. They keep one request's prompt and report bounded; the
// JSON Schema in schemas/ruleset.schema.json states the same numbers.
const (
	MaxRules       = 500
	MaxRuleIDChars = 128
	// MaxRuleTextChars bounds rule_text and not_applicable_text, in characters
	// (code points, as JSON Schema's maxLength counts them).
	MaxRuleTextChars = 8192
	// MaxScores bounds a numerical rule's score set, given or materialised.
	MaxScores = 1001
)

// RulesetError is one problem with a ruleset. RuleIndex is -1 for problems of
// the ruleset itself; Field is a path inside the ruleset (RuleIndex -1) or
// inside the rule, empty when the problem is the object itself.
type RulesetError struct {
	RulesetID string
	RuleIndex int
	RuleID    string
	Field     string
	Problem   string
}

func (e *RulesetError) Error() string {
	var b strings.Builder
	b.WriteString("ruleset")
	if e.RulesetID != "" {
		fmt.Fprintf(&b, " %q", e.RulesetID)
	}
	if e.RuleIndex >= 0 {
		fmt.Fprintf(&b, ": rules[%d]", e.RuleIndex)
		if e.RuleID != "" {
			fmt.Fprintf(&b, " (rule_id %q)", e.RuleID)
		}
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Problem)
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidRuleset) hold for every RulesetError.
func (e *RulesetError) Is(target error) bool { return target == ErrInvalidRuleset }

// joinRulesetErrors orders problems ruleset-level first, then by rule, keeping
// the order they were found in otherwise, and joins them (nil when none).
func joinRulesetErrors(problems []*RulesetError) error {
	if len(problems) == 0 {
		return nil
	}
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].RuleIndex < problems[j].RuleIndex })
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// ParseRuleset reads a ruleset from JSON (a document starting with '{') or
// YAML, rejects unknown fields and wrong value types with their exact place,
// then checks it and resolves its defaults (see Validate). Every problem found
// is reported; each one matches errors.Is(err, ErrInvalidRuleset) and
// errors.As(err, **RulesetError).
func ParseRuleset(data []byte) (*Ruleset, error) {
	doc, err := decodeDocument(data)
	if err != nil {
		return nil, &RulesetError{RuleIndex: -1, Problem: err.Error()}
	}
	p := rulesetParser{ruleTypeErr: map[int]bool{}}
	rs := p.ruleset(doc)
	if rs == nil {
		return nil, joinRulesetErrors(p.problems)
	}
	// Semantic checks run on what could be read. A value of the wrong type is
	// left unset, so checks that could only echo it (a "missing" rule_text
	// that was a number) are dropped: for the rule it belongs to, or for the
	// whole ruleset when the bad value sat at ruleset level (type and the
	// global score config shape every rule).
	for _, problem := range rs.check() {
		if p.rulesetTypeErr || (problem.RuleIndex >= 0 && p.ruleTypeErr[problem.RuleIndex]) {
			continue
		}
		p.problems = append(p.problems, problem)
	}
	if err := joinRulesetErrors(p.problems); err != nil {
		return nil, err
	}
	return rs, nil
}

// Validate checks the ruleset and resolves its defaults in place: the ruleset
// type (boolean), each rule's type (the ruleset's), the aggregations (all,
// mean), weights (1), and each numerical rule's score set (its own
// possible_scores, else the global min..max by increment), deduplicated and
// sorted ascending. Calling it again changes nothing and writes nothing, so a
// validated ruleset may be shared and validated again by concurrent requests.
// A ruleset that fails may be left partly resolved.
// All problems are reported, joined; each matches errors.Is(err, ErrInvalidRuleset).
func (rs *Ruleset) Validate() error {
	if rs == nil {
		return &RulesetError{RuleIndex: -1, Problem: "no ruleset"}
	}
	return joinRulesetErrors(rs.check())
}

const problemNoScores = "numerical rule has no score set: give numerical_rule_config.possible_scores or a global_numerical_rule_config"

func (rs *Ruleset) check() []*RulesetError {
	var problems []*RulesetError
	add := func(ruleIndex int, ruleID, field, format string, args ...any) {
		problems = append(problems, &RulesetError{
			RulesetID: rs.ID, RuleIndex: ruleIndex, RuleID: ruleID, Field: field,
			Problem: fmt.Sprintf(format, args...),
		})
	}

	switch rs.Type {
	case "":
		rs.Type = Boolean
	case Boolean, Numerical:
	default:
		add(-1, "", "type", "unknown rule type %q (want boolean or numerical)", rs.Type)
	}
	switch rs.BooleanAggregation {
	case "":
		rs.BooleanAggregation = AggregateAll
	case AggregateAll, AggregateAny, AggregateMajority:
	default:
		add(-1, "", "boolean_aggregation", "unknown aggregation %q (want all, any or majority)", rs.BooleanAggregation)
	}
	switch rs.NumericalAggregation {
	case "":
		rs.NumericalAggregation = AggregateMean
	case AggregateMean, AggregateSum, AggregateWeightedMean:
	default:
		add(-1, "", "numerical_aggregation", "unknown aggregation %q (want mean, sum or weighted_mean)", rs.NumericalAggregation)
	}

	global, globalOK := rs.globalScores(add)

	if len(rs.Rules) == 0 {
		add(-1, "", "rules", "no rules: give at least one")
	}
	if len(rs.Rules) > MaxRules {
		add(-1, "", "rules", "too many rules: %d (at most %d)", len(rs.Rules), MaxRules)
	}

	firstIndex := make(map[string]int, len(rs.Rules))
	var needGlobal []string // rule ids of numerical rules that use the global score set
	for i := range rs.Rules {
		r := &rs.Rules[i]
		if problem := ruleIDProblem(r.RuleID); problem != "" {
			add(i, r.RuleID, "rule_id", "%s", problem)
		} else if first, dup := firstIndex[r.RuleID]; dup {
			add(i, r.RuleID, "rule_id", "duplicate rule_id: rules[%d] has it too", first)
		} else {
			firstIndex[r.RuleID] = i
		}

		if strings.TrimSpace(r.RuleText) == "" {
			add(i, r.RuleID, "rule_text", "missing or blank")
		} else if n := utf8.RuneCountInString(r.RuleText); n > MaxRuleTextChars {
			add(i, r.RuleID, "rule_text", "too long: %d characters (at most %d)", n, MaxRuleTextChars)
		}
		if n := utf8.RuneCountInString(r.NotApplicableText); n > MaxRuleTextChars {
			add(i, r.RuleID, "not_applicable_text", "too long: %d characters (at most %d)", n, MaxRuleTextChars)
		}

		if r.Weight == nil {
			one := 1.0
			r.Weight = &one
		} else if w := *r.Weight; !(w > 0) || math.IsInf(w, 0) {
			add(i, r.RuleID, "weight", "must be a finite number greater than 0 (got %v)", w)
		}

		if r.Type == "" && (rs.Type == Boolean || rs.Type == Numerical) {
			r.Type = rs.Type
		}
		switch r.Type {
		case Boolean:
			if r.NumericalRuleConfig != nil {
				add(i, r.RuleID, "numerical_rule_config", "only numerical rules take a numerical_rule_config; this rule is boolean")
			}
		case Numerical:
			switch {
			case r.NumericalRuleConfig != nil && r.NumericalRuleConfig.PossibleScores != nil:
				scores := r.NumericalRuleConfig.PossibleScores
				switch {
				case len(scores) == 0:
					add(i, r.RuleID, "numerical_rule_config.possible_scores", "must not be empty")
				case len(scores) > MaxScores:
					add(i, r.RuleID, "numerical_rule_config.possible_scores", "too many scores: %d (at most %d)", len(scores), MaxScores)
				case !sortedUnique(scores):
					scores = slices.Clone(scores)
					slices.Sort(scores)
					r.NumericalRuleConfig.PossibleScores = slices.Compact(scores)
				}
			case rs.GlobalNumericalRuleConfig == nil:
				add(i, r.RuleID, "numerical_rule_config.possible_scores", "%s", problemNoScores)
			case globalOK:
				if r.NumericalRuleConfig == nil {
					r.NumericalRuleConfig = &NumericalRuleConfig{}
				}
				r.NumericalRuleConfig.PossibleScores = slices.Clone(global)
			default:
				needGlobal = append(needGlobal, r.RuleID)
			}
		case "":
			// The ruleset type is unknown and already reported.
		default:
			add(i, r.RuleID, "type", "unknown rule type %q (want boolean or numerical)", r.Type)
		}
	}

	// The global range is only required to be complete once a rule uses it.
	if g := rs.GlobalNumericalRuleConfig; len(needGlobal) > 0 && g != nil {
		for _, f := range []struct {
			name  string
			value *int
		}{{"min_score", g.MinScore}, {"max_score", g.MaxScore}} {
			if f.value == nil {
				add(-1, "", "global_numerical_rule_config."+f.name, "missing, and needed by the numerical rules without possible_scores: %s", strings.Join(needGlobal, ", "))
			}
		}
	}
	return problems
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
	problem := fmt.Sprintf("must be %s (got %s)", want, describeJSONType(got))
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
		"numerical_aggregation", "generate_report", "nested_rulesets", "filter_criteria", "rules"}
	ruleFields = []string{"rule_id", "rule_text", "type", "numerical_rule_config", "not_applicable_text", "name", "weight"}
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

// decodeDocument reads one JSON document (when the data starts with '{') or
// one YAML document into plain values: map[string]any, []any, string, bool,
// nil and numbers (json.Number from JSON; int, uint64 or float64 from YAML).
// Errors name the line and column where the syntax broke.
func decodeDocument(data []byte) (any, error) {
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, errors.New("empty document")
	}
	if trimmed[0] == '{' {
		return decodeJSON(data)
	}
	return decodeYAML(data)
}

func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keeps integers exact
	var v any
	if err := dec.Decode(&v); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			// Offset counts the bytes read, the offending one included.
			at := max(syntax.Offset-1, 0)
			line, col := lineAndColumn(data, at)
			return nil, fmt.Errorf("invalid JSON at line %d, column %d (byte offset %d): %s", line, col, at, syntax.Error())
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errors.New("invalid JSON: the document ends early")
		}
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		at := end + int64(len(data[end:])-len(bytes.TrimLeft(data[end:], " \t\r\n")))
		line, col := lineAndColumn(data, at)
		return nil, fmt.Errorf("invalid JSON: unexpected data after the document at line %d, column %d (byte offset %d)", line, col, at)
	}
	return v, nil
}

func decodeYAML(data []byte) (any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty document")
		}
		return nil, fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("invalid YAML: more than one document (remove the second '---')")
	}
	return normalizeYAML(v), nil
}

// normalizeYAML turns the maps YAML allows with non-string keys into the
// map[string]any JSON has, so that values can be marshalled as JSON later.
func normalizeYAML(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalizeYAML(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = normalizeYAML(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = normalizeYAML(e)
		}
		return v
	default:
		return v
	}
}

// lineAndColumn turns a byte offset into a 1-based line and column.
func lineAndColumn(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

func sortedMapKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// integerValue reads an integral number (3, 3.0 and 3e0 alike, as JSON Schema's
// "integer" does) that fits in an int.
func integerValue(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int(n), true
	case float64:
		return integralFloat(n)
	case json.Number:
		if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			return int(i), true
		}
		f, err := strconv.ParseFloat(n.String(), 64)
		if err != nil {
			return 0, false
		}
		return integralFloat(f)
	default:
		return 0, false
	}
}

func integralFloat(f float64) (int, bool) {
	// -2^63 is exact as a float64; 2^63 is the first value out of range.
	if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int(f), true
}

// numberValue reads a finite number; non-finite YAML values (.inf, .nan) are
// returned as they are for Validate to reject.
func numberValue(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := strconv.ParseFloat(n.String(), 64)
		return f, err == nil
	default:
		return 0, false
	}
}

// describeJSONType names a decoded value's JSON type for messages.
func describeJSONType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number, int, int64, uint64, float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}
