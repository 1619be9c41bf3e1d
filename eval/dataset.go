// Package eval measures verdict quality: it judges a labelled dataset with the
// engine (and, optionally, with a naive one-call-per-rule judge on the same
// model), scores verdicts and evidence against the labels, and reports
// accuracy, evidence precision and recall, and cost.
package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"

	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/pipeline"
	"rulevalidator/request"
	"rulevalidator/schemas"
)

// ErrInvalidDataset marks every problem Load finds with a dataset.
var ErrInvalidDataset = errors.New("invalid dataset")

// ManifestNames are the file names Load looks for in a dataset directory, in order.
var ManifestNames = []string{"dataset.yaml", "dataset.yml", "dataset.json"}

// Problem is one thing wrong with a dataset. Case and RuleID are empty when
// the problem is not about one case or one rule; Field is a path inside the
// case (or the manifest) such as labels[2].evidence[0].text.
type Problem struct {
	File    string
	Case    string
	RuleID  string
	Field   string
	Message string
}

func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Case != "" {
		b.WriteString(": case " + strconv.Quote(p.Case))
	}
	if p.RuleID != "" {
		b.WriteString(": rule " + strconv.Quote(p.RuleID))
	}
	if p.Field != "" {
		b.WriteString(": " + p.Field)
	}
	b.WriteString(": " + p.Message)
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidDataset) hold for every Problem.
func (p *Problem) Is(target error) bool { return target == ErrInvalidDataset }

// Dataset is a loaded, checked dataset.
type Dataset struct {
	Name        string
	Description string
	// Dir is the directory the dataset was read from.
	Dir   string
	Cases []*Case
}

// Case is one input with its ruleset and the expected verdict of every rule.
type Case struct {
	ID          string
	Description string
	Ruleset     *engine.Ruleset
	// Request is the case as the service would receive it: what the engine judges
	// (pipeline.Evaluate). Inputs are the engine's inputs built from it, for the
	// baseline and for locating gold evidence.
	Request *schemas.Request
	Inputs  *engine.Inputs
	// Labels are in the ruleset's rule order.
	Labels []Label
}

// Label is the expected verdict of one rule.
type Label struct {
	RuleID string
	Type   engine.RuleType
	// Boolean is set for boolean rules, Numerical for numerical ones.
	Boolean       *bool
	Numerical     *int
	NotApplicable bool
	// Allowed is the rule's resolved score set (numerical rules).
	Allowed []int
	Gold    []Span
}

// Span is a passage of a document, located: offsets count Unicode code points
// into the document's text (its pages joined by form feeds), end exclusive,
// the way the engine reports evidence offsets.
type Span struct {
	Text     string `json:"text"`
	Document string `json:"document"`
	Page     int    `json:"page"`
	Start    int    `json:"start_offset"`
	End      int    `json:"end_offset"`
}

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
	RuleID          string         `json:"rule_id"`
	BooleanOutput   *bool          `json:"boolean_output,omitempty"`
	NumericalOutput *int           `json:"numerical_output,omitempty"`
	NotApplicable   bool           `json:"not_applicable,omitempty"`
	Evidence        []ManifestSpan `json:"evidence,omitempty"`
	// Note is for reviewers; it is read and ignored.
	Note string `json:"note,omitempty"`
}

type ManifestSpan struct {
	Text     string `json:"text"`
	Document string `json:"document,omitempty"`
	Page     int    `json:"page"`
}

// Load reads and checks the dataset in dir. Every problem found is reported;
// each is a *Problem and matches errors.Is(err, ErrInvalidDataset).
func Load(dir string) (*Dataset, error) { return LoadWith(context.Background(), dir, LoadOptions{}) }

// DocumentReader reads a document's file into pages (a *docread.Reader).
type DocumentReader interface {
	Read(ctx context.Context, src docread.Source) (*docread.Document, error)
}

