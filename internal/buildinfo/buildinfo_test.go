package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

const rev = "9e17170d3c1f4b0a8e2d5c6b7a8f9e0d1c2b3a4f"

func recorded(version string, settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "rulevalidator", Version: version}}
	for i := 0; i+1 < len(settings); i += 2 {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return bi
}

func TestFromBuild(t *testing.T) {
	commit := time.Date(2026, 12, 5, 18, 1, 0, 0, time.UTC)
	tests := []struct {
		name    string
		bi      *debug.BuildInfo
		stamp   Stamp
		want    Info
		wantErr string
	}{
		{
			name: "no record, nothing stamped",
			want: Info{Version: Devel},
		},
		{
			name: "built from a repository",
			bi: recorded("v0.0.0-20261205180100-9e17170d3c1f+dirty",
				"vcs", "git", "vcs.revision", rev, "vcs.time", "2026-12-05T18:01:00Z", "vcs.modified", "true"),
			want: Info{Version: "v0.0.0-20261205180100-9e17170d3c1f+dirty", Revision: rev, Time: commit, Modified: true, GoVersion: "go1.26.8"},
		},
		{
			name: "built without VCS information (-buildvcs=false)",
			bi:   recorded(Devel),
			want: Info{Version: Devel, GoVersion: "go1.26.8"},
		},
		{
			name:  "stamped, as the Dockerfile does",
			bi:    recorded(Devel),
			stamp: Stamp{Version: "v0.1.0", Revision: rev, Time: "2026-12-05T19:01:00+01:00", Modified: "false"},
			want:  Info{Version: "v0.1.0", Revision: rev, Time: commit, GoVersion: "go1.26.8"},
		},
		{
			name:  "a stamp wins over the record",
			bi:    recorded("v0.0.0-20261205180100-9e17170d3c1f", "vcs.revision", rev, "vcs.modified", "true"),
			stamp: Stamp{Version: "v0.1.0", Modified: "false"},
			want:  Info{Version: "v0.1.0", Revision: rev, GoVersion: "go1.26.8"},
		},
		{
			name:  "blank stamps are not stamps",
			bi:    recorded("v0.1.0", "vcs.revision", rev),
			stamp: Stamp{Version: " ", Revision: "", Time: "", Modified: ""},
			want:  Info{Version: "v0.1.0", Revision: rev, GoVersion: "go1.26.8"},
		},
		{
			name:    "stamps that do not parse",
			bi:      recorded(Devel, "vcs.revision", rev, "vcs.time", "2026-12-05T18:01:00Z"),
			stamp:   Stamp{Version: "v0.1.0", Time: "yesterday", Modified: "perhaps"},
			want:    Info{Version: "v0.1.0", Revision: rev, Time: commit, GoVersion: "go1.26.8"},
			wantErr: `stamped revision time "yesterday" is not RFC 3339 (2026-12-05T18:01:00Z); modified "perhaps" is not true or false`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromBuild(tt.bi, tt.stamp)
			if tt.want.GoVersion == "" {
				tt.want.GoVersion = got.GoVersion // the running toolchain's, when nothing is recorded
			}
			if got != tt.want {
				t.Errorf("FromBuild = %+v, want %+v", got, tt.want)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one saying %s", err, tt.wantErr)
			}
		})
	}
}

func TestFormatting(t *testing.T) {
	commit := time.Date(2026, 12, 5, 18, 1, 0, 0, time.UTC)
	tests := []struct {
		info                  Info
		short, label, oneLine string
	}{
		{Info{Version: Devel}, "unknown", "unknown", "(devel) (revision unknown)"},
		{Info{Version: "v0.1.0", Revision: rev, Time: commit}, "9e17170d3c1f", rev, "v0.1.0 (revision 9e17170d3c1f, 2026-12-05T18:01:00Z)"},
		{Info{Version: "v0.1.0", Revision: rev, Time: commit, Modified: true}, "9e17170d3c1f", rev + "-dirty", "v0.1.0 (revision 9e17170d3c1f, 2026-12-05T18:01:00Z, modified)"},
		{Info{Version: "v0.1.0", Revision: "abc123"}, "abc123", "abc123", "v0.1.0 (revision abc123)"},
	}
	for _, tt := range tests {
		if got := tt.info.ShortRevision(); got != tt.short {
			t.Errorf("%+v: ShortRevision %q, want %q", tt.info, got, tt.short)
		}
		if got := tt.info.LabelRevision(); got != tt.label {
			t.Errorf("%+v: LabelRevision %q, want %q", tt.info, got, tt.label)
		}
		if got := tt.info.String(); got != tt.oneLine {
			t.Errorf("%+v: String %q, want %q", tt.info, got, tt.oneLine)
		}
	}
}

// TestReadInATest: a test binary records no VCS information and nothing is
// stamped, so Read gives a development build of the running toolchain.
func TestReadInATest(t *testing.T) {
	info, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if info.Version == "" || info.GoVersion == "" {
		t.Errorf("Read = %+v; version and Go version must never be empty", info)
	}
}
