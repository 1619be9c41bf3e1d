// Package reviewexport writes a tenant's reviewed validations as an
// evaluation dataset that package eval loads (the reviews export command):
// the reviews' final outcomes as labels. It is an adapter of package
// reviews, kept apart so that reviews depends on neither eval nor the file
// system.
package reviewexport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"rulevalidator/engine"
	"rulevalidator/eval"
	"rulevalidator/jobs"
	"rulevalidator/reviews"
	"rulevalidator/schemas"
	"rulevalidator/verdict"
)

// JobReader reads a tenant's job (a jobs.Store).
type JobReader interface {
	Get(ctx context.Context, tenant, requestID string) (_ jobs.Job, ok bool, _ error)
}

// Config says which reviewed validations to export and where.
type Config struct {
	Tenant string
	// Since and Until bound when the validations were judged (their
	// summary's completed_at), Until excluded; zero: unbounded.
	Since, Until time.Time
	// RulesetID keeps the validations of one ruleset; "": all.
	RulesetID string
	// Dir is the dataset directory to write; it must be empty or absent.
	Dir string
	// Name names the dataset (default reviews-<tenant>).
	Name string
}

// Exported says what Export wrote and what it left out, and why.
type Exported struct {
	Cases   int
	Skipped []string
}

// Export writes the tenant's reviewed validations as an evaluation dataset
// that `rulevalidator eval` loads: dataset.json, each validation's inputs
// (the documents as they were read) under inputs/, its ruleset under
// rulesets/, and as labels each rule's final outcome (the current review's
// where there is one, else the model's), with the passages the reviewers
// relied on as gold evidence. A validation is left out, and said why, when
// its material was not kept or a rule's final outcome has no value a label
// can hold.
func Export(ctx context.Context, store reviews.Store, jobStore JobReader, cfg Config) (Exported, error) {
	var out Exported
	if cfg.Tenant == "" {
		return out, errors.New("reviews: export: a tenant is required")
	}
	if cfg.Name == "" {
		cfg.Name = "reviews-" + caseID(cfg.Tenant)
	}
	if err := emptyDir(cfg.Dir); err != nil {
		return out, err
	}
	type reviewed struct {
		id  string
		all []reviews.Review
	}
	var list []reviewed
	if err := store.Reviewed(ctx, cfg.Tenant, func(id string, all []reviews.Review) error {
		list = append(list, reviewed{id, all})
		return nil
	}); err != nil {
		return out, err
	}
	slices.SortFunc(list, func(a, b reviewed) int { return strings.Compare(a.id, b.id) })

	m := eval.Manifest{Name: cfg.Name, Description: fmt.Sprintf("Validations of tenant %s reviewed by people, exported %s: the final outcomes as labels.", cfg.Tenant, time.Now().UTC().Format(time.RFC3339))}
	usedIDs := map[string]bool{}
	rulesets := map[string]string{} // content hash -> file
	for _, r := range list {
		job, ok, err := jobStore.Get(ctx, cfg.Tenant, r.id)
		if err != nil {
			return out, err
		}
		if !ok || job.Status != jobs.Completed || job.Summary == nil {
			out.Skipped = append(out.Skipped, r.id+": no completed result is kept")
			continue
		}
		at := job.Summary.CompletedAt
		if (!cfg.Since.IsZero() && at.Before(cfg.Since)) || (!cfg.Until.IsZero() && !at.Before(cfg.Until)) ||
			(cfg.RulesetID != "" && job.Summary.RulesetID != cfg.RulesetID) {
			continue
		}
		mat, found, err := store.Material(ctx, cfg.Tenant, r.id)
		if err != nil {
			return out, err
		}
		if !found || mat.Inputs == nil || mat.Ruleset == nil {
			out.Skipped = append(out.Skipped, r.id+": what it judged was not kept (job status in memory, or judged before reviews were kept)")
			continue
		}
		labels, why := caseLabels(mat, job.Verdicts, r.all)
		if why != "" {
			out.Skipped = append(out.Skipped, r.id+": "+why)
			continue
		}
		id := caseID(r.id)
		for n := 2; usedIDs[id]; n++ {
			id = fmt.Sprintf("%s-%d", caseID(r.id), n)
		}
		usedIDs[id] = true
		input := filepath.Join("inputs", id+".json")
		if err := writeJSON(filepath.Join(cfg.Dir, input), mat.Inputs); err != nil {
			return out, err
		}
		rsData, err := json.MarshalIndent(mat.Ruleset, "", "  ")
		if err != nil {
			return out, err
		}
		sum := sha256.Sum256(rsData)
		hash := hex.EncodeToString(sum[:])
		rsFile, ok := rulesets[hash]
		if !ok {
			rsFile = filepath.Join("rulesets", caseID(orElse(mat.Ruleset.ID, "ruleset"))+"-"+hash[:12]+".json")
			rulesets[hash] = rsFile
			if err := writeFile(filepath.Join(cfg.Dir, rsFile), append(rsData, '\n')); err != nil {
				return out, err
			}
		}
		m.Cases = append(m.Cases, eval.ManifestCase{ID: id, Description: fmt.Sprintf("Request %s, judged %s by %s.", r.id, at.UTC().Format(time.RFC3339), job.Summary.Model),
			Input: filepath.ToSlash(input), Ruleset: filepath.ToSlash(rsFile), Labels: labels})
		out.Cases++
	}
	if out.Cases == 0 {
		return out, fmt.Errorf("reviews: export: tenant %q has no reviewed validation to export (%d left out)", cfg.Tenant, len(out.Skipped))
	}
	return out, writeJSON(filepath.Join(cfg.Dir, "dataset.json"), m)
}

