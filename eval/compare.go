package eval

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"rulevalidator/engine"
)

// Revised is ds with every case judged against rs, a new version of the
// cases' ruleset, for comparing the two: each case keeps the labels of the
// rules rs still has (a rule rs removed is judged by the old version
// alone), each with rs's score set. It refuses a label whose rule rs
// judges as another type (the label cannot score it), and a case left with
// no label (its ruleset is another one than rs: compare a dataset of one
// ruleset).
func Revised(ds *Dataset, rs *engine.Ruleset) (*Dataset, error) {
	if err := rs.Validate(); err != nil {
		return nil, err
	}
	rules := map[string]engine.Rule{}
	for _, r := range rs.AllRules() {
		rules[r.RuleID] = r
	}
	out := *ds
	out.Cases = make([]*Case, len(ds.Cases))
	for i, c := range ds.Cases {
		cc := *c
		cc.Ruleset = rs
		cc.Labels = nil
		for _, l := range c.Labels {
			r, ok := rules[l.RuleID]
			if !ok {
				continue
			}
			if r.Type != l.Type {
				return nil, fmt.Errorf("case %q: rule %q is labelled as %s, the new ruleset makes it %s: the labels cannot score it", c.ID, l.RuleID, l.Type, r.Type)
			}
			l.Allowed = r.AllowedScores()
			l.RuleWords = ruleWords(r)
			cc.Labels = append(cc.Labels, l)
		}
		if len(cc.Labels) == 0 && len(c.Labels) > 0 {
			oldID := ""
			if c.Ruleset != nil {
				oldID = c.Ruleset.ID
			}
			return nil, fmt.Errorf("case %q: none of its labelled rules is in the new ruleset %q (the case's is %q): compare a dataset of one ruleset", c.ID, rs.ID, oldID)
		}
		out.Cases[i] = &cc
	}
	return &out, nil
}

// Comparison is a dataset judged by the engine with two versions of its
// ruleset, verdict by verdict: the verdicts that flip from one version to
// the other, and how right each version is against the labels.
type Comparison struct {
	Dataset string `json:"dataset"`
	Model   string `json:"model"`
	Cases   int    `json:"cases"`
	// PerRule lists the labelled rules in the order they first appear.
	PerRule []RuleComparison `json:"per_rule"`
	Overall CompareTotals    `json:"overall"`
}

// RuleComparison is one rule over every case.
type RuleComparison struct {
	RuleID string `json:"rule_id"`
	// Old and New score each version's verdicts of the rule; a version
	// without the rule judged none (Verdicts 0).
	Old VersionScore `json:"old"`
	New VersionScore `json:"new"`
	// Flips are the cases whose verdict differs between the versions.
	Flips []Flip `json:"flips"`
	// Reused counts the new version's verdicts taken from the verdict
	// cache the old version's run filled.
	Reused int `json:"reused_from_cache"`
}

// VersionScore is how right one version's verdicts are.
type VersionScore struct {
	Verdicts int      `json:"verdicts"`
	Correct  int      `json:"correct"`
	Accuracy *float64 `json:"accuracy"`
}

func (v *VersionScore) add(o Outcome) {
	v.Verdicts++
	if o.Correct {
		v.Correct++
	}
	v.Accuracy = ratio(v.Correct, v.Verdicts)
}

// How a flip fares against the label.
const (
	FlipFixed     = "fixed"      // the old verdict was wrong, the new one is right
	FlipBroken    = "broken"     // the old verdict was right, the new one is wrong
	FlipBothWrong = "both wrong" // neither is right
)

// Flip is one case whose verdict on a rule differs between the versions:
// each verdict, and the label, as a person reads them ("pass", "fail", a
// score, "not applicable", "no answer").
type Flip struct {
	Case     string `json:"case"`
	RuleID   string `json:"rule_id"`
	Expected string `json:"expected"`
	Old      string `json:"old"`
	New      string `json:"new"`
	Change   string `json:"change"`
}

// CompareTotals sum the comparison over every rule.
type CompareTotals struct {
	Old    VersionScore `json:"old"`
	New    VersionScore `json:"new"`
	Flips  int          `json:"flips"`
	Fixed  int          `json:"fixed"`
	Broken int          `json:"broken"`
	Reused int          `json:"reused_from_cache"`
}

