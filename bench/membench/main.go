// Command membench is the helper of ops/membench.sh, which measures the memory
// of `rulevalidator serve` with large documents flowing:
//
//	membench model -addr 127.0.0.1:8081 -delay 3s   a scripted OpenAI-compatible model
//	membench request -base REQ.json -bytes 1000000   a request with a long document, on stdout
//	membench sample -pid PID -interval 250ms         VmRSS and VmHWM of a process, one line a sample
//
// The model answers every call, after the delay, with a well-formed verdict
// for each rule the call's response schema names, quoting the first sentence
// of a page of the prompt, so that the service anchors real evidence. It keeps
// no record of the prompts.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"rulevalidator/internal/llmfake"
	"rulevalidator/internal/synthdoc"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: membench model|request|sample [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "model":
		err = runModel(os.Args[2:])
	case "request":
		err = runRequest(os.Args[2:], os.Stdout)
	case "sample":
		err = runSample(os.Args[2:], os.Stdout)
	default:
		err = fmt.Errorf("unknown command %q: want model, request or sample", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "membench:", err)
		os.Exit(1)
	}
}

func runModel(args []string) error {
	fs := flag.NewFlagSet("model", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:8081", "address to listen on")
	delay := fs.Duration("delay", 3*time.Second, "how long each answer takes")
	_ = fs.Parse(args)
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := llmfake.Listen(l)
	defer srv.Close()
	srv.Forget()
	srv.Answer(func(req llmfake.Call) llmfake.Reply {
		reply := llmfake.Verdicts(req)
		reply.Delay = *delay
		return reply
	})
	fmt.Fprintf(os.Stderr, "membench: scripted model on %s, answering after %s\n", srv.URL(), *delay)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}

func runRequest(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("request", flag.ExitOnError)
	base := fs.String("base", "examples/contract-review/request.json", "request whose primary document is replaced")
	size := fs.Int("bytes", 1_000_000, "size of the generated document")
	pageBytes := fs.Int("page-bytes", 4000, "size of one of its pages")
	_ = fs.Parse(args)
	data, err := os.ReadFile(*base)
	if err != nil {
		return err
	}
	var req map[string]any
	if err := json.Unmarshal(data, &req); err != nil {
		return fmt.Errorf("%s: %w", *base, err)
	}
	pages := synthdoc.Pages(max(1, *size / *pageBytes), *pageBytes, 1)
	req["primary_docs"] = []any{map[string]any{"name": "contract.pdf", "pages": pages}}
	delete(req, "request_id")
	// No report: the run measures the judging path, not object storage.
	req["options"] = map[string]any{"generate_report": false}
	return json.NewEncoder(stdout).Encode(req)
}

func runSample(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("sample", flag.ExitOnError)
	pid := fs.Int("pid", 0, "process to sample (required)")
	interval := fs.Duration("interval", 250*time.Millisecond, "time between samples")
	_ = fs.Parse(args)
	if *pid <= 0 {
		return errors.New("sample: -pid is required")
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	path := fmt.Sprintf("/proc/%d/status", *pid)
	for {
		rss, hwm, err := readStatus(path)
		if err != nil {
			return nil // the process is gone
		}
		fmt.Fprintf(w, "%d %d %d\n", time.Now().UnixMilli(), rss, hwm)
		w.Flush()
		time.Sleep(*interval)
	}
}

// readStatus reads VmRSS and VmHWM, in KiB, from a /proc status file.
func readStatus(path string) (rss, hwm int64, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch name {
		case "VmRSS":
			rss = kb
		case "VmHWM":
			hwm = kb
		}
	}
	return rss, hwm, nil
}
