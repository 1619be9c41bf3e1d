package engine

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"rulevalidator/verdict"
)

// Bounds written into the grammar schema: they stop a model from looping
// inside a string, and keep answers short enough to be fast.
const (
	// A rationale is whole sentences: it starts with a letter, a digit or
	// an opening bracket or quote, and ends with a full stop, a question or
	// an exclamation mark, so a grammar server can only close it where a
	// sentence ends, never mid-word. Its length fits two sentences with
	// room to spare (400 characters): a model that has said its piece
	// ends well before it, and one caught in a loop is stopped. It holds
	// none of the characters of code and markup ("_", "[", "]", "{", "}",
	// "=", "|", "<"), with which a small model wrote identifiers in place
	// of sentences and could copy a marker of the material, and no control
	// character.
	grammarRationalePattern = `^[A-Za-z0-9(‘“'][^` + rationaleForbidden + `]{8,` + maxRationaleRest + `}[.!?]$`
	// maxRationaleRest is the 400 characters less the first and last
	// characters, as the pattern counts them.
	maxRationaleRest = "398"
	// rationaleForbidden are the characters a rationale may not hold, as a
	// character class's contents.
	rationaleForbidden  = `"\\<\[\]{}=_|\x00-\x1f`
	grammarMaxQuote     = 300
	grammarMaxEvidences = 3
	// maxEnumCitable is the most passage ids or source names a schema lists
	// as an enum; beyond it a pattern constrains their form and the content
	// checks what was cited (strict structured-output servers cap an enum
	// at 250 values of some length).
	maxEnumCitable = 250
)

// citableRef is where each evidence's passage id (cite mode) or source name
// (quote mode) points: one definition, however many rules share it.
const citableRef = "#/$defs/citable"

// OutputSchema is the JSON Schema the model's answer must follow for the given
// rules, in the subset strict structured-output servers accept: rule ids are
// constrained to those asked for, each numerical rule's score to its allowed
// set, and what evidence names to citable (the passage ids the call shows in
// cite mode, the source names in quote mode). It is deterministic for the
// same arguments, so request prefixes stay cacheable.
func OutputSchema(rules []Rule, mode EvidenceMode, citable []string) (json.RawMessage, error) {
	body, err := outputBody(rules, mode)
	if err != nil {
		return nil, err
	}
	return withCitable(body, mode, citable)
}

// outputBody is OutputSchema without its definition of what is citable: it
// depends on the rules alone, and is cached with the ruleset.
func outputBody(rules []Rule, mode EvidenceMode) (json.RawMessage, error) {
	variants := make([]any, 0, len(rules))
	for _, r := range rules {
		variants = append(variants, ruleSchema(r, mode, false, false))
	}
	var items any = obj{{"anyOf", variants}}
	if len(variants) == 1 {
		items = variants[0]
	}
	return marshalSchema(obj{
		{"type", "object"},
		{"properties", obj{{"rules", obj{{"type", "array"}, {"items", items}}}}},
		{"required", []string{"rules"}},
		{"additionalProperties", false},
	})
}

// GrammarSchema is a stricter form of OutputSchema for servers that enforce a
// schema with a grammar (llama.cpp): exactly one entry per rule, in ruleset
// order (a lone rule's entry is the whole answer, without the "rules" array
// or its rule_id), a rationale of whole sentences of bounded length, one to
// three citations and, in cite mode, evidence that is a passage id only.
// It asks every field OutputSchema asks. Such servers need no schema
// support from the API to produce a valid answer, and cannot write an id
// that was not shown.
func GrammarSchema(rules []Rule, mode EvidenceMode, citable []string) (json.RawMessage, error) {
	body, err := grammarBody(rules, mode)
	if err != nil {
		return nil, err
	}
	return withCitable(body, mode, citable)
}

// grammarBody is GrammarSchema without its definition of what is citable.
func grammarBody(rules []Rule, mode EvidenceMode) (json.RawMessage, error) {
	if len(rules) == 1 {
		// The rule's object alone (parseAnswer reads it as the only
		// entry): a grammar server generates every token of the array
		// around it as slowly as a free one.
		return marshalSchema(ruleSchema(rules[0], mode, true, true))
	}
	items := make([]any, 0, len(rules))
	for _, r := range rules {
		items = append(items, ruleSchema(r, mode, true, false))
	}
	return marshalSchema(obj{
		{"type", "object"},
		{"properties", obj{{"rules", obj{
			{"type", "array"},
			{"prefixItems", items},
			{"items", false},
			{"minItems", len(rules)},
			{"maxItems", len(rules)},
		}}}},
		{"required", []string{"rules"}},
		{"additionalProperties", false},
	})
}

