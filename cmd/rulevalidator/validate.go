package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/pipeline"
	"rulevalidator/report"
	"rulevalidator/request"
	"rulevalidator/schemas"
)

// Defaults for reaching a model; the local server is the one ops/llm.sh runs.
const (
	defaultBaseURL = "http://127.0.0.1:8081/v1"
	defaultModel   = "gemma-3-270m"
)

// llmFlags are the flags every subcommand that talks to a model shares.
type llmFlags struct {
	baseURL       string
	apiKey        string
	model         string
	format        string
	instructions  string
	evidence      string
	outputRetries int
	timeout       time.Duration
	maxTokens     int
	maxInputBytes int
	contextTokens int
	callsPerReq   int
	rulesPerCall  int
}

func (f *llmFlags) register(fs *flag.FlagSet, getenv env) {
	fs.StringVar(&f.baseURL, "base-url", orEnv(getenv, "OPENAI_BASE_URL", defaultBaseURL), "OpenAI-compatible API base URL (env OPENAI_BASE_URL)")
	f.apiKey = getenv("OPENAI_API_KEY")
	fs.StringVar(&f.model, "model", orEnv(getenv, "RULEVALIDATOR_MODEL", defaultModel), "model name (env RULEVALIDATOR_MODEL)")
	fs.StringVar(&f.format, "format", orEnv(getenv, "RULEVALIDATOR_LLM_FORMAT", string(engine.FormatJSONSchema)), "preferred response format: json_schema, json_object or text; weaker ones are tried when the server refuses (env RULEVALIDATOR_LLM_FORMAT)")
	fs.StringVar(&f.instructions, "llm-instructions", orEnv(getenv, "RULEVALIDATOR_LLM_INSTRUCTIONS", string(engine.InstructionsAuto)), "how the rules reach the model: system, user (folded into the user message) or auto (probe the model once) (env RULEVALIDATOR_LLM_INSTRUCTIONS)")
	fs.StringVar(&f.evidence, "evidence-mode", orEnv(getenv, "RULEVALIDATOR_EVIDENCE_MODE", string(engine.EvidenceCite)), evidenceModeHelp+" (env RULEVALIDATOR_EVIDENCE_MODE)")
	fs.IntVar(&f.outputRetries, "output-retries", 2, "corrective re-asks per request when the answer fails the checks (-1: none)")
	fs.DurationVar(&f.timeout, "llm-timeout", 120*time.Second, "timeout of one model call")
	fs.IntVar(&f.maxTokens, "max-tokens", 0, "cap on the tokens of each answer (0: the server's default)")
	fs.IntVar(&f.maxInputBytes, "max-input-bytes", 4<<20, "cap on the total text of the inputs")
	fs.IntVar(&f.contextTokens, "llm-context-tokens", 0, "the model's context window in tokens, prompt and answer together (0: ask the server, else 8192); larger requests are split into several calls")
	fs.IntVar(&f.callsPerReq, "llm-calls-per-request", engine.DefaultCallConcurrency, "calls of one split request that run at once")
	fs.IntVar(&f.rulesPerCall, "llm-rules-per-call", 0, rulesPerCallHelp)
}

// newEngine builds the model client and the engine from the flags.
func (f *llmFlags) newEngine(logger *slog.Logger, hooks engine.Hooks) (*engine.Engine, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	client, err := f.newClient(logger)
	if err != nil {
		return nil, err
	}
	return engine.New(client, f.engineConfig(logger, hooks))
}

// check reports a flag value the engine would refuse, named as the flag.
func (f *llmFlags) check() error {
	switch engine.EvidenceMode(f.evidence) {
	case engine.EvidenceCite, engine.EvidenceQuote:
	default:
		return fmt.Errorf("--evidence-mode: %q is not cite or quote", f.evidence)
	}
	switch engine.Instructions(f.instructions) {
	case engine.InstructionsSystem, engine.InstructionsUser, engine.InstructionsAuto:
		return nil
	}
	return fmt.Errorf("--llm-instructions: %q is not system, user or auto", f.instructions)
}

// rulesPerCallHelp is the rules-per-call setting's help, the same on every
// command.
const rulesPerCallHelp = "the most rules one model call judges (0: as many as fit); calls share the instructions and the material as a prefix a server's prompt cache keeps"

