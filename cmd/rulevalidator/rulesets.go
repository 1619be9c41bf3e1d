package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"rulevalidator/engine"
	"rulevalidator/registry"
	"rulevalidator/stream"
)

// rulesetsCommands are the subcommands of `rulevalidator rulesets`.
func rulesetsCommands() []command {
	return []command{
		{"publish", "check a ruleset file and publish it to the rulesets topic", runRulesetsPublish},
		{"list", "list the rulesets held by the rulesets topic", runRulesetsList},
		{"check", "check ruleset files offline (no Kafka), for CI", runRulesetsCheck},
		{"diff", "compare two ruleset versions: rules changed, cached verdicts kept", runRulesetsDiff},
	}
}

func runRulesets(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	return commandGroup{name: "rulesets", commands: rulesetsCommands(), about: []string{
		"Manages the rulesets the service resolves by reference: a compacted topic keyed by",
		"ruleset id (--rulesets-topic).",
	}}.run(ctx, args, stdout, stderr, getenv)
}

// rulesetsPublishDoc is rulesets publish's --help.
var rulesetsPublishDoc = commandDoc{
	synopsis: "rulesets publish --file RULESET.yaml [settings]",
	about: []string{
		"Checks the ruleset as the service will and publishes it to the rulesets topic, keyed by its id, " +
			"acknowledged by every in-sync replica. Running services pick it up at once; its version becomes " +
			"the id's latest. An invalid ruleset is not published.",
	},
	exit:     "0 published, 2 invalid flags, settings or ruleset (nothing published), 1 Kafka failed.",
	examples: []string{"rulevalidator rulesets publish --file examples/contract-review/ruleset.yaml"},
}

