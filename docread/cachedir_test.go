package docread

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// unwritableDir is a directory that can never be made, whoever runs the
// test (root ignores permission bits): its parent is a regular file.
func unwritableDir(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(file, "cache")
}

// TestUsableCacheDir: a cache directory set is made and used, or, when it
// cannot be written, fails the start (ErrCacheDir, naming it); a default
// one that cannot be written leaves the engine without a cache, with a
// warning naming it.
func TestUsableCacheDir(t *testing.T) {
	writable := filepath.Join(t.TempDir(), "made", "pdfium")
	unwritable := unwritableDir(t)
	for _, tc := range []struct {
		name     string
		dir      string
		optional bool
		want     string
		wantErr  error
		warned   bool
	}{
		{"no cache", "", false, "", nil, false},
		{"a writable directory, made", writable, false, writable, nil, false},
		{"a directory set that cannot be written", unwritable, false, "", ErrCacheDir, false},
		{"a default that cannot be written", unwritable, true, "", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			cfg := Config{CacheDir: tc.dir, CacheDirOptional: tc.optional, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			got, err := usableCacheDir(cfg)
			if got != tc.want || !errors.Is(err, tc.wantErr) {
				t.Fatalf("usableCacheDir = %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
			if err != nil && (!strings.Contains(err.Error(), tc.dir) || errors.Is(err, ErrUnreadable)) {
				t.Errorf("error %q does not name %s, or blames a document", err, tc.dir)
			}
			if warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), tc.dir); warned != tc.warned {
				t.Errorf("warned %v, want %v: %s", warned, tc.warned, logs.String())
			}
		})
	}
	if entries, err := os.ReadDir(writable); err != nil || len(entries) != 0 {
		t.Errorf("the writable directory holds %v (%v); want it made, and the check's file removed", entries, err)
	}
}

// TestReadWithAnUnwritableCacheDir: a PDF read by a reader whose cache
// directory set cannot be written fails at once, before any compile, with
// the environment's error, not the document's.
func TestReadWithAnUnwritableCacheDir(t *testing.T) {
	dir := unwritableDir(t)
	r, err := New(Config{CacheDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Read(t.Context(), Source{Name: "a.pdf", Data: []byte("%PDF-1.7\n%%EOF\n")})
	var de *Error
	if !errors.Is(err, ErrCacheDir) || errors.As(err, &de) || !strings.Contains(err.Error(), dir) {
		t.Errorf("Read = %v; want ErrCacheDir naming %s, not a document's error", err, dir)
	}
}
