package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// moduleRoot is the root of the module, seen from this package's directory.
const moduleRoot = "../.."

// Every relative link of the repository's Markdown pages leads somewhere: to a
// file or directory that exists and, for a link with an anchor into a Markdown
// page, to a heading of that page. A docs/ page named in a Go source file or an
// ops script exists too, so a comment that sends the reader to the figures
// behind a default does not point at a page that has moved.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	pages := map[string]string{} // path relative to the module root → content
	var sources []string
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != moduleRoot && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(moduleRoot, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case strings.HasSuffix(name, ".md"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			pages[rel] = string(b)
		case strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".sh"):
			sources = append(sources, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pages["README.md"]; !ok {
		t.Fatalf("found no README.md under %s", moduleRoot)
	}
	for page, text := range pages {
		for _, problem := range brokenLinks(page, text, pages) {
			t.Errorf("%s: %s", page, problem)
		}
	}
	for _, src := range sources {
		b, err := os.ReadFile(filepath.Join(moduleRoot, src))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docPathInSource.FindAllString(string(b), -1) {
			if _, ok := pages[m]; !ok {
				t.Errorf("%s names %s, which does not exist", src, m)
			}
		}
	}
}

// docPathInSource is a docs/ page named in a source file.
var docPathInSource = regexp.MustCompile(`\bdocs/[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)

// markdownLink is an inline link or image: [text](target) or ![alt](target),
// the target up to the first space or closing parenthesis.
var markdownLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// brokenLinks lists what is wrong with the relative links of one page, given
// every page of the repository by its path.
func brokenLinks(page, text string, pages map[string]string) []string {
	var problems []string
	dir := filepath.ToSlash(filepath.Dir(page))
	for _, paragraph := range proseParagraphs(text) {
		for _, m := range markdownLink.FindAllStringSubmatch(paragraph, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := page
			if file != "" {
				resolved = filepath.ToSlash(filepath.Clean(filepath.Join(dir, file)))
				if strings.HasPrefix(resolved, "../") || resolved == ".." {
					problems = append(problems, "link "+target+" leaves the repository")
					continue
				}
				if _, ok := pages[resolved]; !ok {
					if _, err := os.Stat(filepath.Join(moduleRoot, resolved)); err != nil {
						problems = append(problems, "link "+target+": no such file ("+resolved+")")
						continue
					}
				}
			}
			if anchor == "" {
				continue
			}
			content, ok := pages[resolved]
			if !ok {
				continue // an anchor into a file that is not a Markdown page is the browser's business
			}
			if !headingAnchors(content)[anchor] {
				problems = append(problems, "link "+target+": "+resolved+" has no heading whose anchor is #"+anchor)
			}
		}
	}
	return problems
}

// proseParagraphs are a page's paragraphs outside fenced code blocks, with
// inline code spans removed, so that a link shown as an example is not
// followed; a link's text may run over several lines of a paragraph.
func proseParagraphs(text string) []string {
	var paragraphs []string
	var current []string
	flush := func() {
		if len(current) > 0 {
			paragraphs = append(paragraphs, inlineCode.ReplaceAllString(strings.Join(current, "\n"), ""))
			current = nil
		}
	}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			flush()
			fenced = !fenced
			continue
		}
		switch {
		case fenced:
		case strings.TrimSpace(line) == "":
			flush()
		default:
			current = append(current, line)
		}
	}
	flush()
	return paragraphs
}

var inlineCode = regexp.MustCompile("`[^`]*`")

// headingAnchors are the anchors GitHub gives a page's headings: the heading
// lower-cased, its punctuation dropped, spaces made hyphens, and -1, -2 … after
// a repeated one.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var slug strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				slug.WriteRune(r)
			}
		}
		s := slug.String()
		if n := seen[s]; n > 0 {
			anchors[s+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	}
	return anchors
}

// TestBrokenLinksCatchesMistakes: the check above sees a missing page, a
// missing anchor and a link that leaves the repository, and follows neither
// links in code nor links to the web.
func TestBrokenLinksCatchesMistakes(t *testing.T) {
	t.Parallel()
	pages := map[string]string{
		"README.md":      "# Title\n\n## The model (a setting, off by default)\n",
		"guide/a.md":     "# A\n\n## Part\n\n## Part\n",
		"guide/m/one.md": "# One\n",
	}
	page := strings.Join([]string{
		"[ok](../README.md#the-model-a-setting-off-by-default) [ok](m/one.md) [ok](#part-1) [ok](https://example.com/x.md)",
		"`[in code](nowhere.md)`",
		"```",
		"[in a block](nowhere.md)",
		"```",
		"",
		"[gone](missing.md) [no anchor](../README.md#the-model) [out over",
		"two lines](../../x.md)",
	}, "\n")
	got := brokenLinks("guide/a.md", page, pages)
	if len(got) != 3 {
		t.Fatalf("got %d problems, want 3 (missing page, missing anchor, leaves the repository):\n%s", len(got), strings.Join(got, "\n"))
	}
	for i, want := range []string{"missing.md", "#the-model", "leaves the repository"} {
		if !strings.Contains(got[i], want) {
			t.Errorf("problem %d is %q, want one about %s", i, got[i], want)
		}
	}
}