func runRulesetsPublish(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	var (
		kf    kafkaConfig
		topic string
	)
	cl := newCommandLine("rulesets publish", rulesetsPublishDoc, rulesetsTopicSettings(&kf, &topic), stderr)
	var (
		file    = cl.fs.String("file", "", "the ruleset, YAML or JSON, with an id (required)")
		timeout = cl.fs.Duration("timeout", 30*time.Second, "bound on the write, acknowledgements included")
	)
	if code, ok := cl.parse(args, getenv); !ok {
		return code
	}
	switch {
	case *file == "":
		fmt.Fprintln(stderr, "rulesets publish: --file is required")
		cl.fs.Usage()
		return exitInvalid
	case topic == "":
		fmt.Fprintln(stderr, "rulesets publish: --rulesets-topic is required")
		return exitInvalid
	case *timeout <= 0:
		fmt.Fprintf(stderr, "rulesets publish: --timeout: %s must be positive\n", *timeout)
		return exitInvalid
	}
	if err := checkKafka(kf.brokers, kf.conn); err != nil {
		return cl.invalid(err)
	}
	rs, err := readPublishableRuleset(*file, false)
	if err != nil {
		printRulesetError(stderr, "rulesets publish: ", *file, err)
		return exitInvalid
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client, err := kf.client()
	if err != nil {
		fmt.Fprintf(stderr, "rulesets publish: %v\n", err)
		return exitInvalid
	}
	defer client.Close()
	if _, err := client.Partitions(ctx, topic); err != nil {
		fmt.Fprintf(stderr, "rulesets publish: %v\n", err)
		return exitFailure
	}
	if err := registry.Publish(ctx, client, topic, rs); err != nil {
		fmt.Fprintf(stderr, "rulesets publish: %v\n", err)
		if errors.Is(err, engine.ErrInvalidRuleset) {
			return exitInvalid
		}
		return exitFailure
	}
	fmt.Fprintf(stdout, "published ruleset %s version %s (%d rules) to topic %s\n", rs.ID, orDash(rs.Version), len(rs.AllRules()), topic)
	return exitOK
}

// rulesetsListDoc is rulesets list's --help.
var rulesetsListDoc = commandDoc{
	synopsis: "rulesets list [--json] [settings]",
	about: []string{
		"Reads the rulesets topic to its end, as the service does at start-up, and lists every ruleset " +
			"version it holds: id, version, whether it is the id's latest, rule count and the record it came " +
			"from (topic/partition/offset). Records the service would skip are reported on stderr.",
	},
	exit:     "0 listed, 2 invalid flags or settings, 1 the topic could not be read.",
	examples: []string{"rulevalidator rulesets list --kafka-brokers kafka-1:9092,kafka-2:9092"},
}

func runRulesetsList(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	var (
		kf    kafkaConfig
		topic string
	)
	cl := newCommandLine("rulesets list", rulesetsListDoc, rulesetsTopicSettings(&kf, &topic), stderr)
	var (
		asJSON  = cl.fs.Bool("json", false, "print a JSON array of {id, version, latest, rules, source}")
		timeout = cl.fs.Duration("timeout", 30*time.Second, "how long to wait for the topic to be read to its end")
	)
	if code, ok := cl.parse(args, getenv); !ok {
		return code
	}
	switch {
	case topic == "":
		fmt.Fprintln(stderr, "rulesets list: --rulesets-topic is required")
		return exitInvalid
	case *timeout <= 0:
		fmt.Fprintf(stderr, "rulesets list: --timeout: %s must be positive\n", *timeout)
		return exitInvalid
	}
	if err := checkKafka(kf.brokers, kf.conn); err != nil {
		return cl.invalid(err)
	}
	client, err := kf.client()
	if err != nil {
		fmt.Fprintf(stderr, "rulesets list: %v\n", err)
		return exitInvalid
	}
	defer client.Close()
	rows, err := listRulesets(ctx, client, topic, *timeout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "rulesets list: %v\n", err)
		return exitFailure
	}
	if *asJSON {
		if rows == nil {
			rows = []rulesetRow{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			fmt.Fprintf(stderr, "rulesets list: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	printRulesetRows(stdout, rows, topic)
	return exitOK
}

// rulesetRow is one ruleset version on the topic, as `rulesets list` shows it.
type rulesetRow struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	Latest  bool   `json:"latest"`
	Rules   int    `json:"rules"`
	Source  string `json:"source"`
}

// listRulesets reads topic to its end and returns what it holds; records
// the service would skip are logged on logTo.
func listRulesets(ctx context.Context, client *stream.Client, topic string, timeout time.Duration, logTo io.Writer) ([]rulesetRow, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t, stop, err := readRulesetsTopic(ctx, client, topic, logTo)
	if err != nil {
		return nil, err
	}
	defer stop()
	var rows []rulesetRow
	latest := map[string]string{}
	for _, e := range t.List() {
		if _, ok := latest[e.ID]; !ok {
			if rs, err := t.Resolve(ctx, e.ID, ""); err == nil {
				latest[e.ID] = rs.Version
			}
		}
		rows = append(rows, rulesetRow{
			ID: e.ID, Version: e.Version, Latest: latest[e.ID] == e.Version,
			Rules: len(e.Ruleset.AllRules()), Source: e.Source,
		})
	}
	return rows, nil
}

// readRulesetsTopic reads topic to its end, as the service does at
// start-up, and returns what it holds with the function that stops reading
// it; records the service would skip are logged on logTo. ctx bounds the
// wait.
func readRulesetsTopic(ctx context.Context, client *stream.Client, topic string, logTo io.Writer) (*registry.Topic, func(), error) {
	if _, err := client.Partitions(ctx, topic); err != nil {
		return nil, nil, err
	}
	logger := slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelWarn}))
	t, err := registry.NewTopic(registry.TopicConfig{Client: client, Topic: topic, Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = t.Run(runCtx) // returns nil when runCtx ends
	}()
	stop := func() {
		cancel()
		<-done
	}
	if err := t.WaitReady(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	return t, stop, nil
}

func printRulesetRows(w io.Writer, rows []rulesetRow, topic string) {
	if len(rows) == 0 {
		fmt.Fprintf(w, "no rulesets on topic %s\n", topic)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tVERSION\tLATEST\tRULES\tSOURCE")
	for _, r := range rows {
		latest := ""
		if r.Latest {
			latest = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r.ID, orDash(r.Version), latest, r.Rules, r.Source)
	}
	tw.Flush()
}

// rulesetsCheckDoc is rulesets check's --help.
var rulesetsCheckDoc = commandDoc{
	synopsis: "rulesets check [--inline] --file RULESET.yaml | FILE...",
	about: []string{
		"Checks ruleset files exactly as the service and `rulesets publish` do, without Kafka or a model, " +
			"and prints every problem with its place (rule index and id, field). A ruleset to publish needs an " +
			"id; --inline checks rulesets sent inside requests, which need none. Meant for the CI of teams that " +
			"write rulesets.",
	},
	exit:     "0 every file is valid, 2 a file is invalid or unreadable.",
	examples: []string{"rulevalidator rulesets check rulesets/*.yaml"},
}

func runRulesetsCheck(_ context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	cl := newCommandLine("rulesets check", rulesetsCheckDoc, nil, stderr)
	cl.allowArgs = true
	fs := cl.fs
	var (
		files  []string
		inline = fs.Bool("inline", false, "the files are inline rulesets of requests: no id needed")
	)
	fs.Func("file", "a ruleset `file`, YAML or JSON; repeat the flag or list files as arguments", func(v string) error {
		files = append(files, v)
		return nil
	})
	if code, ok := cl.parse(args, getenv); !ok {
		return code
	}
	files = append(files, cl.args...)
	if len(files) == 0 {
		fmt.Fprintln(stderr, "rulesets check: give at least one file (--file or arguments)")
		fs.Usage()
		return exitInvalid
	}
	code := exitOK
	for _, path := range files {
		rs, err := readPublishableRuleset(path, *inline)
		if err != nil {
			printRulesetError(stderr, "", path, err)
			code = exitInvalid
			continue
		}
		fmt.Fprintf(stdout, "ok  %s  (ruleset %s version %s, %d rules)\n", path, orDash(rs.ID), orDash(rs.Version), len(rs.AllRules()))
	}
	return code
}

// errNoRulesetID is the problem of a ruleset to publish that has no id.
var errNoRulesetID = fmt.Errorf("%w: no id: a published ruleset needs an id, the key it is stored and referenced under", engine.ErrInvalidRuleset)

// readPublishableRuleset reads and checks a ruleset file; unless inline,
// it must have an id.
func readPublishableRuleset(path string, inline bool) (*engine.Ruleset, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rs, err := engine.ParseRuleset(data)
	if err != nil {
		return nil, err
	}
	if !inline && rs.ID == "" {
		return nil, errNoRulesetID
	}
	return rs, nil
}

// printRulesetError writes each problem of a ruleset on its own line,
// prefixed by the file.
func printRulesetError(w io.Writer, prefix, path string, err error) {
	var pathErr *iofs.PathError
	if errors.As(err, &pathErr) {
		fmt.Fprintf(w, "%s%v\n", prefix, err) // it names the file already
		return
	}
	var problems []error
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		problems = joined.Unwrap()
	} else {
		problems = []error{err}
	}
	for _, p := range problems {
		fmt.Fprintf(w, "%s%s: %v\n", prefix, path, p)
	}
}
