package gbnf

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rulevalidator/engine"
	"rulevalidator/verdict"
)

// testRules mirror the engine's test ruleset: a rule with an alternate, one
// without, and a numerical rule scored 1 to 3.
func testRules() []engine.Rule {
	return []engine.Rule{
		{RuleID: "cap", RuleText: "Liability is capped.", Type: verdict.Boolean, NotApplicableText: "The contract names no liability at all."},
		{RuleID: "term", RuleText: "The term is under 3 years.", Type: verdict.Boolean},
		{RuleID: "score", RuleText: "Rate the clarity.", Type: verdict.Numerical, NumericalRuleConfig: &engine.NumericalRuleConfig{PossibleScores: []int{1, 2, 3}}},
	}
}

// manyPassages is more passage ids than the engine lists as an enum, and two
// other names, so the citable definition is a pattern.
func manyPassages() []string {
	ids := []string{"text_input", "contract.pdf"}
	for i := range 260 {
		ids = append(ids, fmt.Sprintf("d1p%ds1", i+1))
	}
	return ids
}

// rationaleLone is the engine's rationaleSchema([]Rule{rule}, true) (it is
// unexported), copied from its output.
const rationaleLone = `{"type":"object","properties":{"rationale":{"type":"string","pattern":"^[A-Za-z][^ \"\\\\<\\x00-\\x1f]{0,24} [^\"\\\\<\\x00-\\x1f]{8,56}$"}},"required":["rationale"],"additionalProperties":false}`

const okRationale = `Liability is capped at the fees paid.`

