package docread_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rulevalidator/docread"
	"rulevalidator/internal/opsscript"
)

// corpusModule holds the public PDF corpus read here: the test files of
// pdfcpu (Apache-2.0), real-world PDFs of every kind (books, slides, forms,
// scans, specifications), taken from the Go module proxy into the module
// cache at test time, never into the repository.
const corpusModule = "github.com/pdfcpu/pdfcpu@v0.15.0"

// corpusDir is the corpus's directory in the module cache, downloading the
// module when needed; it skips the test (fails it when integration tests are
// required) when the module proxy cannot be reached.
func corpusDir(t *testing.T) string {
	t.Helper()
	if testing.Short() && !opsscript.Required() {
		t.Skip("the PDF corpus is skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", corpusModule).Output()
	if err != nil {
		opsscript.Unavailable(t, "PDF corpus", "go mod download %s: %v", corpusModule, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		opsscript.Unavailable(t, "PDF corpus", "go mod download %s: no directory in %s", corpusModule, out)
	}
	return filepath.Join(mod.Dir, "pkg", "testdata")
}

// Every PDF of a public corpus of real-world files is read without error,
// except those whose pages are mostly images without text, which are
// refused as scans; the files made of text give text.
func TestRealWorldPDFs(t *testing.T) {
	dir := corpusDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.[pP][dD][fF]"))
	if err != nil || len(files) < 30 {
		t.Fatalf("the corpus at %s has %d PDFs (%v)", dir, len(files), err)
	}
	r := newReader(t, docread.Config{})
	var pages, scans, withText int
	start := time.Now()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		doc, err := r.Read(context.Background(), docread.Source{Name: name, Data: data})
		var de *docread.Error
		switch {
		case errors.Is(err, docread.ErrNoText) && errors.As(err, &de) && len(de.Pages) > 0:
			scans++
			t.Logf("%s: refused as a scan: %v", name, err)
			continue
		case err != nil:
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(doc.ImageOnly) > 0 {
			t.Logf("%s: read; pages that are only an image: %v", name, doc.ImageOnly)
		}
		pages += len(doc.Pages)
		if strings.TrimSpace(strings.Join(doc.Pages, "")) != "" {
			withText++
		}
	}
	t.Logf("%d PDFs, %d pages read in %v; %d with text, %d refused as scans", len(files), pages, time.Since(start).Round(time.Millisecond), withText, scans)
	if withText < len(files)/2 {
		t.Errorf("only %d of %d PDFs gave any text", withText, len(files))
	}
}
