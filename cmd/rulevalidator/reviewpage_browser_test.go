package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"rulevalidator/engine"
	"rulevalidator/internal/docfixture"
	"rulevalidator/internal/llmfake"
	"rulevalidator/internal/opsscript"
	"rulevalidator/internal/synthdoc"
)

// envScreenshot, set to 1, has TestReviewPageInBrowser write its screenshot
// of the validation page to docs/review-page.png.
const envScreenshot = "RULEVALIDATOR_UPDATE_SCREENSHOT"

// chromium finds the headless browser (ops/tools.sh install chromium), or
// skips the test, failing it when integration tests are required.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("RULEVALIDATOR_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	opsscript.Unavailable(t, "browser", "no Chromium on PATH (install it with: bash ops/tools.sh install chromium)")
	return ""
}

// tab is a tab of a headless Chromium, 1280x800, for the test.
type tab struct {
	t   *testing.T
	ctx context.Context
}

// browser starts a headless Chromium for the test.
func browser(t *testing.T, path string) tab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests may run as root, where Chromium's sandbox refuses to start
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-gpu", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser, for the life of ctx: no timeout on it.
	if err := chromedp.Do(ctx); err != nil {
		opsscript.Unavailable(t, "browser", "Chromium at %s does not start: %v", path, err)
	}
	return tab{t: t, ctx: ctx}
}

// do runs steps, each run within 30 s.
func (b tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// get runs one step that gives a value.
func get[T any](b tab, what string, step chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, step)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// submitFiles submits a validation through the API.
func submitFiles(t *testing.T, public, token string, body map[string]any) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, resp := httpDo(t, http.MethodPost, public+"/v1/validations", token, data); code != http.StatusAccepted {
		t.Fatalf("POST /v1/validations %s: %d %s", body["request_id"], code, resp)
	}
}

// examplePDFSubmission is the demo's PDF request (request-pdf.json, its
// files inlined as data) as requestID.
func examplePDFSubmission(t *testing.T, requestID string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../../examples/contract-review/request-pdf.json")
	if err != nil {
		t.Fatal(err)
	}
	var sub map[string]any
	if err := json.Unmarshal(raw, &sub); err != nil {
		t.Fatal(err)
	}
	delete(sub, "tenant_id")
	sub["request_id"] = requestID
	for _, group := range []string{"primary_docs", "auxiliary_docs"} {
		docs, _ := sub[group].([]any)
		for _, d := range docs {
			doc := d.(map[string]any)
			if file, ok := doc["file"].(string); ok {
				data, err := os.ReadFile(filepath.Join("../../examples/contract-review", file))
				if err != nil {
					t.Fatal(err)
				}
				delete(doc, "file")
				doc["data"] = base64.StdEncoding.EncodeToString(data)
			}
		}
	}
	return sub
}

// validationJSON is what the page is checked against.
type validationJSON struct {
	Status string `json:"status"`
	Result *struct {
		Verdicts []struct {
			RuleID    string `json:"rule_id"`
			Evidences []struct {
				PassageID    *string `json:"passage_id"`
				SourceOrigin string  `json:"source_origin"`
				Page         int     `json:"source_page_number"`
				StartOffset  *int    `json:"start_offset"`
				EndOffset    *int    `json:"end_offset"`
			} `json:"evidences"`
			Final struct {
				Source  string `json:"source"`
				Outcome string `json:"outcome"`
			} `json:"final"`
		} `json:"verdicts"`
	} `json:"result"`
}

func waitCompleted(t *testing.T, public, token, requestID string) validationJSON {
	t.Helper()
	var v validationJSON
	waitUntil(t, 2*waitLimit, "validation "+requestID+" completed", func() bool {
		code, _, body := httpDo(t, http.MethodGet, public+"/v1/validations/"+requestID, token, nil)
		if code != http.StatusOK {
			return false
		}
		v = validationJSON{}
		_ = json.Unmarshal(body, &v)
		return v.Status == "completed" || v.Status == "failed"
	})
	if v.Status != "completed" {
		t.Fatalf("validation %s: %s", requestID, v.Status)
	}
	return v
}

// pageState is what the validation page shows of its selected rule.
type pageState struct {
	Title    string   `json:"title"`
	Boxes    []string `json:"boxes"`
	Marks    []string `json:"marks"`
	MarkText []string `json:"markText"`
	Loaded   bool     `json:"loaded"`
	Final    string   `json:"final"`
	Status   string   `json:"status"`
	Scripts  int      `json:"scripts"`
}

