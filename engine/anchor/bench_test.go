package anchor

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Benchmarks run on generated documents (see corpus) with 300-byte quotes
// taken from them: verbatim (exact); with straightened quotes and dashes,
// capitals, line breaks as doubled spaces and added quotation marks
// (normalized); paraphrased by two substituted words and one deleted
// (fuzzy); and drawn from the same vocabulary but not from the document
// (unanchored). Every benchmark reports the median and 99th percentile of
// per-call latency as p50-ns/op and p99-ns/op.

var benchSizes = []struct {
	name  string
	bytes int
}{{"100KB", 100 << 10}, {"1MB", 1 << 20}, {"4MB", 4 << 20}}

var benchPaths = []Method{Exact, Normalized, Fuzzy, "unanchored"}

type benchFixture struct {
	doc    Document
	quotes map[Method][]Quote
}

const benchQuotes = 64

func newBenchFixture(tb testing.TB, size int) benchFixture {
	tb.Helper()
	c := newCorpus(uint64(size))
	doc := Document{Name: "report.txt", Pages: c.document(size, 3000)}
	f := benchFixture{doc: doc, quotes: make(map[Method][]Quote)}
	for range benchQuotes {
		text, page := c.excerpt(doc.Pages, 300)
		f.quotes[Exact] = append(f.quotes[Exact], Quote{Text: text, Origin: doc.Name, Page: page})
		f.quotes[Normalized] = append(f.quotes[Normalized], Quote{Text: c.restyle(text), Origin: doc.Name, Page: page})
		f.quotes[Fuzzy] = append(f.quotes[Fuzzy], Quote{Text: c.paraphrase(text, 2, 1), Origin: doc.Name, Page: page})
		stray := c.text(400)
		stray = stray[:strings.LastIndexByte(stray[:300], ' ')]
		f.quotes["unanchored"] = append(f.quotes["unanchored"], Quote{Text: stray, Origin: doc.Name, Page: page})
	}
	// The benchmarks must measure the path they are named after.
	m, err := New([]Document{doc}, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	for path, qs := range f.quotes {
		for _, q := range qs {
			s, ok := m.Find(q)
			if got := map[bool]Method{true: s.Method, false: "unanchored"}[ok]; got != path {
				tb.Fatalf("%s quote %q matched %s (%q)", path, q.Text, got, s.Text)
			}
		}
	}
	return f
}

// reportLatency reports the median and 99th percentile of per-call times.
func reportLatency(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	at := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	b.ReportMetric(float64(at(0.50).Nanoseconds()), "p50-ns/op")
	b.ReportMetric(float64(at(0.99).Nanoseconds()), "p99-ns/op")
}

// BenchmarkFind measures anchoring with the document's indexes already
// built, as every quote after the first pays in a request.
func BenchmarkFind(b *testing.B) {
	fixtures := make([]benchFixture, len(benchSizes))
	matchers := make([]*Matcher, len(benchSizes))
	for i, size := range benchSizes {
		fixtures[i] = newBenchFixture(b, size.bytes)
		m, err := New([]Document{fixtures[i].doc}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		m.docs[0].shingleIndex()
		matchers[i] = m
	}
	for _, path := range benchPaths {
		for i, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%s", path, size.name), func(b *testing.B) {
				m, quotes := matchers[i], fixtures[i].quotes[path]
				times := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for n := range b.N {
					start := time.Now()
					m.Find(quotes[n%len(quotes)])
					times = append(times, time.Since(start))
				}
				b.StopTimer()
				reportLatency(b, times)
			})
		}
	}
}

// BenchmarkNewAndFind measures what a request with one quote pays: a fresh
// Matcher, the indexes its path builds, and the search.
func BenchmarkNewAndFind(b *testing.B) {
	for _, size := range benchSizes[:2] {
		f := newBenchFixture(b, size.bytes)
		for _, path := range benchPaths[:3] {
			b.Run(fmt.Sprintf("%s/%s", path, size.name), func(b *testing.B) {
				quotes := f.quotes[path]
				times := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for n := range b.N {
					start := time.Now()
					m, err := New([]Document{f.doc}, Options{})
					if err != nil {
						b.Fatal(err)
					}
					m.Find(quotes[n%len(quotes)])
					times = append(times, time.Since(start))
				}
				b.StopTimer()
				reportLatency(b, times)
			})
		}
	}
}

// BenchmarkIndex measures building each document index on its own.
func BenchmarkIndex(b *testing.B) {
	for _, size := range benchSizes {
		text := strings.Join(newCorpus(uint64(size.bytes)).document(size.bytes, 3000), "\f")
		norm := newNormalized(text)
		builds := []struct {
			name  string
			build func()
		}{
			{"runes", func() { newRuneIndex(text) }},
			{"normalize", func() { newNormalized(text) }},
			{"shingles", func() { newShingleIndex(norm.text) }},
		}
		for _, build := range builds {
			b.Run(fmt.Sprintf("%s/%s", build.name, size.name), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				times := make([]time.Duration, 0, b.N)
				for range b.N {
					start := time.Now()
					build.build()
					times = append(times, time.Since(start))
				}
				reportLatency(b, times)
			})
		}
	}
}

// BenchmarkFindShort measures short quotes (under MinFuzzyRunes) with a
// letter left out, which only the search for a unique fuzzy match can
// anchor: the verbatim searches fail, then every place holding the quote
// but one word is aligned. Most such quotes resemble several places in a
// large document and stay unanchored.
func BenchmarkFindShort(b *testing.B) {
	for _, size := range benchSizes {
		c := newCorpus(uint64(size.bytes) + 1)
		doc := Document{Name: "report.txt", Pages: c.document(size.bytes, 3000)}
		m, err := New([]Document{doc}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		m.docs[0].shingleIndex()
		var quotes []Quote
		for len(quotes) < benchQuotes {
			text, page := c.excerpt(doc.Pages, 14)
			if n := len(text); n >= 12 && n < defaultMinFuzzyRunes && strings.Count(text, " ") >= 1 {
				quotes = append(quotes, Quote{Text: text[:n-3] + text[n-2:], Origin: doc.Name, Page: page})
			}
		}
		b.Run(size.name, func(b *testing.B) {
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for n := range b.N {
				start := time.Now()
				m.Find(quotes[n%len(quotes)])
				times = append(times, time.Since(start))
			}
			b.StopTimer()
			reportLatency(b, times)
		})
	}
}
