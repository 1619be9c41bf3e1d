package eval

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"rulevalidator/engine"
)

// WriteTable renders the report for a person: the systems side by side, then
// per rule and per case.
func (r *Report) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	r.writeTitle(ew)
	r.writeSystems(ew)
	r.writeMargins(ew)
	r.writeOverruleSweeps(ew)
	r.writeConfusion(ew)
	r.writePerRule(ew)
	r.writePerCase(ew)
	r.writeKeptWithProblems(ew)
	r.writeFailures(ew)
	return ew.err
}

// writeTitle writes the line naming the dataset, the model and how much was
// judged.
func (r *Report) writeTitle(w io.Writer) {
	runs := "1 run"
	if r.Runs != 1 {
		runs = strconv.Itoa(r.Runs) + " runs"
	}
	cases := "1 case"
	if r.Cases != 1 {
		cases = strconv.Itoa(r.Cases) + " cases"
	}
	fmt.Fprintf(w, "Dataset %s · model %s · %s, %d labelled verdicts per run · %s\n\n", r.Dataset, r.Model, cases, r.Rules, runs)
}

// metricTable is the table of the systems side by side: one row a metric,
// one column a system.
type metricTable struct {
	tw      *tabwriter.Writer
	systems []SystemReport
}

// row writes the metric name and its value for each system.
func (t metricTable) row(name string, cell func(s *SystemReport) string) {
	line := name
	for i := range t.systems {
		line += "\t" + cell(&t.systems[i])
	}
	fmt.Fprintln(t.tw, line)
}

// writeSystems writes the systems side by side, a section of rows for each
// thing measured; confidence, routing and the spread between runs only when
// there is something to show.
func (r *Report) writeSystems(w io.Writer) {
	t := metricTable{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0), systems: r.Systems}
	header := "METRIC"
	for _, s := range r.Systems {
		header += "\t" + strings.ToUpper(s.Name)
	}
	fmt.Fprintln(t.tw, header)
	accuracyRows(t)
	if r.hasNotMentioned() {
		notMentionedRows(t)
	}
	if r.hasConfidence() {
		confidenceRows(t)
	}
	if r.hasRouting() {
		routingRows(t)
	}
	answerRows(t)
	rationaleRows(t)
	evidenceRows(t)
	costRows(t)
	if r.Runs > 1 {
		spreadRows(t, r.hasNotMentioned())
	}
	t.tw.Flush()
}

// accuracyRows: how many verdicts were right, overall and by kind.
func accuracyRows(t metricTable) {
	t.row("verdict accuracy", func(s *SystemReport) string { return frac(s.Overall.Correct, s.Overall.Verdicts) })
	t.row("  kept with problems left out", func(s *SystemReport) string {
		m := s.Overall
		return frac(m.Correct-m.KeptCorrect, m.Verdicts-m.KeptWithProblems)
	})
	t.row("  boolean", func(s *SystemReport) string { return frac(s.Overall.Boolean.Correct, s.Overall.Boolean.Verdicts) })
	t.row("  boolean balanced (pass, fail recall)", func(s *SystemReport) string {
		b := s.Overall.Boolean
		if b.BalancedAccuracy == nil {
			return "-"
		}
		c := b.Confusion
		return fmt.Sprintf("%s (%s, %s)", pct(*b.BalancedAccuracy),
			fracShort(c.TruePass, c.TruePass+c.FalseFail+c.NoAnswerPass), fracShort(c.TrueFail, c.TrueFail+c.FalsePass+c.NoAnswerFail))
	})
	t.row("  numerical exact", func(s *SystemReport) string {
		return frac(s.Overall.Numerical.Exact, s.Overall.Numerical.Verdicts)
	})
	t.row("  numerical ±1 step", func(s *SystemReport) string {
		return frac(s.Overall.Numerical.WithinOne, s.Overall.Numerical.Verdicts)
	})
	t.row("  not-applicable flag", func(s *SystemReport) string {
		return frac(s.Overall.NotApplicable.Correct, s.Overall.NotApplicable.Verdicts)
	})
	t.row("  not-applicable found", func(s *SystemReport) string {
		return frac(s.Overall.NotApplicable.Flagged, s.Overall.NotApplicable.Labelled)
	})
	t.row("  not-applicable precision", func(s *SystemReport) string {
		return frac(s.Overall.NotApplicable.Flagged, s.Overall.NotApplicable.FlaggedTotal)
	})
}

// notMentionedRows: where the material does not say, how often the judge
// said so, and how often it said so where the material does say.
func notMentionedRows(t metricTable) {
	t.row("not mentioned said", func(s *SystemReport) string {
		return frac(s.Overall.NotMentioned.Said, s.Overall.NotMentioned.Labelled)
	})
	t.row("  not mentioned precision", func(s *SystemReport) string {
		return frac(s.Overall.NotMentioned.Said, s.Overall.NotMentioned.SaidTotal)
	})
}

