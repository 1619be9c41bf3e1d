package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/eval"
)

// exitBelowMinimum: the evaluation ran but accuracy is under --min-accuracy.
const exitBelowMinimum = 3

// evalDoc is eval's --help.
var evalDoc = commandDoc{
	synopsis: "eval --dataset DIR [--json] [--baseline per-rule] [--runs N] [--min-accuracy X] [settings]",
	about: []string{
		"Judges every case of a labelled dataset with the model and scores the verdicts and their " +
			"evidence against the labels; with --baseline per-rule, also a naive judge on the same model.",
	},
	exit: "0 done, 2 invalid flags, settings or dataset (no model call made), 1 the model could not be " +
		"reached, 3 accuracy below --min-accuracy.",
	examples: []string{
		"rulevalidator eval --dataset examples/eval/edgar-nda --baseline per-rule",
		"rulevalidator eval --dataset DIR --min-accuracy 0.9",
		"rulevalidator eval --dataset examples/eval/edgar-nda --inputs pdf",
	},
}

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	var (
		llm  llmConfig
		docs documentConfig
	)
	cl := newCommandLine("eval", evalDoc, judgeSettings(&llm, &docs), stderr)
	fs := cl.fs
	var (
		dir         = fs.String("dataset", "", "dataset directory holding dataset.yaml (required)")
		asJSON      = fs.Bool("json", false, "print exactly one JSON object on stdout")
		baseline    = fs.String("baseline", "", `also judge with a naive baseline on the same model: "per-rule" (one call per rule, pass/score/reason)`)
		runs        = fs.Int("runs", 1, "judge every case this many times and report the spread")
		minAccuracy share
		cases       = fs.String("cases", "", "comma-separated case ids to judge (default: all)")
		compare     = fs.String("compare-evidence-mode", "", "also judge with the engine in this evidence mode (cite or quote), reported beside the engine as engine:MODE")
		inputsDir   = fs.String("inputs", "", "read each case's input from this directory of the dataset instead, by file name: the same labels on other renderings of the documents (the shipped dataset's pdf: its agreements as PDFs)")
		verbose     = fs.Bool("v", false, "log model calls and retries on stderr")
	)
	fs.Var(&minAccuracy, "min-accuracy", "exit 3 when the engine's verdict accuracy is below this `share` (0 to 1; 0.9 for 90%); unset, no gate")
	if code, ok := cl.parse(args, getenv); !ok {
		return code
	}
	if err := errors.Join(llm.check(), docs.check()); err != nil {
		return cl.invalid(err)
	}
	switch {
	case *dir == "":
		fmt.Fprintln(stderr, "eval: --dataset is required")
		fs.Usage()
		return exitInvalid
	case *baseline != "" && *baseline != eval.BaselinePerRule:
		fmt.Fprintf(stderr, "eval: --baseline %q: the only baseline is %q\n", *baseline, eval.BaselinePerRule)
		return exitInvalid
	case *compare != "" && *compare != string(engine.EvidenceCite) && *compare != string(engine.EvidenceQuote):
		fmt.Fprintf(stderr, "eval: --compare-evidence-mode %q: is not cite or quote\n", *compare)
		return exitInvalid
	case *runs < 1:
		fmt.Fprintf(stderr, "eval: --runs %d: must be at least 1\n", *runs)
		return exitInvalid
	case minAccuracy.set && !(minAccuracy.v >= 0 && minAccuracy.v <= 1): // NaN too
		fmt.Fprintf(stderr, "eval: --min-accuracy %s: accuracy is a share between 0 and 1 (0.9 for 90%%)\n", minAccuracy.raw)
		return exitInvalid
	}

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	reader, err := docs.reader(logger)
	if err != nil {
		return cl.invalid(err)
	}
	defer reader.Close()
	ds, err := eval.LoadWith(ctx, *dir, eval.LoadOptions{InputsDir: *inputsDir, Documents: reader})
	if err != nil {
		fmt.Fprintf(stderr, "eval: %s\n", strings.ReplaceAll(err.Error(), "\n", "\neval: "))
		return exitInvalid
	}
	if *cases != "" {
		if ds, err = selectCases(ds, strings.Split(*cases, ",")); err != nil {
			fmt.Fprintf(stderr, "eval: --cases: %v\n", err)
			return exitInvalid
		}
	}

	// Every HTTP attempt is counted, retries and format fallbacks included.
	attempts := &eval.Attempts{}
	clientCfg := llm.clientConfig(logger)
	clientCfg.OnAttempt = attempts.Observe
	client, err := openai.New(clientCfg)
	if err != nil {
		fmt.Fprintf(stderr, "eval: %v\n", err)
		return exitInvalid
	}
	rep, err := eval.Run(ctx, ds, eval.Options{
		LLM:      client,
		Engine:   llm.engineConfig(logger, engine.Hooks{}),
		Runs:     *runs,
		Baseline: *baseline,
		Attempts: attempts,
		CompareEvidence: func() []engine.EvidenceMode {
			if *compare == "" {
				return nil
			}
			return []engine.EvidenceMode{engine.EvidenceMode(*compare)}
		}(),
		Progress: func(system string, run int, caseID string, took time.Duration, err error) {
			status := "ok"
			if err != nil {
				status = "failed: " + err.Error()
			}
			fmt.Fprintf(stderr, "eval: %s run %d case %s: %s (%s)\n", system, run, caseID, status, took.Round(100*time.Millisecond))
		},
	})
	if err != nil {
		fmt.Fprintf(stderr, "eval: %s\n", describeEvalError(err, llm.baseURL))
		if errors.Is(err, engine.ErrInvalidRuleset) || errors.Is(err, engine.ErrInvalidInput) {
			return exitInvalid
		}
		return exitFailure
	}

	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "eval: writing the report: %v\n", err)
			return exitFailure
		}
	} else if err := rep.WriteTable(stdout); err != nil {
		fmt.Fprintf(stderr, "eval: writing the report: %v\n", err)
		return exitFailure
	}

	if minAccuracy.set {
		acc := rep.System(eval.SystemEngine).Overall.Accuracy
		if acc == nil || *acc < minAccuracy.v {
			got := "none"
			if acc != nil {
				got = fmt.Sprintf("%.3f", *acc)
			}
			fmt.Fprintf(stderr, "eval: verdict accuracy %s is below --min-accuracy %.3f\n", got, minAccuracy.v)
			return exitBelowMinimum
		}
	}
	return exitOK
}

// share is a flag holding a number, remembering whether it was given; its
// range is checked after parsing, so that the message names the flag the
// way the other checks do.
type share struct {
	set bool
	raw string
	v   float64
}

func (s *share) String() string { return s.raw }

func (s *share) Set(raw string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
	if err != nil {
		return errors.New("not a number")
	}
	s.set, s.raw, s.v = true, raw, v
	return nil
}

// selectCases keeps the named cases, in the dataset's order.
func selectCases(ds *eval.Dataset, ids []string) (*eval.Dataset, error) {
	want := map[string]bool{}
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" {
			want[id] = true
		}
	}
	kept := *ds
	kept.Cases = nil
	for _, c := range ds.Cases {
		if want[c.ID] {
			kept.Cases = append(kept.Cases, c)
			delete(want, c.ID)
		}
	}
	if len(want) > 0 {
		var missing []string
		for id := range want {
			missing = append(missing, id)
		}
		slices.Sort(missing)
		return nil, fmt.Errorf("no case %s in the dataset", strings.Join(missing, ", "))
	}
	if len(kept.Cases) == 0 {
		return nil, errors.New("no case named")
	}
	return &kept, nil
}
