package pipeline

import (
	"context"

	"rulevalidator/consumer"
	"rulevalidator/engine"
)

// What judging a request holds in memory per byte of its material while it
// waits for the model, in hundredths, by evidence mode. Quote mode: the
// record itself (kept for a dead letter), the request decoded from it (Avro
// strings are copies) and the user prompt rendered from its inputs, a little
// over three shares. Cite mode adds the passages the material is cut into (a
// sentence each, with its id and place) and their ids again in the prompt
// and in the answer's schema. BenchmarkInFlightMemory in bench/ measures
// them (x-record, per mode and document type; 3.1 and 4.3 with a 1 MB text
// document) and fails when a request holds more than this counts. A call's
// prompt is the request's, not a copy (engine.withRules), so a request of
// several calls costs the same.
const (
	quoteCostPerByte = 350
	citeCostPerByte  = 500
)

// costOf is what n bytes of material cost in mode (cite when empty, the
// engine's default).
func costOf(mode engine.EvidenceMode, n int64) int64 {
	per := int64(citeCostPerByte)
	if mode == engine.EvidenceQuote {
		per = quoteCostPerByte
	}
	return per * n / 100
}

// Cost is what handling a message holds in memory when the engine gives
// evidence in mode, for consumer.Config.Cost: the bound on the bytes in
// flight then bounds the heap, not only the records. A document file
// reserves, once read, what its text costs beyond its size (a DOCX, a
// compressed PDF) and the file's size again: it is kept besides its text
// (readDocument).
func Cost(mode engine.EvidenceMode) func(m *consumer.Message) int64 {
	return func(m *consumer.Message) int64 { return costOf(mode, consumer.Size(m)) }
}

// documentCost is what a claim-checked document of size bytes holds: the
// same shares as an inline one's in its record (the downloaded file in the
// record's place, its pages of text in the decoded request's). PDFium's own
// memory is bounded apart, by the number of PDF engines.
func (p *Pipeline) documentCost(size int64) int64 { return costOf(p.cfg.Evidence, size) }

// holds are the bytes in flight one attempt reserved for the documents it
// downloaded (consumer.Reserve), given back when the attempt lets go of the
// documents: a retry downloads them again and reserves again.
type holds struct{ releases []func() }

// reserve reserves n bytes for the message ctx belongs to, waiting until
// they fit.
func (h *holds) reserve(ctx context.Context, n int64) error {
	release, err := consumer.Reserve(ctx, n)
	if err != nil {
		return err
	}
	h.releases = append(h.releases, release)
	return nil
}

func (h *holds) release() {
	for _, release := range h.releases {
		release()
	}
	h.releases = nil
}
