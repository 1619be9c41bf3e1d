package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

// runHealthcheck probes the service's readiness endpoint: container images
// without a shell or curl use it as their health check.
func runHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := orEnv(getenv, "RULEVALIDATOR_OPS_ADDR", "127.0.0.1:9464")
	url := fs.String("url", "http://"+addr+"/readyz", "endpoint to probe (default from RULEVALIDATOR_OPS_ADDR)")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rulevalidator healthcheck [--url URL] [--timeout D]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "GETs the service's readiness endpoint; exit 0 when it answers 2xx, 1 otherwise.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitInvalid
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		return exitInvalid
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		return exitFailure
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(stderr, "healthcheck: %s answered %s: %s\n", *url, resp.Status, body)
		return exitFailure
	}
	fmt.Fprintf(stdout, "%s: %s\n", *url, resp.Status)
	return exitOK
}