// LoadOptions widen what Load reads.
type LoadOptions struct {
	// InputsDir, when set, is a directory (relative to the dataset's) whose
	// files stand in for the cases' inputs, by file name: the same cases
	// and labels judged on other renderings of their documents, such as
	// PDFs.
	InputsDir string
	// Documents reads the documents an input gives as files
	// ({"file": "nda.pdf"}, relative to the input): PDF, DOCX or text,
	// into the pages a reader sees. Nil refuses such inputs.
	Documents DocumentReader
}

// LoadWith is Load with opt.
func LoadWith(ctx context.Context, dir string, opt LoadOptions) (*Dataset, error) {
	path, data, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	file := filepath.Base(path)
	doc, err := decode(data)
	if err != nil {
		return nil, &Problem{File: file, Message: err.Error()}
	}
	if probs := checkSchema(file, doc); len(probs) > 0 {
		return nil, joinProblems(probs)
	}
	// The schema held, so the document has the manifest's shape.
	raw, _ := json.Marshal(doc)
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, &Problem{File: file, Message: err.Error()}
	}

	l := &loader{ctx: ctx, dir: dir, file: file, rulesets: map[string]*engine.Ruleset{}, opt: opt}
	ds := &Dataset{Name: m.Name, Description: m.Description, Dir: dir}
	seen := map[string]int{}
	for i, mc := range m.Cases {
		if first, dup := seen[mc.ID]; dup {
			l.add(mc.ID, "", fmt.Sprintf("cases[%d].id", i), fmt.Sprintf("duplicate case id (cases[%d] has it too)", first))
			continue
		}
		seen[mc.ID] = i
		if c := l.loadCase(m.Ruleset, mc); c != nil {
			ds.Cases = append(ds.Cases, c)
		}
	}
	if len(l.problems) > 0 {
		return nil, joinProblems(l.problems)
	}
	return ds, nil
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

type loader struct {
	ctx      context.Context
	opt      LoadOptions
	dir      string
	file     string
	rulesets map[string]*engine.Ruleset
	problems []*Problem
}

func (l *loader) add(caseID, ruleID, field, msg string) {
	l.problems = append(l.problems, &Problem{File: l.file, Case: caseID, RuleID: ruleID, Field: field, Message: msg})
}

