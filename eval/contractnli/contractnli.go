// Package contractnli turns a split of ContractNLI (Koreeda and Manning,
// 2021: non-disclosure agreements, each labelled against 17 hypotheses as
// entailed, contradicted or not mentioned, with the spans that show it)
// into a dataset package eval loads: one boolean rule per hypothesis, one
// case per agreement, and per label the expected verdict, whether the
// agreement says anything on it (data_sufficiency) and its spans as gold
// evidence.
package contractnli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"rulevalidator/engine"
	"rulevalidator/eval"
)

// The three labels of ContractNLI.
const (
	Entailment    = "Entailment"
	Contradiction = "Contradiction"
	NotMentioned  = "NotMentioned"
)

// Split is a ContractNLI split as its JSON file has it (train.json,
// dev.json, test.json).
type Split struct {
	Documents []Document `json:"documents"`
	// Labels are the hypotheses by key (nda-1 … nda-20).
	Labels map[string]Hypothesis `json:"labels"`
}

// Document is one agreement with its annotations.
type Document struct {
	ID       int    `json:"id"`
	FileName string `json:"file_name"`
	Text     string `json:"text"`
	// Spans are the sentences and list items of Text, as [start, end)
	// offsets in code points.
	Spans          [][2]int        `json:"spans"`
	AnnotationSets []AnnotationSet `json:"annotation_sets"`
	DocumentType   string          `json:"document_type"`
	URL            string          `json:"url"`
}

// AnnotationSet is one annotator's labels; ContractNLI has one per document.
type AnnotationSet struct {
	Annotations map[string]Annotation `json:"annotations"`
}

// Annotation labels one hypothesis: its choice and the indexes of the spans
// that show it (none for NotMentioned).
type Annotation struct {
	Choice string `json:"choice"`
	Spans  []int  `json:"spans"`
}

// Hypothesis is one of the fixed hypotheses.
type Hypothesis struct {
	ShortDescription string `json:"short_description"`
	Hypothesis       string `json:"hypothesis"`
}

// Decode reads a split.
func Decode(r io.Reader) (*Split, error) {
	var s Split
	dec := json.NewDecoder(r)
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("contractnli: reading the split: %w", err)
	}
	if len(s.Documents) == 0 || len(s.Labels) == 0 {
		return nil, errors.New("contractnli: the split has no documents or no labels: is it a ContractNLI split?")
	}
	return &s, nil
}

// Options name what Convert writes.
type Options struct {
	// Name names the dataset (required); Description describes it.
	Name, Description string
	// RulesetID is the ruleset's id (default contractnli-nda).
	RulesetID string
}

// Dataset is a converted split, ready to be written.
type Dataset struct {
	Manifest eval.Manifest
	// Ruleset is ruleset.yaml; Inputs the input files by path.
	Ruleset []byte
	Inputs  map[string][]byte
	Stats   Stats
}

// Stats count what Convert made.
type Stats struct {
	Cases, Labels int
	// ByChoice counts the labels by ContractNLI choice; ByRule the same for
	// each rule, in the ruleset's order (RuleIDs).
	ByChoice map[string]int
	RuleIDs  []string
	ByRule   map[string]map[string]int
	// Gold counts the gold passages written; Widened those widened to the
	// words before them because their text first occurs earlier in the
	// document (the loader finds a passage where its text first occurs);
	// Dropped the annotated spans with no letter or digit (blank lines to
	// fill in, whitespace), which no quote can show.
	Gold, Widened, Dropped int
}

// rulePreamble turns a hypothesis into a rule the engine judges: the rule
// holds when the agreement entails the hypothesis, and fails when it
// contradicts it or does not say.
const rulePreamble = "The agreement provides the following: "

// Convert maps the split to a dataset: each hypothesis a boolean rule
// (rule_id a slug of its short description, its text the hypothesis after
// rulePreamble), each document a case (id doc-<id>, its text one
// document), and each label: Entailment a pass, Contradiction a fail,
// NotMentioned a fail with data_sufficiency false; the annotated spans,
// trimmed of whitespace, its gold evidence.
func Convert(s *Split, opt Options) (*Dataset, error) {
	if opt.Name == "" {
		return nil, errors.New("contractnli: a dataset name is required")
	}
	if opt.RulesetID == "" {
		opt.RulesetID = "contractnli-nda"
	}
	keys, ruleIDs, err := hypotheses(s.Labels)
	if err != nil {
		return nil, err
	}
	ruleset, err := renderRuleset(opt.RulesetID, keys, ruleIDs, s.Labels)
	if err != nil {
		return nil, err
	}
	d := &Dataset{
		Manifest: eval.Manifest{Name: opt.Name, Description: opt.Description, Ruleset: "ruleset.yaml"},
		Ruleset:  ruleset,
		Inputs:   map[string][]byte{},
		Stats:    Stats{ByChoice: map[string]int{}, ByRule: map[string]map[string]int{}},
	}
	for _, k := range keys {
		d.Stats.RuleIDs = append(d.Stats.RuleIDs, ruleIDs[k])
		d.Stats.ByRule[ruleIDs[k]] = map[string]int{}
	}
	seen := map[string]bool{}
	for i := range s.Documents {
		doc := &s.Documents[i]
		c, input, err := d.convertDocument(doc, keys, ruleIDs)
		if err != nil {
			return nil, fmt.Errorf("contractnli: document %d (%s): %w", doc.ID, doc.FileName, err)
		}
		if seen[c.ID] {
			return nil, fmt.Errorf("contractnli: document %d: its id is not unique", doc.ID)
		}
		seen[c.ID] = true
		d.Inputs[c.Input] = input
		d.Manifest.Cases = append(d.Manifest.Cases, c)
		d.Stats.Cases++
	}
	return d, nil
}