// rationaleRows: rationales that restate the rule or do not end a sentence.
func rationaleRows(t metricTable) {
	t.row("rationales restating the rule", func(s *SystemReport) string {
		return frac(s.Overall.Rationales.Restating, s.Overall.Rationales.Rationales)
	})
	t.row("  not ending a sentence", func(s *SystemReport) string {
		return frac(s.Overall.Rationales.Unended, s.Overall.Rationales.Rationales)
	})
	t.row("  none given", func(s *SystemReport) string { return strconv.Itoa(s.Overall.Rationales.Empty) })
}

// confidenceRows: how well the confidence separates right verdicts from
// wrong ones, and how many wrong ones reviewing the least confident share
// would catch.
func confidenceRows(t metricTable) {
	t.row("confidence AUROC", func(s *SystemReport) string {
		if c := s.Overall.Confidence; c != nil && c.AUROC != nil {
			return strconv.FormatFloat(*c.AUROC, 'f', 2, 64)
		}
		return "-"
	})
	for i, share := range ReviewShares {
		t.row(fmt.Sprintf("  wrong caught reviewing %d%%", int(math.Round(100*share))), func(s *SystemReport) string {
			if c := s.Overall.Confidence; c != nil && i < len(c.Caught) {
				return short(c.Caught[i].Caught)
			}
			return "-"
		})
	}
}

// routingRows: how many verdicts review routing sent to a person, and how
// many of the wrong ones among them.
func routingRows(t metricTable) {
	t.row("routed to review", func(s *SystemReport) string {
		return frac(s.Overall.Routing.Routed, s.Overall.Routing.Answered)
	})
	t.row("  wrong ones routed", func(s *SystemReport) string {
		return frac(s.Overall.Routing.WrongRouted, s.Overall.Routing.Wrong)
	})
}

// answerRows: the verdicts not given, and those kept with problems.
func answerRows(t metricTable) {
	t.row("unanswered", func(s *SystemReport) string { return strconv.Itoa(s.Overall.Unanswered) })
	t.row("kept with problems (correct)", func(s *SystemReport) string {
		return fmt.Sprintf("%d (%d)", s.Overall.KeptWithProblems, s.Overall.KeptCorrect)
	})
}

// evidenceRows: the quotes against the gold spans, and their anchoring.
func evidenceRows(t metricTable) {
	t.row("evidence precision (chars)", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.QuotedCharsInGold, s.Overall.Evidence.QuotedChars)
	})
	t.row("  quotes overlapping gold", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.Hits, s.Overall.Evidence.Judged)
	})
	t.row("evidence recall (chars)", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.GoldCharsCovered, s.Overall.Evidence.GoldChars)
	})
	t.row("  gold spans overlapped", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.GoldFound, s.Overall.Evidence.Gold)
	})
	t.row("  verdicts with gold overlapping it", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.WithGoldHit, s.Overall.Evidence.WithGold)
	})
	t.row("quotes anchored", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.Anchored, s.Overall.Evidence.Quotes)
	})
	t.row("pages right (as cited)", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.PagesRight, s.Overall.Evidence.JudgedAnchored)
	})
	t.row("  pages corrected", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.PagesCorrected, s.Overall.Evidence.JudgedAnchored)
	})
}

// costRows: what the verdicts cost, in re-asks, model calls, tokens and
// time. What the model's client did not observe shows as "-".
func costRows(t metricTable) {
	t.row("re-asks", func(s *SystemReport) string {
		if s.Reasks == nil {
			return "-"
		}
		return reaskSummary(s.Reasks)
	})
	t.row("rules decided without the model (filtered, checked)", func(s *SystemReport) string {
		return fmt.Sprintf("%d (%d, %d)", s.Cost.RulesFiltered+s.Cost.RulesChecked, s.Cost.RulesFiltered, s.Cost.RulesChecked)
	})
	t.row("model calls (failed)", func(s *SystemReport) string {
		return fmt.Sprintf("%d (%d)", s.Cost.Calls, s.Cost.FailedCalls)
	})
	t.row("  by purpose (time)", func(s *SystemReport) string { return purposeSummary(s.Cost.ByPurpose) })
	t.row("  HTTP attempts (failed)", func(s *SystemReport) string {
		if !s.Cost.AttemptsObserved {
			return "-"
		}
		return fmt.Sprintf("%d (%d)", s.Cost.Attempts, s.Cost.FailedAttempts)
	})
	t.row("  format refusals", func(s *SystemReport) string {
		if !s.Cost.AttemptsObserved {
			return "-"
		}
		return strconv.Itoa(s.Cost.FormatRefusals)
	})
	t.row("prompt tokens (cached)", func(s *SystemReport) string {
		return fmt.Sprintf("%d (%d)", s.Cost.PromptTokens, s.Cost.CachedTokens)
	})
	t.row("completion tokens", func(s *SystemReport) string { return strconv.Itoa(s.Cost.CompletionTokens) })
	t.row("model time", func(s *SystemReport) string {
		if !s.Cost.AttemptsObserved {
			return "-"
		}
		return s.Cost.ModelTime.Round(100 * time.Millisecond).String()
	})
	t.row("wall time", func(s *SystemReport) string { return s.Cost.Wall.Round(100 * time.Millisecond).String() })
}

