// Package rulesetdiff compares two versions of a ruleset before the new one
// is rolled out: the rules added, removed and changed, each changed rule
// field by field over the engine's rule model; what changed in the ruleset
// itself and in its nested rulesets; and, per rule, whether the verdicts the
// verdict cache holds for the old version are found again under the new one,
// decided by the cache key's own rule part (engine.VerdictKeyRule) and the
// cache's scope, not by a list kept here.
package rulesetdiff

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"rulevalidator/engine"
)

// Status is what became of a rule, or a nested ruleset, in the new version.
type Status string

const (
	Added     Status = "added"
	Removed   Status = "removed"
	Changed   Status = "changed"
	Unchanged Status = "unchanged"
)

// CacheStatus is what the new version does with a rule's cached verdicts.
type CacheStatus string

const (
	// CacheValid: the old version's cached verdicts are found again and
	// reused (for the same tenant, model, engine settings and material).
	CacheValid CacheStatus = "valid"
	// CacheInvalidated: they are no longer found; the rule is asked again,
	// or decided without the model.
	CacheInvalidated CacheStatus = "invalidated"
	// CacheNone: the old version left no verdicts of the rule to reuse (a
	// rule added, one it decided by its check, a ruleset that opted out),
	// or the new version has no such rule.
	CacheNone CacheStatus = "none"
)

// Version names one side of a diff. Source is where it was read from, set
// by the caller (a file, a registry record); Compare leaves it empty.
type Version struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	Source  string `json:"source,omitempty"`
}

// Change is one field that differs: its path in the ruleset's JSON form
// (rule_text, numerical_rule_config.possible_scores, inputs.region) and its
// value on each side in JSON, null where it is unset.
type Change struct {
	Field string          `json:"field"`
	Old   json.RawMessage `json:"old"`
	New   json.RawMessage `json:"new"`
}

// CacheEffect is what the new version does with a rule's cached verdicts,
// and why.
type CacheEffect struct {
	Status CacheStatus `json:"status"`
	Reason string      `json:"reason"`
}

// RuleDiff is one rule of either version. Group is the path of ids of the
// nested ruleset it is in ("" for the top level), in the new version or,
// for a removed rule, the old one. A rule moved to another group has a
// change of the pseudo-field "group".
type RuleDiff struct {
	RuleID  string      `json:"rule_id"`
	Status  Status      `json:"status"`
	Group   string      `json:"group,omitempty"`
	Changes []Change    `json:"changes,omitempty"`
	Cache   CacheEffect `json:"cache"`
}

// GroupDiff is a nested ruleset added, removed or changed, by its path of
// ids; Changes are its own fields (its rules are listed as rules).
type GroupDiff struct {
	Path    string   `json:"path"`
	Status  Status   `json:"status"`
	Changes []Change `json:"changes,omitempty"`
}

// Counts sum up a diff's rules.
type Counts struct {
	Added            int `json:"added"`
	Removed          int `json:"removed"`
	Changed          int `json:"changed"`
	Unchanged        int `json:"unchanged"`
	CacheValid       int `json:"cache_valid"`
	CacheInvalidated int `json:"cache_invalidated"`
}

// Diff is what changed from one ruleset version to another.
type Diff struct {
	Old Version `json:"old"`
	New Version `json:"new"`
	// Ruleset are the changes to the ruleset's own fields (id, version,
	// type, aggregations, score range, inputs, filter and the rest), and
	// the pseudo-field "rule order" when rules both versions have are in
	// another order.
	Ruleset []Change    `json:"ruleset"`
	Groups  []GroupDiff `json:"nested_rulesets"`
	// Rules are every rule of the new version in its order, then the
	// rules it removed in the old version's order.
	Rules  []RuleDiff `json:"rules"`
	Counts Counts     `json:"counts"`
}

// Same says whether the versions have no difference at all.
func (d *Diff) Same() bool {
	return len(d.Ruleset) == 0 && len(d.Groups) == 0 && d.Counts.Unchanged == len(d.Rules)
}

