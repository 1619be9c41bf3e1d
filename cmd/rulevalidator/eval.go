package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/engine/rulesetdiff"
	"rulevalidator/eval"
	"rulevalidator/internal/tracing"
	"rulevalidator/verdictcache"
)

// exitBelowMinimum: the evaluation ran but accuracy is under --min-accuracy.
const exitBelowMinimum = 3

// evalDoc is eval's --help.
var evalDoc = commandDoc{
	synopsis: "eval --dataset DIR [--json] [--baseline per-rule] [--runs N] [--cases A,B | --first N] [--min-accuracy X] [--compare-ruleset FILE] [settings] | eval --merge A.json,B.json [--json]",
	about: []string{
		"Judges every case of a labelled dataset with the model and scores the verdicts and their " +
			"evidence against the labels; with --baseline per-rule, also a plain rubric judge (promptfoo's llm-rubric) " +
			"on the same model, and the engine's margin over it with its 95% interval over the cases. With " +
			"--confidence verify, what each --overrule-passes-below would have made of the engine's verdicts.",
		"With --compare-ruleset FILE, judges the dataset with its own ruleset and then with FILE, a new " +
			"version of it, through one verdict cache (the rules whose cached verdicts stay valid are not " +
			"asked again), and reports what changed (as `rulesets diff` does) and, rule by rule, each " +
			"version's accuracy against the labels and the verdicts that flip, case by case; --min-accuracy " +
			"then gates the new version.",
		"With --recheck RUN.json, judges nothing: asks the verify check again, with the settings given, of the " +
			"engine's verdicts in a report eval --json wrote of the dataset (one run, cite evidence mode): what a run " +
			"with those check settings would have given, for the cost of the checks.",
		"With --merge A.json,B.json, judges nothing: reads reports that eval --json wrote for disjoint cases " +
			"of one dataset (one run a server, say) and writes the report of all their cases, every figure, " +
			"margin, interval and sweep computed again; --min-accuracy gates it.",
	},
	exit: "0 done, 2 invalid flags, settings or dataset (no model call made), 1 the model could not be " +
		"reached, 3 accuracy below --min-accuracy.",
	examples: []string{
		"rulevalidator eval --dataset examples/eval/edgar-nda --baseline per-rule",
		"rulevalidator eval --dataset examples/eval/contractnli-dev --baseline per-rule --runs 2 --first 5",
		"rulevalidator eval --dataset DIR --min-accuracy 0.9",
		"rulevalidator eval --dataset examples/eval/edgar-nda --inputs pdf",
		"rulevalidator eval --dataset examples/eval/edgar-nda --compare-ruleset examples/eval/edgar-nda/ruleset-revised.yaml",
		"rulevalidator eval --merge first-half.json,second-half.json",
		"rulevalidator eval --dataset examples/eval/contractnli-dev --recheck run.json --verify-nearest-passages 2",
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
		first       = fs.Int("first", 0, "judge only the first N cases of the dataset (after --cases), for a quick run; 0: all")
		compare     = fs.String("compare-evidence-mode", "", "also judge with the engine in this evidence mode (cite or quote), reported beside the engine as engine:MODE")
		inputsDir   = fs.String("inputs", "", "read each case's input from this directory of the dataset instead, by file name: the same labels on other renderings of the documents (the shipped dataset's pdf: its agreements as PDFs)")
		verbose     = fs.Bool("v", false, "log model calls and retries on stderr")
		revalidate  = fs.String("revalidate-ruleset", "", "judge the dataset, then judge it again with this ruleset (the dataset's with some rules changed) through a verdict cache both share, and report what the second run cost against the first")
		compareRS   = fs.String("compare-ruleset", "", "judge the dataset with its ruleset, then with this new version of it through a verdict cache both share, and report the changes, each version's accuracy and the verdicts that flip")
		recheck     = fs.String("recheck", "", "judge nothing: ask the verify check again, with these settings, of the engine's verdicts in this `file`, a report eval --json wrote of the dataset (cite evidence mode, one run); needs --confidence verify")
		merge       = fs.String("merge", "", "judge nothing: merge these comma-separated `files`, reports eval --json wrote for disjoint cases of one dataset, into one report, every figure computed again")
	)
	fs.Var(&minAccuracy, "min-accuracy", "exit 3 when the engine's verdict accuracy is below this `share` (0 to 1; 0.9 for 90%); unset, no gate")
	if code, ok := cl.parse(args, getenv); !ok {
		return code
	}
	if err := errors.Join(llm.check(), docs.check()); err != nil {
		return cl.invalid(err)
	}
	if *merge != "" {
		if *dir != "" || *baseline != "" || *runs != 1 || *cases != "" || *first != 0 || *compare != "" || *inputsDir != "" || *revalidate != "" || *compareRS != "" {
			fmt.Fprintln(stderr, "eval: --merge judges nothing: it takes no --dataset, --baseline, --runs, --cases, --first, --compare-evidence-mode, --inputs, --revalidate-ruleset or --compare-ruleset")
			return exitInvalid
		}
		if minAccuracy.set && !(minAccuracy.v >= 0 && minAccuracy.v <= 1) {
			fmt.Fprintf(stderr, "eval: --min-accuracy %s: accuracy is a share between 0 and 1 (0.9 for 90%%)\n", minAccuracy.raw)
			return exitInvalid
		}
		return mergeEvalReports(stdout, stderr, strings.Split(*merge, ","), *asJSON, minAccuracy)
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
	case *first < 0:
		fmt.Fprintf(stderr, "eval: --first %d: must be 0 (all cases) or more\n", *first)
		return exitInvalid
	case *revalidate != "" && (*runs != 1 || *baseline != "" || *compare != ""):
		fmt.Fprintln(stderr, "eval: --revalidate-ruleset measures one run of the engine: it takes no --runs, --baseline or --compare-evidence-mode")
		return exitInvalid
	case *compareRS != "" && (*runs != 1 || *baseline != "" || *compare != "" || *revalidate != ""):
		fmt.Fprintln(stderr, "eval: --compare-ruleset compares one run of the engine per version: it takes no --runs, --baseline, --compare-evidence-mode or --revalidate-ruleset")
		return exitInvalid
	case *recheck != "" && (*runs != 1 || *baseline != "" || *compare != "" || *revalidate != "" || *compareRS != ""):
		fmt.Fprintln(stderr, "eval: --recheck asks the checks again of one recorded run of the engine: it takes no --runs, --baseline, --compare-evidence-mode, --revalidate-ruleset or --compare-ruleset")
		return exitInvalid
	case minAccuracy.set && !(minAccuracy.v >= 0 && minAccuracy.v <= 1): // NaN too
		fmt.Fprintf(stderr, "eval: --min-accuracy %s: accuracy is a share between 0 and 1 (0.9 for 90%%)\n", minAccuracy.raw)
		return exitInvalid
	}

	logger := commandLogger(stderr, *verbose)
	llm.logProfile(logger)
	// Checked now: the loader reports a document it cannot read as a
	// problem of the dataset, and this is the environment's.
	if err := docs.checkCacheDir(); err != nil {
		fmt.Fprintf(stderr, "eval: %s\n", cacheDirFault(err))
		return exitFailure
	}
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
	var recorded *eval.Report
	if *recheck != "" {
		if recorded, err = readEvalReport(*recheck); err != nil {
			fmt.Fprintf(stderr, "eval: --recheck: %v\n", err)
			return exitInvalid
		}
		if ds, err = recordedCases(ds, recorded); err != nil {
			fmt.Fprintf(stderr, "eval: --recheck: %v\n", err)
			return exitInvalid
		}
	}
	if *cases != "" {
		if ds, err = selectCases(ds, strings.Split(*cases, ",")); err != nil {
			fmt.Fprintf(stderr, "eval: --cases: %v\n", err)
			return exitInvalid
		}
	}
	if *first > 0 && *first < len(ds.Cases) {
		kept := *ds
		kept.Cases = ds.Cases[:*first]
		ds = &kept
	}

	var (
		variant *eval.Dataset
		diffs   []*rulesetdiff.Diff
	)
	if *revalidate != "" {
		if variant, err = withRuleset(ds, *revalidate); err != nil {
			fmt.Fprintf(stderr, "eval: --revalidate-ruleset: %v\n", err)
			return exitInvalid
		}
	}
	if *compareRS != "" {
		if variant, diffs, err = revisedDataset(ds, *compareRS); err != nil {
			fmt.Fprintf(stderr, "eval: --compare-ruleset: %v\n", err)
			return exitInvalid
		}
	}

	// Each case judged is a trace of its own when the OTEL_* variables ask.
	tp, shutdown, err := tracing.Setup(ctx, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "eval: %v\n", err)
		return exitInvalid
	}
	defer shutdownTracing(shutdown, logger)
	llm.tracer = tp

	// Every HTTP attempt is counted, retries and format fallbacks included.
	attempts := &eval.Attempts{}
	clientCfg := llm.clientConfig(logger)
	clientCfg.OnAttempt = attempts.Observe
	client, err := openai.New(clientCfg)
	if err != nil {
		fmt.Fprintf(stderr, "eval: %v\n", err)
		return exitInvalid
	}
	engineCfg := llm.engineConfig(logger, engine.Hooks{})
	if recorded != nil && engineCfg.Confidence != engine.ConfidenceVerify {
		fmt.Fprintf(stderr, "eval: --recheck asks the verify check again: the engine's confidence must be verify, not %q (--confidence verify)\n", cmp.Or(engineCfg.Confidence, engine.ConfidenceLogProbs))
		return exitInvalid
	}
	if variant != nil {
		// Shared by both runs: the second asks only for what changed.
		if engineCfg.Cache, err = verdictcache.NewMemory(verdictcache.MemoryConfig{}); err != nil {
			fmt.Fprintf(stderr, "eval: %v\n", err)
			return exitFailure
		}
	}
	opts := eval.Options{
		LLM:      client,
		Engine:   engineCfg,
		Runs:     *runs,
		Baseline: *baseline,
		Attempts: attempts,
		Recheck:  recorded,
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
	}
	rep, err := eval.Run(ctx, ds, opts)
	var again *eval.Report
	if err == nil && variant != nil {
		again, err = eval.Run(ctx, variant, opts)
	}
	if err != nil {
		fmt.Fprintf(stderr, "eval: %s\n", describeEvalError(err, llm.baseURL))
		if errors.Is(err, engine.ErrInvalidRuleset) || errors.Is(err, engine.ErrInvalidInput) {
			return exitInvalid
		}
		return exitFailure
	}

	gated, err := writeEvalReports(stdout, *asJSON, rep, again, *compareRS != "", diffs)
	if err != nil {
		fmt.Fprintf(stderr, "eval: writing the report: %v\n", err)
		return exitFailure
	}

	return gateAccuracy(stderr, gated, minAccuracy)
}

