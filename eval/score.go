package eval

import (
	"slices"
	"strings"
	"unicode/utf8"

	"rulevalidator/engine"
	"rulevalidator/verdict"
)

// Outcome is one scored verdict: one rule of one case in one run.
type Outcome struct {
	Case   string           `json:"case"`
	RuleID string           `json:"rule_id"`
	Run    int              `json:"run"`
	Type   verdict.RuleType `json:"type"`

	ExpectedBoolean       *bool `json:"expected_boolean_output,omitempty"`
	ExpectedNumerical     *int  `json:"expected_numerical_output,omitempty"`
	ExpectedNotApplicable bool  `json:"expected_not_applicable"`
	// ExpectedDataSufficiency is false where the label says the material
	// does not say (Label.Insufficient).
	ExpectedDataSufficiency bool `json:"expected_data_sufficiency"`

	// Answered is false when no verdict came back for the rule (the call
	// failed, or the answer could not be read); the verdict counts as wrong.
	// Boolean is the verdict's as it gave it; where a boolean rule's verdict
	// gave none because it said the material does not say, it is scored as
	// false (scoredBoolean).
	Answered      bool  `json:"answered"`
	Boolean       *bool `json:"boolean_output,omitempty"`
	Numerical     *int  `json:"numerical_output,omitempty"`
	NotApplicable bool  `json:"not_applicable"`

	// OutputCorrect: the boolean or the score is the expected one.
	// WithinOneStep: a score at most one allowed score away (numerical only).
	// NotApplicableCorrect: the not-applicable flag is the expected one.
	// Correct: both the output and the flag are right.
	OutputCorrect        bool `json:"output_correct"`
	WithinOneStep        bool `json:"within_one_step,omitempty"`
	NotApplicableCorrect bool `json:"not_applicable_correct"`
	Correct              bool `json:"correct"`

	// Problems are what was still wrong with the answer when the engine
	// kept it after its re-asks ran out (engine.Verdict.Problems); such a
	// verdict is scored, and counted apart as kept with problems.
	Problems []string `json:"problems,omitempty"`
	// Confidence is the verdict's confidence (engine.Verdict.Confidence);
	// nil when nothing measured it.
	Confidence *float64 `json:"confidence,omitempty"`
	// ReviewReasons are why the verdict was routed to a person
	// (engine.Verdict.ReviewReasons); empty when it was not.
	ReviewReasons []engine.ReviewReason `json:"review_reasons,omitempty"`
	// Overruled says the engine turned the model's pass into a fail
	// (engine.Verdict.Overruled); Confidence is then the check's
	// probability that the rule is not met.
	Overruled bool `json:"overruled,omitempty"`
	// Rationale and DataSufficiency are the verdict's, for reading a run's
	// answers beside their scores.
	Rationale       string `json:"rationale,omitempty"`
	DataSufficiency bool   `json:"data_sufficiency"`
	// RationaleRestates says most of the rationale's words are the rule's
	// (restatesRule); RationaleUnended that it does not end a sentence.
	// Both are false for a verdict with no rationale.
	RationaleRestates bool `json:"rationale_restates_rule,omitempty"`
	RationaleUnended  bool `json:"rationale_unended,omitempty"`
	// Cached says the verdict was taken from the verdict cache (a run that
	// shares one with an earlier run: --revalidate-ruleset,
	// --compare-ruleset).
	Cached bool `json:"cached,omitempty"`

	Evidence EvidenceCounts `json:"evidence"`
	// Citations are the verdict's evidences in the model's order, each
	// with whether it lies on a gold span: what Evidence tallies, to be read
	// citation by citation (which of a verdict's citations decide it).
	Citations []Citation `json:"citations,omitempty"`
}

// Citation is one evidence of a verdict as scored.
type Citation struct {
	// PassageID is the passage cited (cite mode); "" for a quote.
	PassageID string `json:"passage_id,omitempty"`
	Document  string `json:"document"`
	Page      int    `json:"page"`
	// OnGold says it overlaps a gold span of its page; nil when the label
	// has no gold spans to judge it by.
	OnGold *bool `json:"on_gold,omitempty"`
}