// Rule returns the named rule's diff, or nil.
func (d *Diff) Rule(id string) *RuleDiff {
	for i := range d.Rules {
		if d.Rules[i].RuleID == id {
			return &d.Rules[i]
		}
	}
	return nil
}

// Compare validates both rulesets (resolving their defaults, as the service
// does before judging: rule types, weights, score sets) and compares them:
// every field of the engine's Ruleset and Rule types is compared, so that
// a change is reported as it reaches the judge, whether it was written on
// the rule or inherited (a ruleset's type or score range shows on each rule
// it changes).
func Compare(old, new *engine.Ruleset) (*Diff, error) {
	if old == nil || new == nil {
		return nil, fmt.Errorf("rulesetdiff: two rulesets are needed")
	}
	if err := old.Validate(); err != nil {
		return nil, fmt.Errorf("the old ruleset: %w", err)
	}
	if err := new.Validate(); err != nil {
		return nil, fmt.Errorf("the new ruleset: %w", err)
	}
	d := &Diff{
		Old:     Version{ID: old.ID, Version: old.Version},
		New:     Version{ID: new.ID, Version: new.Version},
		Ruleset: fieldChanges(reflect.ValueOf(*old), reflect.ValueOf(*new), "", rulesetStructure),
		Groups:  compareGroups(groups(old), groups(new)),
		Rules:   []RuleDiff{},
	}
	oldRules, newRules := placedRules(old), placedRules(new)
	if c, ok := orderChange(oldRules, newRules); ok {
		d.Ruleset = append(d.Ruleset, c)
	}
	byID := make(map[string]placedRule, len(oldRules))
	for _, r := range oldRules {
		byID[r.RuleID] = r
	}
	for _, nr := range newRules {
		or, ok := byID[nr.RuleID]
		if !ok {
			d.Rules = append(d.Rules, RuleDiff{RuleID: nr.RuleID, Status: Added, Group: nr.group,
				Cache: CacheEffect{CacheNone, "a new rule: nothing is cached for it yet"}})
			continue
		}
		rd := RuleDiff{RuleID: nr.RuleID, Status: Unchanged, Group: nr.group,
			Changes: fieldChanges(reflect.ValueOf(or.Rule), reflect.ValueOf(nr.Rule), "", nil)}
		if or.group != nr.group {
			rd.Changes = append(rd.Changes, Change{Field: "group", Old: jsonValue(or.group), New: jsonValue(nr.group)})
		}
		if len(rd.Changes) > 0 {
			rd.Status = Changed
		}
		rd.Cache = cacheEffect(old, or.Rule, new, nr.Rule)
		d.Rules = append(d.Rules, rd)
	}
	inNew := make(map[string]bool, len(newRules))
	for _, r := range newRules {
		inNew[r.RuleID] = true
	}
	for _, or := range oldRules {
		if !inNew[or.RuleID] {
			d.Rules = append(d.Rules, RuleDiff{RuleID: or.RuleID, Status: Removed, Group: or.group,
				Cache: CacheEffect{CacheNone, "removed: its cached verdicts are no longer read (they expire with the cache's time to live)"}})
		}
	}
	// Lists, never null, in the JSON form.
	if d.Ruleset == nil {
		d.Ruleset = []Change{}
	}
	if d.Groups == nil {
		d.Groups = []GroupDiff{}
	}
	for _, r := range d.Rules {
		switch r.Status {
		case Added:
			d.Counts.Added++
		case Removed:
			d.Counts.Removed++
		case Changed:
			d.Counts.Changed++
		case Unchanged:
			d.Counts.Unchanged++
		}
		switch r.Cache.Status {
		case CacheValid:
			d.Counts.CacheValid++
		case CacheInvalidated:
			d.Counts.CacheInvalidated++
		}
	}
	return d, nil
}