// Compare pairs the engine's verdicts of two reports on the same dataset,
// the first judged with the dataset's ruleset and the second with a new
// version (Revised), case by case and rule by rule. Both must be of one
// run.
func Compare(old, new *Report) (*Comparison, error) {
	if old.Runs != 1 || new.Runs != 1 {
		return nil, fmt.Errorf("eval: a comparison pairs single runs (got %d and %d)", old.Runs, new.Runs)
	}
	olds, news := old.System(SystemEngine), new.System(SystemEngine)
	if olds == nil || news == nil {
		return nil, fmt.Errorf("eval: a comparison needs the engine's verdicts in both reports")
	}
	out := &Comparison{Dataset: old.Dataset, Model: old.Model, Cases: old.Cases, PerRule: []RuleComparison{}}
	index := map[string]int{}
	rule := func(id string) *RuleComparison {
		i, ok := index[id]
		if !ok {
			i = len(out.PerRule)
			index[id] = i
			out.PerRule = append(out.PerRule, RuleComparison{RuleID: id, Flips: []Flip{}})
		}
		return &out.PerRule[i]
	}
	type pair struct{ c, r string }
	newOf := map[pair]Outcome{}
	for _, o := range news.Outcomes {
		newOf[pair{o.Case, o.RuleID}] = o
	}
	t := &out.Overall
	for _, o := range olds.Outcomes {
		rc := rule(o.RuleID)
		rc.Old.add(o)
		t.Old.add(o)
		n, ok := newOf[pair{o.Case, o.RuleID}]
		if !ok { // the new version has no such rule
			continue
		}
		if verdictKey(o) == verdictKey(n) {
			continue
		}
		f := Flip{Case: o.Case, RuleID: o.RuleID, Expected: expectedText(o), Old: verdictText(o), New: verdictText(n), Change: FlipBothWrong}
		switch {
		case n.Correct && !o.Correct:
			f.Change = FlipFixed
			t.Fixed++
		case o.Correct && !n.Correct:
			f.Change = FlipBroken
			t.Broken++
		}
		rc.Flips = append(rc.Flips, f)
		t.Flips++
	}
	for _, n := range news.Outcomes {
		rc := rule(n.RuleID)
		rc.New.add(n)
		t.New.add(n)
		if n.Cached {
			rc.Reused++
			t.Reused++
		}
	}
	return out, nil
}

// verdictText is an outcome's verdict as a person reads it.
func verdictText(o Outcome) string {
	if !o.Answered {
		return "no answer"
	}
	return valueText(o.Boolean, o.Numerical, o.NotApplicable)
}

// expectedText is the label of an outcome as a person reads it.
func expectedText(o Outcome) string {
	return valueText(o.ExpectedBoolean, o.ExpectedNumerical, o.ExpectedNotApplicable)
}

func valueText(b *bool, n *int, notApplicable bool) string {
	var s string
	switch {
	case b != nil && *b:
		s = "pass"
	case b != nil:
		s = "fail"
	case n != nil:
		s = strconv.Itoa(*n)
	default:
		s = "no value"
	}
	if notApplicable {
		s += " (not applicable)"
	}
	return s
}

// WriteTable renders the comparison for a person: each rule's accuracy
// under both versions, its flips and the verdicts reused from the cache,
// then every flip case by case.
func (c *Comparison) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	cases := "1 case"
	if c.Cases != 1 {
		cases = strconv.Itoa(c.Cases) + " cases"
	}
	fmt.Fprintf(ew, "Dataset %s · model %s · %s · the dataset's ruleset (old) against the new one\n\n", c.Dataset, c.Model, cases)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tOLD\tNEW\tFLIPS\tFIXED\tBROKEN\tREUSED")
	row := func(name string, o, n VersionScore, flips, fixed, broken, reused int) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", name, frac(o.Correct, o.Verdicts), scoreOrRemoved(n),
			flips, fixed, broken, strconv.Itoa(reused)+"/"+strconv.Itoa(n.Verdicts))
	}
	for _, r := range c.PerRule {
		fixed, broken := 0, 0
		for _, f := range r.Flips {
			switch f.Change {
			case FlipFixed:
				fixed++
			case FlipBroken:
				broken++
			}
		}
		row(r.RuleID, r.Old, r.New, len(r.Flips), fixed, broken, r.Reused)
	}
	t := c.Overall
	row("all", t.Old, t.New, t.Flips, t.Fixed, t.Broken, t.Reused)
	tw.Flush()
	if t.Flips == 0 {
		fmt.Fprintln(ew, "\nNo verdict flips.")
		return ew.err
	}
	fmt.Fprintln(ew, "\nFlips")
	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tCASE\tLABEL\tOLD\tNEW\tCHANGE")
	for _, r := range c.PerRule {
		for _, f := range r.Flips {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.RuleID, f.Case, f.Expected, f.Old, f.New, f.Change)
		}
	}
	tw.Flush()
	return ew.err
}

func scoreOrRemoved(v VersionScore) string {
	if v.Verdicts == 0 {
		return "removed"
	}
	return frac(v.Correct, v.Verdicts)
}
