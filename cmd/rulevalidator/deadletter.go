package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"rulevalidator/replay"
	"rulevalidator/schemas"
)

// deadLetterCommands are the subcommands of `rulevalidator deadletter`.
func deadLetterCommands() []command {
	return []command{
		{"list", "list the dead letters a selection names and what a replay would do with each", runDeadLetterList},
		{"replay", "send the selected dead letters' requests to the requests topic again", runDeadLetterReplay},
	}
}

func runDeadLetter(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	return commandGroup{name: "deadletter", commands: deadLetterCommands(), about: []string{
		"Acts on the dead-letter topic (--deadletter-topic): selects dead letters by reason,",
		"tenant, ruleset and time, and sends their requests again once the cause is fixed.",
	}}.run(ctx, args, stdout, stderr, getenv)
}

// deadLetterSelection is what both subcommands say about choosing dead letters.
const deadLetterSelection = "Reads the dead-letter topic from its start to its current end and selects dead letters: " +
	"--reason (repeatable, or a comma-separated list), --tenant and --ruleset (read from the original request " +
	"the dead letter keeps; a dead letter whose original cannot be decoded matches neither), --since and --until " +
	"(when it failed: RFC 3339, or a duration before now such as 24h). Each selected dead letter is printed on one " +
	"line (request id, tenant, ruleset, reason, when it failed, where the original was consumed, how many times it " +
	"was replayed) with what a replay does with it, then the count by reason. With --json, one JSON object a " +
	"dead letter, then one holding the counts."

// deadLetterListDoc is deadletter list's --help.
var deadLetterListDoc = commandDoc{
	synopsis: "deadletter list [--reason R]... [--tenant T] [--ruleset ID[@VERSION]] [--since T] [--until T] [--json] [settings]",
	about: []string{
		deadLetterSelection,
		"Nothing is written. What a replay would do is read from the progress topic (--replays-topic): a dead " +
			"letter replayed before is skipped, one whose original was replayed --max-replays times already is " +
			"refused, and one whose original cannot be decoded, or is not kept whole, is never replayed. It is " +
			"`deadletter replay --dry-run`.",
	},
	exit: "0 listed, 2 invalid flags or settings, 1 a topic could not be read.",
	examples: []string{
		"rulevalidator deadletter list --reason unknown_ruleset --since 24h",
		"rulevalidator deadletter list --tenant acme --ruleset contract-review@1.0.0 --json",
	},
}

// deadLetterReplayDoc is deadletter replay's --help.
var deadLetterReplayDoc = commandDoc{
	synopsis: "deadletter replay [--reason R]... [--tenant T] [--ruleset ID[@VERSION]] [--since T] [--until T] [--max-replays N] [--dry-run] [--json] [settings]",
	about: []string{
		deadLetterSelection,
		"Each selected dead letter is sent again, in the dead-letter topic's order: its original request's key, value " +
			"and headers as they were, to the requests topic, with headers recording the replay (rv-replay-count, one " +
			"more than the original's; rv-replay-topic, -partition and -offset, where the original was consumed; " +
			"rv-replay-deadletter; rv-replay-time). Once every in-sync replica has the request, the replay is " +
			"recorded on the compacted progress topic (--replays-topic), keyed by the dead letter's topic/partition/offset: " +
			"a dead letter recorded there is never sent again, by this selection or any other, so a replay stopped " +
			"half way resumes where it stopped and a repeated one sends nothing. A request that fails again comes back " +
			"as a new dead letter, with its count one higher; one replayed --max-replays times is refused. " +
			"Undecodable originals and those not kept whole are never sent.",
		"--dry-run sends and records nothing and prints what would be sent (as `deadletter list`).",
	},
	exit: "0 done (skipped dead letters included), 2 invalid flags or settings, 1 a topic could not be read or a write failed " +
		"(what was sent before it is recorded; run again to resume).",
	examples: []string{
		"rulevalidator deadletter replay --reason unknown_ruleset --tenant acme --dry-run",
		"rulevalidator deadletter replay --reason unknown_ruleset --tenant acme",
	},
}

func runDeadLetterList(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	return runDeadLetterCommand(ctx, "deadletter list", deadLetterListDoc, args, stdout, stderr, getenv)
}

func runDeadLetterReplay(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	return runDeadLetterCommand(ctx, "deadletter replay", deadLetterReplayDoc, args, stdout, stderr, getenv)
}

// deadLetterTopics are the topics deadletter reads and writes.
type deadLetterTopics struct {
	requests, deadLetter, replays string
}