// cacheEffect says whether the verdicts cached for rule or of ruleset old
// are found again for rule nr of ruleset new, as the engine looks them up:
// within the scope of the ruleset's id, under the key whose rule part is
// engine.VerdictKeyRule, for a ruleset that caches and a rule the model
// judges (a rule with a check is decided without it).
func cacheEffect(old *engine.Ruleset, or engine.Rule, new *engine.Ruleset, nr engine.Rule) CacheEffect {
	switch {
	case !old.CachesVerdicts():
		return CacheEffect{CacheNone, "the old version does not cache verdicts (cache: false)"}
	case or.Check != "":
		return CacheEffect{CacheNone, "the old version decides the rule by its check, without the model: nothing is cached"}
	case !new.CachesVerdicts():
		return CacheEffect{CacheInvalidated, "the new version does not use the verdict cache (cache: false)"}
	case nr.Check != "":
		return CacheEffect{CacheInvalidated, "the new version decides the rule by its check, without the model"}
	case old.ID != new.ID:
		return CacheEffect{CacheInvalidated, "the ruleset id changed: cached verdicts are kept per ruleset id"}
	}
	if engine.VerdictKeyRule(or) == engine.VerdictKeyRule(nr) {
		return CacheEffect{CacheValid, "the rule as the model sees it is unchanged"}
	}
	var why []string
	for _, f := range keyFields(or, nr) {
		why = append(why, f+" changed")
	}
	if len(why) == 0 {
		return CacheEffect{CacheInvalidated, "the rule as the model sees it changed"}
	}
	return CacheEffect{CacheInvalidated, strings.Join(why, ", ")}
}

// keyFields are the fields of the rule that, each given its new value
// alone, change its part of the cache key: what a person changed that the
// model sees.
func keyFields(or, nr engine.Rule) []string {
	base := engine.VerdictKeyRule(or)
	ov, nv := reflect.ValueOf(or), reflect.ValueOf(nr)
	var fields []string
	for i := 0; i < ov.NumField(); i++ {
		f := ov.Type().Field(i)
		if !f.IsExported() || reflect.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
			continue
		}
		probe := or
		reflect.ValueOf(&probe).Elem().Field(i).Set(nv.Field(i))
		if engine.VerdictKeyRule(probe) != base {
			fields = append(fields, jsonName(f))
		}
	}
	return fields
}

// rulesetStructure are the Ruleset fields compared as structure (rules and
// groups, each on its own), not as values.
var rulesetStructure = []string{"Rules", "NestedRulesets"}

// fieldChanges compares every exported field of two structs of one type,
// by its JSON name under prefix: a struct (or a pointer to one) field by
// field, a map key by key, anything else as its JSON value. Fields named
// in skip are left out.
func fieldChanges(old, new reflect.Value, prefix string, skip []string) []Change {
	var out []Change
	t := old.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || slices.Contains(skip, f.Name) {
			continue
		}
		out = append(out, valueChanges(old.Field(i), new.Field(i), prefix+jsonName(f))...)
	}
	return out
}

func valueChanges(old, new reflect.Value, path string) []Change {
	ft := old.Type()
	if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
		zero := reflect.New(ft.Elem()).Elem()
		o, n := zero, zero
		if !old.IsNil() {
			o = old.Elem()
		}
		if !new.IsNil() {
			n = new.Elem()
		}
		return fieldChanges(o, n, path+".", nil)
	}
	switch ft.Kind() {
	case reflect.Struct:
		return fieldChanges(old, new, path+".", nil)
	case reflect.Map:
		if ft.Key().Kind() != reflect.String {
			break
		}
		var keys []string
		for _, m := range []reflect.Value{old, new} {
			for _, k := range m.MapKeys() {
				if !slices.Contains(keys, k.String()) {
					keys = append(keys, k.String())
				}
			}
		}
		slices.Sort(keys)
		var out []Change
		for _, k := range keys {
			kv := reflect.ValueOf(k).Convert(ft.Key())
			o, n := mapValue(old, kv), mapValue(new, kv)
			if string(o) != string(n) {
				out = append(out, Change{Field: path + "." + k, Old: o, New: n})
			}
		}
		return out
	}
	o, n := jsonValue(old.Interface()), jsonValue(new.Interface())
	if string(o) == string(n) {
		return nil
	}
	return []Change{{Field: path, Old: o, New: n}}
}