// KeptWithProblems says the engine kept the verdict with content problems.
func (o Outcome) KeptWithProblems() bool { return len(o.Problems) > 0 }

// SaysNotMentioned says the verdict said the material does not say what
// the rule asks about: data_sufficiency false, or not applicable.
func (o Outcome) SaysNotMentioned() bool {
	return o.Answered && (!o.DataSufficiency || o.NotApplicable)
}

// scoredBoolean is the boolean a verdict is scored by: the one it gave; a
// verdict that gives none because it says the material does not say reads
// as false: it does not say the rule holds.
func scoredBoolean(given *bool, notApplicable, dataSufficiency bool) *bool {
	if given == nil && (notApplicable || !dataSufficiency) {
		f := false
		return &f
	}
	return given
}

// scoredBoolean is o's boolean as scored (scoredBoolean); nil for no answer.
func (o Outcome) scoredBoolean() *bool {
	if !o.Answered {
		return nil
	}
	return scoredBoolean(o.Boolean, o.NotApplicable, o.DataSufficiency)
}

// EvidenceCounts are the evidence tallies of one or more verdicts.
type EvidenceCounts struct {
	// Quotes and Anchored count every quote; Anchored ones were found in a
	// supplied document.
	Quotes   int `json:"quotes"`
	Anchored int `json:"anchored"`
	// Judged counts the quotes of verdicts whose label has gold spans (only
	// those can be judged); Hits are those whose anchored span overlaps a gold
	// span on the same page; PagesRight are those anchored whose page, as the
	// model cited it, holds a gold span of the same document; PagesCorrected
	// are those anchored on another page than the one the model cited.
	Judged         int `json:"judged_quotes"`
	JudgedAnchored int `json:"judged_anchored"`
	Hits           int `json:"hits"`
	PagesRight     int `json:"pages_right"`
	PagesCorrected int `json:"pages_corrected"`
	// Gold counts gold spans; GoldFound those overlapped by at least one quote.
	Gold      int `json:"gold"`
	GoldFound int `json:"gold_found"`
	// WithGold counts the verdicts whose label has gold spans, answered or
	// not; WithGoldHit those among them with a quote overlapping one.
	WithGold    int `json:"verdicts_with_gold"`
	WithGoldHit int `json:"verdicts_with_gold_hit"`
	// QuotedChars counts the characters (code points) of the judged quotes:
	// an anchored quote its span, any other its own text;
	// QuotedCharsInGold those at a position of the same document that a
	// gold span covers (offsets are positions in the whole document, so a
	// character inside a gold span is on its page). A quote not found in a
	// document has none inside.
	QuotedChars       int `json:"quoted_chars"`
	QuotedCharsInGold int `json:"quoted_chars_in_gold"`
	// GoldChars counts the characters of the gold spans of each verdict (a
	// character two spans share once); GoldCharsCovered those inside the
	// span of at least one of the verdict's anchored quotes.
	GoldChars        int `json:"gold_chars"`
	GoldCharsCovered int `json:"gold_chars_covered"`
}

func (a EvidenceCounts) add(b EvidenceCounts) EvidenceCounts {
	return EvidenceCounts{
		Quotes: a.Quotes + b.Quotes, Anchored: a.Anchored + b.Anchored,
		Judged: a.Judged + b.Judged, JudgedAnchored: a.JudgedAnchored + b.JudgedAnchored, Hits: a.Hits + b.Hits,
		PagesRight: a.PagesRight + b.PagesRight, PagesCorrected: a.PagesCorrected + b.PagesCorrected,
		Gold: a.Gold + b.Gold, GoldFound: a.GoldFound + b.GoldFound,
		WithGold: a.WithGold + b.WithGold, WithGoldHit: a.WithGoldHit + b.WithGoldHit,
		QuotedChars: a.QuotedChars + b.QuotedChars, QuotedCharsInGold: a.QuotedCharsInGold + b.QuotedCharsInGold,
		GoldChars: a.GoldChars + b.GoldChars, GoldCharsCovered: a.GoldCharsCovered + b.GoldCharsCovered,
	}
}