// rationaleSchema is the answer to a rationale-only re-ask (rationaleNote):
// for each rule, its id and a rationale. bounded is the grammar server's
// form, in order, exactly one per rule, the rationale bounded as
// GrammarSchema bounds it and no id for a rule asked alone.
func rationaleSchema(rules []Rule, bounded bool) (json.RawMessage, error) {
	entries := make([]any, 0, len(rules))
	for _, r := range rules {
		var props obj
		var required []string
		if !bounded || len(rules) > 1 {
			props = append(props, kv{"rule_id", obj{{"type", "string"}, {"enum", []string{r.RuleID}}}})
			required = append(required, "rule_id")
		}
		rationale := obj{{"type", "string"}}
		if bounded {
			rationale = append(rationale, kv{"pattern", grammarRationalePattern})
		}
		props = append(props, kv{"rationale", rationale})
		required = append(required, "rationale")
		entries = append(entries, obj{{"type", "object"}, {"properties", props}, {"required", required}, {"additionalProperties", false}})
	}
	if bounded && len(entries) == 1 {
		return marshalSchema(entries[0].(obj)) // alone, as grammarBody writes it
	}
	array := obj{{"type", "array"}}
	switch {
	case bounded:
		array = append(array, kv{"prefixItems", entries}, kv{"items", false}, kv{"minItems", len(rules)}, kv{"maxItems", len(rules)})
	case len(entries) == 1:
		array = append(array, kv{"items", entries[0]})
	default:
		array = append(array, kv{"items", obj{{"anyOf", entries}}})
	}
	return marshalSchema(obj{
		{"type", "object"},
		{"properties", obj{{"rules", array}}},
		{"required", []string{"rules"}},
		{"additionalProperties", false},
	})
}

// withCitable is body (a schema object) with the definition of what its
// evidence may cite put first.
func withCitable(body json.RawMessage, mode EvidenceMode, citable []string) (json.RawMessage, error) {
	// Room for an enum of the ids only when the schema lists them: past
	// maxEnumCitable it is a pattern, and a call holds its schema while it
	// waits for the model.
	size := len(body) + 64
	if len(citable) <= maxEnumCitable {
		size += 16 * len(citable)
	}
	out := make([]byte, 0, size)
	out = append(out, `{"$defs":{"citable":`...)
	out, err := citableSchema(mode, citable).appendJSON(out)
	if err != nil {
		return nil, fmt.Errorf("engine: marshalling the output schema: %w", err)
	}
	out = append(out, "},"...)
	return append(out, body[1:]...), nil
}

// groundingIDs is what a grammar server's citation may name in cite mode:
// the document passages among ids when the call shows any, else all of
// ids. A named input, the text input or the message is context a rule is
// judged with, not where a verdict on a document rests, and a small model
// otherwise cites the first input it read (measured on the contract demo: 4
// of 6 verdicts cited an input). Strict-schema servers may cite any id.
func groundingIDs(ids []string, mode EvidenceMode) []string {
	if mode != EvidenceCite {
		return ids
	}
	n := 0
	for _, id := range ids {
		if isPassageID(id) {
			n++
		}
	}
	if n == 0 || n == len(ids) { // ids itself: a long document's are tens of thousands
		return ids
	}
	docs := make([]string, 0, n)
	for _, id := range ids {
		if isPassageID(id) {
			docs = append(docs, id)
		}
	}
	return docs
}

// citableSchema constrains what an evidence names: an enum of the values
// when there are few enough, else (cite mode) the form of a passage id or
// one of the other names.
func citableSchema(mode EvidenceMode, citable []string) obj {
	switch {
	case len(citable) > 0 && len(citable) <= maxEnumCitable:
		return obj{{"type", "string"}, {"enum", citable}}
	case mode == EvidenceCite:
		alts := []string{`d[0-9]+p[0-9]+s[0-9]+`}
		for _, id := range citable {
			if !isPassageID(id) {
				alts = append(alts, regexp.QuoteMeta(id))
			}
		}
		return obj{{"type", "string"}, {"pattern", "^(" + strings.Join(alts, "|") + ")$"}}
	}
	return obj{{"type", "string"}}
}

// isPassageID reports whether id has the form of a document passage's id,
// "d<n>p<n>s<n>".
func isPassageID(id string) bool {
	rest := id
	for _, letter := range []byte{'d', 'p', 's'} {
		if len(rest) < 2 || rest[0] != letter {
			return false
		}
		j := 1
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if j == 1 {
			return false
		}
		rest = rest[j:]
	}
	return rest == ""
}

