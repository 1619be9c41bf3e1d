package api

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"rulevalidator/docread"
	"rulevalidator/internal/docfixture"
	"rulevalidator/internal/pdftest"
)

// startingReader is a reader whose PDF engine never finishes compiling.
type startingReader struct{}

func (startingReader) Read(ctx context.Context, src docread.Source) (*docread.Document, error) {
	<-ctx.Done()
	return nil, fmt.Errorf("%w: %w", docread.ErrEngineStarting, ctx.Err())
}

// A document arriving while the PDF engine still compiles is answered 503
// with Retry-After: the service is not ready, and the document is not too
// large or unreadable.
func TestSubmitWhileTheEngineStarts(t *testing.T) {
	id := newIdentity(t)
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier, Internal: internalVerifier(t), Documents: startingReader{},
		RequestTimeout: 200 * time.Millisecond})
	body := `{"inline_ruleset":{"id":"contract-check","rules":[{"rule_id":"signed","type":"boolean","rule_text":"Is the contract signed?"}]},` +
		`"primary_docs":[{"name":"contract.pdf","data":"` + base64.StdEncoding.EncodeToString(docfixture.ImagePDF("t")) + `"}]}`
	r := call(t, http.MethodPost, ts.URL+"/v1/validations", id.token(t, "acme"), []byte(body))
	if r.status != http.StatusServiceUnavailable || r.errorCode() != CodeUnavailable || r.header.Get("Retry-After") == "" ||
		!strings.Contains(r.errorMessage(), "PDF engine is still starting") {
		t.Fatalf("got %s (Retry-After %q), want 503 %s saying the PDF engine is starting, with Retry-After", r, r.header.Get("Retry-After"), CodeUnavailable)
	}
	if n := len(runner.requests()); n != 0 {
		t.Fatalf("%d requests queued, want none", n)
	}
}

// A submission carrying a document that cannot be read is answered 422
// naming the document, on both submission routes, and nothing is queued; a
// readable one is queued with its file as it came.
func TestSubmitUnreadableDocument(t *testing.T) {
	id := newIdentity(t)
	// The engine is compiled before the first request, as the service starts it.
	runner, ts := serveWithPipeline(t, Config{Verifier: id.verifier, Internal: internalVerifier(t), Documents: pdftest.Reader(t)})
	token := id.token(t, "acme")
	doc := func(name string, data []byte) string {
		return `"primary_docs":[{"name":"` + name + `","data":"` + base64.StdEncoding.EncodeToString(data) + `"}]`
	}
	ruleset := `"inline_ruleset":{"id":"contract-check","rules":[{"rule_id":"signed","type":"boolean","rule_text":"Is the contract signed?"}]}`
	for _, tc := range []struct {
		name, url, body, want string
	}{
		{"a scan", "/v1/validations", "{" + ruleset + "," + doc("scan.pdf", docfixture.ImagePDF("ii")) + "}",
			`primary_docs[0] ("scan.pdf"): document "scan.pdf" cannot be read (no text layer): 2 of its 2 pages are images without text (a scan?): page 1-2; OCR is not done`},
		{"a truncated PDF", "/v1/validations", "{" + ruleset + "," + doc("cut.pdf", docfixture.ImagePDF("tt")[:300]) + "}",
			`primary_docs[0] ("cut.pdf"): document "cut.pdf" cannot be read (corrupt or truncated): it is truncated`},
		{"not a DOCX, by the internal route", "/internal/execute-async",
			`{"job_id":"job-x","tenant_id":"acme","agent_config":{"type_config":{"rules":[{"rule_id":"signed","rule_text":"Is it signed?"}]}},"inputs":{` +
				doc("nda.docx", []byte("PK\x03\x04 junk")) + `}}`,
			`primary_docs[0] ("nda.docx"): document "nda.docx" cannot be read (not a DOCX)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bearer := token
			if strings.HasPrefix(tc.url, "/internal") {
				bearer = internalToken
			}
			r := call(t, http.MethodPost, ts.URL+tc.url, bearer, []byte(tc.body))
			if r.status != http.StatusUnprocessableEntity || r.errorCode() != CodeUnreadable || !strings.Contains(r.errorMessage(), tc.want) {
				t.Errorf("got %s, want 422 %s naming %q", r, CodeUnreadable, tc.want)
			}
		})
	}
	if n := len(runner.requests()); n != 0 {
		t.Fatalf("%d requests queued, want none", n)
	}

	pdf := docfixture.ImagePDF("t")
	r := call(t, http.MethodPost, ts.URL+"/v1/validations", token, []byte("{"+ruleset+","+doc("contract.pdf", pdf)+`,"request_id":"pdf-1"}`))
	if r.status != http.StatusAccepted {
		t.Fatalf("POST a readable PDF: %s", r)
	}
	seen := runner.requests()
	if len(seen) != 1 || len(seen[0].PrimaryDocs) != 1 || string(seen[0].PrimaryDocs[0].Data) != string(pdf) {
		t.Fatalf("queued %+v, want the PDF as it came", seen)
	}
}
