package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/rulesetdiff"
	"rulevalidator/registry"
)

// rulesetsDiffDoc is rulesets diff's --help.
var rulesetsDiffDoc = commandDoc{
	synopsis: "rulesets diff [--json] OLD NEW [settings]",
	about: []string{
		"Compares two versions of a ruleset before the new one is rolled out: the rules added, removed and " +
			"changed, each changed rule field by field (text, not-applicable text, type, allowed scores, check, " +
			"filter, group, weight, name, review threshold), the ruleset's own changes (aggregations, score range, " +
			"inputs, filter, cache) and its nested rulesets', and for each rule whether the verdicts the verdict " +
			"cache holds for the old version stay valid under the new one or are invalidated, and why. The cache's " +
			"own key decides it: a rule's verdicts stay valid while the rule as the model sees it (id, type, allowed " +
			"scores, text, not-applicable text) is unchanged, the ruleset id is the same and both versions cache; " +
			"for the same tenant, model, engine settings and documents.",
		"OLD and NEW are ruleset files (YAML or JSON, checked as `rulesets check` does) or ID@VERSION, read " +
			"from the rulesets topic (ID@ for the id's latest version). Flags may follow them.",
	},
	exit: "0 compared (whether or not they differ), 2 invalid flags, settings or ruleset, or a version the topic " +
		"does not hold, 1 the topic could not be read.",
	examples: []string{
		"rulevalidator rulesets diff examples/eval/edgar-nda/ruleset.yaml examples/eval/edgar-nda/ruleset-revised.yaml",
		"rulevalidator rulesets diff contract-review@1.0.0 contract-review@ --json",
	},
}

func runRulesetsDiff(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	var (
		kf    kafkaConfig
		topic string
	)
	cl := newCommandLine("rulesets diff", rulesetsDiffDoc, rulesetsTopicSettings(&kf, &topic), stderr)
	cl.allowArgs = true
	var (
		asJSON  = cl.fs.Bool("json", false, "print the diff as one JSON object")
		timeout = cl.fs.Duration("timeout", 30*time.Second, "how long to wait for the rulesets topic to be read to its end (ID@VERSION only)")
	)
	if code, ok := cl.parse(args, getenv); !ok {
		return code
	}
	if len(cl.args) != 2 {
		fmt.Fprintf(stderr, "rulesets diff: give two rulesets, OLD and NEW; got %d\n", len(cl.args))
		cl.fs.Usage()
		return exitInvalid
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "rulesets diff: --timeout: %s must be positive\n", *timeout)
		return exitInvalid
	}

	refs := make([]rulesetRef, 2)
	needTopic := false
	for i, arg := range cl.args {
		ref, err := parseRulesetRef(arg)
		if err != nil {
			fmt.Fprintf(stderr, "rulesets diff: %v\n", err)
			return exitInvalid
		}
		refs[i] = ref
		needTopic = needTopic || ref.file == ""
	}
	sides := make([]*engine.Ruleset, 2)
	sources := make([]string, 2)
	for i, ref := range refs {
		if ref.file == "" {
			continue
		}
		rs, err := readPublishableRuleset(ref.file, true)
		if err != nil {
			printRulesetError(stderr, "rulesets diff: ", ref.file, err)
			return exitInvalid
		}
		sides[i], sources[i] = rs, ref.file
	}
	if needTopic {
		if topic == "" {
			fmt.Fprintln(stderr, "rulesets diff: --rulesets-topic is required to read ID@VERSION")
			return exitInvalid
		}
		if err := checkKafka(kf.brokers, kf.conn); err != nil {
			return cl.invalid(err)
		}
		client, err := kf.client()
		if err != nil {
			fmt.Fprintf(stderr, "rulesets diff: %v\n", err)
			return exitInvalid
		}
		defer client.Close()
		tctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		t, stop, err := readRulesetsTopic(tctx, client, topic, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "rulesets diff: %v\n", err)
			return exitFailure
		}
		defer stop()
		for i, ref := range refs {
			if ref.file != "" {
				continue
			}
			rs, err := t.Resolve(tctx, ref.id, ref.version)
			if err != nil {
				fmt.Fprintf(stderr, "rulesets diff: %s: %v\n", cl.args[i], err)
				if errors.Is(err, registry.ErrUnknownRuleset) {
					return exitInvalid
				}
				return exitFailure
			}
			sides[i], sources[i] = rs, topicSource(t, rs)
		}
	}

	d, err := rulesetdiff.Compare(sides[0], sides[1])
	if err != nil { // both were checked as they were read
		fmt.Fprintf(stderr, "rulesets diff: %v\n", err)
		return exitInvalid
	}
	d.Old.Source, d.New.Source = sources[0], sources[1]
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(d)
	} else {
		err = d.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rulesets diff: writing the diff: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// rulesetRef is a ruleset named on the command line: a file, or an id and
// version of the rulesets topic (version "" for the latest).
type rulesetRef struct {
	file, id, version string
}

// parseRulesetRef reads arg as a file when one exists there, else as
// ID@VERSION.
func parseRulesetRef(arg string) (rulesetRef, error) {
	if _, err := os.Stat(arg); err == nil {
		return rulesetRef{file: arg}, nil
	}
	id, version, ok := strings.Cut(arg, "@")
	if !ok {
		return rulesetRef{}, fmt.Errorf("%s: no such file (a ruleset of the rulesets topic is named ID@VERSION, or ID@ for its latest version)", arg)
	}
	if id == "" {
		return rulesetRef{}, fmt.Errorf("%s: no ruleset id before the @", arg)
	}
	return rulesetRef{id: id, version: version}, nil
}

// topicSource is where on the topic rs was read from.
func topicSource(t *registry.Topic, rs *engine.Ruleset) string {
	for _, e := range t.List() {
		if e.Ruleset == rs {
			return e.Source
		}
	}
	return rs.ID + "@" + rs.Version
}
