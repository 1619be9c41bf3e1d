package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulevalidator/eval"
)

const split = `{
  "documents": [{
    "id": 1, "file_name": "a.txt", "text": "The Recipient shall return all materials.\nNothing else.",
    "spans": [[0, 41], [42, 55]],
    "annotation_sets": [{"annotations": {
      "nda-1": {"choice": "Entailment", "spans": [0]},
      "nda-2": {"choice": "NotMentioned", "spans": []}
    }}],
    "document_type": "sec-text", "url": ""
  }],
  "labels": {
    "nda-1": {"short_description": "Return", "hypothesis": "Receiving Party shall return Confidential Information."},
    "nda-2": {"short_description": "No solicitation", "hypothesis": "Receiving Party shall not solicit."}
  }
}`

func TestWritesALoadableDataset(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "dev.json")
	if err := os.WriteFile(in, []byte(split), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ds")
	var stdout strings.Builder
	if err := run([]string{"--split", in, "--dir", out}, &stdout); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 cases, 2 labels: Entailment 1 (50.0%), Contradiction 0 (0.0%), NotMentioned 1 (50.0%)", "1 gold passages", "  return: Entailment 1"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	ds, err := eval.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Name != "contractnli-dev" || len(ds.Cases) != 1 || len(ds.Cases[0].Labels) != 2 {
		t.Errorf("dataset %s with %d cases", ds.Name, len(ds.Cases))
	}
}

func TestRefusesMissingFlags(t *testing.T) {
	for _, args := range [][]string{{"--dir", "x"}, {"--split", "x"}} {
		if err := run(args, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "required") {
			t.Errorf("%v: err = %v", args, err)
		}
	}
	if err := run([]string{"--split", "/nonexistent/dev.json", "--dir", t.TempDir()}, &strings.Builder{}); err == nil {
		t.Error("a missing split was read")
	}
}
