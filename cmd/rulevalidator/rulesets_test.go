package main

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"rulevalidator/internal/kafkatest"
)

// invalidRuleset has two problems, in its second and third rules.
const invalidRuleset = `id: broken
version: "1"
rules:
  - rule_id: ok
    rule_text: Fine.
  - rule_id: heavy
    rule_text: Too light.
    weight: -1
  - rule_id: ok
    rule_text: Same id again.
`

// badExpressionRuleset has a nested ruleset whose filter does not parse.
const badExpressionRuleset = `id: bad-expression
rules:
  - {rule_id: a, rule_text: Say hi.}
nested_rulesets:
  - id: payment
    filter_criteria: inputs.contract_value >> 5
    rules:
      - {rule_id: b, rule_text: Say bye.}
`

func TestRulesetsCheck(t *testing.T) {
	t.Parallel()
	bad := opWriteFile(t, "broken.yaml", invalidRuleset)
	badExpr := opWriteFile(t, "badexpr.yaml", badExpressionRuleset)
	noID := opWriteFile(t, "inline.yaml", "rules:\n  - {rule_id: a, rule_text: Say hi.}\n")
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		stdout     []string
		stderrRE   []string // each a line of stderr
		stderrNone bool
	}{
		{"valid", []string{exampleRuleset}, exitOK,
			[]string{"ok  " + exampleRuleset + "  (ruleset contract-review version 1.0.0, 8 rules)"}, nil, true},
		{"valid by flag", []string{"--file", exampleRuleset}, exitOK, []string{"ok  " + exampleRuleset}, nil, true},
		{"every problem on its own line", []string{bad}, exitInvalid, nil, []string{
			`^` + regexp.QuoteMeta(bad) + `: ruleset "broken": rules\[1\] \(rule_id "heavy"\): weight: .*\(got -1\)$`,
			`^` + regexp.QuoteMeta(bad) + `: ruleset "broken": rules\[2\] \(rule_id "ok"\): .*rules\[0\].*$`,
		}, false},
		{"an expression that does not parse", []string{badExpr}, exitInvalid, nil, []string{
			`^` + regexp.QuoteMeta(badExpr) + `: ruleset "bad-expression": nested_rulesets\[0\] \("payment"\): filter_criteria: line 1, column 24 of "inputs.contract_value >> 5": Syntax error: .*$`,
		}, false},
		{"no id", []string{noID}, exitInvalid, nil, []string{`^` + regexp.QuoteMeta(noID) + `: invalid ruleset: no id: a published ruleset needs an id`}, false},
		{"no id, inline", []string{"--inline", noID}, exitOK, []string{"ok  " + noID + "  (ruleset - version -, 1 rules)"}, nil, true},
		{"one bad among good", []string{exampleRuleset, bad}, exitInvalid, []string{"ok  " + exampleRuleset}, []string{`rules\[1\]`}, false},
		{"missing file", []string{"nope.yaml"}, exitInvalid, nil, []string{`^open nope.yaml: no such file or directory$`}, false},
		{"no file", nil, exitInvalid, nil, []string{`give at least one file`}, false},
		{"help", []string{"--help"}, exitOK, nil, []string{`^Example:$`, `^  rulevalidator rulesets check rulesets/\*\.yaml$`}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := opRun(t, append([]string{"rulesets", "check"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout does not say %q:\n%s", want, stdout)
				}
			}
			for _, pattern := range tc.stderrRE {
				if !regexp.MustCompile(`(?m)` + pattern).MatchString(stderr) {
					t.Errorf("no line of stderr matches %s:\n%s", pattern, stderr)
				}
			}
			if tc.stderrNone && stderr != "" {
				t.Errorf("stderr: %s", stderr)
			}
		})
	}
}

func TestRulesetsUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		code   int
		output string
	}{
		{[]string{"rulesets"}, exitInvalid, "usage: rulevalidator rulesets <publish|list|check|diff>"},
		{[]string{"rulesets", "--help"}, exitOK, "list the rulesets held by the rulesets topic"},
		{[]string{"rulesets", "drop"}, exitInvalid, `rulesets: unknown command "drop"`},
		{[]string{"rulesets", "publish", "--help"}, exitOK, "RULEVALIDATOR_TOPIC_RULESETS"},
		{[]string{"rulesets", "list", "--help"}, exitOK, "RULEVALIDATOR_KAFKA_BROKERS"},
		{[]string{"rulesets", "publish"}, exitInvalid, "--file is required"},
		{[]string{"rulesets", "publish", "--file", exampleRuleset, "--timeout", "0s"}, exitInvalid, "--timeout: 0s must be positive"},
		{[]string{"rulesets", "list", "--kafka-brokers", " , "}, exitInvalid, "--kafka-brokers: at least one broker is required"},
		{[]string{"rulesets", "list", "--kafka-brokers", "127.0.0.1:1"}, exitFailure, "127.0.0.1:1"},
		{[]string{"help"}, exitOK, "rulesets   publish, list, check and compare rulesets"},
	} {
		code, stdout, stderr := opRun(t, tc.args...)
		if code != tc.code || !strings.Contains(stdout+stderr, tc.output) {
			t.Errorf("%v: exit %d (want %d), output does not say %q:\n%s%s", tc.args, code, tc.code, tc.output, stdout, stderr)
		}
	}
}

