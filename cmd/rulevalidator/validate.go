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
	outputRetries int
	timeout       time.Duration
	maxTokens     int
	maxInputBytes int
}

func (f *llmFlags) register(fs *flag.FlagSet, getenv env) {
	fs.StringVar(&f.baseURL, "base-url", orEnv(getenv, "OPENAI_BASE_URL", defaultBaseURL), "OpenAI-compatible API base URL (env OPENAI_BASE_URL)")
	f.apiKey = getenv("OPENAI_API_KEY")
	fs.StringVar(&f.model, "model", orEnv(getenv, "RULEVALIDATOR_MODEL", defaultModel), "model name (env RULEVALIDATOR_MODEL)")
	fs.StringVar(&f.format, "format", orEnv(getenv, "RULEVALIDATOR_LLM_FORMAT", string(engine.FormatJSONSchema)), "preferred response format: json_schema, json_object or text; weaker ones are tried when the server refuses (env RULEVALIDATOR_LLM_FORMAT)")
	fs.IntVar(&f.outputRetries, "output-retries", 2, "corrective re-asks per request when the answer fails the checks (-1: none)")
	fs.DurationVar(&f.timeout, "llm-timeout", 120*time.Second, "timeout of one model call")
	fs.IntVar(&f.maxTokens, "max-tokens", 0, "cap on the tokens of each answer (0: the server's default)")
	fs.IntVar(&f.maxInputBytes, "max-input-bytes", 4<<20, "cap on the total text of the inputs")
}

// newEngine builds the model client and the engine from the flags.
func (f *llmFlags) newEngine(logger *slog.Logger, hooks engine.Hooks) (*engine.Engine, error) {
	client, err := f.newClient(logger)
	if err != nil {
		return nil, err
	}
	return engine.New(client, f.engineConfig(hooks))
}

// newClient builds the model client from the flags.
func (f *llmFlags) newClient(logger *slog.Logger) (*openai.Client, error) {
	return openai.New(openai.Config{
		BaseURL: f.baseURL,
		APIKey:  f.apiKey,
		Timeout: f.timeout,
		Format:  engine.ResponseFormat(f.format),
		Logger:  logger,
	})
}

// engineConfig is the engine configuration the flags describe.
func (f *llmFlags) engineConfig(hooks engine.Hooks) engine.Config {
	retries := f.outputRetries
	if retries == 0 {
		retries = -1 // the flag's 0 means none; the engine's zero means default
	}
	return engine.Config{
		Model:         f.model,
		Format:        engine.ResponseFormat(f.format),
		OutputRetries: retries,
		MaxTokens:     f.maxTokens,
		MaxInputBytes: f.maxInputBytes,
		Hooks:         hooks,
	}
}

func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		rulesetPath = fs.String("ruleset", "", "ruleset file, YAML or JSON (required)")
		inputPath   = fs.String("input", "", "input file, YAML or JSON (required)")
		asJSON      = fs.Bool("json", false, "print exactly one JSON object on stdout")
		verbose     = fs.Bool("v", false, "log model calls and retries on stderr")
		llm         llmFlags
	)
	llm.register(fs, getenv)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rulevalidator validate --ruleset FILE --input FILE [--json] [--model NAME]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Judges the input against every rule of the ruleset with the model and prints")
		fmt.Fprintln(stderr, "the verdicts. Exit status: 0 done, 2 invalid ruleset or input (no model call")
		fmt.Fprintln(stderr, "made), 1 the model could not be reached or gave no valid answer.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitInvalid
	}
	if *rulesetPath == "" || *inputPath == "" {
		fmt.Fprintln(stderr, "validate: --ruleset and --input are required")
		fs.Usage()
		return exitInvalid
	}

	rs, err := readFile(*rulesetPath, engine.ParseRuleset)
	if err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return exitInvalid
	}
	in, err := readFile(*inputPath, engine.ParseInputs)
	if err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
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
	switch {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", v.RuleID, orDash(v.Name), outcome(v), data, len(v.Evidences))
	}
	tw.Flush()

	for _, v := range res.Rules {
		fmt.Fprintf(w, "\n%s — %s\n", v.RuleID, outcome(v))
		fmt.Fprintf(w, "  %s\n", v.Rationale)
		for _, ev := range v.Evidences {
			fmt.Fprintf(w, "  • %q\n    %s\n", ev.Text, evidencePlace(ev))
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
}

func outcome(v engine.Verdict) string {
	var s string
	switch {
	case v.BooleanOutput != nil && *v.BooleanOutput:
		s = "PASS"
	case v.BooleanOutput != nil:
		s = "FAIL"
	case v.NumericalOutput != nil:
		s = "score " + strconv.Itoa(*v.NumericalOutput)
	default:
		s = "no verdict"
	}
	if v.NotApplicable {
		s = "N/A (" + s + ")"
	}
	return s
}

func evidencePlace(ev engine.Evidence) string {
	var parts []string
	parts = append(parts, orDash(ev.SourceOrigin))
	if ev.SourcePageNumber > 0 {
		parts = append(parts, "page "+strconv.Itoa(ev.SourcePageNumber))
	}
	switch {
	case ev.Anchored:
		parts = append(parts, "anchored ("+string(ev.Match)+")")
	case ev.Match == engine.MatchNotDocument:
		parts = append(parts, "named input")
	default:
		parts = append(parts, "not found in the document")
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
