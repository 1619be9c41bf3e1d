package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rulevalidator/internal/logbuf"
)

// rulesetYAML is a one-rule ruleset file; text tells versions apart.
func rulesetYAML(id, version, text string) string {
	s := "id: " + id + "\n"
	if version != "" {
		s += fmt.Sprintf("version: %q\n", version)
	}
	return s + "rules:\n  - rule_id: r1\n    rule_text: " + text + "\n"
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newTestDir(t *testing.T, dir string) (*Dir, *logbuf.Buffer) {
	t.Helper()
	logger, logs := testLogger(t)
	d, err := NewDir(dir, DirOptions{Logger: logger})
	if err != nil {
		t.Fatalf("NewDir(%s): %v", dir, err)
	}
	return d, logs
}

func scan(t *testing.T, d *Dir) {
	t.Helper()
	if err := d.scan(); err != nil {
		t.Fatalf("scan: %v", err)
	}
}

// wantResolves checks Resolve(id, version) gives the ruleset whose rule text is want.
func wantResolves(t *testing.T, r Resolver, id, version, want string) {
	t.Helper()
	rs, err := r.Resolve(context.Background(), id, version)
	if err != nil {
		t.Fatalf("Resolve(%q, %q): %v", id, version, err)
	}
	if got := ruleText(rs); got != want {
		t.Fatalf("Resolve(%q, %q) gave rule text %q, want %q", id, version, got, want)
	}
}

// wantUnknown checks Resolve(id, version) fails with ErrUnknownRuleset and message want.
func wantUnknown(t *testing.T, r Resolver, id, version, want string) {
	t.Helper()
	rs, err := r.Resolve(context.Background(), id, version)
	if !errors.Is(err, ErrUnknownRuleset) {
		t.Fatalf("Resolve(%q, %q) = %q, %v; want an error matching ErrUnknownRuleset", id, version, ruleText(rs), err)
	}
	if err.Error() != want {
		t.Fatalf("Resolve(%q, %q) error %q, want %q", id, version, err, want)
	}
}

func TestDirLoadsTree(t *testing.T) {
	d, logs := newTestDir(t, filepath.Join("testdata", "rulesets"))

	var listed []string
	for _, e := range d.List() {
		listed = append(listed, e.ID+"@"+e.Version+" "+filepath.ToSlash(e.Source))
		if e.Ruleset == nil || e.Ruleset.ID != e.ID || e.Ruleset.Version != e.Version || e.Loaded.IsZero() {
			t.Errorf("entry %+v does not describe its ruleset", e)
		}
	}
	want := []string{
		"contract-review@1.0.0 testdata/rulesets/contract-review-1.0.0.yaml",
		"contract-review@1.9.2 testdata/rulesets/nested/contract-review-1.9.2.yml",
		"contract-review@1.10.0 testdata/rulesets/contract-review-1.10.0.json",
		"expense-policy@ testdata/rulesets/nested/expense-policy.YAML",
	}
	if strings.Join(listed, "\n") != strings.Join(want, "\n") {
		t.Errorf("List():\n%s\nwant:\n%s", strings.Join(listed, "\n"), strings.Join(want, "\n"))
	}

	latest, err := d.Resolve(context.Background(), "contract-review", "")
	if err != nil {
		t.Fatal(err)
	}
	if latest.Version != "1.10.0" || len(latest.Rules) != 2 || latest.BooleanAggregation != "majority" {
		t.Errorf("latest contract-review = version %q with %d rules, aggregation %q; want 1.10.0 from the JSON file", latest.Version, len(latest.Rules), latest.BooleanAggregation)
	}
	pinned, err := d.Resolve(context.Background(), "contract-review", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if got := ruleText(pinned); strings.Contains(got, "draft") || pinned.Version != "1.0.0" {
		t.Errorf("contract-review 1.0.0 = %q version %q; the hidden draft must not be served", got, pinned.Version)
	}
	// Defaults are resolved: numerical rules get their score set.
	expense, err := d.Resolve(context.Background(), "expense-policy", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := expense.Rules[0].AllowedScores(); len(got) != 6 {
		t.Errorf("expense-policy scores = %v, want 0..5", got)
	}

	wantUnknown(t, d, "contract-review", "9", `unknown ruleset "contract-review" version "9" (known versions: "1.0.0", "1.9.2", "1.10.0")`)
	wantUnknown(t, d, "broken", "", `unknown ruleset "broken"`)
	wantUnknown(t, d, "swap", "", `unknown ruleset "swap"`)

	// The broken file is skipped with the engine's exact complaint.
	out := logs.String()
	for _, want := range []string{
		"ruleset file does not parse; skipped",
		"nested/broken.yaml",
		`rules[0] (rule_id \"no-text\"): rule_text: missing or blank`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "same id and version") {
		t.Errorf("a hidden file was loaded and clashed:\n%s", out)
	}
}

func TestDirReloads(t *testing.T) {
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "review-v1.yaml"), filepath.Join(dir, "team", "review-v2.json")
	writeFile(t, v1, rulesetYAML("review", "1", "first"))
	d, logs := newTestDir(t, dir)
	wantResolves(t, d, "review", "", "first")

	// A new file with a higher version becomes the latest; the old one stays pinned.
	writeFile(t, v2, `{"id": "review", "version": "2", "rules": [{"rule_id": "r1", "rule_text": "second"}]}`)
	scan(t, d)
	wantResolves(t, d, "review", "", "second")
	wantResolves(t, d, "review", "2", "second")
	wantResolves(t, d, "review", "1", "first")

	// An edit that breaks the file keeps its previous version served, and says why.
	writeFile(t, v2, `{"id": "review", "version": "2", "rules": [{"rule_id": "r1", "rule_txt": "second"}]}`)
	scan(t, d)
	wantResolves(t, d, "review", "", "second")
	out := logs.String()
	for _, want := range []string{
		"ruleset file does not parse; still serving its previous version",
		"path=" + v2,
		`unknown field \"rule_txt\"`,
		"still_serving_version=2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	// The same broken contents are not reported again on every poll.
	scan(t, d)
	if n := strings.Count(logs.String(), "does not parse"); n != 1 {
		t.Errorf("the broken file was reported %d times, want once:\n%s", n, logs)
	}

	// Fixing it loads the fix.
	writeFile(t, v2, `{"id": "review", "version": "2", "rules": [{"rule_id": "r1", "rule_text": "second, fixed"}]}`)
	scan(t, d)
	wantResolves(t, d, "review", "2", "second, fixed")

	// Rewritten at once with contents of the same size: the mtime may not
	// have moved, so the contents decide.
	writeFile(t, v2, `{"id": "review", "version": "2", "rules": [{"rule_id": "r1", "rule_text": "second, FIXED"}]}`)
	scan(t, d)
	wantResolves(t, d, "review", "2", "second, FIXED")

	// Deleting the file removes its ruleset.
	if err := os.Remove(v2); err != nil {
		t.Fatal(err)
	}
	scan(t, d)
	wantResolves(t, d, "review", "", "first")
	wantUnknown(t, d, "review", "2", `unknown ruleset "review" version "2" (known versions: "1")`)
	if !strings.Contains(logs.String(), "ruleset file removed") {
		t.Errorf("the removal was not logged:\n%s", logs)
	}

	// An edit may change a file's version: the old one goes, the new one comes.
	writeFile(t, v1, rulesetYAML("review", "1.1", "first, revised"))
	scan(t, d)
	wantResolves(t, d, "review", "", "first, revised")
	wantUnknown(t, d, "review", "1", `unknown ruleset "review" version "1" (known versions: "1.1")`)

	if err := os.Remove(v1); err != nil {
		t.Fatal(err)
	}
	scan(t, d)
	wantUnknown(t, d, "review", "", `unknown ruleset "review"`)
	if got := d.List(); len(got) != 0 {
		t.Errorf("List() after deleting every file = %v, want none", got)
	}
}

func TestDirDuplicates(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b", "copy.yml")
	writeFile(t, b, rulesetYAML("review", "1", "from b"))
	writeFile(t, a, rulesetYAML("review", "1", "from a"))
	d, logs := newTestDir(t, dir)

	wantResolves(t, d, "review", "1", "from a")
	out := logs.String()
	for _, want := range []string{
		"two ruleset files hold the same id and version; serving the first by path",
		"ruleset_id=review", "ruleset_version=1",
		"served=" + a, "ignored=" + b,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if got := d.List(); len(got) != 1 || got[0].Source != a {
		t.Errorf("List() = %+v, want only the entry from %s", got, a)
	}

	// Once the first is gone the other is served.
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	scan(t, d)
	wantResolves(t, d, "review", "1", "from b")
}

func TestDirSkipsFilesWithoutID(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "anonymous.yaml")
	writeFile(t, path, "rules:\n  - rule_id: r1\n    rule_text: a rule\n")
	d, logs := newTestDir(t, dir)
	if got := d.List(); len(got) != 0 {
		t.Errorf("List() = %+v, want nothing", got)
	}
	if out := logs.String(); !strings.Contains(out, "no id: every ruleset file needs an id") || !strings.Contains(out, path) {
		t.Errorf("log does not say which file lacks an id:\n%s", out)
	}
}

// TestDirFollowsLinks uses the layout of a Kubernetes ConfigMap volume: the
// files sit in a hidden timestamped directory and are reached through links,
// and the root itself may be a link.
func TestDirFollowsLinks(t *testing.T) {
	base := t.TempDir()
	volume := filepath.Join(base, "volume")
	writeFile(t, filepath.Join(volume, "..2025_01_01", "review.yaml"), rulesetYAML("review", "1", "through a link"))
	for _, link := range []struct{ target, name string }{
		{"..2025_01_01", filepath.Join(volume, "..data")},
		{filepath.Join("..data", "review.yaml"), filepath.Join(volume, "review.yaml")},
		{"volume", filepath.Join(base, "rulesets")},
	} {
		if err := os.Symlink(link.target, link.name); err != nil {
			t.Skipf("symbolic links unavailable: %v", err)
		}
	}
	d, logs := newTestDir(t, filepath.Join(base, "rulesets"))
	wantResolves(t, d, "review", "", "through a link")
	if got := d.List(); len(got) != 1 || got[0].Source != filepath.Join(base, "rulesets", "review.yaml") {
		t.Errorf("List() = %+v, want one entry named under the root given", got)
	}
	if strings.Contains(logs.String(), "same id and version") {
		t.Errorf("the hidden copy was loaded too:\n%s", logs)
	}
}

func TestNewDirRejects(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file.yaml")
	writeFile(t, file, rulesetYAML("x", "", "x"))
	tests := []struct {
		name string
		dir  string
		opts DirOptions
		want string
	}{
		{"missing", filepath.Join(t.TempDir(), "absent"), DirOptions{}, "no such file or directory"},
		{"a file", file, DirOptions{}, "is not a directory"},
		{"negative poll", t.TempDir(), DirOptions{PollInterval: -time.Second}, "PollInterval must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewDir(tt.dir, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewDir error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestDirRun checks the polling loop picks changes up on its own and stops with its context.
func TestDirRun(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "v1.yaml"), rulesetYAML("review", "1", "first"))
	logger, _ := testLogger(t)
	d, err := NewDir(dir, DirOptions{PollInterval: 10 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	writeFile(t, filepath.Join(dir, "v2.yaml"), rulesetYAML("review", "2", "second"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs, err := d.Resolve(ctx, "review", "")
		if err == nil && ruleText(rs) == "second" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("version 2 not picked up within 10s (latest: %q, %v)", ruleText(rs), err)
		}
		time.Sleep(5 * time.Millisecond)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v after cancel, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
