package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// runHealthcheck probes the service's readiness endpoint: container images
// without a shell or curl use it as their health check.
func runHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	var opsAddr string
	cl := newCommandLine("healthcheck", commandDoc{
		synopsis: "healthcheck [--url URL] [--timeout D] [settings]",
		about:    []string{"GETs the service's readiness endpoint, http://OPS-ADDR/readyz unless --url says otherwise."},
		exit:     "0 it answered 2xx, 1 otherwise, 2 invalid flags or settings.",
	}, healthcheckSettings(&opsAddr), stderr)
	url := cl.fs.String("url", "", "endpoint to probe (default: /readyz on --ops-addr)")
	timeout := cl.fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	if code, ok := cl.parse(args, getenv); !ok {
		return code
	}
	if *url == "" {
		*url = "http://" + opsAddr + "/readyz"
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
