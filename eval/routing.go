package eval

import "rulevalidator/engine"

// RoutingMetrics say what review routing is worth on answered verdicts:
// the share it sends to a person, and the share of the wrong verdicts
// among them (random review of as many catches the routed share).
type RoutingMetrics struct {
	Answered int `json:"answered"`
	Wrong    int `json:"wrong"`
	// Routed counts the verdicts that need review, WrongRouted the wrong
	// ones among them.
	Routed      int      `json:"routed"`
	WrongRouted int      `json:"wrong_routed"`
	RoutedShare *float64 `json:"routed_share"`
	// Caught is WrongRouted over Wrong; nil when none is wrong.
	Caught *float64 `json:"caught"`
	// ByReason counts, for each reason that routed a verdict, the verdicts
	// it routed and the wrong ones among them, in engine.ReviewReasons
	// order.
	ByReason []ReasonCount `json:"by_reason,omitempty"`
}

// ReasonCount is how many verdicts one review reason routed, and how many
// of them were wrong.
type ReasonCount struct {
	Reason engine.ReviewReason `json:"reason"`
	Routed int                 `json:"routed"`
	Wrong  int                 `json:"wrong"`
}

// routingMetrics measures the review routing of outs' answered verdicts.
func routingMetrics(outs []Outcome) RoutingMetrics {
	var m RoutingMetrics
	routed := map[engine.ReviewReason]int{}
	wrong := map[engine.ReviewReason]int{}
	for _, o := range outs {
		if !o.Answered {
			continue
		}
		m.Answered++
		if !o.Correct {
			m.Wrong++
		}
		if len(o.ReviewReasons) == 0 {
			continue
		}
		m.Routed++
		if !o.Correct {
			m.WrongRouted++
		}
		for _, r := range o.ReviewReasons {
			routed[r]++
			if !o.Correct {
				wrong[r]++
			}
		}
	}
	m.RoutedShare = ratio(m.Routed, m.Answered)
	m.Caught = ratio(m.WrongRouted, m.Wrong)
	for _, r := range engine.ReviewReasons() {
		if routed[r] > 0 {
			m.ByReason = append(m.ByReason, ReasonCount{Reason: r, Routed: routed[r], Wrong: wrong[r]})
		}
	}
	return m
}
