package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"rulevalidator/jobs"
	"rulevalidator/reviews"
	"rulevalidator/reviews/reviewexport"
)

// reviewsExportSettings are the settings of reviews export: where job
// status and reviews are kept.
func reviewsExportSettings(c *s3Config, jobPrefix, reviewPrefix *string) *settings {
	s := &settings{}
	s3Settings(s, c)
	s.section("Reports and jobs")
	jobPrefixSetting(s, jobPrefix)
	reviewPrefixSetting(s, reviewPrefix)
	return s
}

// reviewsExportDoc is reviews export's --help.
var reviewsExportDoc = commandDoc{
	synopsis: "reviews export --tenant T --out DIR [--since T] [--until T] [--ruleset R] [settings]",
	about: []string{
		"Writes a tenant's reviewed validations, kept in object storage by serve, as an evaluation dataset " +
			"that `rulevalidator eval --dataset DIR` runs: each validation's documents as they were read as the " +
			"case's input, its ruleset, and as labels every rule's final outcome (the current review's, else the " +
			"model's verdict), with the passages the reviewers relied on as gold evidence. A validation whose " +
			"material was not kept, or with a rule whose final outcome holds no score, is left out and said why.",
	},
	exit:     "0 written, 2 invalid flags or settings, 1 object storage failed or nothing to export.",
	examples: []string{"rulevalidator reviews export --tenant contoso --ruleset contract-review --since 2026-11-01T00:00:00Z --out reviewed-nov"},
}

const reviewsUsage = "usage: rulevalidator reviews export --tenant T --out DIR [--since T] [--until T] [--ruleset R] [settings]"

func runReviews(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	if len(args) == 0 || args[0] != "export" {
		if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, reviewsUsage)
			return exitOK
		}
		fmt.Fprintln(stderr, reviewsUsage)
		return exitInvalid
	}
	var (
		s3                      s3Config
		jobPrefix, reviewPrefix string
	)
	cl := newCommandLine("reviews export", reviewsExportDoc, reviewsExportSettings(&s3, &jobPrefix, &reviewPrefix), stderr)
	var (
		tenant  = cl.fs.String("tenant", "", "the tenant whose reviewed validations are exported (required)")
		out     = cl.fs.String("out", "", "the dataset directory to write, new or empty (required)")
		ruleset = cl.fs.String("ruleset", "", "only the validations of this ruleset id")
		since   = cl.fs.String("since", "", "only validations judged at or after this time (RFC 3339)")
		until   = cl.fs.String("until", "", "only validations judged before this time (RFC 3339)")
		name    = cl.fs.String("name", "", "the dataset's name (default reviews-<tenant>)")
		timeout = cl.fs.Duration("timeout", 10*time.Minute, "bound on the export")
	)
	if code, ok := cl.parse(args[1:], getenv); !ok {
		return code
	}
	cfg := reviewexport.Config{Tenant: *tenant, Dir: *out, RulesetID: *ruleset, Name: *name}
	for _, t := range []struct {
		flag, value string
		dst         *time.Time
	}{{"--since", *since, &cfg.Since}, {"--until", *until, &cfg.Until}} {
		if t.value == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339, t.value)
		if err != nil {
			fmt.Fprintf(stderr, "reviews export: %s: %q is not an RFC 3339 time such as 2026-11-01T00:00:00Z\n", t.flag, t.value)
			return exitInvalid
		}
		*t.dst = at
	}
	switch {
	case *tenant == "":
		fmt.Fprintln(stderr, "reviews export: --tenant is required")
		return exitInvalid
	case *out == "":
		fmt.Fprintln(stderr, "reviews export: --out is required")
		return exitInvalid
	case s3.endpoint == "":
		fmt.Fprintln(stderr, "reviews export: --s3-endpoint is required: reviews are kept in object storage")
		return exitInvalid
	case *timeout <= 0:
		fmt.Fprintf(stderr, "reviews export: --timeout: %s must be positive\n", *timeout)
		return exitInvalid
	}
	store, _, err := s3.openForCommand(stderr)
	if err != nil {
		return cl.invalid(err)
	}
	jobStore, err := jobs.NewObjectStore(store, jobs.ObjectStoreConfig{Prefix: jobPrefix})
	if err != nil {
		return cl.invalid(fmt.Errorf("--job-prefix: %w", err))
	}
	reviewStore, err := reviews.NewObjectStore(store, reviews.ObjectStoreConfig{Prefix: reviewPrefix})
	if err != nil {
		return cl.invalid(fmt.Errorf("--review-prefix: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	got, err := reviewexport.Export(ctx, reviewStore, jobStore, cfg)
	for _, s := range got.Skipped {
		fmt.Fprintf(stderr, "left out: %s\n", s)
	}
	if err != nil {
		fmt.Fprintf(stderr, "reviews export: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "wrote %d case(s) to %s (%d left out); run: rulevalidator eval --dataset %s\n", got.Cases, *out, len(got.Skipped), *out)
	return exitOK
}
