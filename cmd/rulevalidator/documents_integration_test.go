package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"rulevalidator/docread"
	"rulevalidator/internal/docfixture"
	"rulevalidator/internal/s3test"
	"rulevalidator/schemas"
)

// TestServeReadsDocumentFiles: on the real broker and object storage, requests whose agreement
// is a PDF sent inline (by produce from the demo's request too) or a DOCX behind a claim check
// are judged on the pages a reader sees;
// an encrypted PDF, a truncated one, a scan without text, a zip bomb, a DOCX that is not one
// and files over the page and byte limits are each dead-lettered once as unreadable_document, naming the document, with a failed summary; the requests
// behind them complete and everything is committed.
func TestServeReadsDocumentFiles(t *testing.T) {
	t.Parallel()
	e := newServeEnv(t, 1)
	store := s3test.Store(t)
	endpoint, accessKey, secretKey := s3test.Endpoint(t)
	verdictLog := e.watch(t, e.verdicts, 1)
	summaryLog := e.watch(t, e.summaries, 1)
	deadLog := e.watch(t, e.deadLetters, 1)

	msa := exampleInputs(t).PrimaryDocs[0]
	files := docfixture.Make(t,
		docfixture.Doc{Pages: msa.Pages, Format: docfixture.PDF},
		docfixture.Doc{Pages: msa.Pages, Format: docfixture.DOCX},
		docfixture.Doc{Pages: []string{"locked"}, Format: docfixture.EncryptedPDF})
	pdf, docx, encrypted := files[0], files[1], files[2]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	put := func(key string, body []byte) string {
		info, err := store.Put(ctx, key, body, "application/octet-stream", nil)
		if err != nil {
			t.Fatal(err)
		}
		return info.URI
	}
	withFile := func(id string, d schemas.Document) *schemas.Request {
		req := exampleRequest(t, id)
		d.Name = msa.Name
		req.PrimaryDocs = []schemas.Document{d}
		return req
	}
	good := []string{"doc-pdf-inline", "doc-docx-uri", "doc-text"}
	unreadable := map[string]string{
		"doc-encrypted":  `document "northwind-msa.pdf" cannot be read (encrypted)`,
		"doc-scan":       `document "northwind-msa.pdf" cannot be read (no text layer): 2 of its 2 pages are images without text (a scan?): page 1-2; OCR is not done`,
		"doc-many-pages": `document "northwind-msa.pdf" cannot be read (over the page limit): it has 6 pages, over the limit of 5`,
		"doc-truncated":  `document "northwind-msa.pdf" cannot be read (corrupt or truncated): it is truncated`,
		"doc-zip-bomb":   `document "northwind-msa.pdf" cannot be read (zip bomb): its archive would expand to 1125899906842624 bytes`,
		"doc-not-docx":   `document "northwind-msa.pdf" cannot be read (not a DOCX): it is given as a DOCX but is not a zip archive`,
		"doc-too-big":    `document "northwind-msa.pdf" cannot be read (over the byte limit): it is 65536 bytes, over the limit of 60000 bytes`,
		// Refused from the object's size, before it is downloaded.
		"doc-too-big-uri": `document "northwind-msa.pdf" cannot be read (over the byte limit): it is 65536 bytes, over the limit of 60000 bytes`,
	}
	e.produceRequests(t,
		withFile("doc-pdf-inline", schemas.Document{Data: pdf}),
		withFile("doc-encrypted", schemas.Document{Data: encrypted, ContentType: ptr(docread.PDF)}),
		withFile("doc-docx-uri", schemas.Document{URI: ptr(put("claims/"+tenant+"/msa.docx", docx))}),
		withFile("doc-scan", schemas.Document{URI: ptr(put("claims/"+tenant+"/scan.pdf", docfixture.ImagePDF("ii"))), ContentType: ptr("application/pdf")}),
		withFile("doc-many-pages", schemas.Document{Data: docfixture.ImagePDF("tttttt")}),
		withFile("doc-truncated", schemas.Document{Data: pdf[:len(pdf)/2]}),
		withFile("doc-zip-bomb", schemas.Document{URI: ptr(put("claims/"+tenant+"/bomb.docx", docfixture.ZipBomb(1<<50)))}),
		withFile("doc-not-docx", schemas.Document{Data: []byte("plain words"), ContentType: ptr(docread.DOCX)}),
		withFile("doc-too-big", schemas.Document{Data: make([]byte, 65536)}),
		withFile("doc-too-big-uri", schemas.Document{URI: ptr(put("claims/"+tenant+"/big.pdf", make([]byte, 65536)))}),
		exampleRequest(t, "doc-text"),
	)
	// The demo's request, its agreement a PDF named by the file, sent by produce.
	if code, _, stderr := opRun(t, "produce", "--file", exampleRequestPDF, "--kafka-brokers", e.bootstrap, "--requests-topic", e.requests,
		"--request-id", "doc-produce-pdf", "--tenant", tenant); code != exitOK {
		t.Fatalf("produce: exit %d\n%s", code, stderr)
	}
	good = append(good, "doc-produce-pdf")
	e.startInProcess(t, "--document-max-pages", "5", "--document-max-bytes", "60000",
		"--s3-endpoint", endpoint, "--s3-access-key", accessKey, "--s3-secret-key", secretKey, "--s3-bucket", store.Bucket())

	waitUntil(t, waitLimit, "every summary", func() bool { return summaryLog.len() >= len(good)+len(unreadable) })
	waitUntil(t, waitLimit, "every dead letter", func() bool { return deadLog.len() >= len(unreadable) })
	waitUntil(t, waitLimit, "every verdict", func() bool { return verdictLog.len() >= len(good)*len(exampleRuleIDs) })
	e.waitCommittedToEnd(t)

	summaries := map[string]*schemas.SummaryEvent{}
	for _, m := range summaryLog.snapshot() {
		s := e.summary(t, m)
		if summaries[s.RequestID] != nil {
			t.Errorf("two summaries for %s", s.RequestID)
		}
		summaries[s.RequestID] = s
	}
	for _, id := range good {
		if s := summaries[id]; s == nil || s.Status != schemas.StatusCompleted {
			t.Errorf("%s: summary %s, want completed", id, jsonText(t, s))
		}
	}
	// The agreement's clauses are cited on the pages of the PDF and of the DOCX, as of its text.
	pages := map[string]map[string]int{}
	for _, m := range verdictLog.snapshot() {
		v := e.verdict(t, m)
		if pages[v.RequestID] == nil {
			pages[v.RequestID] = map[string]int{}
		}
		for _, ev := range v.Evidences {
			if ev.SourceOrigin == msa.Name && ev.Anchored {
				pages[v.RequestID][v.RuleID] = ev.SourcePageNumber
			}
		}
	}
	t.Logf("evidence pages by rule: %s", jsonText(t, pages))
	for _, id := range []string{"doc-pdf-inline", "doc-docx-uri", "doc-produce-pdf"} {
		if got, want := jsonText(t, pages[id]), jsonText(t, pages["doc-text"]); got != want || len(pages[id]) < 4 {
			t.Errorf("%s: evidence pages by rule %s, want those of the text %s", id, got, want)
		}
	}

	dead := map[string]*schemas.DeadLetter{}
	for _, m := range deadLog.snapshot() {
		dl := e.deadLetter(t, m)
		if dead[string(m.Key)] != nil {
			t.Errorf("%s dead-lettered twice", m.Key)
		}
		dead[string(m.Key)] = dl
	}
	for id, detail := range unreadable {
		dl, s := dead[id], summaries[id]
		switch {
		case dl == nil:
			t.Errorf("%s: not dead-lettered", id)
		case dl.Reason != schemas.ReasonUnreadableDocument || dl.Attempts != 1 || !strings.Contains(dl.Message, detail) || !strings.Contains(dl.Message, `primary_docs[0] ("northwind-msa.pdf")`):
			t.Errorf("%s: dead letter reason %s, attempts %d, message %q; want unreadable_document on the first attempt, naming %q", id, dl.Reason, dl.Attempts, dl.Message, detail)
		}
		if s == nil || s.Status != schemas.StatusFailed || s.Error == nil || s.Error.Code != schemas.ReasonUnreadableDocument || !strings.Contains(s.Error.Message, detail) {
			t.Errorf("%s: summary %s, want failed with unreadable_document", id, jsonText(t, s))
		}
	}
	// The produced request carries no ticket in its message.
	if seen := ticketsSeen(e.llm); len(seen) != len(good)-1 || !hasAll(seen, good[:len(good)-1]) {
		t.Errorf("the model saw %v, want only %v", seen, good)
	}
}
