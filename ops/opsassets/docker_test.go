package opsassets

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// stage is one FROM ... section of the Dockerfile.
type stage struct {
	from         string
	instructions [][2]string // keyword (upper case), arguments
}

func readDockerfile(t *testing.T) []stage {
	t.Helper()
	var stages []stage
	// Continuation lines join their instruction.
	text := strings.ReplaceAll(repoFile(t, "Dockerfile"), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		keyword, args, _ := strings.Cut(line, " ")
		keyword = strings.ToUpper(keyword)
		if keyword == "FROM" {
			stages = append(stages, stage{from: strings.Fields(args)[0]})
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile: %s before the first FROM", keyword)
		}
		last := &stages[len(stages)-1]
		last.instructions = append(last.instructions, [2]string{keyword, strings.TrimSpace(args)})
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and a runtime stage", len(stages))
	}
	return stages
}

// last returns the arguments of the stage's last instruction of keyword.
func (s stage) last(keyword string) (string, bool) {
	for i := len(s.instructions) - 1; i >= 0; i-- {
		if s.instructions[i][0] == keyword {
			return s.instructions[i][1], true
		}
	}
	return "", false
}

var execForm = regexp.MustCompile(`^\["([^"]+)"`)

// dockerfileEntrypoint is the binary the final image runs.
func dockerfileEntrypoint(t *testing.T) string {
	t.Helper()
	stages := readDockerfile(t)
	ep, ok := stages[len(stages)-1].last("ENTRYPOINT")
	m := execForm.FindStringSubmatch(ep)
	if !ok || m == nil {
		t.Fatalf("the final stage has no exec-form ENTRYPOINT (got %q)", ep)
	}
	return m[1]
}

var goDirective = regexp.MustCompile(`(?m)^go ([0-9]+\.[0-9]+)`)

func TestDockerfile(t *testing.T) {
	stages := readDockerfile(t)
	build, final := stages[0], stages[len(stages)-1]

	goVersion := goDirective.FindStringSubmatch(repoFile(t, "go.mod"))
	if goVersion == nil {
		t.Fatal("go.mod has no go directive")
	}
	if want := "golang:" + goVersion[1]; !strings.HasPrefix(build.from, want) {
		t.Errorf("the build stage starts from %s, want %s (go.mod says go %s)", build.from, want, goVersion[1])
	}
	run, _ := build.last("RUN")
	if !strings.Contains(run, "CGO_ENABLED=0") || !strings.Contains(run, "./cmd/rulevalidator") {
		t.Errorf("the build stage's last RUN %q does not build ./cmd/rulevalidator statically (CGO_ENABLED=0)", run)
	}

	if !strings.Contains(final.from, "distroless/static") || !strings.HasSuffix(final.from, ":nonroot") {
		t.Errorf("the final stage starts from %s, want gcr.io/distroless/static...:nonroot", final.from)
	}
	user, ok := final.last("USER")
	name, _, _ := strings.Cut(user, ":")
	if !ok || name == "root" || name == "0" || name == "" {
		t.Errorf("the final stage's USER is %q; it must name a non-root user", user)
	}
	copied, _ := final.last("COPY")
	if ep := dockerfileEntrypoint(t); !strings.HasSuffix(copied, " "+ep) {
		t.Errorf("the final stage copies %q but runs %s", copied, ep)
	}
	expose, _ := final.last("EXPOSE")
	var cm configMap
	decodeKind(t, readManifests(t), "ConfigMap", &cm)
	for _, env := range []string{"RULEVALIDATOR_HTTP_ADDR", "RULEVALIDATOR_OPS_ADDR"} {
		if port := portOf(t, cm.Data[env]); !slices.Contains(strings.Fields(expose), port) {
			t.Errorf("the image exposes %q, not the %s port %s", expose, env, port)
		}
	}
}

var stampFlag = regexp.MustCompile(`-X ([a-z/]+)\.([A-Za-z]+)=\$\{([A-Z_]+)\}`)

