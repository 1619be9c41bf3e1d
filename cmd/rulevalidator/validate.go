package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/internal/tracing"
	"rulevalidator/judging"
	"rulevalidator/report"
	"rulevalidator/request"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// validateDoc is validate's --help.
var validateDoc = commandDoc{
	synopsis: "validate --ruleset FILE (--input FILE | --document FILE...) [--json] [--report FILE.xlsx] [settings]",
	about: []string{
		"Judges the input against every rule of the ruleset with the model and prints the verdicts. " +
			"The input is read as the service reads a request's JSON form (POST /v1/validations, produce), " +
			"in the same shapes. It may be a whole request: its inline_ruleset then stands in for --ruleset, " +
			"its request_id and tenant_id name the report, and its other keys are not used here.",
		"Documents may be files, PDF, DOCX or text: each --document is a primary document, and in the " +
			`input a document may name its file ({"file": "msa.pdf"}, relative to the input file). ` +
			"A PDF page is a page of the document, as a PDF viewer numbers it.",
	},
	exit: "0 done, 2 invalid ruleset, input or settings (no model call made), 1 the model could not be " +
		"reached or gave no valid answer, or the report could not be written.",
	examples: []string{
		"rulevalidator validate --ruleset examples/contract-review/ruleset.yaml --input examples/contract-review/input.json",
		"rulevalidator validate --ruleset examples/contract-review/ruleset.yaml --document MSA-Acme.pdf --document policy.docx",
		"rulevalidator validate --input examples/contract-review/request.json --json --llm-rules-per-call 1",
	},
}