func TestFromSchemaAcceptsExactlyTheCompactAnswers(t *testing.T) {
	rules := testRules()
	schema := func(s json.RawMessage, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	loneCite := `{"rationale":"` + okRationale + `","evidences":[{"passage_id":"d1p1s1"}],"not_applicable":false,"data_sufficiency":true,"boolean_output":true}`
	withRationale := func(r string) string { return strings.Replace(loneCite, okRationale, r, 1) }
	// Every entry has every field; strict ones quote in cite mode.
	entryOf := func(bool) func(id, evidences, verdict string) string {
		return func(id, evidences, verdict string) string {
			return `{"rule_id":"` + id + `","rationale":"` + okRationale + `","evidences":` + evidences + `,"not_applicable":false,"data_sufficiency":true,` + verdict + `}`
		}
	}
	entry, strictEntry := entryOf(false), entryOf(true)
	quoteEv := `{"text":"The supplier's total liability is capped.","source_origin":"msa.pdf","source_page_number":1}`
	quote3 := func(ev0, score string) string {
		return `{"rules":[` + entry("cap", ev0, `"boolean_output":true`) + `,` + entry("term", `[]`, `"boolean_output":false`) + `,` + entry("score", `[]`, `"numerical_output":`+score) + `]}`
	}
	strictCite := func(ev string) string {
		return `{"rules":[{"rule_id":"term","rationale":"x","evidences":` + ev + `,"not_applicable":false,"data_sufficiency":true,"boolean_output":true}]}`
	}
	for _, tc := range []struct {
		name   string
		schema []byte
		accept []string
		reject []string
	}{{
		name:   "grammar, cite, lone rule",
		schema: schema(engine.GrammarSchema(rules[:1], engine.EvidenceCite, []string{"d1p1s1", "d1p2s1"})),
		accept: []string{
			loneCite,
			strings.Replace(loneCite, "d1p1s1", "d1p2s1", 1),
			strings.Replace(loneCite, `{"passage_id":"d1p1s1"}`, `{"passage_id":"d1p1s1"},{"passage_id":"d1p2s1"}`, 1),
			withRationale("9 months of fees cap it. That is the policy's floor!"),
			withRationale("“Liability” is capped at twelve months of fees?"),
		},
		reject: []string{
			strings.Replace(loneCite, `"rationale":`, `"rationale": `, 1),           // space after a colon
			strings.Replace(loneCite, `,"boolean_output"`, `, "boolean_output"`, 1), // space after a comma
			" " + loneCite,
			loneCite + "\n",
			strings.Replace(loneCite, `"data_sufficiency":true,"boolean_output":true`, `"boolean_output":true,"data_sufficiency":true`, 1),                             // key order
			strings.Replace(loneCite, `"data_sufficiency":true,`, ``, 1),                                                                                               // data_sufficiency is asked
			strings.Replace(loneCite, "d1p1s1", "d9p9s9", 1),                                                                                                           // id not in the enum
			strings.Replace(loneCite, `{"passage_id":"d1p1s1"}`, ``, 1),                                                                                                // no citation
			strings.Replace(loneCite, `{"passage_id":"d1p1s1"}`, `{"passage_id":"d1p1s1"},{"passage_id":"d1p1s1"},{"passage_id":"d1p1s1"},{"passage_id":"d1p1s1"}`, 1), // over three
			strings.Replace(loneCite, `"not_applicable":false,`, ``, 1),                                                                                                // a required key left out
			strings.Replace(loneCite, `}`, `,"extra":1}`, 1),                                                                                                           // a key not in the schema
			withRationale("-Liability is capped at the fees paid."),                                                                                                    // starts with a dash
			withRationale("Liability is capped at the fees paid"),                                                                                                      // no sentence end
			withRationale("Liability is capped at the fees paid in the"),                                                                                               // cut mid-sentence
			withRationale("Short."), // under ten characters
			withRationale(strings.Repeat("Liability is capped. ", 20) + "Yes."), // over 400 characters
			withRationale("Liability is <capped> at the fees."),                 // holds "<"
			withRationale("Liability is\ncapped at the fees paid."),             // a raw control character
			withRationale(`Liability is \"capped\" at the fees.`),               // a quote, even escaped
		},
	}, {
		name:   "grammar, quote, three rules",
		schema: schema(engine.GrammarSchema(rules, engine.EvidenceQuote, []string{"msa.pdf", "annex.pdf"})),
		accept: []string{
			quote3(`[`+quoteEv+`]`, "2"),
			quote3(`[]`, "1"),
			quote3(`[`+quoteEv+`,`+quoteEv+`,`+quoteEv+`]`, "3"),
			quote3(`[`+strings.Replace(quoteEv, "capped.", `\"capped\" \\ \u00e9.`, 1)+`]`, "3"), // escapes in a bounded string
			quote3(`[`+strings.Replace(quoteEv, `:1}`, `:-12}`, 1)+`]`, "3"),
		},
		reject: []string{
			quote3(`[]`, "4"), // outside the integer enum
			quote3(`[]`, "0"),
			quote3(`[]`, "-1"),
			quote3(`[]`, "02"),
			quote3(`[`+quoteEv+`,`+quoteEv+`,`+quoteEv+`,`+quoteEv+`]`, "3"), // maxItems 3
			quote3(`[`+strings.Replace(quoteEv, "msa.pdf", "other.pdf", 1)+`]`, "3"),
			quote3(`[`+strings.Replace(quoteEv, `:1}`, `:01}`, 1)+`]`, "3"),
			quote3(`[`+strings.Replace(quoteEv, "capped.", strings.Repeat("x", 300), 1)+`]`, "3"),                                                                                        // maxLength 300
			`{"rules":[` + entry("cap", `[]`, `"boolean_output":true`) + `,` + entry("term", `[]`, `"boolean_output":false`) + `]}`,                                                      // a rule left out
			`{"rules":[` + entry("term", `[]`, `"boolean_output":false`) + `,` + entry("cap", `[]`, `"boolean_output":true`) + `,` + entry("score", `[]`, `"numerical_output":1`) + `]}`, // out of order
		},
	}, {
		name:   "grammar, cite, pattern of citable ids",
		schema: schema(engine.GrammarSchema(rules[:1], engine.EvidenceCite, manyPassages())),
		accept: []string{
			loneCite,
			strings.Replace(loneCite, "d1p1s1", "d12p300s4", 1),
			strings.Replace(loneCite, "d1p1s1", "text_input", 1),
			strings.Replace(loneCite, "d1p1s1", "contract.pdf", 1),
		},
		reject: []string{
			strings.Replace(loneCite, "d1p1s1", "contractXpdf", 1),
			strings.Replace(loneCite, "d1p1s1", "d1p1", 1),
			strings.Replace(loneCite, "d1p1s1", "xd1p1s1", 1),
			strings.Replace(loneCite, "d1p1s1", "text_input2", 1),
		},
	}, {
		name:   "strict output schema, cite",
		schema: schema(engine.OutputSchema(rules, engine.EvidenceCite, []string{"d1p1s1"})),
		accept: []string{
			`{"rules":[]}`,
			strictCite(`[]`),
			strictCite(`[{"passage_id":"d1p1s1","quote":"He said \"no\" \\ \/ \n \u00e9 <b>"}]`), // escaped quote in a plain string
			strictCite(`[{"passage_id":"d1p1s1","quote":""},{"passage_id":"d1p1s1","quote":"q"}]`),
			`{"rules":[` + strings.Replace(strictEntry("score", `[]`, `"numerical_output":3`), `"not_applicable":false`, `"not_applicable":true`, 1) + `,` + strings.TrimPrefix(strictCite(`[]`), `{"rules":[`),
		},
		reject: []string{
			strictCite(`[{"passage_id":"d1p1s1","quote":"an "unescaped" quote"}]`),
			strictCite(`[{"passage_id":"d1p1s1","quote":"bad \x escape"}]`),
			strictCite(`[{"passage_id":"d1p1s1","quote":"q"} ]`),
			strictCite(`[{"passage_id":"d2p1s1","quote":"q"}]`),
			strings.Replace(strictCite(`[]`), `"term"`, `"nope"`, 1),
			strings.Replace(strictCite(`[]`), `true}`, `1}`, 1),
		},
	}, {
		name:   "rationale re-ask, lone rule",
		schema: []byte(rationaleLone),
		accept: []string{`{"rationale":"` + okRationale + `"}`, `{"rationale":"A` + strings.Repeat("b", 24) + ` cdefghij"}`},
		reject: []string{
			`{"rationale":"A` + strings.Repeat("b", 25) + ` cdefghij"}`, // first word of 26
			`{"rationale":"Abc cdefghi"}`,                               // second part under 8
			`{"rationale":"Abc ` + strings.Repeat("c", 57) + `"}`,       // second part over 56
			`{"rationale": "` + okRationale + `"}`,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := FromSchema(tc.schema)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := parseGrammar(g)
			if err != nil {
				t.Fatalf("the grammar does not parse: %v\n%s", err, g)
			}
			for _, s := range tc.accept {
				if !json.Valid([]byte(s)) {
					t.Fatalf("test answer is not JSON: %s", s)
				}
				if !rec.accepts(s) {
					t.Errorf("rejected %s\ngrammar:\n%s", s, g)
				}
			}
			for _, s := range tc.reject {
				if rec.accepts(s) {
					t.Errorf("accepted %s\ngrammar:\n%s", s, g)
				}
			}
		})
	}
}

// TestFromSchemaSubset covers constructs the engine's schemas do not all use.
func TestFromSchemaSubset(t *testing.T) {
	str := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	pattern := func(p string) string { return `{"type":"string","pattern":` + str(p) + `}` }
	array := func(bounds string) string { return `{"type":"array","items":{"type":"integer"}` + bounds + `}` }
	for _, tc := range []struct {
		schema         string
		accept, reject []string
	}{
		{pattern(`^a.b$`), []string{`"axb"`, `"a<b"`, `"aéb"`}, []string{`"ab"`, `"a\nb"`, `"a\"b"`, `"a\\b"`, `"xaxb"`}},
		{pattern(`bc`), []string{`"bc"`, `"abcd"`, `"a\"bc\n"`}, []string{`"b"`, `"cb"`}},
		{pattern(`^(ab)+c?x{2,}$`), []string{`"abxx"`, `"ababcxxx"`}, []string{`"abx"`, `"cxx"`, `"abccxx"`}},
		{pattern(`^x{3}y{0,2}$`), []string{`"xxx"`, `"xxxyy"`}, []string{`"xx"`, `"xxxyyy"`}},
		{pattern(`^say "hi"\\\t$`), []string{`"say \"hi\"\\\t"`}, []string{`"say hi"`, `"say \u0022hi\u0022\\\t"`}},
		{pattern(`^[^a]$`), []string{`"b"`, `"-"`, `"^"`, `"]"`, `"é"`}, []string{`"a"`, `"\""`, `"\\"`, `"\n"`}},
		{pattern(`^[a\-^\]]$`), []string{`"a"`, `"-"`, `"^"`, `"]"`}, []string{`"b"`, `"\\"`}},
		{pattern(`^(|x)$`), []string{`""`, `"x"`}, []string{`"xx"`}},
		{`{"type":"string","maxLength":2}`, []string{`""`, `"ab"`, `"\u00e9\n"`}, []string{`"abc"`}},
		{`{"type":"string","minLength":1,"maxLength":2}`, []string{`"a"`}, []string{`""`, `"abc"`}},
		{`{"type":"string","minLength":2}`, []string{`"ab"`, `"abcdef"`}, []string{`"a"`}},
		{array(``), []string{`[]`, `[1]`, `[1,-2,3]`}, []string{`[ ]`, `[1,]`, `[,1]`, `[1, 2]`}},
		{array(`,"minItems":1,"maxItems":1`), []string{`[7]`}, []string{`[]`, `[1,2]`}},
		{array(`,"minItems":2,"maxItems":4`), []string{`[1,2]`, `[1,2,3,4]`}, []string{`[1]`, `[1,2,3,4,5]`}},
		{array(`,"maxItems":2`), []string{`[]`, `[1]`, `[1,2]`}, []string{`[1,2,3]`}},
		{array(`,"minItems":2`), []string{`[1,2]`, `[1,2,3,4,5]`}, []string{`[1]`}},
		{array(`,"maxItems":0`), []string{`[]`}, []string{`[1]`}},
		{`{"type":"array","items":false}`, []string{`[]`}, []string{`[1]`}},
		{`{"type":"array","prefixItems":[{"type":"boolean"},{"enum":["a",2,true]}],"items":false,"minItems":2,"maxItems":2}`,
			[]string{`[true,"a"]`, `[false,2]`, `[true,true]`}, []string{`[true]`, `[true,"a",1]`, `["a",true]`, `[true,"b"]`}},
		{`{"type":"object","properties":{},"additionalProperties":false}`, []string{`{}`}, []string{`{"a":1}`, `{ }`}},
		{`{"$defs":{"a b":{"type":"integer"},"node":{"type":"object","properties":{"v":{"$ref":"#/$defs/a b"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v","kids"]}},"$ref":"#/$defs/node","description":"a tree"}`,
			[]string{`{"v":1,"kids":[]}`, `{"v":1,"kids":[{"v":2,"kids":[]},{"v":3,"kids":[{"v":4,"kids":[]}]}]}`}, []string{`{"v":1,"kids":[{"v":2}]}`}},
		{`{"anyOf":[{"type":"boolean"},{"type":"string","enum":["x"]}],"title":"t"}`, []string{`true`, `"x"`}, []string{`"y"`, `1`}},
	} {
		g, err := FromSchema([]byte(tc.schema))
		if err != nil {
			t.Errorf("%s: %v", tc.schema, err)
			continue
		}
		rec, err := parseGrammar(g)
		if err != nil {
			t.Fatalf("%s: the grammar does not parse: %v\n%s", tc.schema, err, g)
		}
		for _, s := range tc.accept {
			if !rec.accepts(s) {
				t.Errorf("%s: rejected %s\ngrammar:\n%s", tc.schema, s, g)
			}
		}
		for _, s := range tc.reject {
			if rec.accepts(s) {
				t.Errorf("%s: accepted %s\ngrammar:\n%s", tc.schema, s, g)
			}
		}
	}
}

func TestFromSchemaRefusesWhatItCannotEnforce(t *testing.T) {
	obj := func(prop string) string {
		return `{"type":"object","properties":{"a":` + prop + `},"required":["a"],"additionalProperties":false}`
	}
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"}},"required":["a"]}`, `gbnf: (root): optional property "b" is not supported`},
		{`{"type":"object","properties":{"rules":{"type":"array","items":{"oneOf":[{"type":"integer"}]}}},"required":["rules"]}`, `gbnf: /properties/rules/items: "oneOf" is not supported`},
		{`{"type":"object","properties":{},"additionalProperties":true}`, `gbnf: (root): "additionalProperties"`},
		{obj(`{"type":"object","properties":{},"additionalProperties":{"type":"integer"}}`), `gbnf: /properties/a: "additionalProperties"`},
		{obj(`{"$ref":"#/$defs/nowhere"}`), `gbnf: /properties/a: $ref "#/$defs/nowhere"`},
		{`{"$defs":{"x":{"type":"integer"}},"$ref":"#/definitions/x"}`, `gbnf: (root): $ref "#/definitions/x"`},
		{obj(`{"type":"string","pattern":"\\bword"}`), `gbnf: /properties/a/pattern: WordBoundary`},
		{obj(`{"type":"string","pattern":"(?i)abc"}`), `gbnf: /properties/a/pattern: case-insensitive`},
		{obj(`{"type":"string","pattern":"a^b"}`), `gbnf: /properties/a/pattern: an anchor inside`},
		{obj(`{"type":"string","pattern":"^[\"\\\\]$"}`), `gbnf: /properties/a/pattern: a character class`},
		{obj(`{"type":"string","pattern":"(a"}`), `gbnf: /properties/a/pattern: error parsing`},
		{obj(`{"type":"integer","minimum":0}`), `gbnf: /properties/a: "minimum" is not supported`},
		{obj(`{"type":"number"}`), `gbnf: /properties/a: type number is not supported`},
		{obj(`{"type":["string","null"]}`), `gbnf: /properties/a: type [string null]`},
		{obj(`{"type":"string","format":"date"}`), `gbnf: /properties/a: "format" is not supported`},
		{obj(`{"type":"string","enum":["x",1]}`), `gbnf: /properties/a: enum value 1 is not of type string`},
		{obj(`{"enum":[1.5]}`), `gbnf: /properties/a: enum value 1.5`},
		{obj(`{"type":"array","items":{"type":"integer"},"minItems":3,"maxItems":2}`), `gbnf: /properties/a: "minItems" is above`},
		{obj(`{"type":"array"}`), `gbnf: /properties/a: an array without "items"`},
		{obj(`{"type":"array","prefixItems":[{"type":"integer"}],"items":{"type":"integer"}}`), `gbnf: /properties/a: "prefixItems" without`},
		{obj(`{"type":"array","prefixItems":[{"type":"integer"}],"items":false}`), `gbnf: /properties/a: "prefixItems" with "minItems"`},
		{obj(`{"$defs":{},"type":"integer"}`), `gbnf: /properties/a: "$defs" is not supported`},
		{obj(`true`), `gbnf: /properties/a: a schema that is not an object`},
		{obj(`{}`), `gbnf: /properties/a: a schema without "type"`},
		{`{"$defs":{"x":{"type":"string","const":"a"}},"$ref":"#/$defs/x"}`, `gbnf: /$defs/x: "const" is not supported`},
		{`{"type":"object","properties":{"a/b":{"not":{}}},"required":["a/b"]}`, `gbnf: /properties/a~1b: "not" is not supported`},
		{`{"type":"integer"} {}`, `gbnf: decoding the schema`},
		{`{"type":"integer","type":"string"}`, `duplicate key "type"`},
	} {
		_, err := FromSchema([]byte(tc.schema))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %s", tc.schema, err, tc.want)
		}
	}
}

