package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/internal/llmfake"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// groupedRulesetJSON has two nested rulesets, the first a gate, the second
// filtered on the contract value, and a rule judged by its check.
const groupedRulesetJSON = `{"id": "grouped-review", "version": "1",
  "inputs": {"contract_value": "number", "cap": "number"},
  "rules": [
    {"rule_id": "governing-law", "rule_text": "The agreement names its governing law."},
    {"rule_id": "cap-within-limit", "rule_text": "The liability cap asked for is at most 1,000,000.", "check": "inputs.cap <= 1000000"}],
  "nested_rulesets": [
    {"id": "liability", "required": true, "rules": [
      {"rule_id": "liability-capped", "rule_text": "The supplier's liability is capped."},
      {"rule_id": "liability-mutual", "rule_text": "The liability cap applies to both parties."}]},
    {"id": "payment", "filter_criteria": "inputs.contract_value > 500000", "rules": [
      {"rule_id": "payment-terms", "rule_text": "Invoices are payable within 30 days."}]}]}`

// TestGroupsOnEveryPath judges one request on a ruleset with nested
// rulesets, a filter and a check by validate, by POST /v1/validations and
// through the requests topic (produce), with serve on a real broker and the
// scripted model: each path asks the model about exactly the rules left for
// it, gives the same verdicts and group results, and the summary on the
// summaries topic carries the groups. An expression that does not compile is
// refused on each path.
func TestGroupsOnEveryPath(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.llm.Answer(llmfake.Verdicts)
	e.startInProcess(t, append(e.serveArgs(), "--verdict-cache=false")...)
	public := "http://" + e.httpAddr
	waitForListener(t, public)
	acme := e.token(t, "acme")
	summaries := e.watch(t, e.summaries, e.partitions)

	msa := exampleInputs(t).PrimaryDocs[0]
	text, _ := json.Marshal(strings.Join(msa.Pages, "\f"))
	inputs := `"primary_docs":[{"file_name":"` + msa.Name + `","content":` + string(text) + `}],` +
		`"named_inputs":[{"name":"contract_value","value":250000},{"name":"cap","value":500000}]`

	// validate
	file := filepath.Join(t.TempDir(), "input.json")
	if err := os.WriteFile(file, []byte(`{"inline_ruleset":`+groupedRulesetJSON+`,`+inputs+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, e.llm, "validate", "--input", file, "--json")
	if code != exitOK {
		t.Fatalf("validate exit %d: %s", code, stderr)
	}
	var res engine.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	want := verdictsOf(t, res.Rules, res.Aggregate)
	wantGroups, _ := json.Marshal(res.Groups)
	byID := map[string]engine.Verdict{}
	for _, v := range res.Rules {
		byID[v.RuleID] = v
	}
	if v := byID["payment-terms"]; !v.NotApplicable || !strings.Contains(v.Rationale, `filter_criteria of nested ruleset "payment" (inputs.contract_value > 500000) is false`) {
		t.Errorf("payment-terms: %+v; want it not applicable, naming the filter", v)
	}
	if v := byID["cap-within-limit"]; v.BooleanOutput == nil || !*v.BooleanOutput || len(v.Evidences) != 1 || v.Evidences[0].SourceOrigin != "cap" || v.Evidences[0].Text != "500000" {
		t.Errorf("cap-within-limit: %+v; want it passed by its check, on the input cap", v)
	}
	if len(res.Groups) != 2 || res.Groups[0].ID != "liability" || res.Groups[1].ID != "payment" || !res.Groups[1].NotApplicable ||
		res.Usage.RulesFiltered != 1 || res.Usage.RulesChecked != 1 {
		t.Errorf("groups %s, usage %+v", wantGroups, res.Usage)
	}

	// POST /v1/validations and produce, both through the broker.
	body := `{"request_id":"grouped-validations","inline_ruleset":` + groupedRulesetJSON + `,` + inputs + `}`
	if code, _, resp := httpDo(t, http.MethodPost, public+"/v1/validations", acme, []byte(body)); code != http.StatusAccepted {
		t.Fatalf("POST /v1/validations = %d %s", code, resp)
	}
	reqFile := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(reqFile, []byte(`{"request_id":"grouped-produce","tenant_id":"acme","inline_ruleset":`+groupedRulesetJSON+`,`+inputs+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := opRun(t, "produce", "--file", reqFile, "--kafka-brokers", e.bootstrap, "--requests-topic", e.requests); code != exitOK {
		t.Fatalf("produce exit %d: %s", code, stderr)
	}
	for _, id := range []string{"grouped-validations", "grouped-produce"} {
		var got struct {
			Status string `json:"status"`
			Result *struct {
				Summary  schemas.SummaryEvent   `json:"summary"`
				Verdicts []schemas.VerdictEvent `json:"verdicts"`
			} `json:"result"`
		}
		waitUntil(t, waitLimit, id+" to finish", func() bool {
			code, _, body := httpDo(t, http.MethodGet, public+"/v1/validations/"+id, acme, nil)
			if code != http.StatusOK {
				return false
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("%s: %v\n%s", id, err, body)
			}
			return got.Status == "completed" || got.Status == "failed"
		})
		if got.Status != "completed" || got.Result == nil {
			t.Errorf("%s: %s", id, got.Status)
			continue
		}
		var rules []engine.Verdict
		for _, v := range got.Result.Verdicts {
			rules = append(rules, engine.Verdict{RuleID: v.RuleID, Type: verdict.RuleType(v.RuleType), DataSufficiency: v.DataSufficiency, Rationale: v.Rationale,
				BooleanOutput: v.BooleanOutput, NumericalOutput: v.NumericalOutput, NotApplicable: v.NotApplicable, Evidences: viaJSON[[]verdict.Evidence](t, v.Evidences)})
		}
		sum := got.Result.Summary
		if g := verdictsOf(t, rules, viaJSON[verdict.Aggregate](t, sum.Aggregate)); !bytes.Equal(g, want) {
			t.Errorf("%s differs from validate:\n     got %s\nvalidate %s", id, g, want)
		}
		if g, _ := json.Marshal(sum.Groups); !bytes.Equal(g, wantGroups) {
			t.Errorf("%s: groups differ from validate:\n     got %s\nvalidate %s", id, g, wantGroups)
		}
		if sum.Usage.RulesFiltered != 1 || sum.Usage.RulesChecked != 1 {
			t.Errorf("%s: usage %+v", id, sum.Usage)
		}
	}
	// The summary event itself, as the topic carries it.
	waitUntil(t, waitLimit, "both summaries on the topic", func() bool { return summaries.len() >= 2 })
	for _, m := range summaries.snapshot() {
		s := e.summary(t, m)
		if g, _ := json.Marshal(s.Groups); !bytes.Equal(g, wantGroups) {
			t.Errorf("summary event %s: groups %s, want %s", s.RequestID, g, wantGroups)
		}
	}

	// Every call asked about exactly the rules left for the model.
	asked := regexp.MustCompile(`rule_id: "([^"]+)"`)
	calls := 0
	for _, r := range e.llm.Requests() {
		for _, m := range r.Messages {
			if m.Role != "user" || strings.Contains(m.Content, "could not be accepted") {
				continue
			}
			calls++
			var ids []string
			for _, sub := range asked.FindAllStringSubmatch(m.Content, -1) {
				ids = append(ids, sub[1])
			}
			if want := []string{"governing-law", "liability-capped", "liability-mutual"}; !slices.Equal(ids, want) {
				t.Errorf("a call asked about %v, want %v", ids, want)
			}
		}
	}
	if calls != 3 {
		t.Errorf("%d model calls, want one per path (3)", calls)
	}

	// An expression that does not compile is refused on every path.
	bad := strings.Replace(groupedRulesetJSON, `inputs.contract_value > 500000`, `inputs.contract_value >`, 1)
	badFile := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(badFile, []byte(`{"inline_ruleset":`+bad+`,`+inputs+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const where = `nested_rulesets[1] ("payment"): filter_criteria: line 1, column 24 of "inputs.contract_value >"`
	if code, _, stderr := runCLI(t, e.llm, "validate", "--input", badFile); code != exitInvalid || !strings.Contains(stderr, where) {
		t.Errorf("validate: exit %d, stderr %s; want %d naming %s", code, stderr, exitInvalid, where)
	}
	badBody := `{"request_id":"grouped-bad","inline_ruleset":` + bad + `,` + inputs + `}`
	if code, _, resp := httpDo(t, http.MethodPost, public+"/v1/validations", acme, []byte(badBody)); code != http.StatusBadRequest || !strings.Contains(string(resp), "column 24") {
		t.Errorf("POST /v1/validations = %d %s; want 400 naming the expression", code, resp)
	}
	// produce refuses it before it is sent; a request written by another
	// producer is dead-lettered.
	if err := os.WriteFile(reqFile, []byte(`{"request_id":"grouped-bad","tenant_id":"acme","inline_ruleset":`+bad+`,`+inputs+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := opRun(t, "produce", "--file", reqFile, "--kafka-brokers", e.bootstrap, "--requests-topic", e.requests); code != exitInvalid || !strings.Contains(stderr, where) {
		t.Errorf("produce: exit %d, stderr %s; want %d naming %s", code, stderr, exitInvalid, where)
	}
	deadLetters := e.watch(t, e.deadLetters, 1)
	badReq := exampleRequest(t, "grouped-bad")
	badReq.RulesetRef, badReq.InlineRuleset = nil, &bad
	e.produce(t, e.requestMessage(t, badReq))
	waitUntil(t, waitLimit, "the dead letter", func() bool { return deadLetters.len() >= 1 })
	if d := e.deadLetter(t, deadLetters.snapshot()[0]); d.Reason != schemas.ReasonInvalidRuleset || !strings.Contains(d.Message, where) {
		t.Errorf("dead letter %s: %s; want %s naming %s", d.Reason, d.Message, schemas.ReasonInvalidRuleset, where)
	}
}
