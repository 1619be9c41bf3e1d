package eval

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Margin is how far a system is ahead of the baseline, judged on the same
// cases in the same runs.
type Margin struct {
	System string `json:"system"`
	// BalancedAccuracy is the system's balanced accuracy minus the
	// baseline's, over every run's verdicts; nil when either has none.
	BalancedAccuracy *float64 `json:"balanced_accuracy"`
	// Cases is the margin's 95% interval over the cases judged (drawn
	// again with replacement); nil with fewer than CaseIntervalMinCases.
	Cases *CaseInterval `json:"cases_interval,omitempty"`
	// Runs is that margin run by run, with two runs or more; nil when some
	// run has none.
	Runs *Series `json:"runs,omitempty"`
	// WithinSpread, with two runs or more, says these runs cannot tell the
	// margin from none: the runs' mean margin is within two sample standard
	// deviations of their margins from zero.
	WithinSpread *bool `json:"within_spread,omitempty"`
	// WallRatio is the system's wall time over the baseline's, over every
	// run; WallRatioRuns the same run by run, with two runs or more.
	WallRatio     *float64 `json:"wall_ratio"`
	WallRatioRuns *Series  `json:"wall_ratio_runs,omitempty"`
}

// margins are each system's margin over the baseline, in the report's
// order; nil without a baseline. runWalls are each system's run times, in
// the same order as rep.Systems.
func margins(rep *Report, runWalls [][]time.Duration) []Margin {
	base := -1
	for i, s := range rep.Systems {
		if s.Name == SystemBaseline {
			base = i
		}
	}
	if base < 0 {
		return nil
	}
	b := &rep.Systems[base]
	var out []Margin
	for i := range rep.Systems {
		if i == base {
			continue
		}
		s := &rep.Systems[i]
		m := Margin{System: s.Name,
			BalancedAccuracy: diff(s.Overall.Boolean.BalancedAccuracy, b.Overall.Boolean.BalancedAccuracy),
			WallRatio:        quotient(s.Cost.Wall, b.Cost.Wall),
			Cases:            caseInterval(s.Outcomes, b.Outcomes),
		}
		if rep.Runs > 1 {
			var byRun, wallByRun []*float64
			for run := 1; run <= rep.Runs; run++ {
				inRun := func(o Outcome) bool { return o.Run == run }
				sm, bm := summarise(filter(s.Outcomes, inRun)), summarise(filter(b.Outcomes, inRun))
				byRun = append(byRun, diff(sm.Boolean.BalancedAccuracy, bm.Boolean.BalancedAccuracy))
				wallByRun = append(wallByRun, quotient(runWalls[i][run-1], runWalls[base][run-1]))
			}
			m.Runs, m.WallRatioRuns = newSeries(byRun), newSeries(wallByRun)
			if m.Runs != nil {
				within := math.Abs(m.Runs.Mean) <= 2*m.Runs.SampleStdDev
				m.WithinSpread = &within
			}
		}
		out = append(out, m)
	}
	return out
}

func diff(a, b *float64) *float64 {
	if a == nil || b == nil {
		return nil
	}
	d := *a - *b
	return &d
}

func quotient(a, b time.Duration) *float64 {
	if b <= 0 {
		return nil
	}
	q := float64(a) / float64(b)
	return &q
}

// writeMargins writes each system's margin over the baseline on a line:
// "engine over the baseline: balanced accuracy +6.2 pp (95% over 13 cases
// -1.5 to +13.0 pp: these cases cannot tell it from none) (runs +5.0,
// +7.4 pp; sample sd 1.7 pp: beyond the spread) · wall time 2.10× (runs
// 2.05–2.15×)".
func (r *Report) writeMargins(w io.Writer) {
	if len(r.Margins) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, m := range r.Margins {
		line := m.System + " over the baseline: balanced accuracy " + signedPP(m.BalancedAccuracy)
		if c := m.Cases; c != nil {
			verdict := "these cases cannot tell it from none"
			if c.Excludes {
				verdict = "beyond what the cases vary"
			}
			line += fmt.Sprintf(" (95%% over %d cases %+.1f to %+.1f pp: %s)", c.Cases, 100*c.Low, 100*c.High, verdict)
		}
		if m.Runs != nil {
			runs := make([]string, len(m.Runs.Runs))
			for i, v := range m.Runs.Runs {
				runs[i] = fmt.Sprintf("%+.1f", 100*v)
			}
			verdict := "beyond the spread"
			if m.WithinSpread != nil && *m.WithinSpread {
				verdict = "within the spread: these runs cannot tell it from none"
			}
			line += fmt.Sprintf(" (runs %s pp; sample sd %.1f pp: %s)", strings.Join(runs, ", "), 100*m.Runs.SampleStdDev, verdict)
		}
		line += " · wall time "
		if m.WallRatio == nil {
			line += "-"
		} else {
			line += fmt.Sprintf("%.2f×", *m.WallRatio)
		}
		if m.WallRatioRuns != nil {
			line += fmt.Sprintf(" (runs %.2f–%.2f×)", m.WallRatioRuns.Min, m.WallRatioRuns.Max)
		}
		fmt.Fprintln(w, line+" the baseline's")
	}
}

// signedPP writes a difference of shares in percentage points with its
// sign: "+6.2 pp".
func signedPP(d *float64) string {
	if d == nil {
		return "-"
	}
	return fmt.Sprintf("%+.1f pp", 100**d)
}