func TestFromSchemaIsDeterministicAndCompact(t *testing.T) {
	schema, err := engine.GrammarSchema(testRules(), engine.EvidenceCite, manyPassages())
	if err != nil {
		t.Fatal(err)
	}
	a, err := FromSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if b, _ := FromSchema(schema); b != a {
			t.Fatalf("two calls differ:\n%s\n---\n%s", a, b)
		}
	}
	// Rules shared by the three entries are defined once.
	for _, name := range []string{"rationale", "def-citable"} {
		if n := strings.Count(a, "\n"+name+" ::= "); n != 1 {
			t.Errorf("rule %s defined %d times:\n%s", name, n, a)
		}
	}
	// Anchored patterns need no "any character" rule, and no rule is
	// defined unused.
	for _, name := range []string{"char", "string", "integer"} {
		if strings.Contains(a, name+" ::= ") {
			t.Errorf("unused rule %s is defined:\n%s", name, a)
		}
	}
	if !strings.HasPrefix(a, "root ::= ") {
		t.Errorf("grammar does not start with root:\n%s", a)
	}
	t.Logf("grammar:\n%s", a)
}

// The rest is a small GBNF recogniser for what FromSchema writes (literals,
// character classes, sequences, alternatives, groups, *, +, ?, {m,n} and
// rule references), strict about escapes as llama.cpp is.

