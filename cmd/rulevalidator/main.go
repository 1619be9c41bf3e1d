// Command rulevalidator judges documents against business rules with an LLM.
//
//	rulevalidator validate --ruleset FILE --input FILE [--json]
//
// Run "rulevalidator help" for every subcommand.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"rulevalidator/internal/buildinfo"
)

// Exit codes shared by the subcommands.
const (
	exitOK      = 0
	exitFailure = 1 // the work could not be done (model unreachable, bad answers, I/O)
	exitInvalid = 2 // the command line, ruleset or input is invalid
)

// env reads the environment; tests pass their own.
type env func(string) string

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int
}

// commandGroup is a command made of subcommands: `rulevalidator NAME <sub> [flags]`.
type commandGroup struct {
	name string
	// about describes the group, a line each, under its usage line.
	about    []string
	commands []command
}

// run runs the subcommand args name, or prints the group's usage.
func (g commandGroup) run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	usage := func(w io.Writer) {
		names := make([]string, len(g.commands))
		for i, c := range g.commands {
			names[i] = c.name
		}
		fmt.Fprintf(w, "usage: rulevalidator %s <%s> [flags]\n", g.name, strings.Join(names, "|"))
		fmt.Fprintln(w)
		for _, line := range g.about {
			fmt.Fprintln(w, line)
		}
		fmt.Fprintln(w)
		for _, c := range g.commands {
			fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "Run \"rulevalidator %s <command> --help\" for a command's flags.\n", g.name)
	}
	if len(args) == 0 {
		usage(stderr)
		return exitInvalid
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	}
	for _, c := range g.commands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr, getenv)
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n\n", g.name, args[0])
	usage(stderr)
	return exitInvalid
}

func commands() []command {
	return []command{
		{"validate", "judge one input against a ruleset and print the verdicts", runValidate},
		{"serve", "consume requests from Kafka and publish verdicts and summaries", runServe},
		{"produce", "send a validation request to the requests topic", runProduce},
		{"tail", "print the verdicts, summaries and dead letters on the topics", runTail},
		{"deadletter", "list dead letters and replay their requests (deadletter --help)", runDeadLetter},
		{"rulesets", "publish, list, check and compare rulesets (see rulesets --help)", runRulesets},
		{"eval", "score verdicts against a labelled dataset, optionally beside a naive baseline", runEval},
		{"cache", "purge a tenant's or a ruleset's entries from the verdict cache (cache purge --help)", runCache},
		{"reviews", "export a tenant's reviewed validations as an evaluation dataset (reviews export --help)", runReviews},
		{"healthcheck", "probe a running service's readiness endpoint (for container health checks)", runHealthcheck},
		{"version", "print the version and the revision this binary was built from", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return exitInvalid
		}
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		return runVersion(ctx, args[1:], stdout, stderr, getenv)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr, getenv)
		}
	}
	fmt.Fprintf(stderr, "rulevalidator: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitInvalid
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: rulevalidator <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "rulevalidator <command> --help" for a command's flags.`)
	// A bad stamp is for `version` to report; usage shows what could be read.
	info, _ := buildinfo.Read()
	fmt.Fprintf(w, "\nrulevalidator %s\n", info)
}
