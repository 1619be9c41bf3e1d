package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// The docs that name the packages, and where in them.
var packageDocs = []struct {
	file  string // relative to the module root
	where string // for messages
	names func(page string) ([]string, error)
}{
	{"README.md", "the package table under ## Architecture", readmePackageTour},
	{"docs/design.md", "the layout under ## Layout", designLayout},
}

// The README's package tour and the layout of docs/design.md name every
// package of the module, each once and on a line of its own, and nothing that
// is not a package: a new package is described where a newcomer looks for it,
// and a package that is gone is not.
func TestDocsNameEveryPackage(t *testing.T) {
	t.Parallel()
	packages := modulePackages(t)
	for _, doc := range packageDocs {
		page, err := os.ReadFile(filepath.Join(moduleRoot, doc.file))
		if err != nil {
			t.Fatal(err)
		}
		names, err := doc.names(string(page))
		if err != nil {
			t.Errorf("%s: %v", doc.file, err)
			continue
		}
		for _, problem := range packageNameProblems(names, packages) {
			t.Errorf("%s, %s: %s", doc.file, doc.where, problem)
		}
	}
}

// modulePackages are the module's packages, by their path inside the module
// ("." for the root, "engine/ruleexpr"), as go list finds them: no build, only
// the directories and their files' package clauses and build constraints.
func modulePackages(t *testing.T) map[string]bool {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(moduleRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module := ""
	for line := range strings.Lines(string(mod)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			module = strings.Trim(f[1], `"`)
			break
		}
	}
	if module == "" {
		t.Fatal("go.mod names no module")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-e", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = moduleRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	packages := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path := strings.TrimSpace(sc.Text())
		switch {
		case path == module:
			packages["."] = true
		case strings.HasPrefix(path, module+"/"):
			packages[strings.TrimPrefix(path, module+"/")] = true
		}
	}
	if len(packages) == 0 {
		t.Fatalf("go list ./... found no package of module %s", module)
	}
	return packages
}

// packageNameProblems compares the names a doc gives, in order, with the
// packages: each package named once, every name a package.
func packageNameProblems(names []string, packages map[string]bool) []string {
	var problems []string
	seen := map[string]bool{}
	for _, name := range names {
		switch {
		case seen[name]:
			problems = append(problems, fmt.Sprintf("names %s twice", name))
		case !packages[name]:
			problems = append(problems, fmt.Sprintf("names %s, which is not a package of the module (gone or renamed?)", name))
		}
		seen[name] = true
	}
	var missing []string
	for p := range packages {
		if !seen[p] {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	for _, p := range missing {
		problems = append(problems, fmt.Sprintf("does not name package %s: add a line saying its one job", p))
	}
	return problems
}

// readmePackageTour is the package column of the README's table whose header
// is "| package | job |": one package a row, in backquotes, with or without a
// trailing slash.
func readmePackageTour(page string) ([]string, error) {
	lines := strings.Split(page, "\n")
	start := -1
	for i, line := range lines {
		if strings.TrimSpace(line) == "| package | job |" {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf(`no package table (a table whose header is "| package | job |")`)
	}
	var names []string
	for i := start + 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		cells := strings.SplitN(lines[i], "|", 3)
		if len(cells) < 3 {
			return nil, fmt.Errorf("package table row %q has no job column", lines[i])
		}
		found := backquoted.FindAllStringSubmatch(cells[1], -1)
		if len(found) != 1 {
			return nil, fmt.Errorf("package table row %q: want one package in backquotes in its first column, found %d", lines[i], len(found))
		}
		names = append(names, packageName(found[0][1]))
	}
	return names, nil
}

var backquoted = regexp.MustCompile("`([^`]+)`")

// designLayout is the first column of the code block under "## Layout" in
// docs/design.md: each line that does not start with a space starts with one
// package's directory ("engine/plan/"), then its job; indented lines
// continue the job.
func designLayout(page string) ([]string, error) {
	_, section, ok := strings.Cut(page, "\n## Layout\n")
	if !ok {
		return nil, fmt.Errorf(`no "## Layout" section`)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	_, block, ok := strings.Cut(section, "```\n")
	if !ok {
		return nil, fmt.Errorf("no code block under ## Layout")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		return nil, fmt.Errorf("the code block under ## Layout does not end")
	}
	var names []string
	for line := range strings.Lines(block) {
		line = strings.TrimRight(line, "\n")
		if line == "" || line[0] == ' ' {
			continue
		}
		first := strings.Fields(line)[0]
		if strings.HasSuffix(first, ",") {
			return nil, fmt.Errorf("layout line %q: want one package directory before the job, found several", line)
		}
		names = append(names, packageName(first))
	}
	return names, nil
}

// packageName is a package's path inside the module as a doc writes it, its
// trailing slash dropped.
func packageName(s string) string {
	s = strings.TrimSuffix(strings.TrimSpace(s), "/")
	if s == "" {
		return "."
	}
	return s
}

// TestPackageDocsCatchMistakes: the parsers read one name a line, refuse a
// line that names two, and the comparison names what is missing, what is
// gone and what is named twice.
func TestPackageDocsCatchMistakes(t *testing.T) {
	t.Parallel()
	readme := "intro\n\n| package | job |\n| --- | --- |\n| `engine` | judges |\n| `engine/plan/` | plans |\n| `gone` | was here |\n\nafter\n| `later` | not the table |\n"
	names, err := readmePackageTour(readme)
	if err != nil || strings.Join(names, " ") != "engine engine/plan gone" {
		t.Errorf("README tour: got %q, %v; want engine engine/plan gone", names, err)
	}
	if _, err := readmePackageTour("| package | job |\n| --- | --- |\n| `a`, `b` | two |\n"); err == nil {
		t.Error("README tour: a row naming two packages was accepted")
	}
	design := "# D\n\n## Layout\n\ntext\n\n```\nengine/      judges\n             and more\nengine/plan/ plans\nengine/      again\n```\n\n## Next\n\n```\nnot/  the layout\n```\n"
	names, err = designLayout(design)
	if err != nil || strings.Join(names, " ") != "engine engine/plan engine" {
		t.Errorf("design layout: got %q, %v; want engine engine/plan engine", names, err)
	}
	if _, err := designLayout("## Layout\n\n```\na/, b/   two\n```\n"); err == nil {
		t.Error("design layout: a line naming two packages was accepted")
	}
	problems := packageNameProblems(names, map[string]bool{"engine": true, "engine/plan": true, "engine/gbnf": true, "reviews": true})
	want := []string{"names engine twice", "does not name package engine/gbnf", "does not name package reviews"}
	if len(problems) != len(want) {
		t.Fatalf("problems %q, want %d", problems, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(problems[i], w) {
			t.Errorf("problem %d is %q, want %q", i, problems[i], w)
		}
	}
	if p := packageNameProblems([]string{"gone"}, map[string]bool{}); len(p) != 1 || !strings.Contains(p[0], "not a package") {
		t.Errorf("a name that is no package: got %q", p)
	}
}