// scoreVerdict scores one verdict against its label; v is nil when no
// verdict came back.
func scoreVerdict(caseID string, run int, lab Label, v *engine.Verdict) Outcome {
	o := Outcome{
		Case: caseID, RuleID: lab.RuleID, Run: run, Type: lab.Type,
		ExpectedBoolean: lab.Boolean, ExpectedNumerical: lab.Numerical, ExpectedNotApplicable: lab.NotApplicable,
		ExpectedDataSufficiency: !lab.Insufficient,
	}
	if v == nil {
		o.Evidence = scoreEvidence(lab.Gold, nil)
		return o
	}
	o.Answered = true
	o.Problems = v.Problems
	o.Confidence = v.Confidence
	o.ReviewReasons = v.ReviewReasons
	o.Overruled = v.Overruled
	o.Rationale = v.Rationale
	o.DataSufficiency = v.DataSufficiency
	// The model's own words: an overrule's note before them would dilute a restatement.
	o.RationaleRestates = restatesRule(v.ModelRationale(), lab.RuleWords)
	o.RationaleUnended = strings.TrimSpace(v.Rationale) != "" && !endsSentence(v.Rationale)
	o.Cached = v.Cached != nil
	o.Numerical, o.NotApplicable = v.NumericalOutput, v.NotApplicable
	switch lab.Type {
	case verdict.Numerical:
		o.Boolean = v.BooleanOutput
		if v.NumericalOutput != nil && lab.Numerical != nil {
			o.OutputCorrect = *v.NumericalOutput == *lab.Numerical
			o.WithinOneStep = stepDistance(lab.Allowed, *lab.Numerical, *v.NumericalOutput) <= 1
		}
	default:
		o.Boolean = v.BooleanOutput
		scored := scoredBoolean(v.BooleanOutput, v.NotApplicable, v.DataSufficiency)
		o.OutputCorrect = scored != nil && lab.Boolean != nil && *scored == *lab.Boolean
	}
	// Where the material does not say, "not applicable" says so as well as
	// data_sufficiency false does: neither flag is wrong there.
	o.NotApplicableCorrect = v.NotApplicable == lab.NotApplicable || lab.Insufficient
	o.Correct = o.OutputCorrect && o.NotApplicableCorrect
	o.Evidence = scoreEvidence(lab.Gold, v.Evidences)
	for _, ev := range v.Evidences {
		c := Citation{PassageID: ev.PassageID, Document: ev.SourceOrigin, Page: ev.SourcePageNumber}
		if len(lab.Gold) > 0 {
			on := len(goldHit(lab.Gold, ev)) > 0
			c.OnGold = &on
		}
		o.Citations = append(o.Citations, c)
	}
	return o
}

// stepDistance is how many allowed scores apart want and got are; a score
// outside the set is infinitely far.
func stepDistance(allowed []int, want, got int) int {
	i, j := slices.Index(allowed, want), slices.Index(allowed, got)
	if i < 0 || j < 0 {
		return int(^uint(0) >> 1)
	}
	if i > j {
		return i - j
	}
	return j - i
}

// goldHit is the indexes of the gold spans ev overlaps: anchored in the
// same document, on the same page, the offsets overlapping.
func goldHit(gold []Span, ev verdict.Evidence) []int {
	if !ev.Anchored || ev.StartOffset == nil || ev.EndOffset == nil {
		return nil
	}
	var hits []int
	for i, g := range gold {
		if g.Document == ev.SourceOrigin && g.Page == ev.SourcePageNumber && *ev.StartOffset < g.End && g.Start < *ev.EndOffset {
			hits = append(hits, i)
		}
	}
	return hits
}