func TestRulesetsPublishAndList(t *testing.T) {
	t.Parallel()
	bootstrap := kafkatest.Broker(t)
	topic := kafkatest.UniqueTopic(t, "rulesets")
	kafkatest.CreateTopic(t, bootstrap, topic, 2)
	conn := []string{"--kafka-brokers", bootstrap, "--rulesets-topic", topic}

	code, stdout, stderr := opRun(t, append([]string{"rulesets", "list"}, conn...)...)
	if code != exitOK || stdout != "no rulesets on topic "+topic+"\n" {
		t.Errorf("empty topic: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}

	example, err := os.ReadFile(exampleRuleset)
	if err != nil {
		t.Fatal(err)
	}
	next := opWriteFile(t, "next.yaml", strings.Replace(string(example), `version: "1.0.0"`, `version: "1.1.0"`, 1))
	other := opWriteFile(t, "travel.json", `{"id": "travel-policy", "rules": [{"rule_id": "class", "rule_text": "Economy class only."}]}`)
	for _, tc := range []struct{ file, said string }{
		{exampleRuleset, "published ruleset contract-review version 1.0.0 (8 rules) to topic " + topic + "\n"},
		{next, "published ruleset contract-review version 1.1.0 (8 rules) to topic " + topic + "\n"},
		{other, "published ruleset travel-policy version - (1 rules) to topic " + topic + "\n"},
	} {
		code, stdout, stderr := opRun(t, append([]string{"rulesets", "publish", "--file", tc.file}, conn...)...)
		if code != exitOK || stdout != tc.said {
			t.Fatalf("publish %s: exit %d, stdout %q, stderr:\n%s", tc.file, code, stdout, stderr)
		}
	}
	published := opEndOffsets(t, bootstrap, topic, 2)

	// Invalid rulesets are refused with the exact problem and nothing is written.
	for _, tc := range []struct {
		file, said string
	}{
		{opWriteFile(t, "broken.yaml", invalidRuleset), `rules[1] (rule_id "heavy"): weight:`},
		{opWriteFile(t, "noid.yaml", "rules:\n  - {rule_id: a, rule_text: Say hi.}\n"), "no id: a published ruleset needs an id"},
		{opWriteFile(t, "badexpr.yaml", badExpressionRuleset),
			`nested_rulesets[0] ("payment"): filter_criteria: line 1, column 24 of "inputs.contract_value >> 5": Syntax error`},
	} {
		code, stdout, stderr := opRun(t, append([]string{"rulesets", "publish", "--file", tc.file}, conn...)...)
		if code != exitInvalid || stdout != "" || !strings.Contains(stderr, "rulesets publish: "+tc.file+": ") || !strings.Contains(stderr, tc.said) {
			t.Errorf("publish %s: exit %d (want %d), stdout %q, stderr does not say %q:\n%s", tc.file, code, exitInvalid, stdout, tc.said, stderr)
		}
	}
	if got := opEndOffsets(t, bootstrap, topic, 2); !reflect.DeepEqual(got, published) {
		t.Errorf("end offsets %v after the refused publishes, want %v unchanged", got, published)
	}

	code, stdout, stderr = opRun(t, append([]string{"rulesets", "list", "--json"}, conn...)...)
	if code != exitOK {
		t.Fatalf("list --json: exit %d, stderr:\n%s", code, stderr)
	}
	var rows []rulesetRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("list --json printed %q: %v", stdout, err)
	}
	source := regexp.MustCompile(`^` + regexp.QuoteMeta(topic) + `/[01]/[0-9]+$`)
	for i := range rows {
		if !source.MatchString(rows[i].Source) {
			t.Errorf("row %d: source %q is not topic/partition/offset", i, rows[i].Source)
		}
		rows[i].Source = ""
	}
	want := []rulesetRow{
		{ID: "contract-review", Version: "1.0.0", Latest: false, Rules: 8},
		{ID: "contract-review", Version: "1.1.0", Latest: true, Rules: 8},
		{ID: "travel-policy", Version: "", Latest: true, Rules: 1},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("list --json:\n%s\nwant (sources aside):\n%s", opJSON(t, rows), opJSON(t, want))
	}

	code, stdout, stderr = opRun(t, append([]string{"rulesets", "list"}, conn...)...)
	if code != exitOK {
		t.Fatalf("list: exit %d, stderr:\n%s", code, stderr)
	}
	for _, pattern := range []string{
		`^ID +VERSION +LATEST +RULES +SOURCE$`,
		`^contract-review +1\.0\.0 +8 +` + regexp.QuoteMeta(topic) + `/\d/\d+$`,
		`^contract-review +1\.1\.0 +yes +8 +` + regexp.QuoteMeta(topic) + `/\d/\d+$`,
		`^travel-policy +- +yes +1 +` + regexp.QuoteMeta(topic) + `/\d/\d+$`,
	} {
		if !regexp.MustCompile(`(?m)` + pattern).MatchString(stdout) {
			t.Errorf("no line of the table matches %s:\n%s", pattern, stdout)
		}
	}

	// Versions on the topic compare as files do; ID@ is the latest.
	code, stdout, stderr = opRun(t, append([]string{"rulesets", "diff", "contract-review@1.0.0", "contract-review@"}, conn...)...)
	if code != exitOK {
		t.Fatalf("diff: exit %d, stderr:\n%s", code, stderr)
	}
	for _, pattern := range []string{
		`^ruleset contract-review version 1\.0\.0 \(` + regexp.QuoteMeta(topic) + `/\d/\d+\) → contract-review version 1\.1\.0 \(` + regexp.QuoteMeta(topic) + `/\d/\d+\)$`,
		`^rules: 0 changed, 0 added, 0 removed, 8 unchanged; cached verdicts: 7 stay valid, 0 invalidated$`,
		`^unchanged, no cached verdicts to keep \(the old version decides the rule by its check, without the model: nothing is cached\): approval-limit-given$`,
		`^  version: "1\.0\.0" → "1\.1\.0"$`,
	} {
		if !regexp.MustCompile(`(?m)` + pattern).MatchString(stdout) {
			t.Errorf("diff: no line matches %s:\n%s", pattern, stdout)
		}
	}
	code, stdout, stderr = opRun(t, append([]string{"rulesets", "diff", exampleRuleset, "contract-review@1.1.0"}, conn...)...)
	if code != exitOK || !strings.Contains(stdout, "8 unchanged") {
		t.Errorf("diff of a file and a version: exit %d:\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = opRun(t, append([]string{"rulesets", "diff", "contract-review@1.0.0", "contract-review@9"}, conn...)...)
	if code != exitInvalid || !strings.Contains(stderr, `rulesets diff: contract-review@9: `) || !strings.Contains(stderr, `version "9"`) {
		t.Errorf("diff with an unknown version: exit %d, stderr:\n%s", code, stderr)
	}

	code, _, stderr = opRun(t, "rulesets", "list", "--kafka-brokers", bootstrap, "--rulesets-topic", topic+"-missing")
	if code != exitFailure || !strings.Contains(stderr, "no such topic") {
		t.Errorf("missing topic: exit %d, stderr:\n%s", code, stderr)
	}
}