// caseLabels labels every rule of the material's ruleset, nested rulesets'
// included, in tree order (eval wants a label for each), with its final
// outcome; why says what keeps the validation out.
func caseLabels(mat reviews.Material, verdicts []schemas.VerdictEvent, all []reviews.Review) ([]eval.ManifestLabel, string) {
	passages := map[string]engine.Passage{}
	for _, p := range engine.Passages(mat.Inputs) {
		passages[p.ID] = p
	}
	var labels []eval.ManifestLabel
	for _, rule := range mat.Ruleset.AllRules() {
		i := slices.IndexFunc(verdicts, func(v schemas.VerdictEvent) bool { return v.RuleID == rule.RuleID })
		if i < 0 {
			return nil, fmt.Sprintf("rule %q has no verdict", rule.RuleID)
		}
		cur := reviews.Current(all, rule.RuleID)
		final := reviews.FinalVerdict(verdicts[i], cur)
		lab := eval.ManifestLabel{RuleID: rule.RuleID, NotApplicable: final.NotApplicable}
		switch rule.Type {
		case verdict.Numerical:
			switch {
			case final.NumericalOutput != nil:
				lab.NumericalOutput = final.NumericalOutput
			case final.NotApplicable && len(rule.AllowedScores()) > 0:
				// Not applicable without a score: any allowed score stands
				// for it; the flag is what is scored.
				lab.NumericalOutput = &rule.AllowedScores()[0]
			default:
				return nil, fmt.Sprintf("rule %q has no final score (review it to give one)", rule.RuleID)
			}
		default:
			b := final.BooleanOutput != nil && *final.BooleanOutput
			lab.BooleanOutput = &b
			if !final.DataSufficiency && !final.NotApplicable {
				// The final verdict says the material does not say (an
				// override never does): the label's "not mentioned".
				lab.DataSufficiency = new(false)
			}
		}
		if cur != nil {
			lab.Note = fmt.Sprintf("%s by %s at %s", cur.Decision, cur.Reviewer, cur.ReviewedAt.UTC().Format(time.RFC3339))
			for _, id := range cur.PassageIDs {
				if p, ok := passages[id]; ok && p.Page > 0 {
					lab.Evidence = append(lab.Evidence, eval.ManifestSpan{Text: p.Text, Document: p.Origin, Page: p.Page})
				}
			}
		} else {
			lab.Note = "not reviewed: the model's verdict"
		}
		labels = append(labels, lab)
	}
	return labels, ""
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// caseID is s as a case id may be written: letters, digits, '.', '_' and
// '-', starting with a letter or digit.
func caseID(s string) string {
	id := strings.TrimLeft(unsafeID.ReplaceAllString(s, "-"), "._-")
	if id == "" {
		return "case"
	}
	return id
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// emptyDir makes dir, or checks that it is empty: an export never
// overwrites a dataset.
func emptyDir(dir string) error {
	if dir == "" {
		return errors.New("reviews: export: a directory to write the dataset to is required")
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("reviews: export: %s is not empty; give a new directory", dir)
	}
	return nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, append(data, '\n'))
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