// scoreEvidence matches quotes to gold spans: a quote hits a span when it is
// anchored in the same document, on the same page, and the offsets overlap;
// its characters count as inside gold where a gold span of the same
// document covers them.
func scoreEvidence(gold []Span, evs []verdict.Evidence) EvidenceCounts {
	c := EvidenceCounts{Quotes: len(evs), Gold: len(gold)}
	goldByDoc := map[string][]interval{}
	for _, g := range gold {
		goldByDoc[g.Document] = append(goldByDoc[g.Document], interval{g.Start, g.End})
	}
	for doc, iv := range goldByDoc {
		goldByDoc[doc] = union(iv)
		c.GoldChars += length(goldByDoc[doc])
	}
	quotedByDoc := map[string][]interval{}
	found := make([]bool, len(gold))
	for _, ev := range evs {
		if ev.Anchored {
			c.Anchored++
		}
		if len(gold) == 0 {
			continue
		}
		c.Judged++
		if !ev.Anchored || ev.StartOffset == nil || ev.EndOffset == nil {
			c.QuotedChars += utf8.RuneCountInString(ev.Text)
			continue
		}
		c.JudgedAnchored++
		span := interval{*ev.StartOffset, *ev.EndOffset}
		c.QuotedChars += span.len()
		c.QuotedCharsInGold += inside(goldByDoc[ev.SourceOrigin], span)
		quotedByDoc[ev.SourceOrigin] = append(quotedByDoc[ev.SourceOrigin], span)
		hits := goldHit(gold, ev)
		for _, i := range hits {
			found[i] = true
		}
		if len(hits) > 0 {
			c.Hits++
		}
		if slices.ContainsFunc(gold, func(g Span) bool { return g.Document == ev.SourceOrigin && g.Page == ev.CitedPageNumber }) {
			c.PagesRight++
		}
		if ev.CitedPageNumber != ev.SourcePageNumber {
			c.PagesCorrected++
		}
	}
	for _, f := range found {
		if f {
			c.GoldFound++
		}
	}
	if len(gold) > 0 {
		c.WithGold = 1
		if c.Hits > 0 {
			c.WithGoldHit = 1
		}
	}
	for doc, quoted := range quotedByDoc {
		quoted = union(quoted)
		for _, g := range goldByDoc[doc] {
			c.GoldCharsCovered += inside(quoted, g)
		}
	}
	return c
}

// interval is a span of code-point offsets, end exclusive.
type interval struct{ start, end int }

func (i interval) len() int { return max(0, i.end-i.start) }

