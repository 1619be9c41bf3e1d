// Package modelprofile holds the judging defaults measured best for the models the project
// ships with (ops/llm.sh): a small table keyed by the id a model is served under, the
// --model setting. A profile changes defaults only: a value given by flag, environment or
// config file wins over it. A model without a profile, a hosted one among them, keeps the
// global defaults, which suit a capable model (as many rules a call as fit).
//
// The values are the settings' own text, keyed by their flag names, so that a profile is
// applied by the same code that reads a flag; each one's reason names the page its figures
// are on (docs/local-model.md, docs/measurements/).
package modelprofile

import (
	"fmt"
	"strings"
)

// The choices of the --model-profile setting besides a profile's name.
const (
	// Auto applies the profile of the model --model names, where it has one.
	Auto = "auto"
	// None applies no profile: the global defaults.
	None = "none"
)

// Profile is the defaults measured best for one model.
type Profile struct {
	// Model is the id the model is served under (ops/llm.sh alias), and the profile's name.
	Model    string
	Defaults []Default
}

// Default is one setting's default under a profile.
type Default struct {
	Setting string // the setting's flag name and config key
	Value   string // as the setting is written on the command line
	// When, if set, ties the default to another setting's value: it applies only where that
	// setting ends up at that value (a review threshold measured for one confidence source).
	When *Condition
}

// Condition is a setting at a value.
type Condition struct {
	Setting string
	Value   string
}

// Profiles is the table, built anew on each call so that no caller can change it for another.
func Profiles() []Profile {
	return []Profile{
		{
			// Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, on llama-cpp-python (ops/llm.sh's default).
			Model: "qwen2.5-coder-1.5b-instruct",
			Defaults: []Default{
				// One rule a call: every quality figure of docs/local-model.md was taken so
				// (docs/measurements/2026-12-local-model-verdicts.md); asked for all the rules
				// of an agreement at once, it judged ContractNLI's hypotheses at chance
				// (docs/local-model.md, "Defaults for the shipped models").
				{Setting: "llm-rules-per-call", Value: "1"},
				// One call at a time: llama-cpp-python serves one request at once, and those
				// waiting in it slow the one it serves (27 against 44 ms a token,
				// docs/measurements/2026-12-gemma-3-270m-eval-runs.md).
				{Setting: "llm-calls-per-request", Value: "1"},
				// The first call of a request reads the whole agreement: a minute and a half
				// on two cores (docs/local-model.md, "How the local server is driven").
				{Setting: "llm-timeout", Value: "10m"},
				// The only source that reaches the review target on this model: AUROC 0.79
				// against 0.53 for logprobs, which cost a minute more a call on this server
				// (docs/measurements/2026-12-local-model-confidence.md).
				{Setting: "confidence", Value: "verify"},
				// verify's confidences run from 0.29 to 0.72, so 0.8 routes every verdict;
				// 0.45 routed 28 of 60 and caught 22 of the 31 wrong ones (same page).
				{Setting: "review-below-confidence", Value: "0.45", When: &Condition{Setting: "confidence", Value: "verify"}},
				// The model passes what it is asked about (46 of 51 ContractNLI hypotheses, 18
				// of the 19 that do not hold), while its check of the passages a pass rests on
				// orders them better than chance: a pass whose check is under 0.48 becomes a
				// fail. Chosen with the setting below on thirteen dev agreements, the middle of
				// a plateau from 0.46 to 0.50 (docs/measurements/2026-12-contractnli-dev-check-passages.md;
				// 0.45 before, chosen on three, docs/measurements/2026-12-contractnli-dev-overrule.md).
				{Setting: "overrule-passes-below", Value: "0.48", When: &Condition{Setting: "confidence", Value: "verify"}},
				// The check also reads the passage whose words are nearest the rule's: the
				// model cites the deciding clause for under half the hypotheses that have one.
				// AUROC of the check 0.71 against 0.67 on the thirteen, 0.62 against 0.57 on six
				// others, for about 2 s more a check (11.5 against 9.6 s, same page).
				{Setting: "verify-nearest-passages", Value: "1", When: &Condition{Setting: "confidence", Value: "verify"}},
			},
		},
		{
			// Gemma 3 270M, Q4_K_M, on llama-cpp-python (LLM_MODEL=gemma-3-270m). Its
			// confidence was not measured: the global default stays.
			Model: "gemma-3-270m",
			Defaults: []Default{
				// More accurate and no slower than all the rules in one call
				// (docs/model-and-checks.md, "Rules per call"), and how its figures were
				// taken (docs/measurements/2026-12-gemma-3-270m-beside-qwen.md).
				{Setting: "llm-rules-per-call", Value: "1"},
				// 27 against 44 ms a token of decoding with the others waiting
				// (docs/measurements/2026-12-gemma-3-270m-eval-runs.md).
				{Setting: "llm-calls-per-request", Value: "1"},
				// As its figures were taken (docs/measurements/2026-12-gemma-3-270m-beside-qwen.md).
				{Setting: "llm-timeout", Value: "10m"},
			},
		},
	}
}

// Names are the profiles' names, in table order.
func Names() []string {
	var names []string
	for _, p := range Profiles() {
		names = append(names, p.Model)
	}
	return names
}

// Settings are the settings some profile gives a default to, each once, in table order.
func Settings() []string {
	var names []string
	seen := map[string]bool{}
	for _, p := range Profiles() {
		for _, d := range p.Defaults {
			if !seen[d.Setting] {
				seen[d.Setting] = true
				names = append(names, d.Setting)
			}
		}
	}
	return names
}

// Lookup is the profile of the model served under id. A profile matches, case aside, the id
// equal to its name or starting with it and then "-", "." or ":" (a quantisation, a file
// name or a tag: qwen2.5-coder-1.5b-instruct-q4_k_m, gemma-3-270m.gguf, gemma-3-270m:latest).
func Lookup(id string) (Profile, bool) {
	id = strings.ToLower(strings.TrimSpace(id))
	for _, p := range Profiles() {
		name := strings.ToLower(p.Model)
		if id == name {
			return p, true
		}
		if rest, ok := strings.CutPrefix(id, name); ok && rest != "" && strings.ContainsRune("-.:", rune(rest[0])) {
			return p, true
		}
	}
	return Profile{}, false
}

// Choose is the profile a --model-profile choice selects for model: Auto the model's (none
// where it has none), None none, or the profile of that name whatever the model.
func Choose(choice, model string) (Profile, bool, error) {
	switch c := strings.ToLower(strings.TrimSpace(choice)); c {
	case Auto:
		p, ok := Lookup(model)
		return p, ok, nil
	case None:
		return Profile{}, false, nil
	default:
		for _, p := range Profiles() {
			if strings.ToLower(p.Model) == c {
				return p, true, nil
			}
		}
	}
	return Profile{}, false, fmt.Errorf("%q is not %s, %s or a profile's name (%s)", choice, Auto, None, strings.Join(Names(), ", "))
}
