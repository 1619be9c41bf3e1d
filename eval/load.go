package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/judging"
	"rulevalidator/request"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

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
		lab := Label{RuleID: rule.RuleID, Type: rule.Type, NotApplicable: ml.NotApplicable, Allowed: rule.AllowedScores(),
			Insufficient: ml.DataSufficiency != nil && !*ml.DataSufficiency, RuleWords: ruleWords(rule)}
		if lab.Insufficient && lab.NotApplicable {
			l.add(mc.ID, ml.RuleID, fieldOf("data_sufficiency"), "false with not_applicable true: a rule that does not apply needs no data; give one of the two")
		}
		switch rule.Type {
		case verdict.Numerical:
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
	in, err := judging.EngineInputs(req)
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