// evidenceModeHelp is the evidence-mode setting's help, the same on every
// command.
const evidenceModeHelp = "how the model gives evidence: cite (the id of a passage shown in the material; the text is copied from it, verbatim by construction) or quote (verbatim quotes, anchored to the documents)"

// newClient builds the model client from the flags.
func (f *llmFlags) newClient(logger *slog.Logger) (*openai.Client, error) {
	return openai.New(f.clientConfig(logger))
}

// clientConfig is the model client configuration the flags describe.
func (f *llmFlags) clientConfig(logger *slog.Logger) openai.Config {
	return openai.Config{
		BaseURL: f.baseURL,
		APIKey:  f.apiKey,
		Model:   f.model,
		Timeout: f.timeout,
		Format:  engine.ResponseFormat(f.format),
		Logger:  logger,
	}
}

// engineConfig is the engine configuration the flags describe.
func (f *llmFlags) engineConfig(logger *slog.Logger, hooks engine.Hooks) engine.Config {
	retries := f.outputRetries
	if retries == 0 {
		retries = -1 // the flag's 0 means none; the engine's zero means default
	}
	return engine.Config{
		Model:           f.model,
		Format:          engine.ResponseFormat(f.format),
		Instructions:    engine.Instructions(f.instructions),
		Evidence:        engine.EvidenceMode(f.evidence),
		Logger:          logger,
		OutputRetries:   retries,
		MaxTokens:       f.maxTokens,
		MaxInputBytes:   f.maxInputBytes,
		ContextTokens:   f.contextTokens,
		CallConcurrency: f.callsPerReq,
		RulesPerCall:    f.rulesPerCall,
		Hooks:           hooks,
	}
}

