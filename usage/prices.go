package usage

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"rulevalidator/internal/jsonyaml"
)

// Price is what a model's tokens cost, per million.
type Price struct {
	Input  float64
	Output float64
}

// PriceTable prices each model's tokens, by the model name a summary carries. It is read
// from a YAML (or JSON) file:
//
//	gpt-4o-mini: {input: 0.15, output: 0.60}
//	qwen2.5-coder-1.5b-instruct: {input: 0, output: 0}
type PriceTable map[string]Price

// Cost is the price of models' tokens; nil when one of them has no price.
func (t PriceTable) Cost(models map[string]Counts) *float64 {
	var sum float64
	for m, c := range models {
		p, ok := t[m]
		if !ok {
			return nil
		}
		sum += float64(c.InputTokens)*p.Input/1e6 + float64(c.OutputTokens)*p.Output/1e6
	}
	return &sum
}

// ReadPriceTable reads a price table file.
func ReadPriceTable(path string) (PriceTable, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := ParsePriceTable(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParsePriceTable reads a price table's content, naming every problem's key.
func ParsePriceTable(data []byte) (PriceTable, error) {
	doc, err := jsonyaml.Decode(data)
	if err != nil {
		return nil, err
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the price table must be a mapping of model names to {input, output} (got %s)", jsonyaml.TypeName(doc))
	}
	t, problems := PriceTable{}, []string(nil)
	for _, model := range jsonyaml.SortedKeys(top) {
		entry, ok := top[model].(map[string]any)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: must be a mapping of input and output, the prices per million tokens (got %s)", model, jsonyaml.TypeName(top[model])))
			continue
		}
		var p Price
		for _, key := range jsonyaml.SortedKeys(entry) {
			f, ok := asPrice(entry[key])
			switch {
			case !slices.Contains([]string{"input", "output"}, key):
				problems = append(problems, fmt.Sprintf("%s: unknown key %q (known: input, output)", model, key))
			case !ok:
				problems = append(problems, fmt.Sprintf("%s.%s: must be a price per million tokens, 0 or more (got %v)", model, key, entry[key]))
			case key == "input":
				p.Input = f
			default:
				p.Output = f
			}
		}
		t[model] = p
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("the price table: %s", strings.Join(problems, "; "))
	}
	return t, nil
}

func asPrice(v any) (float64, bool) {
	var f float64
	switch v := v.(type) {
	case int:
		f = float64(v)
	case int64:
		f = float64(v)
	case uint64:
		f = float64(v)
	case float64:
		f = v
	case json.Number:
		var err error
		if f, err = v.Float64(); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return f, f >= 0 && !math.IsInf(f, 0) && !math.IsNaN(f)
}
