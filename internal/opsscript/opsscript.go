// Package opsscript runs the repository's ops/*.sh scripts from tests and
// decides whether a missing integration service skips or fails a test.
package opsscript

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// EnvRequire set to 1 makes a missing integration service fail the test
// instead of skipping it; ops/test.sh sets it.
const EnvRequire = "RULEVALIDATOR_REQUIRE_INTEGRATION"

// Required reports whether integration tests must run.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// Unavailable skips the test with reason, or fails it when integration tests
// are required. what names the kind of test, e.g. "Kafka".
func Unavailable(t testing.TB, what, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s (%s=1, so this is a failure)", reason, EnvRequire)
	}
	t.Skipf("%s integration test skipped: %s (set %s=1 to fail instead)", what, reason, EnvRequire)
}

// Run runs ops/<script> with args from the repository root and returns its
// standard output (results such as an address) and standard error (progress
// messages, quoted in the error on failure).
func Run(timeout time.Duration, script string, args ...string) (stdout, stderr string, err error) {
	return RunEnv(timeout, nil, script, args...)
}

// RunEnv is Run with env (KEY=value entries) added to the script's environment, such as
// another port or run directory for a service of a test's own.
func RunEnv(timeout time.Duration, env []string, script string, args ...string) (stdout, stderr string, err error) {
	root, err := RepoRoot()
	if err != nil {
		return "", "", err
	}
	name := "ops/" + script
	bash, err := exec.LookPath("bash")
	if err != nil {
		return "", "", fmt.Errorf("%s needs bash: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, append([]string{filepath.Join(root, "ops", script)}, args...)...)
	cmd.Dir = root
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, messages bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &messages
	// Services run on in the background with their output sent to log files,
	// so Wait returns when the script does; WaitDelay guards against anything
	// else holding the pipes.
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return out.String(), messages.String(),
			fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, TailLines(messages.String(), 20))
	}
	return out.String(), messages.String(), nil
}

// RepoRoot walks up from the working directory (a test's package) to the
// directory holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// TailLines is the last n lines of s.
func TailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
