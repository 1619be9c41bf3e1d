package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The configuration reference (docs/configuration.md) lists every setting of every command
// once, with its environment variable, default, the commands that read it
// and its meaning as the table defines them, and nothing else.
// RULEVALIDATOR_PRINT_REFERENCE=1 prints the table to paste.
func TestConfigurationReferenceListsEverySetting(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(configurationPage)
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	writeReference(&table)
	if os.Getenv("RULEVALIDATOR_PRINT_REFERENCE") == "1" {
		t.Logf("\n%s", table.String())
	}
	want := map[string]bool{}
	for _, row := range strings.Split(strings.TrimSpace(table.String()), "\n")[2:] {
		want[row] = true
	}
	got := configurationRows(t, string(page))
	seen := map[string]bool{}
	for _, row := range got {
		switch {
		case seen[row]:
			t.Errorf("%s lists a configuration row twice:\n%s", configurationPage, row)
		case !want[row]:
			t.Errorf("%s has a configuration row that is not a setting as the code defines it:\n%s", configurationPage, row)
		}
		seen[row] = true
	}
	for row := range want {
		if !seen[row] {
			t.Errorf("%s lacks the configuration row:\n%s", configurationPage, row)
		}
	}
}

// configurationPage is where the configuration reference lives.
const configurationPage = "../../docs/configuration.md"

// configurationRows are the body rows of the page's configuration table.
func configurationRows(t *testing.T, page string) []string {
	t.Helper()
	start := strings.Index(page, referenceHeader)
	if start < 0 {
		t.Fatalf("%s has no configuration table (a table whose header is %q)", configurationPage, referenceHeader)
	}
	var rows []string
	for i, line := range strings.Split(page[start:], "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i >= 2 { // the header and its separator
			rows = append(rows, line)
		}
	}
	return rows
}

// TestConfigurationRowsCatchMistakes: the check above sees a duplicated
// row and a row the code does not define.
func TestConfigurationRowsCatchMistakes(t *testing.T) {
	t.Parallel()
	page := "text\n\n" + referenceHeader + "\n| --- | --- | --- | --- | --- |\n| `--a` | A | `1` | serve | a |\n| `--a` | A | `1` | serve | a |\n\nafter\n| `--b` | B | `2` | serve | b |\n"
	rows := configurationRows(t, page)
	if len(rows) != 2 || rows[0] != rows[1] || strings.Contains(strings.Join(rows, ""), "--b") {
		t.Errorf("rows %q: want the two rows of the table and nothing after it", rows)
	}
}