func (l *loader) ruleset(path string) (*engine.Ruleset, error) {
	if rs, ok := l.rulesets[path]; ok {
		return rs, nil
	}
	data, err := os.ReadFile(filepath.Join(l.dir, path))
	if err != nil {
		return nil, err
	}
	rs, err := engine.ParseRuleset(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	l.rulesets[path] = rs
	return rs, nil
}

func (l *loader) loadCase(defaultRuleset string, mc ManifestCase) *Case {
	before := len(l.problems)
	rsPath := mc.Ruleset
	if rsPath == "" {
		rsPath = defaultRuleset
	}
	var rs *engine.Ruleset
	if rsPath == "" {
		l.add(mc.ID, "", "ruleset", "no ruleset: give one for the case or for the dataset")
	} else if r, err := l.ruleset(rsPath); err != nil {
		l.add(mc.ID, "", "ruleset", err.Error())
	} else {
		rs = r
	}
	input := mc.Input
	if l.opt.InputsDir != "" {
		input = filepath.Join(l.opt.InputsDir, filepath.Base(mc.Input))
	}
	req, in, err := l.inputs(mc.ID, input)
	if err != nil {
		l.add(mc.ID, "", "input", err.Error())
	}
	if rs == nil || in == nil {
		return nil
	}

	c := &Case{ID: mc.ID, Description: mc.Description, Ruleset: rs, Request: req, Inputs: in}
	byRule := map[string]int{}
	for i, ml := range mc.Labels {
		fieldOf := func(f string) string { return fmt.Sprintf("labels[%d].%s", i, f) }
		if first, dup := byRule[ml.RuleID]; dup {
			l.add(mc.ID, ml.RuleID, fieldOf("rule_id"), fmt.Sprintf("labelled twice (labels[%d] too)", first))
			continue
		}
		byRule[ml.RuleID] = i
		rule, ok := findRule(rs, ml.RuleID)
		if !ok {
			l.add(mc.ID, ml.RuleID, fieldOf("rule_id"), "no such rule in the case's ruleset")
			continue
		}
		lab := Label{RuleID: rule.RuleID, Type: rule.Type, NotApplicable: ml.NotApplicable, Allowed: rule.AllowedScores()}
		switch rule.Type {
		case engine.Numerical:
			if ml.BooleanOutput != nil {
				l.add(mc.ID, ml.RuleID, fieldOf("boolean_output"), "the rule is numerical: give numerical_output instead")
			}
			if ml.NumericalOutput == nil {
				l.add(mc.ID, ml.RuleID, fieldOf("numerical_output"), "missing: a numerical rule's label needs the expected score")
			} else if !slices.Contains(lab.Allowed, *ml.NumericalOutput) {
				l.add(mc.ID, ml.RuleID, fieldOf("numerical_output"), fmt.Sprintf("%d is not one of the rule's scores (%s)", *ml.NumericalOutput, joinInts(lab.Allowed)))
			}
			lab.Numerical = ml.NumericalOutput
		default:
			if ml.NumericalOutput != nil {
				l.add(mc.ID, ml.RuleID, fieldOf("numerical_output"), "the rule is boolean: give boolean_output instead")
			}
			if ml.BooleanOutput == nil {
				l.add(mc.ID, ml.RuleID, fieldOf("boolean_output"), "missing: a boolean rule's label needs the expected verdict")
			}
			lab.Boolean = ml.BooleanOutput
		}
		for j, ms := range ml.Evidence {
			span, err := locateGold(in, ms)
			if err != nil {
				l.add(mc.ID, ml.RuleID, fieldOf(fmt.Sprintf("evidence[%d]", j)), err.Error())
				continue
			}
			lab.Gold = append(lab.Gold, span)
		}
		c.Labels = append(c.Labels, lab)
	}
	for _, r := range rs.AllRules() {
		if _, ok := byRule[r.RuleID]; !ok {
			l.add(mc.ID, r.RuleID, "labels", "the rule has no label")
		}
	}
	if len(l.problems) > before {
		return nil
	}
	// Labels in ruleset order, so reports read the same way for every case.
	order := map[string]int{}
	for i, r := range rs.AllRules() {
		order[r.RuleID] = i
	}
	slices.SortFunc(c.Labels, func(a, b Label) int { return order[a.RuleID] - order[b.RuleID] })
	return c
}

// inputs reads a case's input file, the documents it names as files
// included, into the request the service would judge for the case (its
// tenant EvalTenant, its id the case's) and the engine's inputs built from it.
func (l *loader) inputs(caseID, input string) (*schemas.Request, *engine.Inputs, error) {
	path := filepath.Join(l.dir, input)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	m, err := request.DecodeObject(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", input, err)
	}
	if err := l.readFiles(m, filepath.Dir(path)); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", input, err)
	}
	// The inputs' own checks first, for messages that name the input's fields.
	if _, err := request.InputsFromMap(m); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", input, err)
	}
	req := &schemas.Request{RequestID: caseID, TenantID: EvalTenant}
	if err := request.ReadInputs(req, m); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", input, err)
	}
	in, err := pipeline.EngineInputs(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", input, err)
	}
	return req, in, nil
}

// readFiles replaces each document of m that names a file ({"file":
// "nda.pdf"}) with its pages as the document reader reads them; the
// document keeps its name, or takes the file's.
func (l *loader) readFiles(m map[string]any, dir string) error {
	for _, field := range []string{"primary_docs", "auxiliary_docs"} {
		docs, _ := m[field].([]any)
		for i, d := range docs {
			doc, ok := d.(map[string]any)
			if !ok {
				continue
			}
			file, ok := doc["file"].(string)
			if !ok {
				continue
			}
			where := fmt.Sprintf("%s[%d].file", field, i)
			if l.opt.Documents == nil {
				return fmt.Errorf("%s: %s is a document's file, and no document reader is given to read it", where, file)
			}
			path := file
			if !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			name := ""
			for _, k := range []string{"file_name", "name", "title"} {
				if s, ok := doc[k].(string); ok && s != "" {
					name = s
				}
			}
			if name == "" {
				name = filepath.Base(file)
				doc["name"] = name
			}
			read, err := l.opt.Documents.Read(l.ctx, docread.Source{Name: name, Data: data})
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			pages := make([]any, len(read.Pages))
			for j, p := range read.Pages {
				pages[j] = p
			}
			delete(doc, "file")
			doc["pages"] = pages
		}
	}
	return nil
}