type gkind int

const (
	gLit gkind = iota
	gClass
	gRef
	gAlt
	gSeq
	gRep
)

type gnode struct {
	kind     gkind
	runes    []rune // gLit: the text; gClass: lo, hi pairs
	negated  bool
	name     string
	subs     []*gnode
	min, max int // gRep; max < 0: unbounded
}

type recogniser struct{ rules map[string]*gnode }

func parseGrammar(text string) (*recogniser, error) {
	r := &recogniser{rules: map[string]*gnode{}}
	var refs []string
	for line := range strings.SplitSeq(strings.TrimSuffix(text, "\n"), "\n") {
		name, body, ok := strings.Cut(line, " ::= ")
		if !ok || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" || name == "" {
			return nil, fmt.Errorf("bad rule line %q", line)
		}
		if r.rules[name] != nil {
			return nil, fmt.Errorf("rule %s defined twice", name)
		}
		p := &gparser{s: []rune(body)}
		n, err := p.alt()
		if err == nil && p.i < len(p.s) {
			err = fmt.Errorf("unexpected %q", string(p.s[p.i:]))
		}
		if err != nil {
			return nil, fmt.Errorf("rule %s: %v", name, err)
		}
		r.rules[name] = n
		refs = append(refs, p.refs...)
	}
	for _, name := range append(refs, "root") {
		if r.rules[name] == nil {
			return nil, fmt.Errorf("rule %s is not defined", name)
		}
	}
	return r, nil
}

