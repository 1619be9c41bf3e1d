package bench

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"rulevalidator/engine"
	"rulevalidator/internal/docfixture"
	"rulevalidator/internal/pdftest"
	"rulevalidator/internal/synthdoc"
	"rulevalidator/judging"
	"rulevalidator/producer"
	"rulevalidator/registry"
	"rulevalidator/schemas"
)

// documentPages is the length of the agreement of BenchmarkDocumentRequest.
const documentPages = 50

// BenchmarkDocumentRequest is one request from its record to its encoded events (decode,
// read the documents, judge with the scripted model, encode), as BenchmarkHandleCPU, with a
// 50-page agreement (the example's three pages and 47 generated ones of about 2.5 KB) given
// as text (pages) and as a PDF made of that text by LibreOffice (data). The model is the
// scripted one, answering at once in one call, so the difference is reading the PDF.
//
//	go test -run '^$' -bench DocumentRequest -benchtime 20x ./bench
func BenchmarkDocumentRequest(b *testing.B) {
	f := &fixture{bootstrap: "127.0.0.1:9", requests: "requests", verdicts: "verdicts", summaries: "summaries", deadLetters: "deadletter"}
	f.load(b)
	pages := append(slices.Clone(f.inputs.PrimaryDocs[0].Pages), synthdoc.Pages(documentPages-len(f.inputs.PrimaryDocs[0].Pages), 2500, 7)...)
	pdf := docfixture.One(b, docfixture.PDF, pages...)
	reader := pdftest.Reader(b)
	for _, tc := range []struct {
		name string
		doc  schemas.Document
	}{
		{"text", schemas.Document{Name: f.inputs.PrimaryDocs[0].Name, Pages: pages}},
		{"pdf", schemas.Document{Name: f.inputs.PrimaryDocs[0].Name, Data: pdf}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			model := &scriptedModel{answer: exampleAnswer}
			// The whole agreement in one call, as a long-context model takes it.
			eng, err := engine.New(model, engine.Config{Model: "bench-model", ContextTokens: 400_000})
			if err != nil {
				b.Fatal(err)
			}
			rulesets, err := registry.NewDir(f.rulesetsDir, registry.DirOptions{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			judge, err := judging.New(judging.Config{Engine: eng, Rulesets: rulesets, Documents: reader})
			if err != nil {
				b.Fatal(err)
			}
			prod, err := producer.New(context.Background(), producer.Config{Client: f.client(b), VerdictTopic: f.verdicts,
				SummaryTopic: f.summaries, DeadLetterTopic: f.deadLetters, Logger: slog.New(slog.DiscardHandler)}, f.serde)
			if err != nil {
				b.Fatal(err)
			}
			defer prod.Close()
			req := f.request("doc")
			req.PrimaryDocs = []schemas.Document{tc.doc}
			value, headers, err := f.serde.Encode(f.requests, req)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			var judged int64
			for b.Loop() {
				judged++
				ev, err := f.serde.Decode(ctx, f.requests, value, headers)
				if err != nil {
					b.Fatal(err)
				}
				out, release, err := judge.Judge(ctx, ev.(*schemas.Request), time.Now())
				release()
				if err != nil {
					b.Fatal(err)
				}
				if out.Summary.Status != schemas.StatusCompleted {
					b.Fatalf("summary %+v", out.Summary)
				}
				if _, err := prod.Encode(ctx, producer.Result{Verdicts: out.Verdicts, Summary: out.Summary}); err != nil {
					b.Fatal(err)
				}
			}
			model.requireOneCallPerRequest(b, judged)
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(judged), "ms/request")
			b.ReportMetric(float64(len(value))/1024, "KB-record")
		})
	}
}
