package report

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"rulevalidator/internal/opsscript"
)

// convertTimeout bounds one LibreOffice conversion; a cold start takes a few seconds.
const convertTimeout = 2 * time.Minute

// libreOffice finds LibreOffice's command-line binary, or skips the test with
// the reason (fails it when integration tests are required).
func libreOffice(t *testing.T) string {
	t.Helper()
	if testing.Short() && !opsscript.Required() {
		t.Skip("LibreOffice integration test skipped under -short")
	}
	for _, name := range []string{"soffice", "libreoffice"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	opsscript.Unavailable(t, "LibreOffice", "no soffice or libreoffice on PATH (install it with ops/tools.sh install libreoffice)")
	return ""
}

// A report that a real spreadsheet application opens and prints: LibreOffice
// converts it to a non-empty PDF.
func TestReportConvertsToPDF(t *testing.T) {
	soffice := libreOffice(t)
	data, err := Build(mixedMeta(), mustRuleset(t, mixedRuleset), mixedResult())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	xlsx := filepath.Join(dir, "report.xlsx")
	if err := os.WriteFile(xlsx, data, 0o600); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(dir, "pdf")
	// A profile of its own, so that parallel runs (and a desktop session) don't share one.
	profile := (&url.URL{Scheme: "file", Path: filepath.Join(dir, "profile")}).String()

	ctx, cancel := context.WithTimeout(context.Background(), convertTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, soffice, "-env:UserInstallation="+profile,
		"--headless", "--norestore", "--nolockcheck", "--convert-to", "pdf", "--outdir", outDir, xlsx)
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v (after %v)\n%s", cmd, err, time.Since(start).Round(time.Millisecond), out)
	}
	pdf, err := os.ReadFile(filepath.Join(outDir, "report.pdf"))
	if err != nil {
		t.Fatalf("no PDF came out: %v\n%s", err, out)
	}
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) || len(pdf) < 1024 {
		t.Fatalf("output is not a plausible PDF: %d bytes starting %q", len(pdf), pdf[:min(len(pdf), 16)])
	}
	t.Logf("LibreOffice converted %d bytes of xlsx to %d bytes of PDF in %v",
		len(data), len(pdf), time.Since(start).Round(time.Millisecond))
}
