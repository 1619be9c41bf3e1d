package docread_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"rulevalidator/docread"
	"rulevalidator/internal/docfixture"
	"rulevalidator/internal/synthdoc"
)

// BenchmarkReadPDF reads a 300-page PDF (a generated services agreement of
// about 2.5 KB a page, laid out by LibreOffice) again and again: pages/s,
// the process's peak RSS (VmHWM) and its RSS after the first read and after
// the last, which stay level when memory does not grow with the pages read.
//
//	go test -run '^$' -bench ReadPDF -benchtime 10x ./docread
func BenchmarkReadPDF(b *testing.B) {
	const pages = 300
	pdf := docfixture.One(b, docfixture.PDF, synthdoc.Pages(pages, 2500, 1)...)
	r := newReader(b, docread.Config{PDFEngines: 1})
	ctx := context.Background()
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	var first, last int
	n := 0
	for b.Loop() {
		doc, err := r.Read(ctx, docread.Source{Name: "msa.pdf", Data: pdf})
		if err != nil {
			b.Fatal(err)
		}
		if len(doc.Pages) != pages {
			b.Fatalf("%d pages, want %d", len(doc.Pages), pages)
		}
		n++
		if n == 1 {
			first = procStatus(b, "VmRSS")
		}
	}
	last = procStatus(b, "VmRSS")
	b.ReportMetric(float64(n*pages)/b.Elapsed().Seconds(), "pages/s")
	b.ReportMetric(float64(len(pdf))/(1<<20), "MB-pdf")
	b.ReportMetric(float64(procStatus(b, "VmHWM"))/1024, "MB-peak-RSS")
	b.ReportMetric(float64(first)/1024, "MB-RSS-after-first")
	b.ReportMetric(float64(last)/1024, "MB-RSS-after-last")
}

// procStatus is a kB field of /proc/self/status.
func procStatus(b *testing.B, field string) int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}