// purposeSummary is the calls of each purpose with their time, in the
// order a request's calls come (engine.CallPurposes): "judge 17 (2m56s),
// check 17 (1m37s)"; "-" when none was counted.
func purposeSummary(by map[engine.CallPurpose]PurposeCost) string {
	if len(by) == 0 {
		return "-"
	}
	order := engine.CallPurposes()
	var rest []engine.CallPurpose
	for p := range by {
		if !slices.Contains(order, p) {
			rest = append(rest, p)
		}
	}
	slices.Sort(rest)
	var parts []string
	for _, p := range append(order, rest...) {
		c, ok := by[p]
		if !ok {
			continue
		}
		name := string(p)
		if name == "" {
			name = "other"
		}
		parts = append(parts, fmt.Sprintf("%s %d (%s)", name, c.Calls, c.Time.Round(time.Second)))
	}
	return strings.Join(parts, ", ")
}

// spreadRows: how much the runs agreed, and how far their accuracy and the
// other headline figures varied ("not mentioned" only where the dataset
// has labels for it).
func spreadRows(t metricTable, notMentioned bool) {
	t.row("runs agreeing", func(s *SystemReport) string {
		if s.Spread == nil {
			return "-"
		}
		return frac(s.Spread.AgreeingPairs, s.Spread.AnsweredPairs)
	})
	t.row("accuracy min–max (sample sd)", func(s *SystemReport) string {
		if s.Spread == nil {
			return "-"
		}
		return fmt.Sprintf("%s–%s (%.1f pp)", pct(s.Spread.Min), pct(s.Spread.Max), 100*s.Spread.SampleStdDev)
	})
	for _, f := range []struct {
		name string
		of   func(*Spread) *Series
		show bool
	}{
		{"balanced accuracy min–max (sample sd)", func(sp *Spread) *Series { return sp.BalancedAccuracy }, true},
		{"not mentioned said min–max (sample sd)", func(sp *Spread) *Series { return sp.NotMentionedSaid }, notMentioned},
		{"verdicts with gold overlapping min–max (sample sd)", func(sp *Spread) *Series { return sp.VerdictsOverlapping }, true},
		{"rationales restating min–max (sample sd)", func(sp *Spread) *Series { return sp.RationalesRestating }, true},
		{"rationales unended min–max (sample sd)", func(sp *Spread) *Series { return sp.RationalesUnended }, true},
	} {
		if !f.show {
			continue
		}
		t.row(f.name, func(s *SystemReport) string {
			if s.Spread == nil || f.of(s.Spread) == nil {
				return "-"
			}
			x := f.of(s.Spread)
			return fmt.Sprintf("%s–%s (%.1f pp)", pct(x.Min), pct(x.Max), 100*x.SampleStdDev)
		})
	}
	t.row("wall time min–max (sample sd)", func(s *SystemReport) string {
		if s.Spread == nil || s.Spread.WallSeconds == nil {
			return "-"
		}
		x := s.Spread.WallSeconds
		return fmt.Sprintf("%.1fs–%.1fs (%.1fs)", x.Min, x.Max, x.SampleStdDev)
	})
}

// writeConfusion writes each system's boolean confusion matrix on a line.
func (r *Report) writeConfusion(w io.Writer) {
	fmt.Fprintln(w)
	for _, s := range r.Systems {
		c := s.Overall.Boolean.Confusion
		fmt.Fprintf(w, "%s boolean confusion (expected → given): pass→pass %d, pass→fail %d, fail→pass %d, fail→fail %d, no answer %d\n",
			s.Name, c.TruePass, c.FalseFail, c.FalsePass, c.TrueFail, c.NoAnswerPass+c.NoAnswerFail)
	}
}

