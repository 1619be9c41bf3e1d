package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
)

// VerdictKey is everything that decides a rule's verdict, the key of the
// verdict cache: two judgements with the same VerdictKey would ask the model
// the same question about the same material and check its answer the same
// way.
type VerdictKey struct {
	// Tenant is the request's tenant: tenants never share a verdict.
	Tenant string
	// Model is the model that judges.
	Model string
	// Settings are the engine settings that change what the model sees or
	// how its answer is checked (Config.cacheSettings).
	Settings string
	// Rule is the rule as the prompt shows it (VerdictKeyRule): id, type,
	// allowed scores, text and not-applicable text; not its display name,
	// weight or position, which no model sees.
	Rule string
	// Material is the digest of exactly the material the rule was judged on
	// (materialDigest): the whole input for a call that holds all of it,
	// the excerpt a planned call showed.
	Material string
}

// String is the key in hex: the SHA-256 of its fields, each written with
// its length first, so that no two different keys write the same bytes.
func (k VerdictKey) String() string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, field := range []string{"rulevalidator verdict", k.Tenant, k.Model, k.Settings, k.Rule, k.Material} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(field)))])
		h.Write([]byte(field))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// verdictKey is the cache key of rule's verdict on the material whose digest
// is material, for tenant and model.
func (e *Engine) verdictKey(tenant, model string, rule Rule, material string) string {
	return VerdictKey{Tenant: tenant, Model: model, Settings: e.cfg.cacheSettings(), Rule: VerdictKeyRule(rule), Material: material}.String()
}

// VerdictKeyRule is a validated rule's part of its verdict-cache key
// (VerdictKey.Rule): the rule as the prompt shows it. Two versions of a rule
// with the same VerdictKeyRule share their cached verdicts; any other
// change to the rule leaves them where they are. Exported so that what
// compares ruleset versions (package rulesetdiff) asks the key itself.
func VerdictKeyRule(r Rule) string { return RulesPrompt([]Rule{r}) }

// cacheSettings writes the settings that change what the model sees or how
// its answer is checked: the prompt version, how the instructions reach the
// model (the setting, not what auto decided: auto decides the same for a
// server every time), the evidence mode, the response format, the answer
// budget, the temperature, the anchoring threshold and the nearest passages
// shown after a rule. Settings that only change how the material is split
// (the context window, rules per call) change the material itself, which
// the key holds as its digest; the re-ask budget does not change what an
// accepted answer is. The samples source's settings, and the verify
// source's wording, the nearest passages its check adds and the confidence
// under which it overrules a pass, are written when it is on: they make the
// verdict's confidence, and may make its value.
func (c *Config) cacheSettings() string {
	sampling := ""
	switch c.Confidence {
	case ConfidenceSamples:
		sampling = ";confidence=samples/" + strconv.Itoa(c.ConfidenceSamples) + "@" + strconv.FormatFloat(float64(c.SampleTemperature), 'g', -1, 32)
	case ConfidenceVerify:
		sampling = ";confidence=" + VerifyVersion
		if c.OverrulePassesBelow > 0 {
			sampling += ";overrule_passes_below=" + strconv.FormatFloat(c.OverrulePassesBelow, 'g', -1, 64)
		}
		if c.VerifyNearestPassages > 0 {
			sampling += ";verify_nearest=" + strconv.Itoa(c.VerifyNearestPassages)
		}
	}
	nearest := "" // written only when set: verdicts judged without it keep their keys
	if c.NearestPassages > 0 {
		nearest = ";nearest=" + strconv.Itoa(c.NearestPassages)
	}
	return "prompt=" + PromptVersion +
		";instructions=" + string(c.Instructions) +
		";evidence=" + string(c.Evidence) +
		";format=" + string(c.Format) +
		";max_tokens=" + strconv.Itoa(c.MaxTokens) +
		";temperature=" + strconv.FormatFloat(float64(c.Temperature), 'g', -1, 32) +
		";fuzzy=" + strconv.FormatFloat(c.FuzzyThreshold, 'g', -1, 64) + nearest + sampling
}

// materialDigest is the digest of a call's material, the rules after it
// left out: the documents, or the excerpts of them, the named inputs, the
// text input and the message, exactly as the call shows them.
func materialDigest(m material) string {
	sum := sha256.Sum256([]byte(m.withoutRules().user))
	return hex.EncodeToString(sum[:])
}

// withoutRules is m without the rules written at its end, if any.
func (m material) withoutRules() material {
	if m.rules == "" {
		return m
	}
	return material{user: m.user[:len(m.user)-len(m.rules)], ids: m.ids, whole: m.whole}
}
