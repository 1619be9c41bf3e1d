// Package jsonyaml reads a JSON or YAML document into the plain values encoding/json gives
// (map[string]any, []any, string, bool, nil, json.Number), so that a ruleset or a request
// written in YAML reads exactly as its JSON twin, and names what it found for messages.
package jsonyaml

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Decode reads one JSON document (when the data starts with '{') or
// one YAML document into plain values: map[string]any, []any, string, bool,
// nil and numbers (json.Number from JSON; int, uint64 or float64 from YAML).
// Errors name the line and column where the syntax broke.
func Decode(data []byte) (any, error) {
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, errors.New("empty document")
	}
	if trimmed[0] == '{' {
		return decodeJSON(data)
	}
	return decodeYAML(data)
}

func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keeps integers exact
	var v any
	if err := dec.Decode(&v); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			// Offset counts the bytes read, the offending one included.
			at := max(syntax.Offset-1, 0)
			line, col := lineAndColumn(data, at)
			return nil, fmt.Errorf("invalid JSON at line %d, column %d (byte offset %d): %s", line, col, at, syntax.Error())
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errors.New("invalid JSON: the document ends early")
		}
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		at := end + int64(len(data[end:])-len(bytes.TrimLeft(data[end:], " \t\r\n")))
		line, col := lineAndColumn(data, at)
		return nil, fmt.Errorf("invalid JSON: unexpected data after the document at line %d, column %d (byte offset %d)", line, col, at)
	}
	return v, nil
}

// decodeYAML reads one YAML document into the values its JSON twin would
// give: see timestampsAsText and normalizeYAML.
func decodeYAML(data []byte) (any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty document")
		}
		return nil, fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("invalid YAML: more than one document (remove the second '---')")
	}
	timestampsAsText(&doc)
	var v any
	if err := doc.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return normalizeYAML(v), nil
}

// timestampsAsText makes the scalars YAML would read as timestamps
// (2024-03-31, unquoted) plain strings, as written: JSON has no timestamps,
// and a version, date or id written so must read as its JSON twin does, not
// as a time.Time nor reformatted.
func timestampsAsText(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!timestamp" {
		n.Tag = "!!str"
	}
	for _, c := range n.Content {
		timestampsAsText(c)
	}
}

// normalizeYAML turns the maps YAML allows with non-string keys into the
// map[string]any JSON has, so that values can be marshalled as JSON later.
func normalizeYAML(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalizeYAML(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = normalizeYAML(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = normalizeYAML(e)
		}
		return v
	default:
		return v
	}
}

// lineAndColumn turns a byte offset into a 1-based line and column.
func lineAndColumn(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// SortedKeys lists the keys of m in order, so that problems are reported in a stable order.
func SortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TypeName names the JSON type of a value Decode gave ("a string", "an
// object", "null"), for messages that say what was found instead.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number, int, int64, uint64, float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}