// gateAccuracy is eval's exit status for a report written: exitBelowMinimum
// when --min-accuracy is set and the engine's verdict accuracy is below it.
func gateAccuracy(stderr io.Writer, rep *eval.Report, minAccuracy share) int {
	if !minAccuracy.set {
		return exitOK
	}
	var acc *float64
	if s := rep.System(eval.SystemEngine); s != nil {
		acc = s.Overall.Accuracy
	}
	if acc == nil || *acc < minAccuracy.v {
		got := "none"
		if acc != nil {
			got = fmt.Sprintf("%.3f", *acc)
		}
		fmt.Fprintf(stderr, "eval: verdict accuracy %s is below --min-accuracy %.3f\n", got, minAccuracy.v)
		return exitBelowMinimum
	}
	return exitOK
}

// mergeEvalReports reads the reports eval --json wrote to files, merges them
// (eval.Merge) and writes the merged report as a run writes one.
func mergeEvalReports(stdout, stderr io.Writer, files []string, asJSON bool, minAccuracy share) int {
	var reports []*eval.Report
	for _, f := range files {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		rep, err := readEvalReport(f)
		if err != nil {
			fmt.Fprintf(stderr, "eval: --merge: %v\n", err)
			return exitInvalid
		}
		reports = append(reports, rep)
	}
	merged, err := eval.Merge(reports)
	if err != nil {
		fmt.Fprintf(stderr, "eval: --merge: %v\n", err)
		return exitInvalid
	}
	if _, err := writeEvalReports(stdout, asJSON, merged, nil, false, nil); err != nil {
		fmt.Fprintf(stderr, "eval: writing the report: %v\n", err)
		return exitFailure
	}
	return gateAccuracy(stderr, merged, minAccuracy)
}

