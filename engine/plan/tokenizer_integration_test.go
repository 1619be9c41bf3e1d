package plan_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/engine/plan"
	"rulevalidator/internal/opsscript"
	"rulevalidator/internal/synthdoc"
)

// TestCountAgainstRealTokenizer compares Count with the local model's own
// tokenizer (llama-cpp-python's POST /extras/tokenize) on the kinds of text a
// prompt holds: Count must never fall short, and must not overshoot prose so
// far that planning wastes the window.
func TestCountAgainstRealTokenizer(t *testing.T) {
	baseURL := os.Getenv("OPENAI_BASE_URL")
	if baseURL == "" {
		opsscript.Unavailable(t, "Model server", "OPENAI_BASE_URL is not set (run ops/llm.sh start and export OPENAI_BASE_URL=$(ops/llm.sh url))")
		return
	}
	root := strings.TrimSuffix(strings.TrimRight(baseURL, "/"), "/v1")
	overhead, err := tokenize(root, "")
	if err != nil {
		opsscript.Unavailable(t, "Model server", "tokenizing at %s: %v", root, err)
		return
	}

	rs, err := engine.ParseRuleset([]byte(`{"id":"contract-review","version":"3","rules":[
		{"rule_id":"payment-terms","rule_text":"Payment must be due within 45 days of the invoice date.","not_applicable_text":"There is no payment obligation."},
		{"rule_id":"liability-cap","rule_text":"The supplier's aggregate liability must be capped at no more than 150% of annual fees.","type":"boolean"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	pages := synthdoc.Pages(3, 2000, 11)
	in := &engine.Inputs{
		PrimaryDocs: []engine.Document{{Name: "contract.pdf", Pages: pages}},
		NamedInputs: []engine.NamedInput{{Name: "annual_fees", Value: map[string]any{"eur": 120000, "year": 2026}}},
		Message:     "Please review the attached agreement before 2026-12-31.",
	}
	texts := []struct {
		name  string
		text  string
		prose bool // English prose: Count may overshoot at most maxProse
	}{
		{"contract page", pages[0], true},
		{"system prompt", engine.SystemPrompt(rs, engine.EvidenceCite), true},
		{"user prompt", engine.UserPrompt(in, engine.EvidenceCite), true},
		{"numbers", "Invoice 2026-0417: EUR 1,234,567.89 due 2026-03-31; IBAN DE89 3704 0044 0532 0130 00; tel. +49 30 123456.", false},
		{"answer JSON", `{"rules":[{"rule_id":"payment-terms","not_applicable":false,"data_sufficiency":true,"evidences":[{"text":"payable within 30 days","source_origin":"contract.pdf","source_page_number":2}],"rationale":"Payment is due in 30 days.","boolean_output":true}]}`, false},
		{"German", "Der Auftragnehmer haftet für Schäden nur bei Vorsatz und grober Fahrlässigkeit; die Haftung ist auf die jährliche Vergütung begrenzt.", false},
		{"French", "Le prestataire s'engage à préserver la confidentialité des données à caractère personnel conformément au règlement général.", false},
		{"Japanese", "本契約は、甲および乙の間で締結され、日本法に準拠するものとします。", false},
		{"markers and layout", "<------- Page 12 ------->\n\n\t- item one\n\t- item two\n\f\n", false},
		{"table of contents", "1. Definitions ........................ 3\n2. Services .......................... 7\n12.4 (a)(ii) ---- see §4.2;\n", false},
		{"markdown table", "| Clause | Fee (EUR) | Due |\n|---|---:|:---:|\n| 4.1 | 12,000.00 | 30 days |\n====\n****\n", false},
	}
	const maxProse = 2.0
	for _, tt := range texts {
		n, err := tokenize(root, tt.text)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		actual := n - overhead
		est := plan.Count(tt.text)
		ratio := float64(est) / float64(max(actual, 1))
		t.Logf("%-20s %6d bytes  tokenizer %5d  Count %5d  ratio %.2f", tt.name, len(tt.text), actual, est, ratio)
		if est < actual {
			t.Errorf("%s: Count %d is below the tokenizer's %d", tt.name, est, actual)
		}
		if tt.prose && ratio > maxProse {
			t.Errorf("%s: Count %d overshoots the tokenizer's %d by %.2f×, over %.1f×", tt.name, est, actual, ratio, maxProse)
		}
	}
}

// tokenize counts text's tokens with the server's tokenizer. The server answers one request at
// a time, so a count waits for the generation in progress: the smoke test's, in the package
// running alongside, or another user's of the same server.
func tokenize(root, text string) (int, error) {
	body, err := json.Marshal(map[string]string{"input": text})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, root+"/extras/tokenize/count", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("POST /extras/tokenize/count: %s (the server is not llama-cpp-python?)", resp.Status)
	}
	var out struct {
		Count int `json:"count"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, err
	}
	return out.Count, nil
}
