package engine

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"rulevalidator/engine/ruleexpr"
	"rulevalidator/verdict"
)

// RequestFacts are what a request says of itself besides its inputs, for the
// ruleset's filter and check expressions.
type RequestFacts struct {
	// Tenant is the request's tenant as expressions see it.
	Tenant string
	// MediaTypes are the documents' media types by document name; a
	// document without one is "".
	MediaTypes map[string]string
	// Options are the request's options that were set, by their JSON names
	// (generate_report, model, cache, callback_url).
	Options map[string]any
}

// activation is what the expressions of one request read.
func activation(in *Inputs, facts RequestFacts) ruleexpr.Activation {
	a := ruleexpr.Activation{Inputs: make(map[string]any, len(in.NamedInputs)), Options: facts.Options, Tenant: facts.Tenant}
	for _, ni := range in.NamedInputs {
		a.Inputs[ni.Name] = ni.Value
	}
	for _, group := range []struct {
		role string
		docs []Document
	}{{"primary", in.PrimaryDocs}, {"auxiliary", in.AuxiliaryDocs}} {
		for _, d := range group.docs {
			a.Documents = append(a.Documents, ruleexpr.Document{Name: d.Name, MediaType: facts.MediaTypes[d.Name], Role: group.role, Pages: len(d.Pages)})
		}
	}
	return a
}

// decision is what a tree ruleset's filters and checks decided for one
// request, before any model call.
type decision struct {
	// verdicts holds, in tree order, the verdicts decided without the
	// model; decided says which.
	verdicts []Verdict
	decided  []bool
	// model lists the rules (tree indexes) left for the model.
	model []int
	// excluded says, per group a filter left out, why.
	excluded          map[*groupNode]string
	filtered, checked int
}

// groupApplies is a group's own filter's answer for one request.
type groupApplies struct {
	applies bool
	reason  string // why not, or why it could not be decided
	failed  bool   // the filter could not be evaluated
	evs     []verdict.Evidence
}

// decide evaluates the filters, from the top level down to the rule, and
// the checks of t on one request. The first filter that is false makes the
// rule not applicable, with the reason naming it; one that fails on the
// request's values leaves the rule without a verdict, on insufficient
// data, saying why. Neither asks the model. Each expression runs within
// ctx's deadline and its own.
func (t *tree) decide(ctx context.Context, b *ruleexpr.Bound) decision {
	d := decision{verdicts: make([]Verdict, len(t.rules)), decided: make([]bool, len(t.rules)), excluded: map[*groupNode]string{}}
	groups := make(map[*groupNode]groupApplies, len(t.groups))
	var groupFilter func(g *groupNode) groupApplies
	groupFilter = func(g *groupNode) groupApplies {
		if ga, ok := groups[g]; ok {
			return ga
		}
		ga := groupApplies{applies: true}
		if g.parent != nil {
			ga = groupFilter(g.parent)
		}
		if ga.applies && g.filter != nil {
			what := "filter_criteria of " + describeGroup(g)
			ga = filterOutcome(ctx, g.filter, b, what)
			if !ga.applies && !ga.failed {
				d.excluded[g] = ga.reason
			}
		} else if !ga.applies && !ga.failed {
			d.excluded[g] = ga.reason
		}
		groups[g] = ga
		return ga
	}
	for i, tr := range t.rules {
		r := tr.rule
		ga := groupFilter(tr.group)
		if ga.applies && tr.filter != nil {
			ga = filterOutcome(ctx, tr.filter, b, fmt.Sprintf("filter_criteria of rule %q", r.RuleID))
		}
		switch {
		case ga.failed:
			d.verdicts[i], d.decided[i] = undecided(r, ga.reason, ga.evs), true
		case !ga.applies:
			d.verdicts[i], d.decided[i] = Verdict{RuleID: r.RuleID, Name: r.Name, Type: r.Type, DataSufficiency: true,
				NotApplicable: true, Rationale: ga.reason, Evidences: nonNil(ga.evs)}, true
			d.filtered++
		case tr.check != nil:
			d.verdicts[i], d.decided[i] = checkVerdict(ctx, r, tr.check, b), true
			d.checked++
		default:
			d.model = append(d.model, i)
		}
	}
	return d
}