func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	var (
		llm  llmConfig
		docs documentConfig
	)
	cl := newCommandLine("validate", validateDoc, judgeSettings(&llm, &docs), stderr)
	fs := cl.fs
	var documents fileList
	fs.Var(&documents, "document", "a document's `file` (PDF, DOCX or text), judged as a primary document; repeatable")
	var (
		rulesetPath = fs.String("ruleset", "", "ruleset file, YAML or JSON (required unless the input has inline_ruleset)")
		inputPath   = fs.String("input", "", "input file, YAML or JSON: the inputs, or a whole request in its JSON form (required unless --document is given)")
		reportPath  = fs.String("report", "", "also write the Excel report (.xlsx) to this file")
		asJSON      = fs.Bool("json", false, "print exactly one JSON object on stdout")
		verbose     = fs.Bool("v", false, "log model calls and retries on stderr")
	)
	if code, ok := cl.parse(args, getenv); !ok {
		return code
	}
	if err := errors.Join(llm.check(), docs.check()); err != nil {
		return cl.invalid(err)
	}
	if *inputPath == "" && len(documents) == 0 {
		fmt.Fprintln(stderr, "validate: --input or --document is required")
		fs.Usage()
		return exitInvalid
	}
	req, err := readRequestFile(*inputPath, documents, docs.maxBytes)
	if err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return exitInvalid
	}
	rs, err := validateRuleset(*rulesetPath, *inputPath, req)
	if err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return exitInvalid
	}

	logger := commandLogger(stderr, *verbose)
	llm.logProfile(logger)
	reader, err := docs.reader(logger)
	if err != nil {
		return cl.invalid(err)
	}
	defer reader.Close()
	where := *inputPath
	if where == "" {
		where = "--document"
	}
	mediaTypes := map[string]string{}
	if err := readDocumentFiles(ctx, reader, req, mediaTypes); err != nil {
		switch {
		case errors.Is(err, docread.ErrCacheDir):
			fmt.Fprintf(stderr, "validate: %s\n", cacheDirFault(err))
			return exitFailure
		case documentFault(err):
			fmt.Fprintf(stderr, "validate: %s: %v\n", where, err)
			return exitInvalid
		}
		// The reader's own failure (its engine, the deadline): not the input's.
		fmt.Fprintf(stderr, "validate: %s: %v\n", where, err)
		return exitFailure
	}
	tp, shutdown, err := tracing.Setup(ctx, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return exitInvalid
	}
	defer shutdownTracing(shutdown, logger)
	llm.tracer = tp
	eng, err := llm.newEngine(logger, engine.Hooks{})
	if err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return exitInvalid
	}

	res, err := judging.Evaluate(ctx, eng, rs, req, mediaTypes)
	if err != nil {
		if errors.Is(err, engine.ErrInvalidInput) {
			fmt.Fprintf(stderr, "validate: %s: %v\n", where, err)
			return exitInvalid
		}
		fmt.Fprintf(stderr, "validate: %s\n", describeEvalError(err, llm.baseURL))
		if errors.Is(err, engine.ErrInvalidRuleset) {
			return exitInvalid
		}
		return exitFailure
	}
	if *reportPath != "" {
		if err := writeReportFile(*reportPath, req, rs, res); err != nil {
			fmt.Fprintf(stderr, "validate: %v\n", err)
			return exitFailure
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(newResultJSON(res)); err != nil {
			fmt.Fprintf(stderr, "validate: writing the result: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	printResult(stdout, rs, res)
	return exitOK
}

// fileList is a repeatable flag of file paths.
type fileList []string

func (l *fileList) String() string     { return strings.Join(*l, ",") }
func (l *fileList) Set(v string) error { *l = append(*l, v); return nil }

// validateRuleset is the ruleset of --ruleset, or the input's inline_ruleset
// when the flag is not given.
func validateRuleset(path, inputPath string, req *schemas.Request) (*engine.Ruleset, error) {
	switch {
	case path != "" && req.InlineRuleset != nil:
		return nil, fmt.Errorf("%s has an inline_ruleset and --ruleset is given too; give the ruleset once", inputPath)
	case path != "":
		return readFile(path, engine.ParseRuleset)
	case req.InlineRuleset != nil:
		rs, err := request.InlineRuleset(req)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", inputPath, err)
		}
		return rs, nil
	case req.RulesetRef != nil:
		return nil, fmt.Errorf("%s names the stored ruleset %q (ruleset_ref); give its file with --ruleset", inputPath, req.RulesetRef.ID)
	}
	return nil, errors.New("--ruleset is required (or an inline_ruleset in the input)")
}

// writeReportFile writes the report the service would store for the result.
func writeReportFile(path string, req *schemas.Request, rs *engine.Ruleset, res *engine.Result) error {
	body, err := report.Build(report.Meta{RequestID: req.RequestID, TenantID: req.TenantID, GeneratedAt: time.Now().UTC()}, rs, res)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

// resultJSON is validate --json's object: the engine's result, with each verdict's rule type
// also under rule_type, the key the verdict events use. The older key, type, is written as
// well for one release (docs/cli.md says so); read rule_type.
type resultJSON struct {
	RulesetID      string                `json:"ruleset_id,omitempty"`
	RulesetVersion string                `json:"ruleset_version,omitempty"`
	Model          string                `json:"model,omitempty"`
	Rules          []verdictJSON         `json:"rules"`
	Aggregate      verdict.Aggregate     `json:"aggregate"`
	Groups         []verdict.GroupResult `json:"groups,omitempty"`
	Sources        []verdict.Source      `json:"sources"`
	Usage          verdict.Usage         `json:"usage"`
}

// verdictJSON is a verdict with its type under rule_type too.
type verdictJSON struct {
	engine.Verdict
	RuleType verdict.RuleType `json:"rule_type"`
}

func newResultJSON(res *engine.Result) resultJSON {
	out := resultJSON{RulesetID: res.RulesetID, RulesetVersion: res.RulesetVersion, Model: res.Model,
		Rules: make([]verdictJSON, len(res.Rules)), Aggregate: res.Aggregate, Groups: res.Groups, Sources: res.Sources, Usage: res.Usage}
	for i, v := range res.Rules {
		out.Rules[i] = verdictJSON{Verdict: v, RuleType: v.Type}
	}
	return out
}

// readFile reads and parses one file, naming the file in any error.
func readFile[T any](path string, parse func([]byte) (T, error)) (T, error) {
	var zero T
	data, err := os.ReadFile(path)
	if err != nil {
		return zero, err
	}
	v, err := parse(data)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// describeEvalError says which kind of failure it was, for a person.
func describeEvalError(err error, baseURL string) string {
	f := judging.Classify(err)
	switch {
	case !f.Message && (f.Cause == judging.CauseModelAuth || f.Cause == judging.CauseModelNotFound):
		return fmt.Sprintf("the model server at %s refused the request (%s: %s): %v", baseURL, f.Cause, f.Cause.Fix(), err)
	case errors.Is(err, engine.ErrLLMUnavailable):
		return fmt.Sprintf("could not reach the model at %s: %v", baseURL, err)
	case errors.Is(err, engine.ErrLLMRejected):
		return fmt.Sprintf("the model server at %s refused the request: %v", baseURL, err)
	case errors.Is(err, engine.ErrInvalidOutput):
		return fmt.Sprintf("the model did not produce a valid answer: %v", err)
	}
	return err.Error()
}

// printResult renders a result as a table and details for a person.
func printResult(w io.Writer, rs *engine.Ruleset, res *engine.Result) {
	title := "Ruleset " + orDash(res.RulesetID)
	if res.RulesetVersion != "" {
		title += " (version " + res.RulesetVersion + ")"
	}
	fmt.Fprintf(w, "%s · model %s · %d rules\n\n", title, res.Model, len(res.Rules))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tNAME\tRESULT\tDATA\tCONFIDENCE\tREVIEW\tEVIDENCE")
	for _, v := range res.Rules {
		data := "sufficient"
		if !v.DataSufficiency {
			data = "insufficient"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.RuleID, orDash(v.Name), outcome(v), data, confidenceText(v.Confidence), reviewText(v.NeedsReview), evidenceCount(v.Evidences))
	}
	tw.Flush()

	for _, v := range res.Rules {
		fmt.Fprintf(w, "\n%s — %s\n", v.RuleID, outcome(v))
		fmt.Fprintf(w, "  %s\n", v.Rationale)
		switch {
		case len(v.Problems) > 0:
			fmt.Fprintln(w, "  ! kept with problems; still wrong after every re-ask:")
			for _, p := range v.Problems {
				fmt.Fprintf(w, "    - %s\n", p)
			}
		case v.SufficiencyNote != "":
			fmt.Fprintf(w, "  ! judged on insufficient data: %s\n", v.SufficiencyNote)
		}
		for _, dp := range v.PagesConsidered {
			fmt.Fprintf(w, "  judged on %s, pages %s\n", dp.Document, joinPages(dp.Pages))
		}
		if v.NeedsReview {
			fmt.Fprintf(w, "  needs review: %s\n", reasonsText(v.ReviewReasons))
		}
		if c := v.Cached; c != nil {
			fmt.Fprintf(w, "  from the verdict cache: judged %s under request %s\n", c.JudgedAt.UTC().Format(time.RFC3339), c.RequestID)
		}
		for _, ev := range v.Evidences {
			fmt.Fprintf(w, "  • %q\n    %s\n", ev.Text, evidencePlace(ev))
			if ev.Altered {
				fmt.Fprintf(w, "    ! ALTERED: the model wrote %q; %s\n", ev.QuotedText, differences(ev.Differences))
			} else if ev.Anchored && ev.QuotedText != "" && ev.QuotedText != ev.Text {
				fmt.Fprintf(w, "    the model wrote %q\n", ev.QuotedText)
			}
		}
	}

	fmt.Fprintln(w)
	if b := res.Aggregate.Boolean; b != nil {
		verdict := "FAILED"
		if b.Passed {
			verdict = "PASSED"
		}
		fmt.Fprintf(w, "Boolean aggregate (%s): %s — %d of %d applicable rules passed\n", b.Mode, verdict, b.PassedCount, b.Applicable)
	}
	if n := res.Aggregate.Numerical; n != nil {
		score := "no score (no rule counted)"
		if n.Score != nil {
			score = strconv.FormatFloat(*n.Score, 'f', 2, 64)
		}
		fmt.Fprintf(w, "Numerical aggregate (%s): %s over %d rules\n", n.Mode, score, n.Counted)
	}
	if len(res.Groups) > 0 {
		fmt.Fprintln(w, "Nested rulesets:")
		for _, g := range res.Groups {
			line := fmt.Sprintf("  %s: %s", groupLabel(g), groupResult(g))
			if g.Reason != "" {
				line += " — " + g.Reason
			}
			fmt.Fprintln(w, line)
		}
	}
	u := res.Usage
	if s := decidedWithoutModel(u); s != "" {
		fmt.Fprintln(w, strings.ToUpper(s[:1])+s[1:]+".")
	}
	fmt.Fprintf(w, "Usage: %d prompt tokens (%d cached), %d completion tokens, %d model call%s\n",
		u.PromptTokens, u.CachedTokens, u.CompletionTokens, u.LLMCalls, map[bool]string{true: "", false: "s"}[u.LLMCalls == 1])
	if u.PlannedCalls > 1 {
		fmt.Fprintf(w, "The request did not fit one call: it was judged in %d calls, each rule on the pages listed with it.\n", u.PlannedCalls)
	}
}

func outcome(v engine.Verdict) string {
	return outcomeText(v.Type, v.NotApplicable, v.BooleanOutput, v.NumericalOutput, nil)
}

// outcomeText shows a verdict's engine.Outcome to a person: PASS, FAIL, FAIL (no verdict),
// score 4 of 5, no verdict, or N/A with what the model said besides.
func outcomeText(typ verdict.RuleType, notApplicable bool, boolean *bool, score *int, allowed []int) string {
	switch engine.VerdictOutcome(typ, notApplicable, boolean, score) {
	case engine.OutcomeNotApplicable:
		if boolean == nil && score == nil {
			return "N/A"
		}
		return "N/A (" + outcomeText(typ, false, boolean, score, allowed) + ")"
	case engine.OutcomePass:
		return "PASS"
	case engine.OutcomeFail:
		if boolean == nil {
			return "FAIL (no verdict)"
		}
		return "FAIL"
	case engine.OutcomeScore:
		s := "score " + strconv.Itoa(*score)
		if n := len(allowed); n > 0 {
			s += " of " + strconv.Itoa(allowed[n-1])
		}
		return s
	default:
		return "no verdict"
	}
}

// evidencePlace: msa.pdf, page 2 (cited page 9), passage d1p2s4 (cited
// d1p9s1), anchored (exact)
func evidencePlace(ev verdict.Evidence) string {
	parts := []string{orDash(ev.SourceOrigin)}
	for _, part := range []string{pagePlace("page ", ev.SourcePageNumber, ev.CitedPageNumber), passagePlace(ev.PassageID, ev.CitedPassageID, ev.SourceOrigin)} {
		if part != "" {
			parts = append(parts, part)
		}
	}
	switch {
	case ev.Anchored && ev.Similarity > 0 && ev.Similarity < 1:
		parts = append(parts, fmt.Sprintf("anchored (%s, similarity %.2f)", ev.Match, ev.Similarity))
	case ev.Anchored:
		parts = append(parts, "anchored ("+string(ev.Match)+")")
	case ev.Match == verdict.MatchNotDocument:
		parts = append(parts, "not a document (named input, text input or message)")
	default:
		parts = append(parts, "! NOT FOUND in any document")
	}
	return strings.Join(parts, ", ")
}

// pagePlace is the page evidence was found on, and the page the model cited
// when that was another one: "page 2 (cited page 9)" with unit "page ".
// "" when the evidence has no page.
func pagePlace(unit string, found, cited int) string {
	if found <= 0 {
		return ""
	}
	s := unit + strconv.Itoa(found)
	if pageCorrected(found, cited) {
		s += " (cited " + unit + strconv.Itoa(cited) + ")"
	}
	return s
}

// pageCorrected says whether evidence was found on another page of its
// document than the one the model cited.
func pageCorrected(found, cited int) bool {
	return found > 0 && cited > 0 && cited != found
}

// passagePlace names the passage the model cited, "passage d1p2s4"; "" when
// it cited none, or the passage is the source itself (a named input).
func passagePlace(id, citedID, origin string) string {
	switch {
	case id == "" || id == origin:
		return ""
	case citedID != "":
		return "passage " + id + " (cited " + citedID + ")"
	}
	return "passage " + id
}

// joinPages writes page numbers as "1, 4, 250".
func joinPages(pages []int) string {
	parts := make([]string, len(pages))
	for i, p := range pages {
		parts[i] = strconv.Itoa(p)
	}
	return strings.Join(parts, ", ")
}

// evidenceCount is how many quotes a verdict has, how many of them do not
// back it, and on how many the model cited the wrong page.
func evidenceCount(evs []verdict.Evidence) string {
	var altered, missing, repaged int
	for _, ev := range evs {
		switch {
		case ev.Altered:
			altered++
		case !ev.Anchored && ev.Match != verdict.MatchNotDocument:
			missing++
		}
		if pageCorrected(ev.SourcePageNumber, ev.CitedPageNumber) {
			repaged++
		}
	}
	s := strconv.Itoa(len(evs))
	var notes []string
	if missing > 0 {
		notes = append(notes, strconv.Itoa(missing)+" not found")
	}
	if altered > 0 {
		notes = append(notes, strconv.Itoa(altered)+" altered")
	}
	switch {
	case repaged == 1:
		notes = append(notes, "1 page corrected")
	case repaged > 1:
		notes = append(notes, strconv.Itoa(repaged)+" pages corrected")
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	return s
}

// differences says what an altered quote changed.
func differences(ds []verdict.Difference) string {
	if len(ds) == 0 {
		return "the document says something else"
	}
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%s: %s in the quote, %s in the document", d.Kind, orNone(d.Quote), orNone(d.Document))
	}
	return strings.Join(parts, "; ")
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return strconv.Quote(s)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// confidenceText is a verdict's confidence for a person: "0.87", "-" when
// nothing measured it.
func confidenceText(c *float64) string {
	if c == nil {
		return "-"
	}
	return strconv.FormatFloat(*c, 'f', 2, 64)
}

// reviewText is the REVIEW column: "needed" or "-".
func reviewText(needed bool) string {
	if needed {
		return "needed"
	}
	return "-"
}

// reasonsText joins review reasons: "low_confidence, altered_evidence".
func reasonsText(reasons []engine.ReviewReason) string {
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = string(r)
	}
	return strings.Join(parts, ", ")
}