// hypotheses returns the hypothesis keys in their number's order and the
// rule id of each.
func hypotheses(labels map[string]Hypothesis) ([]string, map[string]string, error) {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if na, nb := keyNumber(a), keyNumber(b); na != nb {
			return na - nb
		}
		return strings.Compare(a, b)
	})
	ids := map[string]string{}
	byID := map[string]string{}
	for _, k := range keys {
		h := labels[k]
		if strings.TrimSpace(h.Hypothesis) == "" {
			return nil, nil, fmt.Errorf("contractnli: hypothesis %s has no text", k)
		}
		id := slug(h.ShortDescription)
		if id == "" {
			id = slug(k)
		}
		if other, dup := byID[id]; dup {
			return nil, nil, fmt.Errorf("contractnli: hypotheses %s and %s would both be rule %q", other, k, id)
		}
		byID[id], ids[k] = k, id
	}
	return keys, ids, nil
}

// keyNumber is the number of a key such as nda-11; -1 for none.
func keyNumber(k string) int {
	i := strings.LastIndexByte(k, '-')
	n, err := strconv.Atoi(k[i+1:])
	if err != nil {
		return -1
	}
	return n
}

var notSlug = regexp.MustCompile(`[^a-z0-9]+`)

// slug is s lower-cased, its runs of other characters than letters and
// digits one hyphen.
func slug(s string) string {
	return strings.Trim(notSlug.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

// renderRuleset writes the ruleset as YAML, each string JSON-quoted (a
// valid YAML scalar), and checks it parses.
func renderRuleset(id string, keys []string, ruleIDs map[string]string, labels map[string]Hypothesis) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# ContractNLI's hypotheses (Koreeda and Manning, 2021; CC BY 4.0) as boolean rules,\n")
	b.WriteString("# written by eval/contractnli from the split's labels (see SOURCES.md). A rule holds\n")
	b.WriteString("# when the agreement entails its hypothesis; the comment names the hypothesis's key.\n")
	fmt.Fprintf(&b, "id: %s\nversion: \"1\"\ntype: boolean\nboolean_aggregation: all\nrules:\n", quote(id))
	for _, k := range keys {
		h := labels[k]
		name := h.ShortDescription
		if name == "" {
			name = k
		}
		fmt.Fprintf(&b, "  - rule_id: %s # %s\n    name: %s\n    rule_text: %s\n",
			quote(ruleIDs[k]), k, quote(name), quote(rulePreamble+oneLine(h.Hypothesis)))
	}
	if _, err := engine.ParseRuleset(b.Bytes()); err != nil {
		return nil, fmt.Errorf("contractnli: the ruleset written does not parse: %w", err)
	}
	return b.Bytes(), nil
}

// quote writes s as a JSON string, which YAML reads as a double-quoted
// scalar.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// input is a case's input file: the agreement as one document.
type input struct {
	PrimaryDocs []inputDoc `json:"primary_docs"`
}

type inputDoc struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

func (d *Dataset) convertDocument(doc *Document, keys []string, ruleIDs map[string]string) (eval.ManifestCase, []byte, error) {
	var c eval.ManifestCase
	if len(doc.AnnotationSets) == 0 {
		return c, nil, errors.New("no annotation set")
	}
	if strings.ContainsRune(doc.Text, '\f') {
		// A form feed would start a page, and the gold passages are found
		// on the page their text is on.
		return c, nil, errors.New("the text holds a form feed")
	}
	if strings.TrimSpace(doc.Text) == "" {
		return c, nil, errors.New("the text is empty")
	}
	c.ID = fmt.Sprintf("doc-%03d", doc.ID)
	c.Input = "inputs/" + c.ID + ".json"
	name := doc.FileName
	if name == "" {
		name = c.ID + ".txt"
	}
	c.Description = name
	if doc.DocumentType != "" {
		c.Description += " (" + doc.DocumentType + ")"
	}
	if doc.URL != "" {
		c.Description += ", " + doc.URL
	}
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(input{PrimaryDocs: []inputDoc{{Name: name, Text: doc.Text}}}); err != nil {
		return c, nil, err
	}

	text := []rune(doc.Text)
	annotations := doc.AnnotationSets[0].Annotations
	for _, k := range keys {
		a, ok := annotations[k]
		if !ok {
			return c, nil, fmt.Errorf("hypothesis %s is not labelled", k)
		}
		lab := eval.ManifestLabel{RuleID: ruleIDs[k], Note: "ContractNLI: " + a.Choice}
		switch a.Choice {
		case Entailment:
			lab.BooleanOutput = ptr(true)
		case Contradiction:
			lab.BooleanOutput = ptr(false)
		case NotMentioned:
			lab.BooleanOutput, lab.DataSufficiency = ptr(false), ptr(false)
		default:
			return c, nil, fmt.Errorf("hypothesis %s: unknown choice %q (known: %s, %s, %s)", k, a.Choice, Entailment, Contradiction, NotMentioned)
		}
		widened := 0
		for _, si := range a.Spans {
			if si < 0 || si >= len(doc.Spans) {
				return c, nil, fmt.Errorf("hypothesis %s: span %d is not one of the document's %d spans", k, si, len(doc.Spans))
			}
			start, end := doc.Spans[si][0], doc.Spans[si][1]
			if start < 0 || end > len(text) || start > end {
				return c, nil, fmt.Errorf("hypothesis %s: span %d [%d, %d) is outside the text (%d code points)", k, si, start, end, len(text))
			}
			passage, moved, ok := goldPassage(text, start, end)
			if !ok {
				d.Stats.Dropped++
				continue
			}
			if moved {
				widened++
				d.Stats.Widened++
			}
			lab.Evidence = append(lab.Evidence, eval.ManifestSpan{Text: passage, Page: 1}) // no form feed: one page
			d.Stats.Gold++
		}
		if widened > 0 {
			lab.Note += fmt.Sprintf("; %d gold passage(s) widened to the words before them, where their text first occurs", widened)
		}
		c.Labels = append(c.Labels, lab)
		d.Stats.Labels++
		d.Stats.ByChoice[a.Choice]++
		d.Stats.ByRule[ruleIDs[k]][a.Choice]++
	}
	return c, raw.Bytes(), nil
}

func ptr[T any](v T) *T { return &v }

// goldPassage is the span [start, end) of text trimmed of whitespace, and
// widened word by word to the left (then to the right) until its text
// first occurs where the span starts, since the loader places a passage
// where its text first occurs. ok is false for a span with no letter or
// digit.
func goldPassage(text []rune, start, end int) (passage string, widened, ok bool) {
	for start < end && unicode.IsSpace(text[start]) {
		start++
	}
	for end > start && unicode.IsSpace(text[end-1]) {
		end--
	}
	if !slices.ContainsFunc(text[start:end], func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return "", false, false
	}
	whole := string(text)
	for {
		passage = string(text[start:end])
		i := strings.Index(whole, passage)
		if utf8.RuneCountInString(whole[:i]) == start {
			return passage, widened, true
		}
		widened = true
		switch {
		case start > 0:
			start--
			for start > 0 && unicode.IsSpace(text[start]) {
				start--
			}
			for start > 0 && !unicode.IsSpace(text[start-1]) {
				start--
			}
		case end < len(text):
			end++
			for end < len(text) && unicode.IsSpace(text[end-1]) {
				end++
			}
			for end < len(text) && !unicode.IsSpace(text[end]) {
				end++
			}
		default:
			return passage, widened, true // the whole text: it occurs at 0
		}
	}
}

// Write writes the dataset into dir: dataset.json, ruleset.yaml and inputs/
// (replaced whole), leaving the directory's other files (its SOURCES.md).
func (d *Dataset) Write(dir string) error {
	if err := os.RemoveAll(filepath.Join(dir, "inputs")); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "inputs"), 0o755); err != nil {
		return err
	}
	var manifest bytes.Buffer
	enc := json.NewEncoder(&manifest)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d.Manifest); err != nil {
		return err
	}
	files := map[string][]byte{"dataset.json": manifest.Bytes(), "ruleset.yaml": d.Ruleset}
	for path, data := range d.Inputs {
		files[path] = data
	}
	for path, data := range files {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(path)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// WriteStats writes the counts as text: the cases and labels, the labels by
// choice overall and for each rule, and the gold passages.
func (s Stats) WriteStats(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d cases, %d labels: %s\n", s.Cases, s.Labels, choices(s.ByChoice, s.Labels))
	fmt.Fprintf(&b, "%d gold passages (%d widened to be found where they were annotated; %d spans with no letter or digit dropped)\n", s.Gold, s.Widened, s.Dropped)
	for _, id := range s.RuleIDs {
		n := 0
		for _, v := range s.ByRule[id] {
			n += v
		}
		fmt.Fprintf(&b, "  %s: %s\n", id, choices(s.ByRule[id], n))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func choices(by map[string]int, total int) string {
	parts := make([]string, 0, 3)
	for _, c := range []string{Entailment, Contradiction, NotMentioned} {
		share := 0.0
		if total > 0 {
			share = 100 * float64(by[c]) / float64(total)
		}
		parts = append(parts, fmt.Sprintf("%s %d (%.1f%%)", c, by[c], share))
	}
	return strings.Join(parts, ", ")
}
