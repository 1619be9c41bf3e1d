package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rulevalidator/internal/buildinfo"
)

func TestWriteVersion(t *testing.T) {
	t.Parallel()
	const rev = "9e17170d3c1f4b0a8e2d5c6b7a8f9e0d1c2b3a4f"
	commit := time.Date(2026, 12, 5, 18, 1, 0, 0, time.UTC)
	tests := []struct {
		name     string
		info     buildinfo.Info
		text     string
		jsonText string
	}{
		{
			name:     "a development build knows no revision",
			info:     buildinfo.Info{Version: buildinfo.Devel, GoVersion: "go1.26.8"},
			text:     "rulevalidator (devel)\n  revision  unknown\n  time      unknown\n  modified  unknown\n  go        go1.26.8\n",
			jsonText: `{"version":"(devel)","revision":"","time":null,"modified":false,"go_version":"go1.26.8"}`,
		},
		{
			name:     "a stamped release",
			info:     buildinfo.Info{Version: "v0.1.0", Revision: rev, Time: commit, GoVersion: "go1.26.8"},
			text:     "rulevalidator v0.1.0\n  revision  " + rev + "\n  time      2026-12-05T18:01:00Z\n  modified  false\n  go        go1.26.8\n",
			jsonText: `{"version":"v0.1.0","revision":"` + rev + `","time":"2026-12-05T18:01:00Z","modified":false,"go_version":"go1.26.8"}`,
		},
		{
			name:     "a modified tree",
			info:     buildinfo.Info{Version: "v0.0.0-20261205180100-9e17170d3c1f+dirty", Revision: rev, Time: commit, Modified: true, GoVersion: "go1.26.8"},
			text:     "rulevalidator v0.0.0-20261205180100-9e17170d3c1f+dirty\n  revision  " + rev + "\n  time      2026-12-05T18:01:00Z\n  modified  true\n  go        go1.26.8\n",
			jsonText: `{"version":"v0.0.0-20261205180100-9e17170d3c1f+dirty","revision":"` + rev + `","time":"2026-12-05T18:01:00Z","modified":true,"go_version":"go1.26.8"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var text, js bytes.Buffer
			if err := writeVersion(&text, tt.info); err != nil {
				t.Fatal(err)
			}
			if text.String() != tt.text {
				t.Errorf("text:\n%s\nwant:\n%s", text.String(), tt.text)
			}
			if err := writeVersionJSON(&js, tt.info); err != nil {
				t.Fatal(err)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, js.Bytes()); err != nil {
				t.Fatalf("--json wrote %s: %v", js.String(), err)
			}
			if compact.String() != tt.jsonText {
				t.Errorf("json:\n%s\nwant:\n%s", compact.String(), tt.jsonText)
			}
		})
	}
}

// TestVersionSpellings: the command, --version and -version print the same,
// and the usage ends with the build.
func TestVersionSpellings(t *testing.T) {
	t.Parallel()
	info, err := buildinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := writeVersion(&want, info); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		code, stdout, stderr := opRun(t, args...)
		if code != exitOK || stdout != want.String() || stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and %q", args, code, stdout, stderr, want.String())
		}
	}
	if code, _, stderr := opRun(t, "version", "extra"); code != exitInvalid || !strings.Contains(stderr, "unexpected arguments: extra") {
		t.Errorf("version extra: exit %d, stderr %q; want 2 naming the argument", code, stderr)
	}
	code, stdout, _ := opRun(t, "--help")
	if code != exitOK || !strings.HasSuffix(stdout, "\nrulevalidator "+info.String()+"\n") {
		t.Errorf("--help: exit %d, does not end with the build %q:\n%s", code, info.String(), stdout)
	}
	if !strings.Contains(stdout, "  version    print the version") {
		t.Errorf("--help does not list the version command:\n%s", stdout)
	}
}

// TestVersionStampedAtLinkTime builds the binary as the Dockerfile does,
// without VCS information and with the values given to the linker, and asks
// it its version: a wrong variable name in the -X flags would stamp nothing.
// Only -trimpath is left out, which would compile every package again.
func TestVersionStampedAtLinkTime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	const (
		pkg = "rulevalidator/internal/buildinfo"
		rev = "0123456789abcdef0123456789abcdef01234567"
	)
	bin := filepath.Join(t.TempDir(), "rulevalidator")
	ldflags := strings.Join([]string{
		"-s -w",
		"-X " + pkg + ".version=v9.8.7",
		"-X " + pkg + ".revision=" + rev,
		"-X " + pkg + ".revisionTime=2026-12-05T18:01:00Z",
		"-X " + pkg + ".modified=true",
	}, " ")
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", ldflags, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("%s version --json: %v", bin, err)
	}
	var got versionJSON
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("version --json wrote %s: %v", out, err)
	}
	if got.Version != "v9.8.7" || got.Revision != rev || got.Time == nil ||
		got.Time.Format(time.RFC3339) != "2026-12-05T18:01:00Z" || !got.Modified {
		t.Errorf("the stamped binary says %s", out)
	}
}
