package engine

import (
	"testing"

	"rulevalidator/verdict"
)

// TestVerdictKey: the key changes with everything that decides a verdict
// (the tenant, the model, the settings that change what the model sees or
// how its answer is checked, the rule as the prompt shows it, the material)
// and with nothing else (the rule's display name, weight and position, the
// ruleset's version, the re-ask budget, how the request is split).
func TestVerdictKey(t *testing.T) {
	base := Config{Model: "m"}
	rule := Rule{RuleID: "cap", RuleText: "Liability is capped.", Type: verdict.Boolean, NotApplicableText: "No liability is named.", Name: "Cap", Weight: ptr(1.0)}
	score := Rule{RuleID: "clarity", RuleText: "Rate the clarity.", Type: verdict.Numerical, NumericalRuleConfig: &NumericalRuleConfig{PossibleScores: []int{1, 2, 3}}}
	key := func(cfg Config, tenant, model string, r Rule, material string) string {
		e, err := New(&scriptedLLM{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return e.verdictKey(tenant, model, r, material)
	}
	want := key(base, "contoso", "m", rule, "digest-1")
	wantScore := key(base, "contoso", "m", score, "digest-1")
	with := func(f func(*Rule)) Rule { r := rule; f(&r); return r }
	withScore := func(f func(*Rule)) Rule {
		r := score
		r.NumericalRuleConfig = &NumericalRuleConfig{PossibleScores: append([]int(nil), score.AllowedScores()...)}
		f(&r)
		return r
	}
	withCfg := func(f func(*Config)) Config { c := base; f(&c); return c }
	for _, tc := range []struct {
		name string
		got  string
		base string
		same bool
	}{
		{"the same judgement", key(base, "contoso", "m", rule, "digest-1"), want, true},
		{"another display name", key(base, "contoso", "m", with(func(r *Rule) { r.Name = "Liability cap" }), "digest-1"), want, true},
		{"another weight", key(base, "contoso", "m", with(func(r *Rule) { r.Weight = ptr(3.0) }), "digest-1"), want, true},
		{"rule text respaced as the prompt shows it", key(base, "contoso", "m", with(func(r *Rule) { r.RuleText = "Liability   is\ncapped." }), "digest-1"), want, true},
		{"another re-ask budget", key(withCfg(func(c *Config) { c.OutputRetries = 5 }), "contoso", "m", rule, "digest-1"), want, true},
		{"another context window", key(withCfg(func(c *Config) { c.ContextTokens = 4096 }), "contoso", "m", rule, "digest-1"), want, true},
		{"another tenant", key(base, "fabrikam", "m", rule, "digest-1"), want, false},
		{"another model", key(base, "contoso", "m2", rule, "digest-1"), want, false},
		{"other material", key(base, "contoso", "m", rule, "digest-2"), want, false},
		{"another rule id", key(base, "contoso", "m", with(func(r *Rule) { r.RuleID = "cap2" }), "digest-1"), want, false},
		{"another rule text", key(base, "contoso", "m", with(func(r *Rule) { r.RuleText = "Liability is uncapped." }), "digest-1"), want, false},
		{"another not-applicable text", key(base, "contoso", "m", with(func(r *Rule) { r.NotApplicableText = "" }), "digest-1"), want, false},
		{"another type", key(base, "contoso", "m", with(func(r *Rule) {
			r.Type = verdict.Numerical
			r.NumericalRuleConfig = &NumericalRuleConfig{PossibleScores: []int{0, 1}}
		}), "digest-1"), want, false},
		{"other allowed scores", key(base, "contoso", "m", withScore(func(r *Rule) { r.NumericalRuleConfig.PossibleScores = []int{1, 2, 3, 4} }), "digest-1"), wantScore, false},
		{"quote mode", key(withCfg(func(c *Config) { c.Evidence = EvidenceQuote }), "contoso", "m", rule, "digest-1"), want, false},
		{"instructions folded", key(withCfg(func(c *Config) { c.Instructions = InstructionsUser }), "contoso", "m", rule, "digest-1"), want, false},
		{"another answer budget", key(withCfg(func(c *Config) { c.MaxTokens = 512 }), "contoso", "m", rule, "digest-1"), want, false},
		{"another response format", key(withCfg(func(c *Config) { c.Format = FormatJSONObject }), "contoso", "m", rule, "digest-1"), want, false},
		{"another temperature", key(withCfg(func(c *Config) { c.Temperature = 0.7 }), "contoso", "m", rule, "digest-1"), want, false},
		{"nearest passages shown", key(withCfg(func(c *Config) { c.NearestPassages = 3 }), "contoso", "m", rule, "digest-1"), want, false},
		{"confidence from samples", key(withCfg(func(c *Config) { c.Confidence = ConfidenceSamples }), "contoso", "m", rule, "digest-1"), want, false},
		{"confidence from a check of the verdict", key(withCfg(func(c *Config) { c.Confidence = ConfidenceVerify }), "contoso", "m", rule, "digest-1"), want, false},
		{"passes overruled by the check", key(withCfg(func(c *Config) { c.Confidence, c.OverrulePassesBelow = ConfidenceVerify, 0.4 }), "contoso", "m", rule, "digest-1"),
			key(withCfg(func(c *Config) { c.Confidence = ConfidenceVerify }), "contoso", "m", rule, "digest-1"), false},
		{"the check shows the nearest passages too", key(withCfg(func(c *Config) { c.Confidence, c.VerifyNearestPassages = ConfidenceVerify, 1 }), "contoso", "m", rule, "digest-1"),
			key(withCfg(func(c *Config) { c.Confidence = ConfidenceVerify }), "contoso", "m", rule, "digest-1"), false},
		{"confidence off", key(withCfg(func(c *Config) { c.Confidence = ConfidenceOff }), "contoso", "m", rule, "digest-1"), want, true},
		{"another anchoring threshold", key(withCfg(func(c *Config) { c.FuzzyThreshold = 0.9 }), "contoso", "m", rule, "digest-1"), want, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if (tc.got == tc.base) != tc.same {
				t.Errorf("key %s against %s: same = %v, want %v", tc.got, tc.base, tc.got == tc.base, tc.same)
			}
		})
	}
}

// TestVerdictKeyFieldsDoNotRun: the fields are written with their lengths,
// so moving text from one field to the next makes another key.
func TestVerdictKeyFieldsDoNotRun(t *testing.T) {
	a := VerdictKey{Tenant: "ab", Model: "c"}.String()
	b := VerdictKey{Tenant: "a", Model: "bc"}.String()
	if a == b {
		t.Errorf("keys of (ab, c) and (a, bc) are both %s", a)
	}
	if len(a) != 64 {
		t.Errorf("key %q is not 64 hex digits", a)
	}
}

// TestMaterialDigestLeavesTheRulesOut: a call's material is the same
// whatever rules are written after it.
func TestMaterialDigestLeavesTheRulesOut(t *testing.T) {
	r := renderer{in: testInputs()}
	rs := testRuleset()
	all := r.whole(RulesPrompt(rs.Rules))
	one := r.whole(RulesPrompt(rs.Rules[:1]))
	none := r.whole("")
	if materialDigest(all) != materialDigest(none) || materialDigest(one) != materialDigest(none) {
		t.Error("the digest of the material depends on the rules written after it")
	}
	other := testInputs()
	other.PrimaryDocs[0].Pages[1] = "The term of this agreement is five (5) years."
	if materialDigest(renderer{in: other}.whole("")) == materialDigest(none) {
		t.Error("a changed page leaves the digest of the material as it was")
	}
}

// TestRuneSlice: offsets are code points, as evidence offsets count them;
// offsets outside the text match no text.
func TestRuneSlice(t *testing.T) {
	for _, tc := range []struct {
		s          string
		start, end int
		want       string
	}{
		{"abcdef", 1, 3, "bc"},
		{"abcdef", 0, 6, "abcdef"},
		{"abcdef", 6, 6, ""},
		{"§ 12 Haftung für Schäden", 5, 12, "Haftung"},
		{"契約書の条項", 3, 6, "の条項"},
		{"abc", 2, 4, "\x00"},
		{"abc", 4, 4, "\x00"},
	} {
		if got := runeSlice(tc.s, tc.start, tc.end); got != tc.want {
			t.Errorf("runeSlice(%q, %d, %d) = %q, want %q", tc.s, tc.start, tc.end, got, tc.want)
		}
	}
}

// TestCachedOffsetsFollowTheirPage: evidence offsets are stored relative to
// their page and come back relative to the document, checked against its
// words: a page before it that changed moves them, a changed page of their
// own makes the entry stale.
func TestCachedOffsetsFollowTheirPage(t *testing.T) {
	docs := []Document{{Name: "a.pdf", Pages: []string{"Seite 1.", "§ Haftung für Schäden."}}}
	start, end := len([]rune("Seite 1.\f§ ")), len([]rune("Seite 1.\f§ Haftung"))
	v := Verdict{RuleID: "r", Evidences: []verdict.Evidence{{Text: "Haftung", SourceOrigin: "a.pdf", SourcePageNumber: 2, Anchored: true, StartOffset: &start, EndOffset: &end}}}
	rel, ok := newDocIndex(docs).relative(v)
	if !ok || *rel.Evidences[0].StartOffset != 2 || *rel.Evidences[0].EndOffset != 9 {
		t.Fatalf("relative: %v %+v", ok, rel.Evidences[0])
	}
	if *v.Evidences[0].StartOffset != start {
		t.Error("relative changed the verdict it was given")
	}
	longer := []Document{{Name: "a.pdf", Pages: []string{"Seite eins, länger.", "§ Haftung für Schäden."}}}
	abs, ok := newDocIndex(longer).absolute(rel)
	text := []rune(longer[0].Pages[0] + "\f" + longer[0].Pages[1])
	if !ok || string(text[*abs.Evidences[0].StartOffset:*abs.Evidences[0].EndOffset]) != "Haftung" {
		t.Errorf("absolute on a longer first page: %v %+v", ok, abs.Evidences[0])
	}
	changed := []Document{{Name: "a.pdf", Pages: []string{"Seite 1.", "§ Gewährleistung."}}}
	if _, ok := newDocIndex(changed).absolute(rel); ok {
		t.Error("an entry whose page changed under its evidence was taken")
	}
	if _, ok := newDocIndex(nil).absolute(rel); ok {
		t.Error("an entry whose document is gone was taken")
	}
}
