package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The README's configuration reference must list every setting of serve,
// with its environment variable and default, as the code defines them.
func TestREADMEListsEveryServeSetting(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var cfg serveConfig
	var table bytes.Buffer
	serveSettings(&cfg).reference(&table)
	if os.Getenv("RULEVALIDATOR_PRINT_REFERENCE") == "1" {
		t.Logf("\n%s", table.String())
	}
	for _, row := range strings.Split(strings.TrimSpace(table.String()), "\n")[2:] {
		if !strings.Contains(string(readme), row) {
			t.Errorf("README.md lacks the configuration row:\n%s", row)
		}
	}
}
