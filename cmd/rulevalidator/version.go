package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"rulevalidator/internal/buildinfo"
)

// runVersion prints the build: the same values as the build_info metric.
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer, getenv env) int {
	cl := newCommandLine("version", commandDoc{
		synopsis: "version [--json]",
		about: []string{"Prints the module version, the VCS revision the binary was built from and its time, " +
			"whether the tree held uncommitted changes, and the Go version; the metric rulevalidator_build_info " +
			"carries the same. A binary built outside the repository (the container image) has them stamped " +
			"at link time (docs/operations.md, Releases)."},
		exit: "0 printed, 1 a stamped value does not parse (the rest is printed), 2 invalid flags.",
	}, nil, stderr)
	asJSON := cl.fs.Bool("json", false, "print one JSON object: version, revision, time, modified, go_version")
	if code, ok := cl.parse(args, getenv); !ok {
		return code
	}
	info, err := buildinfo.Read()
	write := writeVersion
	if *asJSON {
		write = writeVersionJSON
	}
	if werr := write(stdout, info); werr != nil {
		fmt.Fprintf(stderr, "version: %v\n", werr)
		return exitFailure
	}
	if err != nil {
		fmt.Fprintf(stderr, "version: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// writeVersion writes the build, one field a line.
func writeVersion(w io.Writer, info buildinfo.Info) error {
	revision, when, modified := "unknown", "unknown", "unknown"
	if info.Revision != "" {
		revision = info.Revision
		modified = fmt.Sprint(info.Modified)
	}
	if !info.Time.IsZero() {
		when = info.Time.Format(time.RFC3339)
	}
	_, err := fmt.Fprintf(w, "rulevalidator %s\n  revision  %s\n  time      %s\n  modified  %s\n  go        %s\n",
		info.Version, revision, when, modified, info.GoVersion)
	return err
}

// versionJSON is `version --json`: unknown values are empty or null.
type versionJSON struct {
	Version   string     `json:"version"`
	Revision  string     `json:"revision"`
	Time      *time.Time `json:"time"`
	Modified  bool       `json:"modified"`
	GoVersion string     `json:"go_version"`
}

func writeVersionJSON(w io.Writer, info buildinfo.Info) error {
	v := versionJSON{Version: info.Version, Revision: info.Revision, Modified: info.Modified, GoVersion: info.GoVersion}
	if !info.Time.IsZero() {
		v.Time = &info.Time
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
