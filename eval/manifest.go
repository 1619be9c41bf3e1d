package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"

	"rulevalidator/schemas"
)

// ManifestNames are the file names Load looks for in a dataset directory, in order.
var ManifestNames = []string{"dataset.yaml", "dataset.yml", "dataset.json"}

// Manifest is a dataset's dataset.yaml as the schema
// (schemas/eval_dataset.schema.json) has it: what Load reads and what a
// dataset's writer (reviews export) writes. ManifestCase, ManifestLabel
// and ManifestSpan are its parts.
type Manifest struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Ruleset     string         `json:"ruleset,omitempty"`
	Cases       []ManifestCase `json:"cases"`
}

type ManifestCase struct {
	ID          string          `json:"id"`
	Description string          `json:"description,omitempty"`
	Input       string          `json:"input"`
	Ruleset     string          `json:"ruleset,omitempty"`
	Labels      []ManifestLabel `json:"labels"`
}

type ManifestLabel struct {
	RuleID          string `json:"rule_id"`
	BooleanOutput   *bool  `json:"boolean_output,omitempty"`
	NumericalOutput *int   `json:"numerical_output,omitempty"`
	NotApplicable   bool   `json:"not_applicable,omitempty"`
	// DataSufficiency false says the material does not hold what is
	// needed to judge the rule; nil is true.
	DataSufficiency *bool          `json:"data_sufficiency,omitempty"`
	Evidence        []ManifestSpan `json:"evidence,omitempty"`
	// Note is for reviewers; it is read and ignored.
	Note string `json:"note,omitempty"`
}

type ManifestSpan struct {
	Text     string `json:"text"`
	Document string `json:"document,omitempty"`
	Page     int    `json:"page"`
}

func readManifest(dir string) (string, []byte, error) {
	for _, name := range ManifestNames {
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err == nil {
			return path, data, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", nil, err
		}
	}
	return "", nil, fmt.Errorf("%w: %s holds none of %s", ErrInvalidDataset, dir, strings.Join(ManifestNames, ", "))
}

// decode reads JSON or YAML into JSON-like values.
func decode(data []byte) (any, error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	// A YAML document decodes with int values and string-keyed maps; a round
	// trip through JSON gives the values the schema validator expects.
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON: %v", err)
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}

// datasetSchema compiles the embedded schema (a few milliseconds, once per Load).
func datasetSchema() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.EvalDatasetJSONSchema()))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	const url = "urn:rulevalidator:schema:eval-dataset"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// checkSchema validates the manifest against the schema, naming the case,
// rule and field of every problem.
func checkSchema(file string, doc any) []*Problem {
	sch, err := datasetSchema()
	if err != nil {
		return []*Problem{{File: file, Message: "the dataset schema does not compile: " + err.Error()}}
	}
	err = sch.Validate(doc)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []*Problem{{File: file, Message: err.Error()}}
	}
	var probs []*Problem
	seen := map[string]bool{}
	printer := message.NewPrinter(language.English)
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		p := locate(file, doc, e.InstanceLocation)
		p.Message = e.ErrorKind.LocalizedString(printer)
		if key := p.Error(); !seen[key] {
			seen[key] = true
			probs = append(probs, p)
		}
	}
	walk(verr)
	return probs
}

// locate turns a location in the manifest into a Problem naming the
// case (by id when it has one), the rule and the field inside the case.
func locate(file string, doc any, tokens []string) *Problem {
	p := &Problem{File: file}
	if len(tokens) < 2 || tokens[0] != "cases" {
		p.Field = jsonPath(tokens)
		return p
	}
	i, _ := strconv.Atoi(tokens[1])
	c := index(field(doc, "cases"), i)
	if id, ok := field(c, "id").(string); ok && id != "" {
		p.Case = id
	} else {
		p.Case = "#" + strconv.Itoa(i)
	}
	rest := tokens[2:]
	if len(rest) >= 2 && rest[0] == "labels" {
		j, _ := strconv.Atoi(rest[1])
		if id, ok := field(index(field(c, "labels"), j), "rule_id").(string); ok {
			p.RuleID = id
		}
	}
	p.Field = jsonPath(rest)
	return p
}

func field(v any, key string) any {
	if m, ok := v.(map[string]any); ok {
		return m[key]
	}
	return nil
}

func index(v any, i int) any {
	if a, ok := v.([]any); ok && i >= 0 && i < len(a) {
		return a[i]
	}
	return nil
}

// jsonPath writes pointer tokens as a.b[2].c.
func jsonPath(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		if _, err := strconv.Atoi(t); err == nil {
			b.WriteString("[" + t + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(t)
	}
	return b.String()
}
