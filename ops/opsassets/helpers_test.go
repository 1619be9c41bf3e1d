package opsassets

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"rulevalidator/internal/opsscript"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// root is the repository root, relative to this package's directory.
const root = "../.."

// repoFile reads a file of the repository.
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatalf("reading %s: %v", rel, err)
	}
	return string(data)
}

// requireTool returns the path of an external program, or skips the test
// saying why; with RULEVALIDATOR_REQUIRE_INTEGRATION=1 it fails instead.
func requireTool(t *testing.T, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	msg := name + " is not on PATH (" + err.Error() + "); install it with `" + install + "`"
	opsscript.Unavailable(t, "Ops tools", "%s", msg)
	return ""
}

func requirePromtool(t *testing.T) string {
	t.Helper()
	return requireTool(t, "promtool", "bash ops/tools.sh install prometheus")
}

// run runs a program in the repository root and returns its combined output;
// a non-zero exit fails the test with that output.
func run(t *testing.T, timeout time.Duration, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// serveSettings is what `rulevalidator serve` reads from the environment, as
// its source binds it: s.str(&cfg.x, "flag", "ENV", "default", "help"), or
// s.str(p, ...) in the functions of the settings table.
type serveSettings struct {
	env      map[string]bool   // every variable
	secret   map[string]bool   // variables bound with s.secret: credentials
	defaults map[string]string // variable -> default
}

// referenceRow is a row of the configuration reference (docs/configuration.md), which
// cmd/rulevalidator's tests hold to the settings as the code defines them.
var referenceRow = regexp.MustCompile("^\\| `--[a-z0-9-]+` \\| `([A-Z][A-Z0-9_]*)` \\| `([^`]*)` \\|")

var settingCall = regexp.MustCompile(
	`s\.(str|strList|integer|duration|boolean|secret)\(&?[^,]+,\s*"[a-z0-9-]+",\s*"([A-Z][A-Z0-9_]*)"(?:,\s*"([^"]*)")?`)

// readServeSettings parses the settings out of cmd/rulevalidator's sources,
// so that the assets are checked against what the binary actually reads.
func readServeSettings(t *testing.T) serveSettings {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "cmd/rulevalidator/*.go"))
	if err != nil {
		t.Fatal(err)
	}
	s := serveSettings{env: map[string]bool{}, secret: map[string]bool{}, defaults: map[string]string{}}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(src)
		for _, m := range settingCall.FindAllStringSubmatchIndex(text, -1) {
			kind, name := text[m[2]:m[3]], text[m[4]:m[5]]
			s.env[name] = true
			switch {
			case kind == "secret":
				s.secret[name] = true
			case m[6] >= 0: // the default is a string literal, not a constant
				s.defaults[name] = text[m[6]:m[7]]
			}
		}
	}
	// A default declared as a constant by the package that applies it is read from the
	// configuration reference, which shows it as --help does.
	reference, err := os.ReadFile(filepath.Join(root, "docs/configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(reference), "\n") {
		if m := referenceRow.FindStringSubmatch(line); m != nil && s.env[m[1]] && !s.secret[m[1]] {
			if _, ok := s.defaults[m[1]]; !ok && m[2] != "-" {
				s.defaults[m[1]] = m[2]
			}
		}
	}
	// A pattern that stopped matching would make every check below pass vacuously.
	if s.defaults["RULEVALIDATOR_DRAIN_TIMEOUT"] == "" {
		t.Fatal("found no default of RULEVALIDATOR_DRAIN_TIMEOUT in cmd/rulevalidator or docs/configuration.md; has the way settings are declared changed?")
	}
	for _, must := range []string{"RULEVALIDATOR_KAFKA_BROKERS", "OPENAI_BASE_URL", "S3_ENDPOINT", "RULEVALIDATOR_OPS_ADDR"} {
		if !s.env[must] {
			t.Fatalf("found no setting %s in cmd/rulevalidator (found %v); has the way settings are declared changed?", must, sorted(s.env))
		}
	}
	return s
}

