package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rulevalidator/engine/modelprofile"
)

// judgingSettings is the settings of a judging command, bound to llm as the command binds
// them.
func judgingSettings(command string, llm **llmConfig) *settings {
	if command == "serve" {
		cfg := &serveConfig{}
		*llm = &cfg.llm
		return serveSettings(cfg)
	}
	*llm = &llmConfig{}
	return judgeSettings(*llm, &documentConfig{})
}

// judged is what a model profile may change, as a command resolved it.
type judged struct {
	rulesPerCall, callsPerReq int
	timeout                   time.Duration
	confidence                string
	reviewBelow               float64
	overruleBelow             float64
	verifyNearest             int
	profile                   string
}

func judgedOf(f *llmConfig) judged {
	return judged{f.rulesPerCall, f.callsPerReq, f.timeout, f.confidence, f.reviewBelow, f.overruleBelow, f.verifyNearest, f.profile.name}
}

// TestModelProfile: the profile of the model --model names sets the judging defaults of
// serve, validate and eval alike, through the one settings resolution; a value given by
// flag, environment or config file wins over it, a model without a profile keeps the
// global defaults, and --model-profile none turns profiles off.
func TestModelProfile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	callsInFile := file("calls.yaml", "llm-calls-per-request: 2\n")
	gemmaInFile := file("gemma.yaml", "model: gemma-3-270m\n")
	noneInFile := file("none.yaml", "model-profile: none\n")

	const qwen = "qwen2.5-coder-1.5b-instruct"
	var (
		global    = judged{0, 4, 2 * time.Minute, "logprobs", 0.8, 0, 0, ""}
		qwenDefs  = judged{1, 1, 10 * time.Minute, "verify", 0.45, 0.48, 1, qwen}
		gemmaDefs = judged{1, 1, 10 * time.Minute, "logprobs", 0.8, 0, 0, "gemma-3-270m"}
	)
	with := func(j judged, change func(*judged)) judged { change(&j); return j }
	for _, tt := range []struct {
		name     string
		args     []string
		env      map[string]string
		want     judged
		wantKept []string
		wantErr  string
	}{
		{name: "the default model", want: qwenDefs},
		{name: "its id in capitals", args: []string{"--model", "Qwen2.5-Coder-1.5B-Instruct"}, want: qwenDefs},
		{name: "its id with a quantisation", args: []string{"--model", "qwen2.5-coder-1.5b-instruct-q4_k_m"}, want: qwenDefs},
		{name: "gemma", args: []string{"--model", "gemma-3-270m"}, want: gemmaDefs},
		{name: "gemma named by the environment", env: map[string]string{"RULEVALIDATOR_MODEL": "gemma-3-270m"}, want: gemmaDefs},
		{name: "gemma named by the file", args: []string{"--config", gemmaInFile}, want: gemmaDefs},
		{name: "a hosted model", args: []string{"--model", "gpt-4o-mini"}, want: global},
		{name: "another name of the same model", args: []string{"--model", "Qwen/Qwen2.5-Coder-1.5B-Instruct"}, want: global},
		{name: "a flag wins", args: []string{"--llm-rules-per-call", "3"},
			want: with(qwenDefs, func(j *judged) { j.rulesPerCall = 3 }), wantKept: []string{"llm-rules-per-call"}},
		{name: "a flag at the global default wins", args: []string{"--llm-rules-per-call", "0"},
			want: with(qwenDefs, func(j *judged) { j.rulesPerCall = 0 }), wantKept: []string{"llm-rules-per-call"}},
		{name: "the environment wins", env: map[string]string{"RULEVALIDATOR_LLM_TIMEOUT": "30s"},
			want: with(qwenDefs, func(j *judged) { j.timeout = 30 * time.Second }), wantKept: []string{"llm-timeout"}},
		{name: "the file wins", args: []string{"--config", callsInFile},
			want: with(qwenDefs, func(j *judged) { j.callsPerReq = 2 }), wantKept: []string{"llm-calls-per-request"}},
		{name: "another confidence keeps the global threshold", args: []string{"--confidence", "logprobs"},
			want: with(qwenDefs, func(j *judged) { j.confidence, j.reviewBelow, j.overruleBelow, j.verifyNearest = "logprobs", 0.8, 0, 0 }), wantKept: []string{"confidence"}},
		{name: "verify given keeps the profile's threshold", args: []string{"--confidence", "verify"},
			want: qwenDefs, wantKept: []string{"confidence"}},
		{name: "the check's passages given win", args: []string{"--verify-nearest-passages", "0"},
			want: with(qwenDefs, func(j *judged) { j.verifyNearest = 0 }), wantKept: []string{"verify-nearest-passages"}},
		{name: "a threshold given wins", args: []string{"--review-below-confidence", "0.6"},
			want: with(qwenDefs, func(j *judged) { j.reviewBelow = 0.6 }), wantKept: []string{"review-below-confidence"}},
		{name: "none", args: []string{"--model-profile", "none"}, want: global},
		{name: "none by the environment", env: map[string]string{"RULEVALIDATOR_MODEL_PROFILE": "None"}, want: global},
		{name: "none by the file", args: []string{"--config", noneInFile}, want: global},
		{name: "a profile named for another model id", args: []string{"--model", "my-gemma", "--model-profile", "gemma-3-270m"}, want: gemmaDefs},
		{name: "an unknown profile", args: []string{"--model-profile", "qwen"},
			wantErr: `--model-profile: "qwen" is not auto, none or a profile's name (qwen2.5-coder-1.5b-instruct, gemma-3-270m)`},
	} {
		for _, command := range []string{"serve", "validate", "eval"} {
			t.Run(command+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				var llm *llmConfig
				var stderr bytes.Buffer
				cl := newCommandLine(command, commandDoc{}, judgingSettings(command, &llm), &stderr)
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
				if got := judgedOf(llm); got != tt.want {
					t.Errorf("got %+v, want %+v", got, tt.want)
				}
				if !slices.Equal(llm.profile.kept, tt.wantKept) {
					t.Errorf("settings given over the profile %q, want %q", llm.profile.kept, tt.wantKept)
				}
				if err := llm.check(); err != nil {
					t.Errorf("the resolved settings do not pass the checks: %v", err)
				}
			})
		}
	}
}

