package judging

import (
	"context"
	"fmt"

	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/schemas"
)

// This file reads a request's documents: inline files, and claim checks stat'ed, made room
// for (Config.Reserve) and downloaded (Config.Objects), all into pages in the request
// (schemas.Request.ResolveDocuments), at the cost in memory MaterialCost counts.

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

// MaterialCost is what n bytes of material (a request's record, or a document's file or
// text) hold in memory while the request is judged with the engine giving evidence in mode
// (cite when empty, the engine's default). Serve's consumer counts each message by it
// (pipeline.Cost), and Judge reserves by it for the claim-checked documents it downloads.
func MaterialCost(mode engine.EvidenceMode, n int64) int64 {
	per := int64(citeCostPerByte)
	if mode == engine.EvidenceQuote {
		per = quoteCostPerByte
	}
	return per * n / 100
}

// documentCost is what a claim-checked document of size bytes holds: the
// same shares as an inline one's in its record (the downloaded file in the
// record's place, its pages of text in the decoded request's). PDFium's own
// memory is bounded apart, by the number of PDF engines.
func (j *Judge) documentCost(size int64) int64 { return MaterialCost(j.cfg.Evidence, size) }

// holds are the bytes one attempt reserved for the documents it read (Config.Reserve),
// given back when the attempt lets go of the documents: a retry reads them again and
// reserves again.
type holds struct {
	take     Reserver
	releases []func()
}

// reserve reserves n bytes, waiting until they fit.
func (h *holds) reserve(ctx context.Context, n int64) error {
	release, err := h.take(ctx, n)
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

// read is what reading a request's documents found besides their pages: the media types of
// those read from files, by name, and the PDF files, as they came.
type read struct {
	mediaTypes map[string]string
	files      []File
}

// readDocuments reads req's documents given as files (data) or by claim-check uri into their
// pages, in req, having made room in held for the claim-checked ones before any is
// downloaded.
func (j *Judge) readDocuments(ctx context.Context, req *schemas.Request, held *holds) (read, error) {
	out := read{mediaTypes: map[string]string{}}
	stats, err := j.statClaimChecks(ctx, req, held)
	if err != nil {
		return out, err
	}
	err = req.ResolveDocuments(ctx, func(ctx context.Context, doc schemas.Document) ([]string, error) {
		pages, mediaType, err := j.readDocument(ctx, req.TenantID, doc, held, stats, &out.files)
		out.mediaTypes[doc.Name] = mediaType
		return pages, err
	})
	return out, err
}

// readDocument reads a document given as a file (data) or by a claim-check
// uri into its pages: a PDF's pages, a DOCX's pages between page breaks, or
// UTF-8 text whose pages are separated by form feeds (what pdftotext writes);
// the media type is content_type, else sniffed.
//
// An inline file is in the record, already counted in the bytes in flight;
// a claim-checked one was stat'ed and reserved for by statClaimChecks.
func (j *Judge) readDocument(ctx context.Context, tenant string, doc schemas.Document, held *holds, stats map[claimKey]claimStat, files *[]File) (pages []string, mediaType string, err error) {
	data := doc.Data
	if data == nil {
		if j.cfg.Objects == nil {
			return nil, "", fmt.Errorf("%w: documents by uri are not enabled (no object storage configured)", engine.ErrInvalidInput)
		}
		st, ok := stats[claimKey{*doc.URI, doc.Name}]
		if !ok { // cannot happen: statClaimChecks saw every document resolved by uri
			st = j.statClaimCheck(ctx, tenant, doc)
			if st.err == nil {
				if err := held.reserve(ctx, j.documentCost(st.size)); err != nil {
					return nil, "", err
				}
			}
		}
		if st.err != nil {
			return nil, "", st.err
		}
		var err error
		if data, err = j.cfg.Objects.GetClaim(ctx, tenant, *doc.URI); err != nil {
			return nil, "", err
		}
		// Replaced since the stat by a larger object: count what was read.
		if n := int64(len(data)); n > st.size {
			if err := held.reserve(ctx, j.documentCost(n-st.size)); err != nil {
				return nil, "", err
			}
		}
	}
	read, err := j.cfg.Documents.Read(ctx, docread.Source{Name: doc.Name, Data: data, MediaType: deref(doc.ContentType)})
	if err != nil {
		return nil, "", err
	}
	// The file was counted as if it were the text (in its record, or
	// reserved from its size). What is made of the text is counted by the
	// text's size (a DOCX or a compressed PDF holds several times its file
	// in text), and the file, kept besides its text, once more.
	text := 0
	for _, page := range read.Pages {
		text += len(page)
	}
	extra := int64(len(data)) + max(0, j.documentCost(int64(text))-j.documentCost(int64(len(data))))
	if err := held.reserve(ctx, extra); err != nil {
		return nil, "", err
	}
	if len(read.ImageOnly) > 0 {
		j.cfg.Logger.WarnContext(ctx, "document read without the text of its pages that are only an image (OCR is not done)",
			"document", doc.Name, "media_type", read.MediaType, "pages", read.ImageOnly)
	}
	if read.MediaType == docread.PDF {
		*files = append(*files, File{Name: doc.Name, MediaType: read.MediaType, Data: data})
	}
	return read.Pages, read.MediaType, nil
}

// claimKey names a claim-checked document: its object, and its name in the
// request (which its refusal quotes).
type claimKey struct{ uri, name string }

// claimStat is what the stat of a claim-checked document found: its size, or
// why it is not read (storage failing, missing, too large).
type claimStat struct {
	size int64
	err  error
}

// statClaimChecks stats every claim-checked document of req before any is
// downloaded and reserves their documentCost in held in one wait, so that a
// request never waits for room while it holds documents already read. It
// stops at the first document that cannot be read, whose error readDocument
// returns when ResolveDocuments comes to it, naming it; those after it are
// never read.
func (j *Judge) statClaimChecks(ctx context.Context, req *schemas.Request, held *holds) (map[claimKey]claimStat, error) {
	stats := map[claimKey]claimStat{}
	if j.cfg.Objects == nil {
		return stats, nil
	}
	var total int64
	for _, d := range req.ClaimChecks() {
		k := claimKey{*d.URI, d.Name}
		st, seen := stats[k]
		if !seen {
			st = j.statClaimCheck(ctx, req.TenantID, d)
			stats[k] = st
		}
		if st.err != nil {
			break
		}
		total += j.documentCost(st.size) // each time it is read
	}
	if total > 0 {
		if err := held.reserve(ctx, total); err != nil {
			return nil, fmt.Errorf("making room for the request's claim-checked documents: %w", err)
		}
	}
	return stats, nil
}

// statClaimCheck stats one claim-checked document, refusing it from its size
// when it is over the reader's limit.
func (j *Judge) statClaimCheck(ctx context.Context, tenant string, doc schemas.Document) claimStat {
	size, err := j.cfg.Objects.ClaimSize(ctx, tenant, *doc.URI)
	if err != nil {
		return claimStat{err: err}
	}
	if err := j.cfg.Documents.CheckSize(doc.Name, size); err != nil {
		return claimStat{err: err}
	}
	return claimStat{size: size}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
