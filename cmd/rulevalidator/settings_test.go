package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine"
)

// A setting read by several commands is one setting: the same environment
// variable, default, help and kind wherever it is read, and no variable
// names two settings.
func TestSharedSettingsAreOneSetting(t *testing.T) {
	t.Parallel()
	first := map[string]setting{}
	where := map[string]string{}
	byEnv := map[string]string{}
	for _, c := range commandSettings() {
		for _, st := range c.set.list {
			if prev, ok := first[st.name]; ok {
				a := []any{prev.env, prev.def, prev.help, prev.kind, prev.secret, prev.aliases, prev.section}
				b := []any{st.env, st.def, st.help, st.kind, st.secret, st.aliases, st.section}
				if !reflect.DeepEqual(a, b) {
					t.Errorf("--%s on %s is %v, on %s %v", st.name, where[st.name], a, c.command, b)
				}
			} else {
				first[st.name], where[st.name] = st, c.command
			}
			if st.env == "" {
				continue
			}
			if name, ok := byEnv[st.env]; ok && name != st.name {
				t.Errorf("%s names both --%s and --%s", st.env, name, st.name)
			}
			byEnv[st.env] = st.name
		}
	}
}

// Every command's --help lists the settings the table says it reads, each
// described in the same words on every command.
func TestHelpListsEachSettingTheSameWay(t *testing.T) {
	t.Parallel()
	blocks := map[string]string{} // flag -> its help block, as the first command shows it
	for _, c := range commandSettings() {
		code, stdout, stderr := opRun(t, append(strings.Fields(c.command), "--help")...)
		if code != exitOK {
			t.Fatalf("%s --help: exit %d\n%s", c.command, code, stderr)
		}
		help := stdout + stderr
		shown := settingBlocks(help)
		for _, st := range c.set.list {
			block, ok := shown[st.name]
			if !ok {
				t.Errorf("%s --help does not list --%s:\n%s", c.command, st.name, help)
				continue
			}
			if !strings.Contains(block, st.env) {
				t.Errorf("%s --help does not name %s for --%s:\n%s", c.command, st.env, st.name, block)
			}
			if prev, ok := blocks[st.name]; ok && prev != block {
				t.Errorf("%s --help shows --%s as\n%s\nanother command as\n%s", c.command, st.name, block, prev)
			}
			blocks[st.name] = block
			delete(shown, st.name)
		}
		for name := range shown {
			t.Errorf("%s --help lists --%s among its settings, which the table does not give it", c.command, name)
		}
	}
	// What the commands that judge have in common is spelled alike.
	for _, name := range []string{"llm-base-url", "llm-format", "llm-api-key", "output-retries", "evidence-mode", "llm-rules-per-call", "llm-instructions"} {
		if _, ok := blocks[name]; !ok {
			t.Errorf("no command lists --%s", name)
		}
	}
}

// Every command whose --help lists settings is in the table's list of
// commands, so that the configuration reference and the checks above see its settings.
func TestEveryCommandWithSettingsIsListed(t *testing.T) {
	t.Parallel()
	listed := map[string]bool{}
	for _, c := range commandSettings() {
		listed[c.command] = true
	}
	var names []string
	for _, c := range commands() {
		if c.name != "rulesets" {
			names = append(names, c.name)
		}
	}
	for _, c := range rulesetsCommands() {
		names = append(names, "rulesets "+c.name)
	}
	for _, name := range names {
		_, stdout, stderr := opRun(t, append(strings.Fields(name), "--help")...)
		if strings.Contains(stdout+stderr, "\nSettings: ") && !listed[name] {
			t.Errorf("%s --help lists settings, but commandSettings does not list %s", name, name)
		}
	}
}

var settingLine = regexp.MustCompile(`^  --([a-z0-9-]+)`)

// settingBlocks are the settings of a --help output, each flag's line with
// the indented lines under it, by flag name.
func settingBlocks(help string) map[string]string {
	_, after, ok := strings.Cut(help, "\nSettings: ")
	if !ok {
		return map[string]string{}
	}
	blocks := map[string]string{}
	var name string
	for _, line := range strings.Split(after, "\n") {
		switch m := settingLine.FindStringSubmatch(line); {
		case m != nil:
			name = m[1]
			blocks[name] = line
		case name != "" && strings.HasPrefix(line, "        "):
			blocks[name] += "\n" + line
		default:
			name = ""
		}
	}
	return blocks
}