// ruleSchema is one rule's entry, the same fields on every server. Its
// properties are in the order a model should write them, since grammar
// servers generate them in schema order: why first, then what it rests
// on, then whether the rule applies and the material answers it, and the
// verdict last, so that the verdict follows from the reasoning and the
// citations from what the rationale says. bounded is the grammar server's
// form; an entry that is the only one of its answer (alone) needs no
// rule_id there, its position names the rule.
func ruleSchema(r Rule, mode EvidenceMode, bounded, alone bool) obj {
	citable := obj{{"$ref", citableRef}}
	rationale := obj{{"type", "string"}}
	if bounded {
		rationale = append(rationale, kv{"pattern", grammarRationalePattern})
	}
	var props obj
	var required []string
	add := func(key string, schema obj) {
		props = append(props, kv{key, schema})
		required = append(required, key)
	}
	if !bounded || !alone {
		add("rule_id", obj{{"type", "string"}, {"enum", []string{r.RuleID}}})
	}
	add("rationale", rationale)
	add("evidences", evidencesSchema(mode, bounded, citable))
	add("not_applicable", obj{{"type", "boolean"}})
	add("data_sufficiency", obj{{"type", "boolean"}})
	if r.Type == verdict.Numerical {
		add("numerical_output", obj{{"type", "integer"}, {"enum", r.AllowedScores()}})
	} else {
		add("boolean_output", obj{{"type", "boolean"}})
	}
	return obj{
		{"type", "object"},
		{"properties", props},
		{"required", required},
		{"additionalProperties", false},
	}
}

// evidencesSchema is a rule's list of evidence: in cite mode passage ids
// with the words quoted from them, in quote mode quotes with their source
// and page. bounded is the grammar server's form: one to three, a citation
// a passage id alone (the engine copies the passage), a quote of bounded
// length. A quote beside each id on the grammar server, which lets the
// engine find the passage by its words when the id is wrong
// (anchoring.cite), measured worse on the local model over the NDA
// dataset: more of its citations held a gold passage (0.37 against 0.28),
// but it cited fewer, found fewer gold passages (18 of 59 against 27) and
// judged 26 of 60 right against 29 (docs/measurements/2026-12-local-model-verdicts.md).
func evidencesSchema(mode EvidenceMode, bounded bool, citable obj) obj {
	str := func(maxLen int) obj {
		if !bounded {
			return obj{{"type", "string"}}
		}
		return obj{{"type", "string"}, {"maxLength", maxLen}}
	}
	var evidence obj
	switch {
	case mode == EvidenceCite && bounded:
		evidence = obj{
			{"type", "object"},
			{"properties", obj{{"passage_id", citable}}},
			{"required", []string{"passage_id"}},
			{"additionalProperties", false},
		}
	case mode == EvidenceCite:
		evidence = obj{
			{"type", "object"},
			{"properties", obj{{"passage_id", citable}, {"quote", str(grammarMaxQuote)}}},
			{"required", []string{"passage_id", "quote"}},
			{"additionalProperties", false},
		}
	default:
		evidence = obj{
			{"type", "object"},
			{"properties", obj{
				{"text", str(grammarMaxQuote)},
				{"source_origin", citable},
				{"source_page_number", obj{{"type", "integer"}}},
			}},
			{"required", []string{"text", "source_origin", "source_page_number"}},
			{"additionalProperties", false},
		}
	}
	evidences := obj{{"type", "array"}, {"items", evidence}}
	switch {
	case bounded && mode == EvidenceCite:
		// A cited id always exists, so asking for one costs no re-ask:
		// the passage that shows the rule holds, or fails, or comes
		// closest. A quote is not held to the material by the grammar,
		// and a rule nothing speaks to would be made to invent one.
		evidences = append(evidences, kv{"minItems", 1}, kv{"maxItems", grammarMaxEvidences})
	case bounded:
		evidences = append(evidences, kv{"maxItems", grammarMaxEvidences})
	}
	return evidences
}

// kv and obj build JSON objects whose keys keep their order: grammar-based
// servers generate properties in schema order.
type kv struct {
	key   string
	value any
}

type obj []kv

func (o obj) MarshalJSON() ([]byte, error) {
	return o.appendJSON(nil)
}

// appendJSON writes o directly: schemas are built for every call, and
// encoding/json would reflect over every value and compact the result.
func (o obj) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	for i, p := range o {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, p.key)
		b = append(b, ':')
		var err error
		if b, err = appendValue(b, p.value); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case obj:
		return v.appendJSON(b)
	case string:
		return appendString(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case []string:
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		return append(b, ']'), nil
	case []int:
		b = append(b, '[')
		for i, n := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(n), 10)
		}
		return append(b, ']'), nil
	case []any:
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, x); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	data, err := json.Marshal(v)
	return append(b, data...), err
}

// appendString writes s as a JSON string; plain ASCII without escapes is
// copied as is.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 || c == '<' || c == '>' || c == '&' {
			data, _ := json.Marshal(s)
			return append(b, data...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func marshalSchema(schema obj) (json.RawMessage, error) {
	data, err := schema.appendJSON(make([]byte, 0, 4096))
	if err != nil {
		return nil, fmt.Errorf("engine: marshalling the output schema: %w", err)
	}
	return data, nil
}
