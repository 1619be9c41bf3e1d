package engine_test

import (
	"context"
	"fmt"

	"rulevalidator/engine"
	"rulevalidator/verdict"
)

// scripted is an LLM that gives every call the same answer, as a test's scripted model does.
type scripted string

func (s scripted) Chat(_ context.Context, req engine.ChatRequest) (engine.ChatResponse, error) {
	return engine.ChatResponse{Content: string(s), Format: req.Format, Model: req.Model, Usage: verdict.Usage{LLMCalls: 1}}, nil
}

// Evaluate judges the inputs against every rule of the ruleset in one call to the model,
// checks the answer, anchors its evidence in the documents, and aggregates.
func ExampleEngine_Evaluate() {
	rs, err := engine.ParseRuleset([]byte(`
id: supplier-contracts
rules:
  - rule_id: liability-cap
    rule_text: The supplier's liability is capped.
  - rule_id: term
    rule_text: The term is under three years.
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	in := &engine.Inputs{PrimaryDocs: []engine.Document{{Name: "msa.txt", Pages: []string{
		"The supplier's total liability is capped at the fees paid in the prior 12 months.",
		"This agreement runs for five (5) years from the effective date.",
	}}}}
	model := scripted(`{"rules": [
  {"rule_id": "liability-cap", "data_sufficiency": true, "rationale": "Liability is capped at a year of fees.",
   "boolean_output": true, "not_applicable": false,
   "evidences": [{"text": "total liability is capped at the fees paid in the prior 12 months", "source_origin": "msa.txt", "source_page_number": 1}]},
  {"rule_id": "term", "data_sufficiency": true, "rationale": "The term is five years.",
   "boolean_output": false, "not_applicable": false,
   "evidences": [{"text": "This agreement runs for five (5) years", "source_origin": "msa.txt", "source_page_number": 2}]}
]}`)
	eng, err := engine.New(model, engine.Config{Model: "scripted"})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := eng.Evaluate(context.Background(), engine.Task{Ruleset: rs, Inputs: in})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, v := range res.Rules {
		ev := v.Evidences[0]
		fmt.Printf("%s: %v, on page %d (%s)\n", v.RuleID, *v.BooleanOutput, ev.SourcePageNumber, ev.Match)
	}
	fmt.Println("passed:", res.Aggregate.Boolean.Passed)
	// Output:
	// liability-cap: true, on page 1 (exact)
	// term: false, on page 2 (exact)
	// passed: false
}