// union returns the sorted, disjoint intervals covering ivs.
func union(ivs []interval) []interval {
	sorted := slices.Clone(ivs)
	slices.SortFunc(sorted, func(a, b interval) int { return a.start - b.start })
	var out []interval
	for _, iv := range sorted {
		if iv.len() == 0 {
			continue
		}
		if n := len(out); n > 0 && iv.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, iv.end)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// length is the number of positions of disjoint intervals.
func length(disjoint []interval) int {
	n := 0
	for _, iv := range disjoint {
		n += iv.len()
	}
	return n
}

// inside counts the positions of span that disjoint intervals cover.
func inside(disjoint []interval, span interval) int {
	n := 0
	for _, iv := range disjoint {
		n += interval{max(iv.start, span.start), min(iv.end, span.end)}.len()
	}
	return n
}

// Metrics summarise a set of outcomes. Ratios are nil when nothing was counted.
type Metrics struct {
	Verdicts   int      `json:"verdicts"`
	Unanswered int      `json:"unanswered"`
	Correct    int      `json:"correct"`
	Accuracy   *float64 `json:"accuracy"`
	// KeptWithProblems counts the verdicts the engine kept with content
	// problems after its re-asks ran out (Outcome.Problems), KeptCorrect
	// the correct ones among them. AccuracyWithoutProblems is the accuracy
	// of the other verdicts, unanswered ones still counted as wrong;
	// Accuracy counts every verdict.
	KeptWithProblems        int      `json:"kept_with_problems"`
	KeptCorrect             int      `json:"kept_with_problems_correct"`
	AccuracyWithoutProblems *float64 `json:"accuracy_without_kept_with_problems"`

	Boolean       BooleanMetrics       `json:"boolean"`
	Numerical     NumericalMetrics     `json:"numerical"`
	NotApplicable NotApplicableMetrics `json:"not_applicable"`
	NotMentioned  NotMentionedMetrics  `json:"not_mentioned"`
	Evidence      EvidenceMetrics      `json:"evidence"`
	Rationales    RationaleMetrics     `json:"rationales"`
	// Confidence is what the verdicts' confidence is worth; absent when no
	// verdict has one.
	Confidence *ConfidenceMetrics `json:"confidence,omitempty"`
	// Routing is what review routing is worth: how many verdicts it sends
	// to a person and how many of the wrong ones are among them.
	Routing RoutingMetrics `json:"review_routing"`
}

// BooleanMetrics score boolean rules; a pass is the positive class.
type BooleanMetrics struct {
	Verdicts  int       `json:"verdicts"`
	Correct   int       `json:"correct"`
	Accuracy  *float64  `json:"accuracy"`
	Confusion Confusion `json:"confusion"`
	// PassRecall is the share of the verdicts expected to pass that passed,
	// FailRecall that of those expected to fail that failed (a verdict
	// with no boolean is wrong for either); BalancedAccuracy is their mean,
	// nil unless both classes were expected: accuracy that a judge answering
	// one class every time cannot raise above one half.
	PassRecall       *float64 `json:"pass_recall"`
	FailRecall       *float64 `json:"fail_recall"`
	BalancedAccuracy *float64 `json:"balanced_accuracy"`
}

// Confusion is the confusion table of boolean outputs: rows expected, columns
// given. NoAnswer counts verdicts with no boolean, by the expected value.
type Confusion struct {
	TruePass     int `json:"expected_pass_got_pass"`
	FalseFail    int `json:"expected_pass_got_fail"`
	FalsePass    int `json:"expected_fail_got_pass"`
	TrueFail     int `json:"expected_fail_got_fail"`
	NoAnswerPass int `json:"expected_pass_no_answer"`
	NoAnswerFail int `json:"expected_fail_no_answer"`
}

// count adds a verdict expected to pass (want) or fail, given as scored
// (nil: no boolean).
func (c *Confusion) count(want bool, given *bool) {
	switch {
	case given == nil && want:
		c.NoAnswerPass++
	case given == nil:
		c.NoAnswerFail++
	case want && *given:
		c.TruePass++
	case want:
		c.FalseFail++
	case *given:
		c.FalsePass++
	default:
		c.TrueFail++
	}
}

func (c Confusion) add(o Confusion) Confusion {
	return Confusion{
		TruePass: c.TruePass + o.TruePass, FalseFail: c.FalseFail + o.FalseFail,
		FalsePass: c.FalsePass + o.FalsePass, TrueFail: c.TrueFail + o.TrueFail,
		NoAnswerPass: c.NoAnswerPass + o.NoAnswerPass, NoAnswerFail: c.NoAnswerFail + o.NoAnswerFail,
	}
}

// recalls are the shares of the verdicts expected to pass that passed and
// of those expected to fail that failed (a verdict with no boolean is
// wrong for either), and their mean, the balanced accuracy: nil unless
// both classes were expected.
func (c Confusion) recalls() (pass, fail, balanced *float64) {
	pass = ratio(c.TruePass, c.TruePass+c.FalseFail+c.NoAnswerPass)
	fail = ratio(c.TrueFail, c.TrueFail+c.FalsePass+c.NoAnswerFail)
	if pass != nil && fail != nil {
		b := (*pass + *fail) / 2
		balanced = &b
	}
	return pass, fail, balanced
}

// NumericalMetrics score numerical rules: exact, and within one step of the
// rule's allowed scores.
type NumericalMetrics struct {
	Verdicts          int      `json:"verdicts"`
	Exact             int      `json:"exact"`
	WithinOne         int      `json:"within_one_step"`
	ExactAccuracy     *float64 `json:"exact_accuracy"`
	WithinOneAccuracy *float64 `json:"within_one_step_accuracy"`
}

// NotApplicableMetrics score the not-applicable flag over every verdict:
// recall is how many of the verdicts labelled not applicable were flagged
// so, precision how many of the verdicts flagged not applicable were
// labelled so.
type NotApplicableMetrics struct {
	Verdicts     int      `json:"verdicts"`
	Correct      int      `json:"correct"`
	Accuracy     *float64 `json:"accuracy"`
	Labelled     int      `json:"labelled_not_applicable"`
	FlaggedTotal int      `json:"flagged_not_applicable"`
	Flagged      int      `json:"labelled_and_flagged"`
	Recall       *float64 `json:"recall"`
	Precision    *float64 `json:"precision"`
}

// NotMentionedMetrics score whether a judge says so where the material does
// not say (labels with data_sufficiency false): recall is the share of those
// labels whose verdict said the material does not say (data_sufficiency
// false or not applicable), precision the share of the verdicts that said
// so whose label has data_sufficiency false.
type NotMentionedMetrics struct {
	Labelled  int      `json:"labelled"`
	Said      int      `json:"said"`
	SaidTotal int      `json:"said_total"`
	Recall    *float64 `json:"recall"`
	Precision *float64 `json:"precision"`
}

// RationaleMetrics say how the rationales read. Over the answered verdicts
// with a rationale: Restating are those at least RestatingShare of whose
// words are the rule's (its text and its not-applicable text; words are
// runs of letters and digits, lower-cased), Unended those that do not end a
// sentence (a full stop, question or exclamation mark, closing quotes and
// brackets aside). Empty counts the answered verdicts without one.
type RationaleMetrics struct {
	Rationales     int      `json:"rationales"`
	Empty          int      `json:"empty"`
	Restating      int      `json:"restating_rule"`
	Unended        int      `json:"unended"`
	RestatingShare *float64 `json:"restating_share"`
	UnendedShare   *float64 `json:"unended_share"`
}

// EvidenceMetrics are the evidence tallies with their ratios. Precision and
// Recall count quotes and spans that overlap (a quote of a whole page that
// holds a gold span is a hit); CharPrecision and CharRecall count
// characters, so a quote is worth only the part of it that is gold.
type EvidenceMetrics struct {
	EvidenceCounts
	// Precision is Hits over Judged; Recall GoldFound over Gold.
	Precision *float64 `json:"precision"`
	Recall    *float64 `json:"recall"`
	// CharPrecision is QuotedCharsInGold over QuotedChars; CharRecall
	// GoldCharsCovered over GoldChars.
	CharPrecision *float64 `json:"char_precision"`
	CharRecall    *float64 `json:"char_recall"`
	AnchoredShare *float64 `json:"anchored_share"`
	// PagesRightShare is PagesRight over JudgedAnchored.
	PagesRightShare *float64 `json:"pages_right_share"`
	// VerdictsOverlapping is WithGoldHit over WithGold: the share of the
	// verdicts with gold spans that quote one of them at least in part.
	VerdictsOverlapping *float64 `json:"verdicts_overlapping_gold"`
}

func ratio(num, den int) *float64 {
	if den == 0 {
		return nil
	}
	r := float64(num) / float64(den)
	return &r
}

// summarise computes the metrics of a set of outcomes.
func summarise(outs []Outcome) Metrics {
	var m Metrics
	var ev EvidenceCounts
	for _, o := range outs {
		m.Verdicts++
		if !o.Answered {
			m.Unanswered++
		}
		if o.Correct {
			m.Correct++
		}
		if o.KeptWithProblems() {
			m.KeptWithProblems++
			if o.Correct {
				m.KeptCorrect++
			}
		}
		switch o.Type {
		case verdict.Numerical:
			m.Numerical.Verdicts++
			if o.OutputCorrect {
				m.Numerical.Exact++
			}
			if o.WithinOneStep {
				m.Numerical.WithinOne++
			}
		default:
			b := &m.Boolean
			b.Verdicts++
			if o.OutputCorrect {
				b.Correct++
			}
			b.Confusion.count(o.ExpectedBoolean != nil && *o.ExpectedBoolean, o.scoredBoolean())
		}
		if o.SaysNotMentioned() {
			m.NotMentioned.SaidTotal++
		}
		if !o.ExpectedDataSufficiency {
			m.NotMentioned.Labelled++
			if o.SaysNotMentioned() {
				m.NotMentioned.Said++
			}
		}
		if o.Answered {
			switch {
			case strings.TrimSpace(o.Rationale) == "":
				m.Rationales.Empty++
			default:
				m.Rationales.Rationales++
				if o.RationaleRestates {
					m.Rationales.Restating++
				}
				if o.RationaleUnended {
					m.Rationales.Unended++
				}
			}
		}
		m.NotApplicable.Verdicts++
		if o.Answered && o.NotApplicableCorrect {
			m.NotApplicable.Correct++
		}
		flagged := o.Answered && o.NotApplicable
		if flagged {
			m.NotApplicable.FlaggedTotal++
		}
		if o.ExpectedNotApplicable {
			m.NotApplicable.Labelled++
			if flagged {
				m.NotApplicable.Flagged++
			}
		}
		ev = ev.add(o.Evidence)
	}
	m.Accuracy = ratio(m.Correct, m.Verdicts)
	m.Confidence = confidenceMetrics(outs)
	m.Routing = routingMetrics(outs)
	m.AccuracyWithoutProblems = ratio(m.Correct-m.KeptCorrect, m.Verdicts-m.KeptWithProblems)
	m.Boolean.Accuracy = ratio(m.Boolean.Correct, m.Boolean.Verdicts)
	m.Boolean.PassRecall, m.Boolean.FailRecall, m.Boolean.BalancedAccuracy = m.Boolean.Confusion.recalls()
	m.NotMentioned.Recall = ratio(m.NotMentioned.Said, m.NotMentioned.Labelled)
	m.NotMentioned.Precision = ratio(m.NotMentioned.Said, m.NotMentioned.SaidTotal)
	m.Rationales.RestatingShare = ratio(m.Rationales.Restating, m.Rationales.Rationales)
	m.Rationales.UnendedShare = ratio(m.Rationales.Unended, m.Rationales.Rationales)
	m.Numerical.ExactAccuracy = ratio(m.Numerical.Exact, m.Numerical.Verdicts)
	m.Numerical.WithinOneAccuracy = ratio(m.Numerical.WithinOne, m.Numerical.Verdicts)
	m.NotApplicable.Accuracy = ratio(m.NotApplicable.Correct, m.NotApplicable.Verdicts)
	m.NotApplicable.Recall = ratio(m.NotApplicable.Flagged, m.NotApplicable.Labelled)
	m.NotApplicable.Precision = ratio(m.NotApplicable.Flagged, m.NotApplicable.FlaggedTotal)
	m.Evidence = EvidenceMetrics{
		EvidenceCounts:  ev,
		Precision:       ratio(ev.Hits, ev.Judged),
		Recall:          ratio(ev.GoldFound, ev.Gold),
		CharPrecision:   ratio(ev.QuotedCharsInGold, ev.QuotedChars),
		CharRecall:      ratio(ev.GoldCharsCovered, ev.GoldChars),
		AnchoredShare:   ratio(ev.Anchored, ev.Quotes),
		PagesRightShare: ratio(ev.PagesRight, ev.JudgedAnchored),

		VerdictsOverlapping: ratio(ev.WithGoldHit, ev.WithGold),
	}
	return m
}