func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		rulesetPath = fs.String("ruleset", "", "ruleset file, YAML or JSON (required unless the input has inline_ruleset)")
		inputPath   = fs.String("input", "", "input file, YAML or JSON: the inputs, or a whole request in its JSON form (required)")
		reportPath  = fs.String("report", "", "also write the Excel report (.xlsx) to this file")
		asJSON      = fs.Bool("json", false, "print exactly one JSON object on stdout")
		verbose     = fs.Bool("v", false, "log model calls and retries on stderr")
		llm         llmFlags
	)
	llm.register(fs, getenv)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rulevalidator validate --ruleset FILE --input FILE [--json] [--report FILE.xlsx] [--model NAME]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Judges the input against every rule of the ruleset with the model and prints")
		fmt.Fprintln(stderr, "the verdicts. The input is read as the service reads a request's JSON form")
		fmt.Fprintln(stderr, "(POST /v1/validations, produce), in the same shapes. It may be a whole request:")
		fmt.Fprintln(stderr, "its inline_ruleset then stands in for --ruleset, its request_id and tenant_id")
		fmt.Fprintln(stderr, "name the report, and its other keys are not used here.")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Exit status: 0 done, 2 invalid ruleset or input (no model call made), 1 the")
		fmt.Fprintln(stderr, "model could not be reached or gave no valid answer, or the report could not")
		fmt.Fprintln(stderr, "be written.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitInvalid
	}
	if *inputPath == "" {
		fmt.Fprintln(stderr, "validate: --input is required")
		fs.Usage()
		return exitInvalid
	}
	req, err := readFile(*inputPath, readValidateInput)
	if err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return exitInvalid
	}
	rs, err := validateRuleset(*rulesetPath, *inputPath, req)
	if err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return exitInvalid
	}
	in, err := pipeline.EngineInputs(req)
	if err != nil {
		if errors.Is(err, schemas.ErrUnresolvedURI) {
			err = fmt.Errorf("%w (documents by uri are read by the service from object storage; give their text here)", err)
		}
		fmt.Fprintf(stderr, "validate: %s: %v\n", *inputPath, err)
		return exitInvalid
	}

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	eng, err := llm.newEngine(logger, engine.Hooks{})
	if err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return exitInvalid
	}

	res, err := eng.Evaluate(ctx, engine.Request{Ruleset: rs, Inputs: in})
	if err != nil {
		fmt.Fprintf(stderr, "validate: %s\n", describeEvalError(err, llm.baseURL))
		if errors.Is(err, engine.ErrInvalidRuleset) || errors.Is(err, engine.ErrInvalidInput) {
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
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(stderr, "validate: writing the result: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	printResult(stdout, rs, res)
	return exitOK
}

// readValidateInput reads validate's input file with the mapping the
// service applies to a request's JSON form, so that a file judged here is
// read exactly as POST /v1/validations and produce read it.
func readValidateInput(data []byte) (*schemas.Request, error) {
	m, err := engine.DecodeObject(data)
	if err != nil {
		return nil, err
	}
	return request.FromMap(m)
}

// validateRuleset is the ruleset of --ruleset, or the input's inline_ruleset
// when the flag is not given.
func validateRuleset(path, inputPath string, req *schemas.Request) (*engine.Ruleset, error) {
	switch {
	case path != "" && req.InlineRuleset != nil:
		return nil, fmt.Errorf("%s has an inline_ruleset and --ruleset is given too; give the ruleset once", inputPath)
	case path != "":
		return readFile(path, engine.ParseRuleset)
	case req.InlineRuleset != nil:
		rs, err := engine.ParseRuleset([]byte(*req.InlineRuleset))
		if err != nil {
			return nil, fmt.Errorf("%s: inline_ruleset: %w", inputPath, err)
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
	f := pipeline.Classify(err)
	switch {
	case !f.Message && (f.Cause == pipeline.CauseModelAuth || f.Cause == pipeline.CauseModelNotFound):
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

func orEnv(getenv env, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// printResult renders a result as a table and details for a person.
func printResult(w io.Writer, rs *engine.Ruleset, res *engine.Result) {
	title := "Ruleset " + orDash(res.RulesetID)
	if res.RulesetVersion != "" {
		title += " (version " + res.RulesetVersion + ")"
	}
	fmt.Fprintf(w, "%s · model %s · %d rules\n\n", title, res.Model, len(res.Rules))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tNAME\tRESULT\tDATA\tEVIDENCE")
	for _, v := range res.Rules {
		data := "sufficient"
		if !v.DataSufficiency {
			data = "insufficient"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.RuleID, orDash(v.Name), outcome(v), data, evidenceCount(v.Evidences))
	}
	tw.Flush()

	for _, v := range res.Rules {
		fmt.Fprintf(w, "\n%s — %s\n", v.RuleID, outcome(v))
		fmt.Fprintf(w, "  %s\n", v.Rationale)
		switch {
		case len(v.Problems) > 0:
			fmt.Fprintln(w, "  ! judged on insufficient data; still wrong after every re-ask:")
			for _, p := range v.Problems {
				fmt.Fprintf(w, "    - %s\n", p)
			}
		case v.SufficiencyNote != "":
			fmt.Fprintf(w, "  ! judged on insufficient data: %s\n", v.SufficiencyNote)
		}
		for _, dp := range v.PagesConsidered {
			fmt.Fprintf(w, "  judged on %s, pages %s\n", dp.Document, joinPages(dp.Pages))
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
	u := res.Usage
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
func outcomeText(typ engine.RuleType, notApplicable bool, boolean *bool, score *int, allowed []int) string {
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

// evidencePlace: msa.pdf, page 2 (cited page 9), passage d1p2s4, anchored (exact)
func evidencePlace(ev engine.Evidence) string {
	parts := []string{orDash(ev.SourceOrigin)}
	for _, part := range []string{pagePlace("page ", ev.SourcePageNumber, ev.CitedPageNumber), passagePlace(ev.PassageID, ev.SourceOrigin)} {
		if part != "" {
			parts = append(parts, part)
		}
	}
	switch {
	case ev.Anchored && ev.Similarity > 0 && ev.Similarity < 1:
		parts = append(parts, fmt.Sprintf("anchored (%s, similarity %.2f)", ev.Match, ev.Similarity))
	case ev.Anchored:
		parts = append(parts, "anchored ("+string(ev.Match)+")")
	case ev.Match == engine.MatchNotDocument:
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
func passagePlace(id, origin string) string {
	if id == "" || id == origin {
		return ""
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
func evidenceCount(evs []engine.Evidence) string {
	var altered, missing, repaged int
	for _, ev := range evs {
		switch {
		case ev.Altered:
			altered++
		case !ev.Anchored && ev.Match != engine.MatchNotDocument:
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
func differences(ds []engine.Difference) string {
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
