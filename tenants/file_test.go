package tenants

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// logBuffer is a logger's output, safe to read while Run writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) count(s string) int { return strings.Count(b.String(), s) }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	// Whole, by a rename, as the docs ask.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func openFile(t *testing.T, content string) (*File, string, *logBuffer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	writeFile(t, path, content)
	logs := &logBuffer{}
	f, err := Open(path, FileOptions{PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return f, path, logs
}

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "none.yaml")
	if _, err := Open(missing, FileOptions{}); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Errorf("Open(missing) = %v, want an error naming the file", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "tenants: {acme: {weight: 0}}")
	_, err := Open(bad, FileOptions{})
	if err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), "tenants.acme.weight") {
		t.Errorf("Open(invalid) = %v, want an error naming the file and the field", err)
	}
	if _, err := Open(bad, FileOptions{PollInterval: -time.Second}); err == nil {
		t.Error("a negative poll interval was accepted")
	}
}

// TestFileReload: a changed file is served from the next poll; a version that does not parse,
// or a file gone, keeps the last good version in force, logged once with the problem.
func TestFileReload(t *testing.T) {
	f, path, logs := openFile(t, "tenants: {acme: {weight: 3, max_in_flight: 2, requests_per_minute: 60}}")
	if w, c, r := f.Weight("acme"), f.MaxInFlight("acme"), f.RequestsPerMinute("acme"); w != 3 || c != 2 || r != 60 {
		t.Fatalf("acme: weight %d, cap %d, rate %d; want 3, 2, 60", w, c, r)
	}
	if w, c, r := f.Weight("other"), f.MaxInFlight("other"), f.RequestsPerMinute("other"); w != 1 || c != 0 || r != 0 {
		t.Fatalf("another tenant: weight %d, cap %d, rate %d; want 1, 0, 0", w, c, r)
	}

	if f.Reload() {
		t.Error("Reload of an unchanged file served a new version")
	}
	writeFile(t, path, "tenants: {acme: {weight: 5}}")
	if !f.Reload() || f.Weight("acme") != 5 || f.RequestsPerMinute("acme") != 0 {
		t.Fatalf("after the edit: weight %d, rate %d; want 5, 0", f.Weight("acme"), f.RequestsPerMinute("acme"))
	}

	writeFile(t, path, "tenants: {acme: {weight: 7, on_exceed: wait}}")
	for range 3 {
		if f.Reload() {
			t.Error("a version that does not parse was served")
		}
	}
	if f.Weight("acme") != 5 {
		t.Errorf("weight %d after a bad version, want the previous 5", f.Weight("acme"))
	}
	if n := logs.count("tenants.acme.on_exceed: must be reject or delay (got wait)"); n != 1 {
		t.Errorf("the bad version was logged %d times, want once, naming the field:\n%s", n, logs)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	f.Reload()
	f.Reload()
	if n := logs.count("tenants file unreadable"); n != 1 {
		t.Errorf("the missing file was logged %d times, want once:\n%s", n, logs)
	}
	if f.Weight("acme") != 5 {
		t.Errorf("weight %d with the file gone, want the previous 5", f.Weight("acme"))
	}
	writeFile(t, path, "tenants: {acme: {weight: 2}}")
	if !f.Reload() || f.Weight("acme") != 2 {
		t.Errorf("the file back: weight %d, want 2", f.Weight("acme"))
	}
}

// TestFileRun: Run serves an edit without being asked, readers reading meanwhile, and returns
// nil when its context ends.
func TestFileRun(t *testing.T) {
	f, path, _ := openFile(t, "default: {weight: 1}")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	stopReading := make(chan struct{})
	var readers sync.WaitGroup
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stopReading:
					return
				default:
					if w := f.Weight("acme"); w != 1 && w != 4 {
						t.Errorf("weight %d, neither version's", w)
						return
					}
				}
			}
		}()
	}
	writeFile(t, path, "default: {weight: 1}\ntenants: {acme: {weight: 4}}")
	deadline := time.Now().Add(10 * time.Second)
	for f.Weight("acme") != 4 {
		if time.Now().After(deadline) {
			t.Fatal("the edit was not served within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stopReading)
	readers.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}