// goRuntimeEnv are variables the Go runtime itself reads.
var goRuntimeEnv = map[string]bool{"GOMEMLIMIT": true, "GOMAXPROCS": true, "GOGC": true, "GODEBUG": true}

var commandEntry = regexp.MustCompile(`\{"([a-z][a-z-]*)",\s*"`)

// subcommands lists the rulevalidator subcommands declared in main.go.
func subcommands(t *testing.T) map[string]bool {
	t.Helper()
	src := repoFile(t, "cmd/rulevalidator/main.go")
	start := strings.Index(src, "func commands()")
	if start < 0 {
		t.Fatal("cmd/rulevalidator/main.go has no func commands()")
	}
	end := strings.Index(src[start:], "\n}\n")
	if end < 0 {
		t.Fatal("cmd/rulevalidator/main.go: cannot find the end of commands()")
	}
	names := map[string]bool{}
	for _, m := range commandEntry.FindAllStringSubmatch(src[start:start+end], -1) {
		names[m[1]] = true
	}
	if !names["serve"] {
		t.Fatalf("found no serve command in commands() (found %v)", sorted(names))
	}
	return names
}

// scriptDefault reads the default of a variable in an ops script, written
// ${NAME:-default}.
func scriptDefault(t *testing.T, script, name string) string {
	t.Helper()
	re := regexp.MustCompile(`\$\{` + regexp.QuoteMeta(name) + `:-([^}]*)\}`)
	m := re.FindStringSubmatch(repoFile(t, script))
	if m == nil {
		t.Fatalf("%s has no default for %s (${%s:-...})", script, name, name)
	}
	return m[1]
}

// portOf returns the port of a HOST:PORT or :PORT address.
func portOf(t *testing.T, addr string) string {
	t.Helper()
	i := strings.LastIndex(addr, ":")
	if i < 0 || i == len(addr)-1 {
		t.Fatalf("%q is not HOST:PORT", addr)
	}
	return addr[i+1:]
}

func sorted[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// topicSpec is one topic that ops/kafka.sh creates.
type topicSpec struct {
	envVar     string // TOPIC_REQUESTS
	name       string // rulevalidator.requests
	partitions int
	configs    []string // key=value
}

var topicSpecLine = regexp.MustCompile(`"\$(TOPIC_[A-Z]+) ([0-9]+)((?: [a-z.]+=[^ "]+)*)"`)

// kafkaTopicSpecs reads the topics `ops/kafka.sh topics` creates.
func kafkaTopicSpecs(t *testing.T) []topicSpec {
	t.Helper()
	var specs []topicSpec
	for _, m := range topicSpecLine.FindAllStringSubmatch(repoFile(t, "ops/kafka.sh"), -1) {
		n, err := strconv.Atoi(m[2])
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, topicSpec{
			envVar:     m[1],
			name:       scriptDefault(t, "ops/kafka.sh", "RULEVALIDATOR_"+m[1]),
			partitions: n,
			configs:    strings.Fields(m[3]),
		})
	}
	if len(specs) < 5 {
		t.Fatalf("found %d topic specs (\"$TOPIC_X PARTITIONS ...\") in ops/kafka.sh, want 5; has topics() changed?", len(specs))
	}
	return specs
}

// requestPartitions is the partition count ops/kafka.sh gives the requests topic.
func requestPartitions(t *testing.T) int {
	t.Helper()
	for _, spec := range kafkaTopicSpecs(t) {
		if spec.envVar == "TOPIC_REQUESTS" {
			return spec.partitions
		}
	}
	t.Fatal("ops/kafka.sh creates no $TOPIC_REQUESTS topic")
	return 0
}

// processRuns reports whether pid runs: it exists and is not a zombie, which an init that
// does not reap the reparented server leaves behind.
func processRuns(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(status)) {
		if state, ok := strings.CutPrefix(line, "State:"); ok {
			return !strings.HasPrefix(strings.TrimSpace(state), "Z")
		}
	}
	return true
}
