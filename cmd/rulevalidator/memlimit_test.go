package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		configured int
		gomemlimit string
		files      map[string]string // cgroup files under the root
		want       int64
		from       string // a part of the source named
		err        string
	}{
		{name: "flag wins", configured: 256 << 20, gomemlimit: "1GiB", files: map[string]string{"memory.max": "1073741824\n"}, want: 256 << 20, from: "--memory-limit"},
		{name: "GOMEMLIMIT left to the runtime", gomemlimit: "200MiB", files: map[string]string{"memory.max": "1073741824\n"}, want: 0, from: "GOMEMLIMIT"},
		{name: "cgroup v2 limit", files: map[string]string{"memory.max": "1073741824\n"}, want: 966367641, from: "memory.max"},
		{name: "cgroup v2 without limit", files: map[string]string{"memory.max": "max\n"}, want: 0},
		{name: "cgroup v1 limit", files: map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, want: 483183820, from: "memory.limit_in_bytes"},
		{name: "cgroup v1 without limit", files: map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, want: 0},
		{name: "no cgroup files", want: 0},
		{name: "garbage", files: map[string]string{"memory.max": "lots\n"}, err: `holds "lots", not a byte count`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, text := range tc.files {
				path := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, from, err := memoryLimit(tc.configured, tc.gomemlimit, root)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("memoryLimit error = %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || !strings.Contains(from, tc.from) {
				t.Errorf("memoryLimit = %d from %q, want %d from %q", got, from, tc.want, tc.from)
			}
		})
	}
}
