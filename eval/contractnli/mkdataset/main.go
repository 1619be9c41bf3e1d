// Command mkdataset writes a ContractNLI split as an eval dataset (package
// contractnli): the shipped examples/eval/contractnli-dev is
//
//	go run ./eval/contractnli/mkdataset --split dev.json --dir examples/eval/contractnli-dev
//
// with dev.json the ContractNLI dev split its SOURCES.md names. It prints
// what it wrote: the cases, the labels by choice and the gold passages.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"rulevalidator/eval/contractnli"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mkdataset:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("mkdataset", flag.ContinueOnError)
	var (
		split = fs.String("split", "", "the ContractNLI split to convert (dev.json) (required)")
		dir   = fs.String("dir", "", "the dataset directory to write: dataset.json, ruleset.yaml and inputs/ are replaced, other files kept (required)")
		name  = fs.String("name", "contractnli-dev", "the dataset's name")
		about = fs.String("description", "ContractNLI's dev split: non-disclosure agreements, each judged against the 17 hypotheses (CC BY 4.0; see SOURCES.md).", "the dataset's description")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *split == "" || *dir == "" {
		return errors.New("--split and --dir are required")
	}
	f, err := os.Open(*split)
	if err != nil {
		return err
	}
	defer f.Close()
	s, err := contractnli.Decode(f)
	if err != nil {
		return err
	}
	ds, err := contractnli.Convert(s, contractnli.Options{Name: *name, Description: *about})
	if err != nil {
		return err
	}
	if err := ds.Write(*dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", *dir)
	return ds.Stats.WriteStats(stdout)
}