// writePerRule writes each rule's accuracy for every system, and the first
// system's evidence precision and recall.
func (r *Report) writePerRule(w io.Writer) {
	fmt.Fprintln(w, "\nPer rule")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "RULE\tTYPE"
	for _, s := range r.Systems {
		header += "\t" + strings.ToUpper(s.Name)
	}
	fmt.Fprintln(tw, header+"\t"+strings.ToUpper(r.Systems[0].Name)+" EVIDENCE P/R (CHARS)")
	if len(r.Systems) > 0 {
		for i, rr := range r.Systems[0].PerRule {
			line := rr.RuleID + "\t" + string(rr.Type)
			for _, s := range r.Systems {
				m := s.PerRule[i].Metrics
				line += "\t" + frac(m.Correct, m.Verdicts)
			}
			ev := rr.Metrics.Evidence
			line += "\t" + short(ev.CharPrecision) + " / " + short(ev.CharRecall)
			fmt.Fprintln(tw, line)
		}
	}
	tw.Flush()
}

// writePerCase writes each case's accuracy, tokens and time for every
// system.
func (r *Report) writePerCase(w io.Writer) {
	fmt.Fprintln(w, "\nPer case")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "CASE"
	for _, s := range r.Systems {
		name := strings.ToUpper(s.Name)
		header += "\t" + name + "\t" + name + " TOKENS\t" + name + " TIME"
	}
	fmt.Fprintln(tw, header)
	if len(r.Systems) > 0 {
		for i, cr := range r.Systems[0].PerCase {
			line := cr.Case
			for _, s := range r.Systems {
				c := s.PerCase[i]
				line += "\t" + frac(c.Metrics.Correct, c.Metrics.Verdicts) +
					"\t" + strconv.Itoa(c.Cost.PromptTokens+c.Cost.CompletionTokens) +
					"\t" + c.Cost.Wall.Round(100*time.Millisecond).String()
			}
			fmt.Fprintln(tw, line)
		}
	}
	tw.Flush()
}

// writeKeptWithProblems lists which verdicts were kept with problems, and
// why: the count above says how many, a reader checking a run needs which.
func (r *Report) writeKeptWithProblems(w io.Writer) {
	for _, s := range r.Systems {
		if s.Overall.KeptWithProblems == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s verdicts kept with problems\n", s.Name)
		for _, o := range s.Outcomes {
			if o.KeptWithProblems() {
				fmt.Fprintf(w, "  case %s run %d rule %s: %s\n", o.Case, o.Run, o.RuleID, strings.Join(o.Problems, "; "))
			}
		}
	}
}

// writeFailures lists the runs of a case that failed, by system.
func (r *Report) writeFailures(w io.Writer) {
	for _, s := range r.Systems {
		for _, f := range s.Errors {
			fmt.Fprintf(w, "\n%s: case %s run %d failed: %s", s.Name, f.Case, f.Run, f.Error)
		}
		if len(s.Errors) > 0 {
			fmt.Fprintln(w)
		}
	}
}

// reaskSummary is the re-ask count with its reasons, most frequent first:
// "3 (unanchored_quote 2, placeholder_rationale 1)".
func reaskSummary(counts map[string]int) string {
	total := 0
	reasons := make([]string, 0, len(counts))
	for r, n := range counts {
		total += n
		reasons = append(reasons, r)
	}
	if total == 0 {
		return "0"
	}
	slices.SortFunc(reasons, func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = r + " " + strconv.Itoa(counts[r])
	}
	return strconv.Itoa(total) + " (" + strings.Join(parts, ", ") + ")"
}

// hasRouting says whether review routing sent any system's verdicts to a
// person.
func (r *Report) hasRouting() bool {
	for _, s := range r.Systems {
		if s.Overall.Routing.Routed > 0 {
			return true
		}
	}
	return false
}

// hasNotMentioned says whether the dataset has labels whose material does
// not say (data_sufficiency false).
func (r *Report) hasNotMentioned() bool {
	return len(r.Systems) > 0 && r.Systems[0].Overall.NotMentioned.Labelled > 0
}

// hasConfidence says whether any system's verdicts had a confidence.
func (r *Report) hasConfidence() bool {
	for _, s := range r.Systems {
		if s.Overall.Confidence != nil {
			return true
		}
	}
	return false
}

// frac writes a ratio as a percentage with its counts, or "-" when nothing
// was counted.
func frac(num, den int) string {
	if den == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%d/%d)", pct(float64(num)/float64(den)), num, den)
}

// fracShort writes a ratio as a percentage, or "-" when nothing was counted.
func fracShort(num, den int) string {
	if den == 0 {
		return "-"
	}
	return pct(float64(num) / float64(den))
}

func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }

func short(p *float64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatFloat(100**p, 'f', 0, 64) + "%"
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