// The commands that judge, and only they, read --model-profile and apply a profile; every
// default a profile gives is a setting of theirs that takes its value as written, and its
// --help says a profile may change it.
func TestModelProfileSettingsAreTheJudgingCommands(t *testing.T) {
	t.Parallel()
	judging := []string{"serve", "validate", "eval"}
	for _, c := range commandSettings() {
		byName := map[string]setting{}
		for _, st := range c.set.list {
			byName[st.name] = st
		}
		_, reads := byName["model-profile"]
		if reads != slices.Contains(judging, c.command) {
			t.Errorf("%s reads --model-profile: %v", c.command, reads)
		}
		if reads != (len(c.set.late) == 1) {
			t.Errorf("%s has %d late default steps", c.command, len(c.set.late))
		}
		if !reads {
			continue
		}
		for _, p := range modelprofile.Profiles() {
			for _, d := range p.Defaults {
				st, ok := byName[d.Setting]
				if !ok {
					t.Errorf("%s: profile %s gives --%s, not a setting of %s", c.command, p.Model, d.Setting, c.command)
					continue
				}
				if !st.profiled || !strings.Contains(st.describe(), "a model profile may change its default") {
					t.Errorf("%s: --%s's help does not say a profile may change its default", c.command, d.Setting)
				}
				if err := st.apply(d.Value); err != nil {
					t.Errorf("%s: profile %s: --%s %q: %v", c.command, p.Model, d.Setting, d.Value, err)
				}
				if d.When != nil {
					if _, ok := byName[d.When.Setting]; !ok {
						t.Errorf("%s: profile %s ties --%s to --%s, not a setting", c.command, p.Model, d.Setting, d.When.Setting)
					}
				}
			}
		}
		for _, st := range c.set.list {
			if st.profiled && !slices.Contains(modelprofile.Settings(), st.name) {
				t.Errorf("%s: --%s is marked as a profile's but no profile sets it", c.command, st.name)
			}
		}
	}
}

// Each judging command says at start which profile applied and what it set.
func TestModelProfileLogged(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"applied", nil, []string{`msg="model profile" profile=qwen2.5-coder-1.5b-instruct model=qwen2.5-coder-1.5b-instruct set="llm-rules-per-call=1 llm-calls-per-request=1 llm-timeout=10m confidence=verify review-below-confidence=0.45 overrule-passes-below=0.48 verify-nearest-passages=1" given=""`}},
		{"a setting given", []string{"--llm-timeout", "1m"}, []string{`set="llm-rules-per-call=1 llm-calls-per-request=1 confidence=verify review-below-confidence=0.45 overrule-passes-below=0.48 verify-nearest-passages=1" given=llm-timeout`}},
		{"no profile for the model", []string{"--model", "gpt-4o-mini"}, []string{`profile=none model=gpt-4o-mini reason="no profile for this model: the global defaults"`}},
		{"none", []string{"--model-profile", "none"}, []string{`profile=none model=qwen2.5-coder-1.5b-instruct reason="--model-profile none: the global defaults"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var llm llmConfig
			cl := newCommandLine("validate", commandDoc{}, judgeSettings(&llm, &documentConfig{}), io.Discard)
			if code, ok := cl.parse(tt.args, noEnv); !ok {
				t.Fatalf("exit %d", code)
			}
			var log bytes.Buffer
			llm.logProfile(slog.New(slog.NewTextHandler(&log, nil)))
			for _, want := range tt.want {
				if !strings.Contains(log.String(), want) || !strings.Contains(log.String(), "level=INFO") {
					t.Errorf("log %q, want an INFO line with %q", log.String(), want)
				}
			}
		})
	}

	// The commands themselves, each stopped after the line is written and before any model
	// call (no model server is reached: the address is a closed port besides).
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	badTracing := func(k string) string { return map[string]string{"OTEL_SDK_DISABLED": "maybe"}[k] }
	for _, tt := range []struct {
		args   []string
		getenv env
	}{
		{[]string{"validate", "-v", "--ruleset", exampleRuleset, "--input", exampleInput, "--llm-base-url", "http://127.0.0.1:1/v1"}, badTracing},
		{[]string{"eval", "-v", "--dataset", filepath.Join(t.TempDir(), "none"), "--llm-base-url", "http://127.0.0.1:1/v1"}, noEnv},
		{[]string{"serve", "--pdf-cache-dir", notADir, "--log-format", "text", "--llm-base-url", "http://127.0.0.1:1/v1"}, noEnv},
	} {
		args := tt.args
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var stderr bytes.Buffer
		code := run(ctx, args, io.Discard, &stderr, tt.getenv)
		cancel()
		if code == exitOK || !strings.Contains(stderr.String(), `msg="model profile" profile=qwen2.5-coder-1.5b-instruct`) {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant the profile said", args[0], code, stderr.String())
		}
	}
}