func TestSettingsSources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// serve's file: validate reads its model settings and leaves the rest.
	shared := write("shared.yaml", "kafka-brokers: [a:9092, b:9092]\nconcurrency: 4\nmodel: from-file\nllm-timeout: 30s\noutput-retries: 1\n")
	typo := write("typo.yaml", "modle: x\n")
	for _, tt := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    llmConfig
		wantErr string
		warn    string
	}{
		// The default model's profile gives the timeout its default (TestModelProfile).
		{name: "defaults", want: llmConfig{model: defaultModel, baseURL: defaultBaseURL, timeout: 10 * time.Minute, outputRetries: 2}},
		{name: "defaults without a profile", args: []string{"--model-profile", "none"}, want: llmConfig{model: defaultModel, baseURL: defaultBaseURL, timeout: 120 * time.Second, outputRetries: 2}},
		{name: "file", args: []string{"--config", shared}, want: llmConfig{model: "from-file", baseURL: defaultBaseURL, timeout: 30 * time.Second, outputRetries: 1}},
		{name: "environment over the file", args: []string{"--config", shared}, env: map[string]string{"RULEVALIDATOR_MODEL": "from-env", "RULEVALIDATOR_OUTPUT_RETRIES": "0"},
			want: llmConfig{model: "from-env", baseURL: defaultBaseURL, timeout: 30 * time.Second, outputRetries: 0}},
		{name: "flag over the environment", args: []string{"--config", shared, "--model", "from-flag"}, env: map[string]string{"RULEVALIDATOR_MODEL": "from-env"},
			want: llmConfig{model: "from-flag", baseURL: defaultBaseURL, timeout: 30 * time.Second, outputRetries: 1}},
		{name: "deprecated spelling", args: []string{"--base-url", "http://old/v1"}, warn: "--base-url is deprecated: use --llm-base-url",
			want: llmConfig{model: defaultModel, baseURL: "http://old/v1", timeout: 10 * time.Minute, outputRetries: 2}},
		{name: "unknown key", args: []string{"--config", typo}, wantErr: typo + `: unknown setting "modle"`},
		{name: "bad environment", env: map[string]string{"RULEVALIDATOR_LLM_TIMEOUT": "soon"}, wantErr: `environment RULEVALIDATOR_LLM_TIMEOUT: "soon" is not a duration`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got llmConfig
			var stderr bytes.Buffer
			cl := newCommandLine("validate", validateDoc, judgeSettings(&got, &documentConfig{}), &stderr)
			code, ok := cl.parse(tt.args, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if ok || code != exitInvalid || !strings.Contains(stderr.String(), tt.wantErr) {
					t.Fatalf("exit %d, ok %v, stderr %q; want status 2 saying %q", code, ok, stderr.String(), tt.wantErr)
				}
				return
			}
			if !ok {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.warn) || (tt.warn == "" && stderr.Len() > 0) {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.warn)
			}
			type seen struct {
				model, baseURL string
				timeout        time.Duration
				outputRetries  int
			}
			if g, w := (seen{got.model, got.baseURL, got.timeout, got.outputRetries}), (seen{tt.want.model, tt.want.baseURL, tt.want.timeout, tt.want.outputRetries}); g != w {
				t.Errorf("got %+v, want %+v", g, w)
			}
		})
	}
}

// --output-retries means the same on every command: the corrective re-asks,
// 0 for none; a negative count is refused rather than read as a default.
func TestOutputRetriesOneMeaning(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		flag    string
		engine  int // engine.Config.OutputRetries: -1 none, 0 its default
		problem string
	}{
		{"0", -1, ""},
		{"1", 1, ""},
		{"2", 2, ""},
		{"-1", 0, "--output-retries: -1 must not be negative (0: none)"},
	} {
		for _, command := range []string{"serve", "validate", "eval"} {
			var cfg serveConfig
			set := serveSettings(&cfg)
			llm := &cfg.llm
			if command != "serve" {
				llm = &llmConfig{}
				set = judgeSettings(llm, &documentConfig{})
			}
			cl := newCommandLine(command, commandDoc{}, set, io.Discard)
			if _, ok := cl.parse([]string{"--output-retries", tt.flag}, noEnv); !ok {
				t.Fatalf("%s --output-retries %s: not parsed", command, tt.flag)
			}
			err := llm.check()
			switch {
			case tt.problem != "":
				if err == nil || !strings.Contains(err.Error(), tt.problem) {
					t.Errorf("%s --output-retries %s: %v, want %q", command, tt.flag, err, tt.problem)
				}
			case err != nil:
				t.Errorf("%s --output-retries %s: %v", command, tt.flag, err)
			case llm.engineConfig(nil, engine.Hooks{}).OutputRetries != tt.engine:
				t.Errorf("%s --output-retries %s: engine gets %d, want %d", command, tt.flag, llm.engineConfig(nil, engine.Hooks{}).OutputRetries, tt.engine)
			}
		}
	}
}

// The API key, once serve's alone, is a setting of the commands that judge.
func TestValidateTakesTheAPIKey(t *testing.T) {
	t.Parallel()
	var llm llmConfig
	cl := newCommandLine("validate", validateDoc, judgeSettings(&llm, &documentConfig{}), io.Discard)
	if _, ok := cl.parse(nil, func(k string) string {
		if k == "OPENAI_API_KEY" {
			return "sk-env"
		}
		return ""
	}); !ok || llm.apiKey != "sk-env" {
		t.Errorf("api key %q from the environment", llm.apiKey)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	if code := run(ctx, []string{"validate", "--llm-api-key", "sk", "--llm-format", "xml", "--input", "x"}, io.Discard, &stderr, noEnv); code != exitInvalid ||
		!strings.Contains(stderr.String(), `validate: --llm-format: "xml" is not one of json_schema, grammar, json_object, text`) {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}

// The claims prefix, under which any tenant may name keys, must lie apart
// from every prefix the service keeps its own state under.
func TestClaimsPrefixApartFromTheServicesOwn(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args    []string
		problem string
	}{
		{nil, ""},
		{[]string{"--s3-claims-prefix", "inbox/claims"}, ""},
		{[]string{"--s3-claims-prefix", "reviews-material"}, `--s3-claims-prefix "reviews-material" overlaps --review-prefix (its -material keys)`},
		{[]string{"--s3-claims-prefix", "jobs/claims"}, `--s3-claims-prefix "jobs/claims" overlaps --job-prefix "jobs"`},
		{[]string{"--s3-claims-prefix", "tenants", "--report-prefix", "tenants/reports"}, `overlaps --report-prefix "tenants/reports"`},
		{[]string{"--s3-claims-prefix", "deadletter"}, `overlaps the dead letters' stored values`},
	} {
		var cfg serveConfig
		cl := newCommandLine("serve", commandDoc{}, serveSettings(&cfg), io.Discard)
		if _, ok := cl.parse(tt.args, noEnv); !ok {
			t.Fatalf("%v: not parsed", tt.args)
		}
		err := cfg.claimsApart()
		if (tt.problem == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.problem) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.problem)
		}
	}
}