func runDeadLetterCommand(ctx context.Context, name string, doc commandDoc, args []string, stdout, stderr io.Writer, getenv env) int {
	var (
		kf     kafkaConfig
		topics deadLetterTopics
	)
	cl := newCommandLine(name, doc, deadLetterSettings(&kf, &topics), stderr)
	fs := cl.fs
	var reasons []string
	fs.Func("reason", "select dead letters of this `reason` ("+reasonList()+"); repeatable, or a comma-separated list", func(v string) error {
		reasons = append(reasons, v)
		return nil
	})
	var (
		tenant     = fs.String("tenant", "", "select the requests of this tenant")
		ruleset    = fs.String("ruleset", "", "select the requests naming this ruleset: `id` or id@version")
		since      = fs.String("since", "", "select dead letters that failed at or after this `time` (RFC 3339, or a duration before now such as 24h)")
		until      = fs.String("until", "", "select dead letters that failed before this `time` (RFC 3339, or a duration before now)")
		maxReplays = fs.Int("max-replays", replay.DefaultMaxReplays, "refuse a dead letter whose original was replayed this many times already")
		asJSON     = fs.Bool("json", false, "print one JSON object per dead letter, then one with the counts")
		timeout    = fs.Duration("timeout", replay.DefaultReadTimeout, "bound on reading the dead-letter and progress topics to their ends")
	)
	dryRun := new(bool)
	if name == "deadletter replay" {
		dryRun = fs.Bool("dry-run", false, "print what would be sent; send and record nothing")
	} else {
		*dryRun = true
	}
	if code, ok := cl.parse(args, getenv); !ok {
		return code
	}
	invalid := func(format string, a ...any) int {
		fmt.Fprintf(stderr, name+": "+format+"\n", a...)
		return exitInvalid
	}
	filter, err := deadLetterFilter(reasons, *tenant, *ruleset, *since, *until, time.Now())
	if err != nil {
		return invalid("%v", err)
	}
	switch {
	case *maxReplays < 1:
		return invalid("--max-replays: %d must be at least 1", *maxReplays)
	case *timeout <= 0:
		return invalid("--timeout: %s must be positive", *timeout)
	case topics.deadLetter == "" || topics.requests == "" || topics.replays == "":
		return invalid("--deadletter-topic, --requests-topic and --replays-topic are required")
	}
	if err := checkKafka(kf.brokers, kf.conn); err != nil {
		return cl.invalid(err)
	}
	serde, err := kf.serde(ctx, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitFailure
	}
	client, err := kf.client()
	if err != nil {
		return invalid("%v", err)
	}
	defer client.Close()

	p := deadLetterPrinter{w: stdout, asJSON: *asJSON, requests: topics.requests}
	rep, err := replay.Run(ctx, replay.Config{
		Client:          client,
		Serde:           serde,
		DeadLetterTopic: topics.deadLetter,
		RequestsTopic:   topics.requests,
		ProgressTopic:   topics.replays,
		Filter:          filter,
		MaxReplays:      *maxReplays,
		DryRun:          *dryRun,
		ReadTimeout:     *timeout,
		Logger:          slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, p.outcome)
	if rep.NoProgressTopic {
		fmt.Fprintf(stderr, "%s: the progress topic %s does not exist: no dead letter was replayed yet (replay needs it, compacted)\n", name, topics.replays)
	}
	if rep.UnreadableMarkers > 0 {
		fmt.Fprintf(stderr, "%s: %d records of the progress topic %s are not replay markers and were ignored\n", name, rep.UnreadableMarkers, topics.replays)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitFailure
	}
	if err := p.counts(rep, filter, *dryRun); err != nil {
		fmt.Fprintf(stderr, "%s: writing: %v\n", name, err)
		return exitFailure
	}
	return exitOK
}

// deadLetterFilter reads the selection flags.
func deadLetterFilter(reasons []string, tenant, ruleset, since, until string, now time.Time) (replay.Filter, error) {
	var (
		f   replay.Filter
		err error
	)
	if f.Reasons, err = replay.ParseReasons(reasons); err != nil {
		return f, fmt.Errorf("--reason: %w", err)
	}
	f.Tenant = strings.TrimSpace(tenant)
	if ruleset != "" {
		if f.RulesetID, f.RulesetVersion, err = replay.ParseRuleset(ruleset); err != nil {
			return f, fmt.Errorf("--ruleset: %w", err)
		}
	}
	for _, t := range []struct {
		flag, value string
		dst         *time.Time
	}{{"--since", since, &f.Since}, {"--until", until, &f.Until}} {
		if t.value == "" {
			continue
		}
		if *t.dst, err = replay.ParseTime(t.value, now); err != nil {
			return f, fmt.Errorf("%s: %w", t.flag, err)
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, fmt.Errorf("--since %s is not before --until %s", f.Since.UTC().Format(time.RFC3339), f.Until.UTC().Format(time.RFC3339))
	}
	return f, nil
}

// reasonList is the dead-letter reasons, comma-separated.
func reasonList() string {
	names := make([]string, len(schemas.Reasons))
	for i, r := range schemas.Reasons {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// deadLetterPrinter writes what deadletter decided, for a person or as JSON lines.
type deadLetterPrinter struct {
	w        io.Writer
	asJSON   bool
	requests string
}

// deadLetterJSON is one selected dead letter as `deadletter --json` prints it.
type deadLetterJSON struct {
	DeadLetter     replay.Position  `json:"deadletter"`
	RequestID      string           `json:"request_id"`
	TenantID       string           `json:"tenant_id"`
	RulesetID      string           `json:"ruleset_id"`
	RulesetVersion string           `json:"ruleset_version"`
	Reason         schemas.Reason   `json:"reason"`
	Message        string           `json:"message"`
	FailedAt       *time.Time       `json:"failed_at"`
	Original       *replay.Position `json:"original"`
	Replays        int              `json:"replays"`
	Status         replay.Status    `json:"status"`
	Why            string           `json:"why,omitempty"`
	// Replay is the replay's record: the one just sent, or the earlier one that skips it.
	Replay *replay.Marker `json:"replay,omitempty"`
}

func (p deadLetterPrinter) outcome(o replay.Outcome) error {
	if p.asJSON {
		id, version := o.Ruleset()
		out := deadLetterJSON{DeadLetter: o.At, RequestID: o.RequestID(), TenantID: o.TenantID(), RulesetID: id,
			RulesetVersion: version, Replays: o.Replays, Status: o.Status, Why: o.Why, Replay: o.Marker}
		if dl := o.Letter; dl != nil {
			orig := o.Original()
			failed := dl.FailedAt.UTC()
			out.Reason, out.Message, out.FailedAt, out.Original = dl.Reason, dl.Message, &failed, &orig
		}
		return p.writeJSON(out)
	}
	_, err := fmt.Fprintln(p.w, deadLetterOutcomeLine(o))
	return err
}

func (p deadLetterPrinter) writeJSON(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.w, "%s\n", data)
	return err
}

// deadLetterOutcomeLine: request r-1  tenant acme  ruleset contract-review@1.0.0  reason unknown_ruleset  failed ...  from requests 2:43  replays 0  would send  [deadletter 0:3]
func deadLetterOutcomeLine(o replay.Outcome) string {
	var b strings.Builder
	id, version := o.Ruleset()
	if version != "" {
		id += "@" + version
	}
	fmt.Fprintf(&b, "request %s  tenant %s  ruleset %s", orDash(o.RequestID()), orDash(o.TenantID()), orDash(id))
	if dl := o.Letter; dl != nil {
		orig := o.Original()
		fmt.Fprintf(&b, "  reason %s  failed %s  from %s %d:%d", dl.Reason, dl.FailedAt.UTC().Format(time.RFC3339), orig.Topic, orig.Partition, orig.Offset)
	}
	fmt.Fprintf(&b, "  replays %d  ", o.Replays)
	switch o.Status {
	case replay.StatusReplayable:
		b.WriteString("would send")
	case replay.StatusSent:
		s := o.Marker.SentTo
		fmt.Fprintf(&b, "sent to %s %d:%d as replay %d", s.Topic, s.Partition, s.Offset, o.Marker.Replay)
	case replay.StatusReplayed:
		b.WriteString("skipped: " + o.Why)
	case replay.StatusRefused:
		b.WriteString("refused: " + o.Why)
	case replay.StatusNotReplayable:
		b.WriteString("not replayable: " + clip(o.Why, messageWidth))
	}
	fmt.Fprintf(&b, "  [%s %d:%d]", o.At.Topic, o.At.Partition, o.At.Offset)
	return b.String()
}

// deadLetterCountsJSON is the last object `deadletter --json` prints.
type deadLetterCountsJSON struct {
	Counts struct {
		Read      int                    `json:"read"`
		Selected  int                    `json:"selected"`
		Selection string                 `json:"selection"`
		ByReason  map[schemas.Reason]int `json:"by_reason"`
		ByStatus  map[replay.Status]int  `json:"by_status"`
		DryRun    bool                   `json:"dry_run"`
	} `json:"counts"`
}

// counts writes what was selected, by reason and by what became of it.
func (p deadLetterPrinter) counts(rep replay.Report, f replay.Filter, dryRun bool) error {
	if p.asJSON {
		var out deadLetterCountsJSON
		c := &out.Counts
		c.Read, c.Selected, c.Selection, c.ByReason, c.ByStatus, c.DryRun = rep.Read, rep.Selected, f.String(), rep.ByReason, rep.ByStatus, dryRun
		return p.writeJSON(out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d dead letters selected (%s)\n", rep.Selected, rep.Read, f.String())
	if len(rep.ByReason) > 0 {
		reasons := slices.Sorted(maps.Keys(rep.ByReason))
		parts := make([]string, len(reasons))
		for i, r := range reasons {
			parts[i] = fmt.Sprintf("%s %d", r, rep.ByReason[r])
		}
		fmt.Fprintf(&b, "by reason: %s\n", strings.Join(parts, ", "))
	}
	var parts []string
	for _, s := range []struct {
		status replay.Status
		label  string
	}{
		{replay.StatusReplayable, "would be sent"},
		{replay.StatusSent, "sent to " + p.requests},
		{replay.StatusReplayed, "replayed before"},
		{replay.StatusRefused, "refused (replayed too often)"},
		{replay.StatusNotReplayable, "not replayable"},
	} {
		if n := rep.ByStatus[s.status]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s.label))
		}
	}
	if len(parts) > 0 {
		b.WriteString(strings.Join(parts, ", "))
		if dryRun {
			b.WriteString("; nothing sent")
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(p.w, b.String())
	return err
}