type gparser struct {
	s    []rune
	i    int
	refs []string
}

func (p *gparser) peek() rune {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *gparser) space() {
	for p.peek() == ' ' {
		p.i++
	}
}

func (p *gparser) alt() (*gnode, error) {
	n := &gnode{kind: gAlt}
	for {
		s, err := p.seq()
		if err != nil {
			return nil, err
		}
		n.subs = append(n.subs, s)
		p.space()
		if p.peek() != '|' {
			return n, nil
		}
		p.i++
	}
}

func (p *gparser) seq() (*gnode, error) {
	n := &gnode{kind: gSeq}
	for {
		p.space()
		if c := p.peek(); c == 0 || c == '|' || c == ')' {
			return n, nil
		}
		item, err := p.atom()
		if err != nil {
			return nil, err
		}
		for {
			rep := &gnode{kind: gRep, subs: []*gnode{item}}
			switch p.peek() {
			case '*':
				rep.min, rep.max = 0, -1
			case '+':
				rep.min, rep.max = 1, -1
			case '?':
				rep.min, rep.max = 0, 1
			case '{':
				end := slices.Index(p.s[p.i:], '}')
				if end < 0 {
					return nil, fmt.Errorf("unclosed {")
				}
				lo, hi, comma := strings.Cut(string(p.s[p.i+1:p.i+end]), ",")
				var err1, err2 error
				rep.min, err1 = strconv.Atoi(lo)
				rep.max, err2 = rep.min, nil
				if comma && hi == "" {
					rep.max = -1
				} else if comma {
					rep.max, err2 = strconv.Atoi(hi)
				}
				if err1 != nil || err2 != nil {
					return nil, fmt.Errorf("bad repetition %q", string(p.s[p.i:p.i+end+1]))
				}
				p.i += end
			default:
				rep = nil
			}
			if rep == nil {
				break
			}
			p.i++
			item = rep
		}
		n.subs = append(n.subs, item)
	}
}