// filterOutcome evaluates one filter, describing it as what.
func filterOutcome(ctx context.Context, p *ruleexpr.Program, b *ruleexpr.Bound, what string) groupApplies {
	evs, read := inputEvidence(p, b)
	ok, err := p.Bool(ctx, b)
	if err != nil {
		return groupApplies{failed: true, evs: evs,
			reason: fmt.Sprintf("whether the rule applies could not be decided: %s (%s) failed on this request: %v", what, p.Source, err)}
	}
	if ok {
		return groupApplies{applies: true}
	}
	return groupApplies{evs: evs, reason: fmt.Sprintf("not applicable: %s (%s) is false for this request%s", what, p.Source, read)}
}

// undecided is the verdict of a rule whose filter or check failed on the
// request's values: no output, insufficient data, the problem named.
func undecided(r *Rule, problem string, evs []verdict.Evidence) Verdict {
	return Verdict{RuleID: r.RuleID, Name: r.Name, Type: r.Type, DataSufficiency: false, Rationale: problem,
		Evidences: nonNil(evs), SufficiencyNote: problem, Problems: []string{problem}}
}

// checkVerdict judges r by its check, without the model.
func checkVerdict(ctx context.Context, r *Rule, p *ruleexpr.Program, b *ruleexpr.Bound) Verdict {
	evs, read := inputEvidence(p, b)
	if r.Type == verdict.Numerical {
		n, boolean, isBool, err := p.Number(ctx, b)
		if err != nil {
			return undecided(r, fmt.Sprintf("the check (%s) could not be evaluated on this request: %v", p.Source, err), evs)
		}
		scores := r.AllowedScores()
		var score int
		var how string
		switch {
		case isBool && boolean:
			score, how = scores[len(scores)-1], "true, the highest allowed score"
		case isBool:
			score, how = scores[0], "false, the lowest allowed score"
		default:
			score = nearestScore(scores, n)
			how = strconv.FormatFloat(n, 'g', -1, 64)
			if float64(score) != n {
				how += fmt.Sprintf(", the nearest allowed score being %d", score)
			}
		}
		return Verdict{RuleID: r.RuleID, Name: r.Name, Type: r.Type, DataSufficiency: true, NumericalOutput: &score,
			Rationale: fmt.Sprintf("Judged by its check (%s), which gave %s%s.", p.Source, how, read), Evidences: nonNil(evs)}
	}
	ok, err := p.Bool(ctx, b)
	if err != nil {
		return undecided(r, fmt.Sprintf("the check (%s) could not be evaluated on this request: %v", p.Source, err), evs)
	}
	return Verdict{RuleID: r.RuleID, Name: r.Name, Type: r.Type, DataSufficiency: true, BooleanOutput: &ok,
		Rationale: fmt.Sprintf("Judged by its check (%s), which is %t%s.", p.Source, ok, read), Evidences: nonNil(evs)}
}

// nearestScore is the allowed score nearest n, the lower on a tie.
func nearestScore(scores []int, n float64) int {
	best := scores[0]
	for _, s := range scores[1:] {
		if math.Abs(float64(s)-n) < math.Abs(float64(best)-n) {
			best = s
		}
	}
	return best
}

// inputEvidence is the evidence of an expression: each named input it reads
// that the request gives, its value verbatim, the input's name as origin and
// page 0; read says in words what was compared (", comparing
// contract_value = 250000 with the expression; cap was not given").
func inputEvidence(p *ruleexpr.Program, b *ruleexpr.Bound) (evs []verdict.Evidence, read string) {
	var given, missing []string
	for _, name := range p.Reads {
		text, ok := b.Value(name)
		if !ok {
			missing = append(missing, name)
			continue
		}
		given = append(given, name+" = "+text)
		evs = append(evs, verdict.Evidence{Text: text, SourceOrigin: name, SourcePageNumber: 0, Match: verdict.MatchNotDocument})
	}
	var s strings.Builder
	if len(given) > 0 {
		s.WriteString(" on the named inputs " + strings.Join(given, ", "))
	}
	if len(missing) > 0 {
		s.WriteString("; not given: " + strings.Join(missing, ", "))
	}
	return evs, s.String()
}

func nonNil(evs []verdict.Evidence) []verdict.Evidence {
	if evs == nil {
		return []verdict.Evidence{}
	}
	return evs
}