// writeEvalReports writes what the run measured: one report, a
// re-validation (again judged after rep through the cache) or, when
// comparing, the comparison of again's ruleset with rep's. It returns the
// report --min-accuracy gates: the new version's when comparing.
func writeEvalReports(w io.Writer, asJSON bool, rep, again *eval.Report, comparing bool, diffs []*rulesetdiff.Diff) (*eval.Report, error) {
	switch {
	case comparing:
		cmp, err := eval.Compare(rep, again)
		if err != nil {
			return nil, err
		}
		return again, writeComparison(w, asJSON, diffs, cmp, rep, again)
	case again != nil:
		return rep, writeRevalidation(w, asJSON, rep, again)
	case asJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return rep, enc.Encode(rep)
	}
	return rep, rep.WriteTable(w)
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

// withRuleset is ds with every case judged against the ruleset in file,
// which must have the rules the labels are for.
func withRuleset(ds *eval.Dataset, file string) (*eval.Dataset, error) {
	rs, err := readFile(file, engine.ParseRuleset)
	if err != nil {
		return nil, err
	}
	out := *ds
	out.Cases = make([]*eval.Case, len(ds.Cases))
	for i, c := range ds.Cases {
		for _, l := range c.Labels {
			if !slices.ContainsFunc(rs.Rules, func(r engine.Rule) bool { return r.RuleID == l.RuleID }) {
				return nil, fmt.Errorf("%s has no rule %q, which case %q is labelled for", file, l.RuleID, c.ID)
			}
		}
		cc := *c
		cc.Ruleset = rs
		out.Cases[i] = &cc
	}
	return &out, nil
}

// revalidation is what --revalidate-ruleset reports: both runs, and the
// share of the first run's cost the second took.
type revalidation struct {
	First        *eval.Report `json:"first"`
	Revalidation *eval.Report `json:"revalidation"`
	// Shares of the first run's model tokens (prompt and completion),
	// model calls and wall time that the second run took.
	TokensShare float64 `json:"tokens_share"`
	CallsShare  float64 `json:"calls_share"`
	WallShare   float64 `json:"wall_share"`
}

func writeRevalidation(w io.Writer, asJSON bool, first, again *eval.Report) error {
	a, b := first.System(eval.SystemEngine).Cost, again.System(eval.SystemEngine).Cost
	ratio := func(x, y float64) float64 {
		if y == 0 {
			return 0
		}
		return x / y
	}
	r := revalidation{First: first, Revalidation: again,
		TokensShare: ratio(float64(b.PromptTokens+b.CompletionTokens), float64(a.PromptTokens+a.CompletionTokens)),
		CallsShare:  ratio(float64(b.Calls), float64(a.Calls)),
		WallShare:   ratio(float64(b.Wall), float64(a.Wall)),
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintln(w, "First run (the dataset's ruleset, the verdict cache empty)")
	if err := first.WriteTable(w); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nRe-validation (the changed ruleset, through the verdict cache the first run filled)")
	if err := again.WriteTable(w); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nre-validation against the first run: model tokens %d of %d (%.3f), model calls %d of %d (%.3f), wall time %s of %s (%.3f)\n",
		b.PromptTokens+b.CompletionTokens, a.PromptTokens+a.CompletionTokens, r.TokensShare,
		b.Calls, a.Calls, r.CallsShare, b.Wall.Round(100*time.Millisecond), a.Wall.Round(100*time.Millisecond), r.WallShare)
	return err
}

// revisedDataset is ds judged with the ruleset in file, a new version of
// its cases' ruleset (eval.Revised), and the diff of each ruleset its
// cases use against it.
func revisedDataset(ds *eval.Dataset, file string) (*eval.Dataset, []*rulesetdiff.Diff, error) {
	rs, err := readFile(file, engine.ParseRuleset)
	if err != nil {
		return nil, nil, err
	}
	revised, err := eval.Revised(ds, rs)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	var (
		diffs []*rulesetdiff.Diff
		seen  []*engine.Ruleset
	)
	for _, c := range ds.Cases {
		if slices.Contains(seen, c.Ruleset) {
			continue
		}
		seen = append(seen, c.Ruleset)
		d, err := rulesetdiff.Compare(c.Ruleset, rs)
		if err != nil {
			return nil, nil, err
		}
		d.Old.Source, d.New.Source = "dataset "+ds.Dir, file
		diffs = append(diffs, d)
	}
	return revised, diffs, nil
}

// comparison is what --compare-ruleset reports: what changed between the
// versions (a diff for each ruleset the dataset's cases use, one for most
// datasets), the verdicts compared, and both runs' reports.
type comparison struct {
	Diffs      []*rulesetdiff.Diff `json:"diffs"`
	Comparison *eval.Comparison    `json:"comparison"`
	Old        *eval.Report        `json:"old"`
	New        *eval.Report        `json:"new"`
}

func writeComparison(w io.Writer, asJSON bool, diffs []*rulesetdiff.Diff, cmp *eval.Comparison, old, new *eval.Report) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(comparison{Diffs: diffs, Comparison: cmp, Old: old, New: new})
	}
	for _, d := range diffs {
		if err := d.WriteText(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if err := cmp.WriteTable(w); err != nil {
		return err
	}
	a, b := old.System(eval.SystemEngine).Cost, new.System(eval.SystemEngine).Cost
	_, err := fmt.Fprintf(w, "\nmodel calls: old %d, new %d (through the cache the old run filled); model tokens: old %d, new %d\n",
		a.Calls, b.Calls, a.PromptTokens+a.CompletionTokens, b.PromptTokens+b.CompletionTokens)
	return err
}

// readEvalReport reads a report eval --json wrote.
func readEvalReport(file string) (*eval.Report, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var rep eval.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("%s is not a report eval --json wrote: %w", file, err)
	}
	if len(rep.Systems) == 0 {
		return nil, fmt.Errorf("%s is not a report eval --json wrote: it has no system", file)
	}
	return &rep, nil
}

// recordedCases keeps the cases of ds that rec judged (--cases then chooses among them), in
// the dataset's order; a case rec judged that ds does not have is refused.
func recordedCases(ds *eval.Dataset, rec *eval.Report) (*eval.Dataset, error) {
	if rec.Dataset != ds.Name {
		return nil, fmt.Errorf("the report is of dataset %q, not %q", rec.Dataset, ds.Name)
	}
	var ids []string
	for _, c := range rec.Systems[0].PerCase {
		ids = append(ids, c.Case)
	}
	return selectCases(ds, ids)
}