func (p *gparser) atom() (*gnode, error) {
	switch c := p.peek(); {
	case c == '"':
		p.i++
		n := &gnode{kind: gLit}
		for p.peek() != '"' {
			r, err := p.char()
			if err != nil {
				return nil, err
			}
			n.runes = append(n.runes, r)
		}
		p.i++
		return n, nil
	case c == '[':
		p.i++
		n := &gnode{kind: gClass}
		if p.peek() == '^' {
			n.negated = true
			p.i++
		}
		for p.peek() != ']' {
			lo, err := p.char()
			if err != nil {
				return nil, err
			}
			hi := lo
			if p.peek() == '-' && p.i+1 < len(p.s) && p.s[p.i+1] != ']' {
				p.i++
				if hi, err = p.char(); err != nil {
					return nil, err
				}
			}
			n.runes = append(n.runes, lo, hi)
		}
		p.i++
		return n, nil
	case c == '(':
		p.i++
		n, err := p.alt()
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			return nil, fmt.Errorf("unclosed (")
		}
		p.i++
		return n, nil
	}
	start := p.i
	for c := p.peek(); c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'; c = p.peek() {
		p.i++
	}
	if p.i == start {
		return nil, fmt.Errorf("unexpected %q", string(p.s[p.i:]))
	}
	name := string(p.s[start:p.i])
	p.refs = append(p.refs, name)
	return &gnode{kind: gRef, name: name}, nil
}

