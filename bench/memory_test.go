package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rulevalidator/consumer"
	"rulevalidator/engine"
	"rulevalidator/engine/openai"
	"rulevalidator/internal/llmfake"
	"rulevalidator/internal/synthdoc"
	"rulevalidator/pipeline"
	"rulevalidator/producer"
	"rulevalidator/registry"
	"rulevalidator/schemas"
	"rulevalidator/stream"
)

// encodeOnly is a Publisher that encodes the events and writes them nowhere.
type encodeOnly struct{ *producer.Producer }

func (encodeOnly) Write(context.Context, []stream.Record) error { return nil }

// BenchmarkInFlightMemory measures what requests with a large document cost
// in memory on the path `serve` runs, record to encoded events: Avro decode,
// pipeline, engine, prompt, the OpenAI client's HTTP call to a scripted model
// (a real loopback server that keeps nothing of the prompts). Each iteration
// takes inFlight requests at once and holds their model calls until all of
// them are waiting, as at --concurrency with a slow model, then lets them
// finish. Reported:
//
//   - live-B/req: heap held per request while it waits for the model, beyond
//     its record (which the consumer holds anyway), after a collection;
//   - x-record: live-B/req over the record's size;
//   - kept-B/req: heap still held per request once it is done (the result
//     cache's share);
//   - alloc-B/req: bytes allocated per request from record to events.
//
// BENCH_HEAPPROFILE=FILE writes heap profiles taken while the requests wait,
// FILE.whole-document and FILE.planned (go tool pprof -sample_index=inuse_space).
//
//	go test -run '^$' -bench InFlightMemory -benchtime 3x ./bench
func BenchmarkInFlightMemory(b *testing.B) {
	for _, tc := range []struct {
		name          string
		contextTokens int
	}{
		{"whole-document", 400_000}, // one call holds the document
		{"planned", 8192},           // several calls on excerpts
	} {
		b.Run(tc.name, func(b *testing.B) { inFlightMemory(b, tc.name, tc.contextTokens) })
	}
}

func inFlightMemory(b *testing.B, name string, contextTokens int) {
	profile := os.Getenv("BENCH_HEAPPROFILE")
	if profile != "" {
		runtime.MemProfileRate = 4096 // precise enough to name every large holder
		profile += "." + name
	}
	const (
		inFlight = 16
		docBytes = 1_000_000
	)
	f := &fixture{bootstrap: "127.0.0.1:9", requests: "requests", verdicts: "verdicts", summaries: "summaries", deadLetters: "deadletter"}
	f.load(b)
	quiet := slog.New(slog.DiscardHandler)

	var (
		mu      sync.Mutex
		hold    chan struct{}
		arrived atomic.Int32
	)
	fake := llmfake.New()
	defer fake.Close()
	fake.Forget()
	fake.Answer(func(r llmfake.Call) llmfake.Reply {
		reply := llmfake.Verdicts(r)
		mu.Lock()
		reply.Hold = hold
		mu.Unlock()
		arrived.Add(1)
		return reply
	})
	llm, err := openai.New(openai.Config{BaseURL: fake.URL(), Model: "bench-model", Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	// One call of a request at a time: inFlight calls waiting are inFlight requests waiting.
	eng, err := engine.New(llm, engine.Config{Model: "bench-model", ContextTokens: contextTokens,
		CallConcurrency: 1, Instructions: engine.InstructionsSystem, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	rulesets, err := registry.NewDir(f.rulesetsDir, registry.DirOptions{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	prod, err := producer.New(context.Background(), producer.Config{Client: f.client(b), VerdictTopic: f.verdicts,
		SummaryTopic: f.summaries, DeadLetterTopic: f.deadLetters, Logger: quiet}, f.serde)
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	pipe, err := pipeline.New(pipeline.Config{Engine: eng, Rulesets: rulesets, Serde: f.serde,
		Publisher: encodeOnly{prod}, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}

	doc := schemas.Document{Name: "contract.pdf", Pages: synthdoc.Pages(docBytes/4000, 4000, 1)}
	records := func(iter int) []*consumer.Message {
		msgs := make([]*consumer.Message, inFlight)
		for i := range msgs {
			req := f.request(fmt.Sprintf("mem-%d-%d", iter, i))
			req.PrimaryDocs = []schemas.Document{doc}
			value, sh, err := f.serde.Encode(f.requests, req)
			if err != nil {
				b.Fatal(err)
			}
			headers := make([]stream.Header, len(sh))
			for j, h := range sh {
				headers[j] = stream.Header{Key: h.Key, Value: h.Value}
			}
			msgs[i] = &consumer.Message{Topic: f.requests, Partition: i % partitions, Offset: int64(iter),
				Key: []byte(req.RequestID), Value: value, Headers: headers}
		}
		return msgs
	}
	doc.Pages = append([]string(nil), doc.Pages...) // the records are built; the benchmark keeps no document

	var live, kept, recordBytes float64
	var allocated uint64
	iter := 0
	for b.Loop() {
		b.StopTimer()
		empty := heapAfterGC()
		msgs := records(iter)
		iter++
		recordBytes = float64(len(msgs[0].Value))
		mu.Lock()
		hold = make(chan struct{})
		mu.Unlock()
		arrived.Store(0)
		base := heapAfterGC()
		before := totalAlloc()
		b.StartTimer()

		errs := make(chan error, inFlight)
		for _, m := range msgs {
			go func() { errs <- pipe.Handle(context.Background(), m) }()
		}
		msgs = nil
		deadline := time.Now().Add(2 * time.Minute)
		for arrived.Load() < inFlight {
			if time.Now().After(deadline) {
				b.Fatalf("only %d of %d requests reached the model", arrived.Load(), inFlight)
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.StopTimer()
		held := heapAfterGC()
		live = (float64(held) - float64(base)) / inFlight
		if profile != "" && iter == 1 {
			writeHeapProfile(b, profile)
		}
		b.StartTimer()
		close(hold)
		for range inFlight {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		allocated += totalAlloc() - before
		kept = (float64(heapAfterGC()) - float64(empty)) / inFlight
		b.StartTimer()
	}
	// Each Handle's own record is counted in base: live is what it holds
	// beyond the record.
	b.ReportMetric(live, "live-B/req")
	b.ReportMetric(live/recordBytes, "x-record")
	b.ReportMetric(recordBytes, "record-B")
	b.ReportMetric(kept, "kept-B/req")
	b.ReportMetric(float64(allocated)/float64(iter*inFlight), "alloc-B/req")
}

// heapAfterGC is the live heap after a full collection.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

func writeHeapProfile(b *testing.B, path string) {
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	if err := pprof.Lookup("heap").WriteTo(out, 0); err != nil {
		b.Fatal(err)
	}
}