func findRule(rs *engine.Ruleset, id string) (engine.Rule, bool) {
	for _, r := range rs.AllRules() {
		if r.RuleID == id {
			return r, true
		}
	}
	return engine.Rule{}, false
}

// locateGold finds a gold passage in its document: verbatim first, then with
// runs of whitespace compared as one space.
func locateGold(in *engine.Inputs, ms ManifestSpan) (Span, error) {
	docs := in.Documents()
	var doc engine.Document
	switch {
	case ms.Document != "":
		i := slices.IndexFunc(docs, func(d engine.Document) bool { return d.Name == ms.Document })
		if i < 0 {
			names := make([]string, len(docs))
			for k, d := range docs {
				names[k] = strconv.Quote(d.Name)
			}
			return Span{}, fmt.Errorf("document: no document %q in the input (it has %s)", ms.Document, orNone(strings.Join(names, ", ")))
		}
		doc = docs[i]
	case len(docs) == 1:
		doc = docs[0]
	case len(docs) == 0:
		return Span{}, errors.New("the input has no document to hold gold evidence")
	default:
		return Span{}, fmt.Errorf("document: missing: the input has %d documents", len(docs))
	}
	if ms.Page > len(doc.Pages) {
		return Span{}, fmt.Errorf("page: %d is past the last page of %q (%d)", ms.Page, doc.Name, len(doc.Pages))
	}
	// Code-point offset of each page's start in the document text.
	starts := make([]int, len(doc.Pages))
	off := 0
	for i, p := range doc.Pages {
		starts[i] = off
		off += utf8.RuneCountInString(p) + 1 // the form feed
	}
	for i, p := range doc.Pages {
		if ms.Page != 0 && i != ms.Page-1 {
			continue
		}
		if s, e, ok := find(p, ms.Text); ok {
			return Span{Text: ms.Text, Document: doc.Name, Page: i + 1, Start: starts[i] + s, End: starts[i] + e}, nil
		}
	}
	where := fmt.Sprintf("%q", doc.Name)
	if ms.Page != 0 {
		where = fmt.Sprintf("page %d of %q", ms.Page, doc.Name)
	}
	return Span{}, fmt.Errorf("text: not found on %s: %q", where, clip(ms.Text, 80))
}

// find returns the code-point span of needle in hay, comparing runs of
// whitespace as a single space when the verbatim text is not there.
func find(hay, needle string) (start, end int, ok bool) {
	if i := strings.Index(hay, needle); i >= 0 {
		s := utf8.RuneCountInString(hay[:i])
		return s, s + utf8.RuneCountInString(needle), true
	}
	words := strings.Fields(needle)
	if len(words) == 0 {
		return 0, 0, false
	}
	// Collapse hay, remembering where each kept rune came from.
	var b strings.Builder
	var from []int // code-point index in hay of each rune of the collapsed text
	space := false
	i := 0
	for _, r := range hay {
		if unicode.IsSpace(r) {
			space = true
		} else {
			if space && b.Len() > 0 {
				b.WriteByte(' ')
				from = append(from, i-1)
			}
			space = false
			b.WriteRune(r)
			from = append(from, i)
		}
		i++
	}
	collapsed := b.String()
	target := strings.Join(words, " ")
	j := strings.Index(collapsed, target)
	if j < 0 {
		return 0, 0, false
	}
	first := utf8.RuneCountInString(collapsed[:j])
	last := first + utf8.RuneCountInString(target) - 1
	return from[first], from[last] + 1, true
}

func joinProblems(probs []*Problem) error {
	errs := make([]error, len(probs))
	for i, p := range probs {
		errs[i] = p
	}
	return errors.Join(errs...)
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ", ")
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
