package modelprofile

import (
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		id   string
		want string // the profile's name; empty: none
	}{
		{"qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-1.5b-instruct"},
		{"Qwen2.5-Coder-1.5B-Instruct", "qwen2.5-coder-1.5b-instruct"},
		{" qwen2.5-coder-1.5b-instruct ", "qwen2.5-coder-1.5b-instruct"},
		{"qwen2.5-coder-1.5b-instruct-q4_k_m", "qwen2.5-coder-1.5b-instruct"},
		{"qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-1.5b-instruct"},
		{"gemma-3-270m", "gemma-3-270m"},
		{"GEMMA-3-270M", "gemma-3-270m"},
		{"gemma-3-270m:latest", "gemma-3-270m"},
		{"gemma-3-270m-it", "gemma-3-270m"},
		{"gemma-3-270mx", ""},                    // another model, its name running on
		{"qwen2.5-coder-1.5b", ""},               // ops/llm.sh's LLM_MODEL, not the served id
		{"Qwen/Qwen2.5-Coder-1.5B-Instruct", ""}, // another server's name for it
		{"gpt-4o-mini", ""},
		{"", ""},
	} {
		p, ok := Lookup(tt.id)
		if ok != (tt.want != "") || p.Model != tt.want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tt.id, p.Model, ok, tt.want)
		}
	}
}

func TestChoose(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		choice, model string
		want          string // the profile's name; empty: none
		wantErr       string
	}{
		{choice: Auto, model: "qwen2.5-coder-1.5b-instruct", want: "qwen2.5-coder-1.5b-instruct"},
		{choice: "AUTO", model: "gemma-3-270m", want: "gemma-3-270m"},
		{choice: Auto, model: "gpt-4o-mini"},
		{choice: None, model: "qwen2.5-coder-1.5b-instruct"},
		{choice: "gemma-3-270m", model: "my-server-name", want: "gemma-3-270m"},
		{choice: "Qwen2.5-Coder-1.5B-Instruct", model: "gpt-4o-mini", want: "qwen2.5-coder-1.5b-instruct"},
		{choice: "qwen", model: "qwen2.5-coder-1.5b-instruct", wantErr: `"qwen" is not auto, none or a profile's name (qwen2.5-coder-1.5b-instruct, gemma-3-270m)`},
		{choice: "", model: "qwen2.5-coder-1.5b-instruct", wantErr: `"" is not auto`},
	} {
		p, ok, err := Choose(tt.choice, tt.model)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Choose(%q, %q): error %v, want %q", tt.choice, tt.model, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("Choose(%q, %q): %v", tt.choice, tt.model, err)
		case ok != (tt.want != "") || p.Model != tt.want:
			t.Errorf("Choose(%q, %q) = %q, %v; want %q", tt.choice, tt.model, p.Model, ok, tt.want)
		}
	}
}

// The table is what the measurements took: one rule a call, one call at a time and a long
// timeout for both local models, verify and its threshold for Qwen alone.
func TestProfilesHoldTheMeasuredSettings(t *testing.T) {
	t.Parallel()
	want := map[string]map[string]string{
		"qwen2.5-coder-1.5b-instruct": {"llm-rules-per-call": "1", "llm-calls-per-request": "1", "llm-timeout": "10m", "confidence": "verify", "review-below-confidence": "0.45", "overrule-passes-below": "0.48", "verify-nearest-passages": "1"},
		"gemma-3-270m":                {"llm-rules-per-call": "1", "llm-calls-per-request": "1", "llm-timeout": "10m"},
	}
	profiles := Profiles()
	if len(profiles) != len(want) {
		t.Fatalf("%d profiles, want %d", len(profiles), len(want))
	}
	for _, p := range profiles {
		got := map[string]string{}
		for _, d := range p.Defaults {
			if _, twice := got[d.Setting]; twice {
				t.Errorf("%s gives %s twice", p.Model, d.Setting)
			}
			got[d.Setting] = d.Value
			if d.When != nil && d.When.Setting == d.Setting {
				t.Errorf("%s: %s depends on itself", p.Model, d.Setting)
			}
		}
		if len(got) != len(want[p.Model]) {
			t.Errorf("%s sets %v, want %v", p.Model, got, want[p.Model])
		}
		for k, v := range want[p.Model] {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", p.Model, k, got[k], v)
			}
		}
	}
	if got := strings.Join(Settings(), ","); got != "llm-rules-per-call,llm-calls-per-request,llm-timeout,confidence,review-below-confidence,overrule-passes-below,verify-nearest-passages" {
		t.Errorf("Settings() = %s", got)
	}
}

// A caller changing the table it was given changes nobody else's.
func TestProfilesAreCopies(t *testing.T) {
	t.Parallel()
	a := Profiles()
	a[0].Defaults[0].Value = "17"
	if b := Profiles(); b[0].Defaults[0].Value == "17" {
		t.Error("Profiles shares its table")
	}
}
