package llmfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Verdicts answers a call of any ruleset: a well-formed verdict for every rule
// the request's response schema names, each quoting the first sentence of a
// different page of the user message with that page's number and document (or judged on
// insufficient data when the message has no page markers); when the schema
// asks for passage ids (cite mode), each cites the first passage of the page
// by its id instead. It is an answer
// function for Answer, for load tests where what is judged does not matter.
func Verdicts(req Call) Reply {
	user := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			user = m.Content
		}
	}
	marks := pageMarker.FindAllStringSubmatchIndex(user, -1)
	rules := schemaRules(req.Schema)
	cites := bytes.Contains(req.Schema, []byte(`"passage_id"`))
	verdicts := make([]map[string]any, 0, len(rules))
	for i, r := range rules {
		v := map[string]any{"rule_id": r.id, "not_applicable": false, "data_sufficiency": false,
			"rationale": "The material shown does not address this rule.", "evidences": []any{}}
		if len(marks) > 0 {
			loc := marks[i%len(marks)]
			page, _ := strconv.Atoi(user[loc[2]:loc[3]])
			origin := "document"
			if docs := docMarker.FindAllStringSubmatch(user[:loc[0]], -1); len(docs) > 0 {
				origin = docs[len(docs)-1][1]
			}
			rest := user[loc[1]:]
			switch id := passageLine.FindStringSubmatch(rest); {
			case cites && id != nil:
				// Cite mode: the id shown before the page's first passage.
				quote, _, _ := strings.Cut(rest[len(id[0]):], "\n")
				v["data_sufficiency"] = true
				v["rationale"] = "The cited passage addresses this rule."
				v["evidences"] = []any{map[string]any{"passage_id": id[1], "quote": quote}}
			case !cites:
				if end := strings.IndexAny(rest, ".\n"); end > 0 {
					v["data_sufficiency"] = true
					v["rationale"] = "The quoted passage addresses this rule."
					v["evidences"] = []any{map[string]any{"text": rest[:end], "source_origin": origin, "source_page_number": page}}
				}
			}
		}
		if r.scores != nil {
			v["numerical_output"] = r.scores[len(r.scores)-1]
		} else {
			v["boolean_output"] = true
		}
		verdicts = append(verdicts, v)
	}
	content, _ := json.Marshal(map[string]any{"rules": verdicts})
	return Reply{Content: string(content), PromptTokens: len(user) / 4, CompletionTokens: len(content) / 4}
}

// pageMarker and docMarker are the engine's page and document markers in a
// prompt.
var (
	pageMarker = regexp.MustCompile(`<------- Page (\d+) ------->\n`)
	docMarker  = regexp.MustCompile(`<------- Start of Document: (.*) ------->\n`)
	// passageLine is a passage shown behind its id in cite mode.
	passageLine = regexp.MustCompile(`^\[([^\]\s]+)\] `)
)

// schemaRule is what a response schema says of one rule.
type schemaRule struct {
	id     string
	scores []int // nil for a boolean rule
}

// schemaRules finds the rules a response schema names: every object whose
// properties hold a rule_id with a one-value enum.
func schemaRules(schema json.RawMessage) []schemaRule {
	var root any
	if json.Unmarshal(schema, &root) != nil {
		return nil
	}
	var out []schemaRule
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				if id, ok := enumOf(props["rule_id"]); ok && len(id) == 1 {
					r := schemaRule{id: fmt.Sprint(id[0])}
					if scores, ok := enumOf(props["numerical_output"]); ok {
						for _, s := range scores {
							if f, ok := s.(float64); ok {
								r.scores = append(r.scores, int(f))
							}
						}
					}
					out = append(out, r)
					return
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(root)
	return out
}

func enumOf(v any) ([]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	e, ok := m["enum"].([]any)
	return e, ok
}