// char reads one character of a literal or class, with llama.cpp's escapes.
func (p *gparser) char() (rune, error) {
	if p.i >= len(p.s) {
		return 0, fmt.Errorf("unexpected end")
	}
	c := p.s[p.i]
	p.i++
	if c != '\\' {
		return c, nil
	}
	if p.i >= len(p.s) {
		return 0, fmt.Errorf("unexpected end")
	}
	e := p.s[p.i]
	p.i++
	digits := map[rune]int{'x': 2, 'u': 4, 'U': 8}[e]
	switch {
	case digits > 0 && p.i+digits <= len(p.s):
		v, err := strconv.ParseUint(string(p.s[p.i:p.i+digits]), 16, 32)
		p.i += digits
		return rune(v), err
	case e == 'n':
		return '\n', nil
	case e == 'r':
		return '\r', nil
	case e == 't':
		return '\t', nil
	case e == '\\' || e == '"' || e == '[' || e == ']':
		return e, nil
	}
	return 0, fmt.Errorf("unknown escape \\%c", e)
}

// accepts reports whether the grammar's root matches all of s.
func (r *recogniser) accepts(s string) bool {
	m := &gmatch{rules: r.rules, in: []rune(s), memo: map[gkey][]int{}}
	return slices.Contains(m.ends(r.rules["root"], 0), len(m.in))
}

type gkey struct {
	n   *gnode
	pos int
}

// gmatch finds every position where a node matched from pos can end,
// memoised per node and position.
type gmatch struct {
	rules map[string]*gnode
	in    []rune
	memo  map[gkey][]int
}

func (m *gmatch) ends(n *gnode, pos int) []int {
	k := gkey{n, pos}
	if e, ok := m.memo[k]; ok {
		return e
	}
	var out []int
	switch n.kind {
	case gLit:
		if pos+len(n.runes) <= len(m.in) && slices.Equal(m.in[pos:pos+len(n.runes)], n.runes) {
			out = []int{pos + len(n.runes)}
		}
	case gClass:
		if pos < len(m.in) {
			in := false
			for i := 0; i < len(n.runes); i += 2 {
				in = in || n.runes[i] <= m.in[pos] && m.in[pos] <= n.runes[i+1]
			}
			if in != n.negated {
				out = []int{pos + 1}
			}
		}
	case gRef:
		out = m.ends(m.rules[n.name], pos)
	case gAlt:
		for _, s := range n.subs {
			out = union(out, m.ends(s, pos))
		}
	case gSeq:
		out = []int{pos}
		for _, s := range n.subs {
			out = m.step(s, out)
		}
	case gRep:
		cur := []int{pos}
		if n.min == 0 {
			out = []int{pos}
		}
		for i := 1; len(cur) > 0 && (n.max < 0 || i <= n.max); i++ {
			cur = m.step(n.subs[0], cur)
			if i >= n.min {
				if n.max < 0 {
					// Past the minimum, a position already reached adds nothing.
					cur = slices.DeleteFunc(cur, func(p int) bool { return slices.Contains(out, p) })
				}
				out = union(out, cur)
			}
		}
	}
	m.memo[k] = out
	return out
}

func (m *gmatch) step(n *gnode, from []int) []int {
	var out []int
	for _, p := range from {
		out = union(out, m.ends(n, p))
	}
	return out
}

func union(a, b []int) []int {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