func mapValue(m, key reflect.Value) json.RawMessage {
	if m.IsNil() {
		return json.RawMessage("null")
	}
	v := m.MapIndex(key)
	if !v.IsValid() {
		return json.RawMessage("null")
	}
	return jsonValue(v.Interface())
}

// jsonValue is v in JSON; null for a nil pointer, slice or map and for an
// empty string, which the ruleset's JSON form leaves out.
func jsonValue(v any) json.RawMessage {
	null := json.RawMessage("null")
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Invalid:
		return null
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		if rv.IsNil() {
			return null
		}
	case reflect.String:
		if rv.Len() == 0 {
			return null
		}
	}
	data, err := json.Marshal(v)
	if err != nil { // the model's types are plain data
		return json.RawMessage(fmt.Sprintf("%q", fmt.Sprint(v)))
	}
	return data
}

// jsonName is a field's name in the ruleset's JSON form.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" || name == "-" {
		return f.Name
	}
	return name
}

// placedRule is a rule with the path of the group it is in.
type placedRule struct {
	engine.Rule
	group string
}

// placedRules lists rs's rules in tree order (its own, then each nested
// ruleset's), each with its group's path.
func placedRules(rs *engine.Ruleset) []placedRule {
	var out []placedRule
	var walk func(g *engine.Ruleset, path string)
	walk = func(g *engine.Ruleset, path string) {
		for _, r := range g.Rules {
			out = append(out, placedRule{r, path})
		}
		for i := range g.NestedRulesets {
			walk(&g.NestedRulesets[i], joinPath(path, g.NestedRulesets[i].ID))
		}
	}
	walk(rs, "")
	return out
}

// groups are rs's nested rulesets at every depth, by path, in reading order.
func groups(rs *engine.Ruleset) []pathGroup {
	var out []pathGroup
	var walk func(g *engine.Ruleset, path string)
	walk = func(g *engine.Ruleset, path string) {
		for i := range g.NestedRulesets {
			child := &g.NestedRulesets[i]
			p := joinPath(path, child.ID)
			out = append(out, pathGroup{p, child})
			walk(child, p)
		}
	}
	walk(rs, "")
	return out
}

type pathGroup struct {
	path string
	rs   *engine.Ruleset
}

func joinPath(path, id string) string {
	if path == "" {
		return id
	}
	return path + "/" + id
}

// compareGroups lists the nested rulesets added, removed or changed: the
// new version's in order, then those removed.
func compareGroups(old, new []pathGroup) []GroupDiff {
	var out []GroupDiff
	for _, ng := range new {
		i := slices.IndexFunc(old, func(g pathGroup) bool { return g.path == ng.path })
		if i < 0 {
			out = append(out, GroupDiff{Path: ng.path, Status: Added})
			continue
		}
		if cs := fieldChanges(reflect.ValueOf(*old[i].rs), reflect.ValueOf(*ng.rs), "", rulesetStructure); len(cs) > 0 {
			out = append(out, GroupDiff{Path: ng.path, Status: Changed, Changes: cs})
		}
	}
	for _, og := range old {
		if !slices.ContainsFunc(new, func(g pathGroup) bool { return g.path == og.path }) {
			out = append(out, GroupDiff{Path: og.path, Status: Removed})
		}
	}
	return out
}

// orderChange reports the rules both versions have when they come in
// another order: the order verdicts are listed in, and the order a call
// shows them to the model, though not their cache keys.
func orderChange(old, new []placedRule) (Change, bool) {
	kept := func(rules, other []placedRule) []string {
		var ids []string
		for _, r := range rules {
			if slices.ContainsFunc(other, func(o placedRule) bool { return o.RuleID == r.RuleID }) {
				ids = append(ids, r.RuleID)
			}
		}
		return ids
	}
	o, n := kept(old, new), kept(new, old)
	if slices.Equal(o, n) {
		return Change{}, false
	}
	return Change{Field: "rule order", Old: jsonValue(o), New: jsonValue(n)}, true
}
