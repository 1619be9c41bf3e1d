package pipeline

import (
	"context"

	"rulevalidator/consumer"
)

// costPerRecordByte is what handling a request holds in memory per byte of
// its record while it waits for the model: the record itself (kept for a
// dead letter), the request decoded from it (Avro strings are copies) and
// the user prompt rendered from its inputs. BenchmarkInFlightMemory in bench/
// measures it: about 3.1 with a 1 MB document.
const costPerRecordByte = 3

// Cost is what handling m holds in memory, for consumer.Config.Cost: the
// bound on the bytes in flight then bounds the heap, not only the records.
func Cost(m *consumer.Message) int64 { return costPerRecordByte * consumer.Size(m) }

// costPerDocumentByte is what reading a claim-checked document holds in
// memory per byte of its object, the same three shares as an inline one's
// in its record: the downloaded file, its pages of text (as large as the
// file for text, smaller for most PDFs and DOCX files) and the prompt
// rendered from them. PDFium's own memory is bounded apart, by the number of
// PDF engines.
const costPerDocumentByte = 3

// documentCost is what a claim-checked document of size bytes holds.
func documentCost(size int64) int64 { return costPerDocumentByte * size }

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