// TestDockerfileStampsTheBuild: the build stage stamps the version, revision
// and time from build arguments into variables that internal/buildinfo
// declares (a name the linker does not find stamps nothing, silently), and
// runs the binary's version command so that a stamp that does not parse
// fails the build.
func TestDockerfileStampsTheBuild(t *testing.T) {
	stages := readDockerfile(t)
	build := stages[0]
	args := map[string]bool{}
	for _, in := range build.instructions {
		if in[0] == "ARG" {
			name, _, _ := strings.Cut(in[1], "=")
			args[name] = true
		}
	}
	run, _ := build.last("RUN")
	declared := buildinfoStampVariables(t)
	stamped := map[string]string{} // variable -> build argument
	for _, m := range stampFlag.FindAllStringSubmatch(run, -1) {
		pkg, variable, arg := m[1], m[2], m[3]
		if pkg != "rulevalidator/internal/buildinfo" {
			t.Errorf("the build stamps %s.%s; the build's values live in rulevalidator/internal/buildinfo", pkg, variable)
			continue
		}
		if !declared[variable] {
			t.Errorf("the build stamps buildinfo.%s, which internal/buildinfo does not declare as a string variable (it declares %v)", variable, sorted(declared))
		}
		if !args[arg] {
			t.Errorf("the build stamps buildinfo.%s from ${%s}, which is no ARG of the build stage", variable, arg)
		}
		stamped[variable] = arg
	}
	for variable, arg := range map[string]string{"version": "VERSION", "revision": "REVISION", "revisionTime": "BUILD_TIME"} {
		if stamped[variable] != arg {
			t.Errorf("the build does not stamp buildinfo.%s from the build argument %s (stamps %v)", variable, arg, stamped)
		}
	}
	if !strings.Contains(run, "-buildvcs=false") {
		t.Error("the build does not say -buildvcs=false; without .git in the context the toolchain has nothing to record")
	}
	if !regexp.MustCompile(`&& /out/rulevalidator version\s*$`).MatchString(run) {
		t.Errorf("the build stage's last RUN does not end by running `/out/rulevalidator version`: %q", run)
	}
}

// buildinfoStampVariables are the package-level string variables of
// internal/buildinfo, which -ldflags -X can set.
func buildinfoStampVariables(t *testing.T) map[string]bool {
	t.Helper()
	const file = "internal/buildinfo/buildinfo.go"
	f, err := parser.ParseFile(token.NewFileSet(), file, repoFile(t, file), 0)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.VAR {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "string" && len(vs.Values) == 0 {
				for _, n := range vs.Names {
					vars[n.Name] = true
				}
			}
		}
	}
	if len(vars) == 0 {
		t.Fatalf("%s declares no string variables for the linker to set", file)
	}
	return vars
}

// dockerignore matches paths against .dockerignore's patterns the way Docker
// does: patterns are relative to the context root, * and ? stay within one
// path element, ** spans any number, a matched directory excludes its
// contents, and a later !pattern re-includes.
type dockerignore []struct {
	re      *regexp.Regexp
	include bool
}

func readDockerignore(t *testing.T) dockerignore {
	t.Helper()
	var d dockerignore
	for _, line := range strings.Split(repoFile(t, ".dockerignore"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		include := strings.HasPrefix(line, "!")
		pattern := filepath.ToSlash(filepath.Clean(strings.TrimPrefix(strings.TrimPrefix(line, "!"), "/")))
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(pattern); i++ {
			switch c := pattern[i]; {
			case strings.HasPrefix(pattern[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(pattern[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("$")
		d = append(d, struct {
			re      *regexp.Regexp
			include bool
		}{regexp.MustCompile(re.String()), include})
	}
	return d
}

// excludes reports whether path (relative, slash-separated) is left out of
// the build context.
func (d dockerignore) excludes(path string) bool {
	elems := strings.Split(path, "/")
	for i := range elems {
		prefix := strings.Join(elems[:i+1], "/")
		excluded := false
		for _, p := range d {
			if p.re.MatchString(prefix) {
				excluded = !p.include
			}
		}
		if excluded {
			return true
		}
	}
	return false
}

func TestDockerignorePatterns(t *testing.T) {
	d := readDockerignore(t)
	for path, want := range map[string]bool{
		".git/config":                     true,
		"bench/run.go":                    true,
		"rulevalidator":                   true,
		"cmd/rulevalidator/main.go":       false,
		"cmd/rulevalidator/testdata/x.in": true,
		"go.mod":                          false,
		"schemas/dead_letter.avsc":        false,
	} {
		if got := d.excludes(path); got != want {
			t.Errorf("excludes(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestDockerignoreKeepsTheBuildInputs checks that every file the binary is
// built from, Go sources and embedded files, reaches the build context.
func TestDockerignoreKeepsTheBuildInputs(t *testing.T) {
	requireTool(t, "go", "the Go toolchain")
	d := readDockerignore(t)
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	out := run(t, 2*time.Minute, nil, "go", "list", "-deps",
		"-f", `{{.Dir}}|{{join .GoFiles ","}},{{join .EmbedFiles ","}}`, "./cmd/rulevalidator")
	var checked int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		dir, files, _ := strings.Cut(line, "|")
		rel, err := filepath.Rel(abs, dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // the standard library or a module dependency
		}
		for _, f := range strings.Split(files, ",") {
			if f == "" {
				continue
			}
			path := filepath.ToSlash(filepath.Join(rel, f))
			checked++
			if d.excludes(path) {
				t.Errorf(".dockerignore leaves out %s, which the build needs", path)
			}
		}
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		if d.excludes(f) {
			t.Errorf(".dockerignore leaves out %s", f)
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d files from `go list -deps`:\n%s", checked, out)
	}
}