const pageStateJS = `(() => {
  const img = document.querySelector('.page-image img');
  return {
    title: (document.querySelector('#page-view .page-title') || {}).textContent || '',
    boxes: Array.from(document.querySelectorAll('.page-image .box')).map(b => b.dataset.passage),
    marks: Array.from(document.querySelectorAll('#page-view mark')).map(m => m.dataset.passage),
    markText: Array.from(document.querySelectorAll('#page-view mark')).map(m => m.textContent),
    loaded: !!(img && img.complete && img.naturalWidth > 0),
    final: (document.querySelector('#final-outcome') || {}).textContent || '',
    status: (document.getElementById('status') || {}).textContent || '',
    scripts: document.querySelectorAll('main script, main img:not(.page-image img)').length,
  };
})()`

func state(b tab) pageState {
	b.t.Helper()
	return get(b, "reading the page", chromedp.Evaluate[pageState](pageStateJS))
}

// waitState polls the page until ok holds of its state.
func waitState(b tab, what string, ok func(pageState) bool) pageState {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := state(b)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: the page shows %+v", what, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var passageRef = regexp.MustCompile(`^d(\d+)p(\d+)s\d+$`)

// TestReviewPageInBrowser drives the review page in headless Chromium
// against serve, the scripted model judging the demo's contract (a PDF):
// sign in, the queue, each rule's cited passage boxed on the page image it
// is on, an override and its final outcome, a document's markup shown as
// text, and another tenant seeing nothing. It measures how soon a 50-page
// PDF's cited page shows.
func TestReviewPageInBrowser(t *testing.T) {
	chrome := chromium(t)
	e := newAPIEnv(t)
	const markupDoc = "MARKUP-CASE <script>window.pwned = 1</script> The supplier's <b>bold</b> <img src=x onerror=\"window.pwned=2\"> claim."
	longPages := synthdoc.Pages(50, 300, 7)
	longPassage := ""
	for _, p := range engine.Passages(&engine.Inputs{PrimaryDocs: []engine.Document{{Name: "long.txt", Pages: longPages}}}) {
		if p.Page == 37 {
			longPassage = p.Text
			break
		}
	}
	for name, yaml := range map[string]string{
		"markup.yaml": "id: markup\nrules:\n  - rule_id: markup-shown\n    rule_text: MARKUP-RULE Does the document make a claim?\n",
		"long.yaml":   "id: long\nrules:\n  - rule_id: long-cite\n    rule_text: LONG-RULE Does the agreement say anything on page 37?\n",
	} {
		if err := os.WriteFile(filepath.Join(e.rulesetsDir, name), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(rule, origin, text string, page int, rationale string) string {
		data, _ := json.Marshal(map[string]any{"rules": []map[string]any{{"rule_id": rule, "data_sufficiency": true, "rationale": rationale,
			"boolean_output": true, "not_applicable": false,
			"evidences": []map[string]any{{"text": text, "source_origin": origin, "source_page_number": page}}}}})
		return string(data)
	}
	example := exampleAnswer(t, nil)
	e.llm.Answer(func(r llmfake.Call) llmfake.Reply {
		all := ""
		for _, m := range r.Messages {
			all += m.Content
		}
		switch {
		case strings.Contains(all, "MARKUP-RULE"):
			return llmfake.Reply{Content: answer("markup-shown", "markup.txt", markupDoc, 1, "The <i>document</i> says <script>window.pwned = 3</script>.")}
		case strings.Contains(all, "LONG-RULE"):
			return llmfake.Reply{Content: answer("long-cite", "long.pdf", longPassage, 37, "Page 37 says it."), ValueProbs: []float64{0.5}}
		}
		// The least confident first: governing-law, then termination.
		return llmfake.Reply{Content: example, ValueProbs: []float64{0.41, 0.93, 0.97, 0.99, 0.9, 0.62}}
	})
	p := e.startBinary(t, e.serveArgs()...)
	public := "http://" + e.httpAddr
	waitForListener(t, public)
	acme, globex := e.token(t, "acme"), e.token(t, "globex")

	submitFiles(t, public, acme, examplePDFSubmission(t, "review-pdf"))
	submitFiles(t, public, acme, map[string]any{"request_id": "review-markup", "ruleset_ref": map[string]any{"id": "markup"},
		"primary_docs": []any{map[string]any{"name": "markup.txt", "content": markupDoc}}})
	longPDF := docfixture.One(t, docfixture.PDF, longPages...)
	submitFiles(t, public, acme, map[string]any{"request_id": "review-long", "ruleset_ref": map[string]any{"id": "long"},
		"primary_docs": []any{map[string]any{"name": "long.pdf", "data": base64.StdEncoding.EncodeToString(longPDF), "content_type": "application/pdf"}}})
	pdf := waitCompleted(t, public, acme, "review-pdf")
	waitCompleted(t, public, acme, "review-markup")
	waitCompleted(t, public, acme, "review-long")
	if t.Failed() {
		t.Logf("service log:\n%s", tail(p.logText(), 60))
	}

	b := browser(t, chrome)
	run := b.do

	// Sign in: a refused token is said so; a good one opens the queue.
	run("sign in with a bad token", chromedp.Navigate(public+"/review/"), chromedp.WaitVisible(css("#token")),
		chromedp.SendKeys(css("#token"), "not-a-token"), chromedp.Click(css("#signin-form button")))
	waitState(b, "a refused token", func(s pageState) bool { return strings.Contains(s.Status, "refused") })
	run("sign in", chromedp.SendKeys(css("#token"), acme), chromedp.Click(css("#signin-form button")), chromedp.WaitVisible(css("#queue tbody tr")))

	// The queue, least confident first.
	rows := get(b, "read the queue", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#queue tbody tr')).map(r => r.textContent)`))
	if len(rows) < 2 || !strings.Contains(rows[0], "41%") || !strings.Contains(rows[0], "Governing law") || !strings.Contains(rows[0], "review-pdf") {
		_, _, body := httpDo(t, http.MethodGet, public+"/v1/validations/review-pdf", acme, nil)
		t.Fatalf("queue rows: %q\nreview-pdf: %s", rows, body)
	}

	// Its first row opens the validation at that rule, the cited passage
	// boxed on its page's image.
	start := time.Now()
	run("open the first row", chromedp.Click(css("#queue tbody tr:first-child a")))
	s := waitState(b, "the governing-law rule's page", func(s pageState) bool { return s.Loaded && len(s.Boxes) > 0 })
	t.Logf("the demo's contract: the queue's first rule shown beside its page, boxed, in %v", time.Since(start).Round(time.Millisecond))

	// Every rule citing the PDF: its passages boxed on the page they are on.
	shown := 0
	for i, v := range pdf.Result.Verdicts {
		// The evidences on the page of the first one in the PDF: a passage
		// cited by id, or a quote found at offsets of the document's text.
		var cited []string
		page := ""
		for _, ev := range v.Evidences {
			id, at := "", ""
			switch {
			case ev.PassageID != nil:
				m := passageRef.FindStringSubmatch(*ev.PassageID)
				if m == nil || m[1] != "1" {
					continue
				}
				id, at = *ev.PassageID, m[2]
			case ev.SourceOrigin == "northwind-msa.pdf" && ev.StartOffset != nil && ev.EndOffset != nil:
				id, at = fmt.Sprintf("span:%d-%d", *ev.StartOffset, *ev.EndOffset), fmt.Sprint(ev.Page)
			default:
				continue
			}
			if page == "" {
				page = at
			}
			if at == page {
				cited = append(cited, id)
			}
		}
		run("select rule "+v.RuleID, chromedp.Click(css(fmt.Sprintf("#rule-%d", i))))
		if len(cited) == 0 {
			continue
		}
		s = waitState(b, "rule "+v.RuleID+"'s page", func(s pageState) bool {
			// The page of this rule, not the last one's.
			return s.Loaded && strings.Contains(s.Title, "northwind-msa.pdf · page "+page+" of") && sameSet(s.Marks, cited)
		})
		for _, id := range cited {
			if !strings.Contains(" "+strings.Join(s.Boxes, " ")+" ", " "+id+" ") {
				t.Errorf("rule %s: passage %s is not boxed on page %s (boxes %v)", v.RuleID, id, page, s.Boxes)
			}
		}
		shown++
	}
	if shown < 4 {
		t.Errorf("%d rules showed their evidence boxed on the PDF's page; the demo's contract has 5 rules citing it", shown)
	}

	// Keyboard: k, k back to the top... then override liability-cap with o.
	liability := -1
	for i, v := range pdf.Result.Verdicts {
		if v.RuleID == "liability-cap" {
			liability = i
		}
	}
	run("select liability-cap", chromedp.Click(css(fmt.Sprintf("#rule-%d", liability))))
	run("press o", chromedp.KeyEvent("o"))
	focused := get(b, "read the focus", chromedp.Evaluate[string](`document.activeElement.id`))
	if focused != "outcome" {
		t.Errorf("after o, the focus is on %q, want the outcome", focused)
	}
	run("override", chromedp.SetValue(css("#outcome"), "pass"), chromedp.SendKeys(css("#note"), "The cap holds: <b>clause 9</b>."),
		chromedp.Click(css("#review-form button[type=submit]")))
	s = waitState(b, "the override's final outcome", func(s pageState) bool { return strings.Contains(s.Status, "Review saved") })
	if s.Final != "pass (by review)" {
		t.Errorf("final outcome shown %q, want pass (by review)", s.Final)
	}
	note := get(b, "read the note", chromedp.Text(css(".note")))
	if note != "The cap holds: <b>clause 9</b>." {
		t.Errorf("note shown %q", note)
	}
	after := waitCompleted(t, public, acme, "review-pdf")
	if f := after.Result.Verdicts[liability].Final; f.Source != "review" || f.Outcome != "pass" {
		t.Errorf("liability-cap final through the API: %+v", f)
	}
	// j and k move between rules.
	run("press k", chromedp.KeyEvent("k"))
	focused = get(b, "read the focus", chromedp.Evaluate[string](`document.activeElement.id`))
	if focused != fmt.Sprintf("rule-%d", liability-1) {
		t.Errorf("after k, the focus is on %q", focused)
	}

	// The screenshot of the README: the governing-law rule beside its page.
	run("select governing-law", chromedp.EmulateViewport(1280, 800), chromedp.Click(css("#rule-0")))
	waitState(b, "governing-law's page", func(s pageState) bool { return s.Loaded && len(s.Boxes) > 0 })
	get(b, "scroll to the top", chromedp.Evaluate[int](`window.scrollTo(0, 0), 0`))
	shot := get(b, "screenshot", chromedp.CaptureScreenshot())
	if os.Getenv(envScreenshot) == "1" {
		if err := os.WriteFile("../../docs/review-page.png", shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A document's markup is shown as text, never run.
	run("open the markup validation", chromedp.Navigate(public+"/review/validations/review-markup"))
	s = waitState(b, "the markup document's page", func(s pageState) bool { return len(s.Marks) > 0 })
	pageText := get(b, "read the markup page", chromedp.Text(css("#page-view pre")))
	rationale := get(b, "read the rationale", chromedp.Text(css("#rationale")))
	pwned := get(b, "look for the script's mark", chromedp.Evaluate[bool](`window.pwned !== undefined`))
	if !strings.Contains(pageText, "<script>window.pwned = 1</script>") || !strings.Contains(rationale, "<script>") || pwned || s.Scripts != 0 {
		t.Errorf("markup: page text %q, rationale %q, script ran %v, elements made of it %d", pageText, rationale, pwned, s.Scripts)
	}

	// 50 pages: the page cited (37) shows, its passage boxed, in under 2 s.
	run("back to the queue", chromedp.Navigate(public+"/review/queue"), chromedp.WaitVisible(css("#queue tbody tr")))
	start = time.Now()
	run("open the 50-page validation", chromedp.Navigate(public+"/review/validations/review-long"))
	waitState(b, "page 37 of the long PDF", func(s pageState) bool {
		return s.Loaded && len(s.Boxes) > 0 && strings.Contains(s.Title, "page 37 of 50")
	})
	took := time.Since(start)
	t.Logf("a 50-page PDF: its cited page 37 shown, boxed, %v after opening the validation", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("a 50-page PDF's cited page took %v to show, over 2 s", took)
	}

	// Another tenant's token sees none of it.
	run("sign out", chromedp.Click(css("#signout")), chromedp.WaitVisible(css("#token")))
	run("sign in as globex", chromedp.SendKeys(css("#token"), globex), chromedp.Click(css("#signin-form button")), chromedp.WaitVisible(css("#queue")))
	waitState(b, "globex's empty queue", func(s pageState) bool { return s.Status == "Nothing waits for review." })
	run("open acme's validation", chromedp.Navigate(public+"/review/validations/review-pdf"))
	s = waitState(b, "acme's validation refused", func(s pageState) bool { return strings.Contains(s.Status, "cannot be read") })
	rules := get(b, "count the rules", chromedp.Evaluate[int](`document.querySelectorAll('#rules li').length`))
	if rules != 0 || len(s.Boxes) != 0 {
		t.Errorf("globex sees %d rules and %d boxes of acme's validation", rules, len(s.Boxes))
	}
	for _, path := range []string{"/v1/validations/review-pdf/documents/1/pages/1", "/v1/validations/review-pdf/documents/1/pages/1.png"} {
		if code, _, _ := httpDo(t, http.MethodGet, public+path, globex, nil); code != http.StatusNotFound {
			t.Errorf("globex GET %s: %d, want 404", path, code)
		}
	}
	// The token is in no URL the page went to, and not in its HTML.
	html := get(b, "read the HTML", chromedp.OuterHTML(css("html")))
	if strings.Contains(html, globex) || strings.Contains(html, acme) {
		t.Error("a token is in the page's HTML")
	}
	if strings.Contains(p.logText(), acme[len(acme)-20:]) {
		t.Error("a token is in the service's log")
	}
}

// sameSet says whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
