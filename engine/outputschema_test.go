package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"rulevalidator/verdict"
)

func TestGrammarSchemaFixesOrderAndBounds(t *testing.T) {
	rules := testRuleset().Rules
	data, err := GrammarSchema(rules, EvidenceQuote, nil)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties struct {
			Rules struct {
				PrefixItems []struct {
					Properties map[string]json.RawMessage `json:"properties"`
					Required   []string                   `json:"required"`
				} `json:"prefixItems"`
				Items    bool `json:"items"`
				MinItems int  `json:"minItems"`
				MaxItems int  `json:"maxItems"`
			} `json:"rules"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	r := s.Properties.Rules
	if len(r.PrefixItems) != 3 || r.Items || r.MinItems != 3 || r.MaxItems != 3 {
		t.Fatalf("rules array = %+v", r)
	}
	for i, rule := range rules {
		if got := string(r.PrefixItems[i].Properties["rule_id"]); got != `{"type":"string","enum":["`+rule.RuleID+`"]}` {
			t.Errorf("item %d rule_id = %s, want %s", i, got, rule.RuleID)
		}
	}
	if !strings.Contains(string(r.PrefixItems[2].Properties["numerical_output"]), `"enum":[1,2,3]`) {
		t.Errorf("score not constrained: %s", r.PrefixItems[2].Properties["numerical_output"])
	}
	if !strings.Contains(string(data), `"maxLength":300`) || !strings.Contains(string(data), `"maxItems":3`) {
		t.Error("strings and evidences are not bounded")
	}
	// Properties come in the order a model should write them.
	text := string(data)
	if strings.Index(text, `"rationale"`) > strings.Index(text, `"evidences"`) || strings.Index(text, `"evidences"`) > strings.Index(text, `"boolean_output"`) {
		t.Error("properties are not ordered rationale, evidences, verdict")
	}
}

func TestOutputSchemaStaysInTheStrictSubset(t *testing.T) {
	data, err := OutputSchema(testRuleset().Rules, EvidenceCite, []string{"d1p1s1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, unsupported := range []string{"maxLength", "minLength", "prefixItems", "const", "minItems"} {
		if strings.Contains(string(data), unsupported) {
			t.Errorf("strict schema uses %s, which strict structured-output servers refuse", unsupported)
		}
	}
	a, _ := OutputSchema(testRuleset().Rules, EvidenceCite, []string{"d1p1s1"})
	if string(a) != string(data) {
		t.Error("schema is not deterministic")
	}
}

// TestSchemasThinkFirstDecideLast: both schemas ask for the same fields of
// every rule, in one order: the rationale, then the evidence, then
// applicability and sufficiency, then the verdict, so a model generating
// in schema order reasons first and decides last.
func TestSchemasThinkFirstDecideLast(t *testing.T) {
	for name, build := range map[string]func([]Rule, EvidenceMode, []string) (json.RawMessage, error){"output": OutputSchema, "grammar": GrammarSchema} {
		for _, rule := range testRuleset().Rules {
			data, err := build([]Rule{rule}, EvidenceCite, []string{"d1p1s1"})
			if err != nil {
				t.Fatal(err)
			}
			output := `"boolean_output"`
			if rule.Type == verdict.Numerical {
				output = `"numerical_output"`
			}
			text := string(data)
			order := []string{`"rule_id"`, `"rationale"`, `"evidences"`, `"not_applicable"`, `"data_sufficiency"`, output}
			if name == "grammar" {
				// The grammar of one rule leaves out its id: the position
				// names it.
				order = order[1:]
			}
			props := text[strings.Index(text, order[0]+`:{`):]
			last := -1
			for _, key := range order {
				at := strings.Index(props, key)
				if at <= last {
					t.Errorf("%s schema of %s: %s is out of order (want %v): %s", name, rule.RuleID, key, order, text)
				}
				last = at
			}
			req := text[strings.LastIndex(text, `"required":[`+order[0]):]
			if want := `"required":[` + strings.Join(order, ",") + `]`; !strings.HasPrefix(req, want) {
				t.Errorf("%s schema of %s: required = %.120s, want %s", name, rule.RuleID, req, want)
			}
		}
	}
}

// TestGrammarLoneRuleIsTheWholeAnswer: a grammar server asked about one rule
// writes the rule's object alone (no "rules" array, no rule_id, every token
// of which it would generate), and the answer is read as that rule's entry;
// so is a rationale-only re-ask's.
func TestGrammarLoneRuleIsTheWholeAnswer(t *testing.T) {
	rule := testRuleset().Rules[:1]
	for name, schema := range map[string]func() (json.RawMessage, error){
		"verdict":   func() (json.RawMessage, error) { return GrammarSchema(rule, EvidenceCite, []string{"d1p1s1"}) },
		"rationale": func() (json.RawMessage, error) { return rationaleSchema(rule, true) },
	} {
		g, err := schema()
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(g, &s); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.Properties["rules"]; ok || s.Properties["rationale"] == nil {
			t.Errorf("%s: a lone rule's grammar is not its object: %s", name, g)
		}
		if _, ok := s.Properties["rule_id"]; ok {
			t.Errorf("%s: a lone rule's grammar forces its id: %s", name, g)
		}
	}
	// Its citation is the entry's own passage_id, as the grammar has it, or
	// an evidences list, as a strict-schema server writes it.
	for _, answer := range []string{
		`{"passage_id":"d1p1s1","rationale":"Liability is capped at the fees paid.","boolean_output":true}`,
		`{"evidences":[{"passage_id":"d1p1s1"}],"rationale":"Liability is capped at the fees paid.","data_sufficiency":true,"boolean_output":true}`,
	} {
		good, problems := checkAnswer(answer, rule)
		// Without data_sufficiency (the grammar asks none), the data suffice.
		if v := good[rule[0].RuleID]; len(problems) != 0 || v.BooleanOutput == nil || !v.DataSufficiency || len(v.Evidences) != 1 || v.Evidences[0].PassageID != "d1p1s1" {
			t.Errorf("a lone rule's object %s: %+v, %v", answer, good, problems)
		}
	}
	rationales, problems := checkRationales(`{"rationale":"Liability is capped at the fees paid."}`, rule)
	if len(problems) != 0 || rationales[rule[0].RuleID] != "Liability is capped at the fees paid." {
		t.Errorf("a lone rationale: %v, %v", rationales, problems)
	}
	// Asked about two rules, a bare object is not an answer.
	if _, problems := checkAnswer(`{"rationale":"Liability is capped.","boolean_output":true}`, testRuleset().Rules[:2]); len(problems) == 0 || problems[0].Reason != ReasonMalformedJSON {
		t.Errorf("a bare object for two rules: %v", problems)
	}
}
