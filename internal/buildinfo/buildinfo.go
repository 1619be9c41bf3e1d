// Package buildinfo says which build of rulevalidator is running: the module
// version, the VCS revision and its time, and whether the tree held changes
// not committed. The Go toolchain records them in the binary when it builds
// from a repository; a build without the repository (the container image,
// whose context leaves .git out) stamps them with the linker instead:
//
//	go build -ldflags "-X rulevalidator/internal/buildinfo.version=v0.1.0 \
//	  -X rulevalidator/internal/buildinfo.revision=$(git rev-parse HEAD) \
//	  -X rulevalidator/internal/buildinfo.revisionTime=$(git log -1 --format=%cI) \
//	  -X rulevalidator/internal/buildinfo.modified=false" ./cmd/rulevalidator
//
// A stamped value wins over the recorded one. The `version` command and the
// build_info metric both read Read, so they cannot disagree.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// Set with -ldflags -X at link time; empty when the build did not stamp them.
// They are variables only because the linker can set nothing else.
var (
	version      string // module version, as a tag: v0.1.0
	revision     string // full commit hash
	revisionTime string // the commit's time, RFC 3339
	modified     string // "true" or "false"
)

// Devel is the version of a build that knows none: what the Go toolchain
// records for a build outside a tagged module or a repository.
const Devel = "(devel)"

// Info is one build's identity.
type Info struct {
	Version   string    // a tag (v0.1.0), a pseudo-version, or Devel
	Revision  string    // the commit hash; empty when unknown
	Time      time.Time // the commit's time; zero when unknown
	Modified  bool      // the tree held uncommitted changes when built
	GoVersion string    // the toolchain that built it
}

// Stamp is what the linker set (see the package comment); empty fields were
// not stamped.
type Stamp struct {
	Version, Revision, Time, Modified string
}

// Read returns the running binary's build: stamped values first, then what
// the toolchain recorded. A stamp that does not parse is an error, so a
// mistyped build argument shows rather than going unseen; the Info is still
// filled in from the rest.
func Read() (Info, error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return FromBuild(bi, Stamp{Version: version, Revision: revision, Time: revisionTime, Modified: modified})
}

// FromBuild combines the toolchain's record of a build (nil when the binary
// has none) with what the linker stamped.
func FromBuild(bi *debug.BuildInfo, stamp Stamp) (Info, error) {
	info := Info{Version: Devel, GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		if bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.time":
				// The toolchain writes RFC 3339; anything else is left unknown.
				if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
					info.Time = t.UTC()
				}
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}

	var problems []string
	if v := strings.TrimSpace(stamp.Version); v != "" {
		info.Version = v
	}
	if r := strings.TrimSpace(stamp.Revision); r != "" {
		info.Revision = r
	}
	if s := strings.TrimSpace(stamp.Time); s != "" {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			info.Time = t.UTC()
		} else {
			problems = append(problems, fmt.Sprintf("revision time %q is not RFC 3339 (2026-12-05T18:01:00Z)", s))
		}
	}
	if s := strings.TrimSpace(stamp.Modified); s != "" {
		if m, err := strconv.ParseBool(s); err == nil {
			info.Modified = m
		} else {
			problems = append(problems, fmt.Sprintf("modified %q is not true or false", s))
		}
	}
	if len(problems) > 0 {
		return info, fmt.Errorf("buildinfo: stamped %s", strings.Join(problems, "; "))
	}
	return info, nil
}

// ShortRevision is the first 12 characters of the revision, "unknown" when
// there is none.
func (i Info) ShortRevision() string {
	switch {
	case i.Revision == "":
		return "unknown"
	case len(i.Revision) > 12:
		return i.Revision[:12]
	default:
		return i.Revision
	}
}

// LabelRevision is the revision as the build_info metric shows it: in full,
// "-dirty" added for a modified tree, "unknown" when there is none.
func (i Info) LabelRevision() string {
	if i.Revision == "" {
		return "unknown"
	}
	if i.Modified {
		return i.Revision + "-dirty"
	}
	return i.Revision
}

// String is the build on one line: v0.1.0 (revision 9e17170abcde,
// 2026-12-05T18:01:00Z, modified).
func (i Info) String() string {
	parts := []string{"revision " + i.ShortRevision()}
	if !i.Time.IsZero() {
		parts = append(parts, i.Time.Format(time.RFC3339))
	}
	if i.Modified {
		parts = append(parts, "modified")
	}
	return i.Version + " (" + strings.Join(parts, ", ") + ")"
}
