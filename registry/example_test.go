package registry_test

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"rulevalidator/engine"
	"rulevalidator/registry"
)

func ruleset(id, version string) *engine.Ruleset {
	return &engine.Ruleset{ID: id, Version: version, Rules: []engine.Rule{{RuleID: "r1", RuleText: "A rule."}}}
}

// Rulesets given on the command line take precedence over the shared ones.
func ExampleChain() {
	local, err := registry.NewStatic(ruleset("contract-review", "2.0-draft"))
	if err != nil {
		panic(err)
	}
	shared, err := registry.NewStatic(ruleset("contract-review", "1.9"), ruleset("contract-review", "1.10"), ruleset("expenses", ""))
	if err != nil {
		panic(err)
	}
	r := registry.Chain(local, shared)
	ctx := context.Background()

	latest, _ := r.Resolve(ctx, "contract-review", "")
	pinned, _ := r.Resolve(ctx, "contract-review", "1.9")
	expenses, _ := r.Resolve(ctx, "expenses", "")
	fmt.Println(latest.Version, pinned.Version, expenses.ID)

	_, err = r.Resolve(ctx, "contract-review", "3")
	fmt.Println(errors.Is(err, registry.ErrUnknownRuleset), err)
	// Output:
	// 2.0-draft 1.9 expenses
	// true unknown ruleset "contract-review" version "3" (known versions: "1.9", "1.10", "2.0-draft")
}

func ExampleCompareVersions() {
	versions := []string{"1.10.0", "2", "", "1.9.2", "1.9"}
	slices.SortFunc(versions, registry.CompareVersions)
	fmt.Printf("%q\n", versions)
	// Output: ["" "1.9" "1.9.2" "1.10.0" "2"]
}
