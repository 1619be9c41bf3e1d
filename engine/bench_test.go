package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"rulevalidator/internal/tracing"
	"rulevalidator/verdict"
)

// instantLLM answers every call at once with the same content: the engine's
// own overhead is what remains. It counts its calls.
type instantLLM struct {
	content string
	calls   *atomic.Int64
}

func (l instantLLM) Chat(_ context.Context, req ChatRequest) (ChatResponse, error) {
	if l.calls != nil {
		l.calls.Add(1)
	}
	return ChatResponse{Content: l.content, Format: req.Format, Model: req.Model, Usage: verdict.Usage{PromptTokens: 1000, CompletionTokens: 300, LLMCalls: 1}}, nil
}

// benchDocument is about size bytes of varied English-like text in pages.
func benchDocument(size int) Document {
	words := strings.Fields("the supplier shall provide services under this agreement and the customer may terminate " +
		"for convenience on ninety days notice liability is limited to fees paid in the prior twelve months " +
		"except for breach of confidentiality data protection obligations apply to personal data processed " +
		"invoices are payable within thirty days late payments bear interest governing law is New York")
	r := rand.New(rand.NewPCG(1, 2))
	var pages []string
	var b strings.Builder
	for b.Len() < size {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
		if b.Len() > (len(pages)+1)*size/10 {
			pages = append(pages, b.String()[len(strings.Join(pages, "")):])
		}
	}
	if rest := b.String()[len(strings.Join(pages, "")):]; rest != "" {
		pages = append(pages, rest)
	}
	return Document{Name: "contract.txt", Pages: pages}
}

// BenchmarkEvaluate measures one request of 10 rules on a 100 KB document
// with an instant model: prompt building, answer checks, evidence resolution
// and aggregation. In quote mode, "verbatim": every quote is exact;
// "paraphrased": 3 quotes differ in case (normalised match) and 3 drop a word
// (fuzzy match), which makes the anchor build its indexes of the document. In
// cite mode, "cited": every evidence names a passage id, with the exact words
// inside it for half of them. Every answer passes every check: one model call
// per request, asserted.
func BenchmarkEvaluate(b *testing.B) {
	for _, c := range []struct {
		name        string
		mode        EvidenceMode
		paraphrased bool
	}{
		{"quote/verbatim", EvidenceQuote, false},
		{"quote/paraphrased", EvidenceQuote, true},
		{"cite/cited", EvidenceCite, false},
	} {
		b.Run(c.name, func(b *testing.B) { benchmarkEvaluate(b, c.mode, c.paraphrased, nil) })
	}
}

// BenchmarkEvaluateTracing is BenchmarkEvaluate's cite/cited request with the tracer
// provider serve gets from its OTEL_* variables: "off" none set (the no-op provider),
// "unsampled" the SDK with OTEL_TRACES_SAMPLER=always_off, "sampled" the SDK recording
// every span into a batch exporter that sends nowhere. The request runs in a span, as it
// does under the consumer's process span.
func BenchmarkEvaluateTracing(b *testing.B) {
	for _, mode := range []struct {
		name string
		tp   func() trace.TracerProvider
	}{
		{"off", tracing.Noop},
		{"unsampled", func() trace.TracerProvider {
			return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
		}},
		{"sampled", func() trace.TracerProvider {
			return sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			tp := mode.tp()
			if sdk, ok := tp.(*sdktrace.TracerProvider); ok {
				defer sdk.Shutdown(context.Background())
			}
			benchmarkEvaluate(b, EvidenceCite, false, tp)
		})
	}
}

func benchmarkEvaluate(b *testing.B, mode EvidenceMode, paraphrased bool, tp trace.TracerProvider) {
	doc := benchDocument(100 << 10)
	text := strings.Join(doc.Pages, "\f")
	rs := &Ruleset{ID: "bench"}
	in := &Inputs{PrimaryDocs: []Document{doc}}
	passages := segmentInputs(in).list
	var answers []map[string]any
	for i := range 10 {
		id := fmt.Sprintf("rule-%02d", i)
		typ := verdict.Boolean
		if i%3 == 0 {
			typ = verdict.Numerical
		}
		rs.Rules = append(rs.Rules, Rule{RuleID: id, RuleText: "Rule text number " + id, Type: typ,
			NumericalRuleConfig: &NumericalRuleConfig{PossibleScores: []int{1, 2, 3, 4, 5}}})
		if typ == verdict.Boolean {
			rs.Rules[i].NumericalRuleConfig = nil
		}
		at := (i*9973 + 5000) % (len(text) - 400)
		quote := strings.TrimSpace(strings.ReplaceAll(text[at:at+200], "\f", " "))
		switch {
		case !paraphrased:
		case i%3 == 1: // normalised: case and quote style differ
			quote = strings.ToUpper(quote[:1]) + quote[1:]
		case i%3 == 2: // fuzzy: a word dropped
			parts := strings.Fields(quote)
			quote = strings.Join(append(parts[:5:5], parts[6:]...), " ")
		}
		evidence := map[string]any{"text": quote, "source_origin": "contract.txt", "source_page_number": 1}
		if mode == EvidenceCite {
			p := passages[(i*37)%len(passages)]
			evidence = map[string]any{"passage_id": p.id, "quote": ""}
			if i%2 == 0 {
				evidence["quote"] = p.text[len(p.text)/4 : len(p.text)/2]
			}
		}
		a := map[string]any{"rule_id": id, "data_sufficiency": true, "rationale": "The cited clause decides this rule.", "not_applicable": false,
			"evidences": []map[string]any{evidence}}
		if typ == verdict.Numerical {
			a["numerical_output"] = 3
		} else {
			a["boolean_output"] = true
		}
		answers = append(answers, a)
	}
	if err := rs.Validate(); err != nil {
		b.Fatal(err)
	}
	content, _ := json.Marshal(map[string]any{"rules": answers})
	// A window that holds the whole request: one call, as the benchmark
	// has always measured.
	var calls atomic.Int64
	eng, err := New(instantLLM{content: string(content), calls: &calls}, Config{Model: "bench", ContextTokens: 1 << 20, Evidence: mode,
		TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if tp != nil {
		var span trace.Span
		ctx, span = tp.Tracer("bench").Start(ctx, "process requests")
		defer span.End()
	}
	res, err := eng.Evaluate(ctx, Task{Ruleset: rs, Inputs: in})
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range res.Rules {
		if !v.Evidences[0].Anchored {
			b.Fatalf("rule %s: evidence not anchored: %+v", v.RuleID, v.Evidences[0])
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	calls.Store(0)
	for b.Loop() {
		if _, err := eng.Evaluate(ctx, Task{Ruleset: rs, Inputs: in}); err != nil {
			b.Fatal(err)
		}
	}
	if n := calls.Load(); n != int64(b.N) {
		b.Fatalf("%d model calls for %d requests: an answer failed the checks and was re-asked", n, b.N)
	}
}
