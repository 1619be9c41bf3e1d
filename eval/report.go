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
)

// WriteTable renders the report for a person: the systems side by side, then
// per rule and per case.
func (r *Report) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	runs := "1 run"
	if r.Runs != 1 {
		runs = strconv.Itoa(r.Runs) + " runs"
	}
	cases := "1 case"
	if r.Cases != 1 {
		cases = strconv.Itoa(r.Cases) + " cases"
	}
	fmt.Fprintf(ew, "Dataset %s · model %s · %s, %d labelled verdicts per run · %s\n\n", r.Dataset, r.Model, cases, r.Rules, runs)

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	header := "METRIC"
	for _, s := range r.Systems {
		header += "\t" + strings.ToUpper(s.Name)
	}
	fmt.Fprintln(tw, header)
	row := func(name string, cell func(s *SystemReport) string) {
		line := name
		for i := range r.Systems {
			line += "\t" + cell(&r.Systems[i])
		}
		fmt.Fprintln(tw, line)
	}
	row("verdict accuracy", func(s *SystemReport) string { return frac(s.Overall.Correct, s.Overall.Verdicts) })
	row("  kept with problems left out", func(s *SystemReport) string {
		m := s.Overall
		return frac(m.Correct-m.KeptCorrect, m.Verdicts-m.KeptWithProblems)
	})
	row("  boolean", func(s *SystemReport) string { return frac(s.Overall.Boolean.Correct, s.Overall.Boolean.Verdicts) })
	row("  numerical exact", func(s *SystemReport) string {
		return frac(s.Overall.Numerical.Exact, s.Overall.Numerical.Verdicts)
	})
	row("  numerical ±1 step", func(s *SystemReport) string {
		return frac(s.Overall.Numerical.WithinOne, s.Overall.Numerical.Verdicts)
	})
	row("  not-applicable flag", func(s *SystemReport) string {
		return frac(s.Overall.NotApplicable.Correct, s.Overall.NotApplicable.Verdicts)
	})
	row("  not-applicable found", func(s *SystemReport) string {
		return frac(s.Overall.NotApplicable.Flagged, s.Overall.NotApplicable.Labelled)
	})
	row("  not-applicable precision", func(s *SystemReport) string {
		return frac(s.Overall.NotApplicable.Flagged, s.Overall.NotApplicable.FlaggedTotal)
	})
	if r.hasConfidence() {
		row("confidence AUROC", func(s *SystemReport) string {
			if c := s.Overall.Confidence; c != nil && c.AUROC != nil {
				return strconv.FormatFloat(*c.AUROC, 'f', 2, 64)
			}
			return "-"
		})
		for i, share := range ReviewShares {
			row(fmt.Sprintf("  wrong caught reviewing %d%%", int(math.Round(100*share))), func(s *SystemReport) string {
				if c := s.Overall.Confidence; c != nil && i < len(c.Caught) {
					return short(c.Caught[i].Caught)
				}
				return "-"
			})
		}
	}
	if r.hasRouting() {
		row("routed to review", func(s *SystemReport) string {
			return frac(s.Overall.Routing.Routed, s.Overall.Routing.Answered)
		})
		row("  wrong ones routed", func(s *SystemReport) string {
			return frac(s.Overall.Routing.WrongRouted, s.Overall.Routing.Wrong)
		})
	}
	row("unanswered", func(s *SystemReport) string { return strconv.Itoa(s.Overall.Unanswered) })
	row("kept with problems (correct)", func(s *SystemReport) string {
		return fmt.Sprintf("%d (%d)", s.Overall.KeptWithProblems, s.Overall.KeptCorrect)
	})
	row("evidence precision (chars)", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.QuotedCharsInGold, s.Overall.Evidence.QuotedChars)
	})
	row("  quotes overlapping gold", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.Hits, s.Overall.Evidence.Judged)
	})
	row("evidence recall (chars)", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.GoldCharsCovered, s.Overall.Evidence.GoldChars)
	})
	row("  gold spans overlapped", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.GoldFound, s.Overall.Evidence.Gold)
	})
	row("quotes anchored", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.Anchored, s.Overall.Evidence.Quotes)
	})
	row("pages right (as cited)", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.PagesRight, s.Overall.Evidence.JudgedAnchored)
	})
	row("  pages corrected", func(s *SystemReport) string {
		return frac(s.Overall.Evidence.PagesCorrected, s.Overall.Evidence.JudgedAnchored)
	})
	row("re-asks", func(s *SystemReport) string {
		if s.Reasks == nil {
			return "-"
		}
		return reaskSummary(s.Reasks)
	})
	row("rules decided without the model (filtered, checked)", func(s *SystemReport) string {
		return fmt.Sprintf("%d (%d, %d)", s.Cost.RulesFiltered+s.Cost.RulesChecked, s.Cost.RulesFiltered, s.Cost.RulesChecked)
	})
	row("model calls (failed)", func(s *SystemReport) string {
		return fmt.Sprintf("%d (%d)", s.Cost.Calls, s.Cost.FailedCalls)
	})
	row("  HTTP attempts (failed)", func(s *SystemReport) string {
		if !s.Cost.AttemptsObserved {
			return "-"
		}
		return fmt.Sprintf("%d (%d)", s.Cost.Attempts, s.Cost.FailedAttempts)
	})
	row("  format refusals", func(s *SystemReport) string {
		if !s.Cost.AttemptsObserved {
			return "-"
		}
		return strconv.Itoa(s.Cost.FormatRefusals)
	})
	row("prompt tokens (cached)", func(s *SystemReport) string {
		return fmt.Sprintf("%d (%d)", s.Cost.PromptTokens, s.Cost.CachedTokens)
	})
	row("completion tokens", func(s *SystemReport) string { return strconv.Itoa(s.Cost.CompletionTokens) })
	row("model time", func(s *SystemReport) string {
		if !s.Cost.AttemptsObserved {
			return "-"
		}
		return s.Cost.ModelTime.Round(100 * time.Millisecond).String()
	})
	row("wall time", func(s *SystemReport) string { return s.Cost.Wall.Round(100 * time.Millisecond).String() })
	if r.Runs > 1 {
		row("runs agreeing", func(s *SystemReport) string {
			if s.Spread == nil {
				return "-"
			}
			return frac(s.Spread.AgreeingPairs, s.Spread.AnsweredPairs)
		})
		row("accuracy min–max (sample sd)", func(s *SystemReport) string {
			if s.Spread == nil {
				return "-"
			}
			return fmt.Sprintf("%s–%s (%.1f pp)", pct(s.Spread.Min), pct(s.Spread.Max), 100*s.Spread.SampleStdDev)
		})
	}
	tw.Flush()

	fmt.Fprintln(ew)
	for _, s := range r.Systems {
		c := s.Overall.Boolean.Confusion
		fmt.Fprintf(ew, "%s boolean confusion (expected → given): pass→pass %d, pass→fail %d, fail→pass %d, fail→fail %d, no answer %d\n",
			s.Name, c.TruePass, c.FalseFail, c.FalsePass, c.TrueFail, c.NoAnswerPass+c.NoAnswerFail)
	}

	fmt.Fprintln(ew, "\nPer rule")
	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	header = "RULE\tTYPE"
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

	fmt.Fprintln(ew, "\nPer case")
	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	header = "CASE"
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

	// Which verdicts were kept with problems, and why: the count above
	// says how many, a reader checking a run needs which.
	for _, s := range r.Systems {
		if s.Overall.KeptWithProblems == 0 {
			continue
		}
		fmt.Fprintf(ew, "\n%s verdicts kept with problems\n", s.Name)
		for _, o := range s.Outcomes {
			if o.KeptWithProblems() {
				fmt.Fprintf(ew, "  case %s run %d rule %s: %s\n", o.Case, o.Run, o.RuleID, strings.Join(o.Problems, "; "))
			}
		}
	}
	for _, s := range r.Systems {
		for _, f := range s.Errors {
			fmt.Fprintf(ew, "\n%s: case %s run %d failed: %s", s.Name, f.Case, f.Run, f.Error)
		}
		if len(s.Errors) > 0 {
			fmt.Fprintln(ew)
		}
	}
	return ew.err
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
