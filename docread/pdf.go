package docread

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/klippa-app/go-pdfium"
	"github.com/klippa-app/go-pdfium/enums"
	pdfiumerrors "github.com/klippa-app/go-pdfium/errors"
	"github.com/klippa-app/go-pdfium/references"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// pdfMemoryPages caps one PDFium instance's memory (64 KiB WebAssembly
// pages): 1 GiB, room for the largest document allowed and PDFium's own
// working memory. A document that needs more fails to open instead of
// taking the process's memory.
const pdfMemoryPages = 16384

// pdfEngines is a pool of PDFium instances on one wazero runtime. Each
// document gets a fresh instance (instantiating the compiled module takes
// milliseconds), so nothing of one document stays in memory for the next:
// memory is bounded by the pool's size and the largest document, never by
// how many pages were read before.
type pdfEngines struct {
	pool  pdfium.Pool
	cache wazero.CompilationCache
	// onClose replaces closing pool and cache, in tests of the start.
	onClose func()
}

func startPDFEngines(ctx context.Context, cfg Config) (*pdfEngines, error) {
	start := time.Now()
	rc := wazero.NewRuntimeConfig().
		WithCoreFeatures(api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(pdfMemoryPages)
	var cache wazero.CompilationCache
	cacheDir, err := usableCacheDir(cfg)
	if err != nil {
		return nil, err
	}
	if cacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cacheDir)
		if err != nil {
			return nil, fmt.Errorf("docread: %w: %s: %w", ErrCacheDir, cacheDir, err)
		}
		cache = c
		rc = rc.WithCompilationCache(cache)
	}
	pool, err := webassembly.Init(webassembly.Config{
		Context:       context.WithoutCancel(ctx),
		MinIdle:       0,
		MaxIdle:       cfg.PDFEngines,
		MaxTotal:      cfg.PDFEngines,
		RuntimeConfig: rc,
		// No file system: documents are given as bytes, and PDFium reads
		// nothing else.
		FSConfig:     wazero.NewFSConfig(),
		Stdout:       io.Discard,
		Stderr:       io.Discard,
		ReuseWorkers: false,
	})
	if err != nil {
		if cache != nil {
			cache.Close(context.Background())
		}
		return nil, fmt.Errorf("docread: starting the PDF engine: %w", err)
	}
	cfg.Logger.Info("PDF engine ready", "engines", cfg.PDFEngines, "took", time.Since(start).Round(time.Millisecond), "cache_dir", cacheDir)
	return &pdfEngines{pool: pool, cache: cache}, nil
}

// usableCacheDir is the compilation cache directory to use: cfg.CacheDir
// once it is found writable, "" for none. It is checked before the compile:
// wazero makes the directory, but finds it cannot write there only once the
// compile, minutes on a loaded machine, is done. One that cannot be written
// is an error wrapping ErrCacheDir, or, when cfg.CacheDirOptional, no cache
// and a warning.
func usableCacheDir(cfg Config) (string, error) {
	if cfg.CacheDir == "" {
		return "", nil
	}
	err := CheckCacheDir(cfg.CacheDir)
	switch {
	case err == nil:
		return cfg.CacheDir, nil
	case cfg.CacheDirOptional:
		cfg.Logger.Warn("the PDF engine's cache directory cannot be written: it is compiled at every start; give it a writable cache directory to keep it",
			"cache_dir", cfg.CacheDir, "err", err)
		return "", nil
	}
	return "", err
}

func (e *pdfEngines) close() error {
	if e.onClose != nil {
		e.onClose()
		return nil
	}
	err := e.pool.Close()
	if e.cache != nil {
		err = errors.Join(err, e.cache.Close(context.Background()))
	}
	return err
}

// read extracts the text of every page of a PDF, in PDFium's order.
func (e *pdfEngines) read(ctx context.Context, name string, data []byte, maxPages int) (pages []string, imageOnly []int, err error) {
	if err := checkPDFEnd(name, data); err != nil {
		return nil, nil, err
	}
	inst, err := e.pool.GetInstanceWithContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("docread: no PDF engine: %w", err)
	}
	// The context ending stops PDFium where it is; the instance is then
	// thrown away, as every instance is after its document.
	stop := context.AfterFunc(ctx, func() { _ = inst.Kill() })
	defer func() {
		if stop() {
			_ = inst.Close()
		}
	}()
	pages, imageOnly, err = readPDF(inst, name, data, maxPages, ctx.Err)
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	return pages, imageOnly, err
}

// checkPDFEnd refuses a PDF cut short: every complete PDF ends with %%EOF
// (give or take a little trailing junk, which readers allow).
func checkPDFEnd(name string, data []byte) error {
	tail := data[max(0, len(data)-4096):]
	if !bytes.Contains(tail, []byte("%%EOF")) {
		return newError(name, ErrCorrupt, "it is truncated: it does not end with %%%%EOF (%d bytes)", len(data))
	}
	return nil
}

// readPDF reads every page. Pages that show an image and have no text are
// scanned pages: a document where they are at least half of the pages is
// refused (ErrNoText, naming them), since OCR is not done; fewer of them (a
// cover, a figure, a scanned signature page) are kept as pages without text
// and listed in imageOnly.
func readPDF(inst pdfium.Pdfium, name string, data []byte, maxPages int, stopped func() error) (pages []string, imageOnly []int, err error) {
	doc, err := inst.OpenDocument(&requests.OpenDocument{File: &data})
	if err != nil {
		return nil, nil, openError(name, err)
	}
	defer inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: doc.Document})
	count, err := inst.FPDF_GetPageCount(&requests.FPDF_GetPageCount{Document: doc.Document})
	if err != nil {
		return nil, nil, newError(name, ErrCorrupt, "its pages cannot be counted: %v", err)
	}
	switch {
	case count.PageCount == 0:
		return nil, nil, newError(name, ErrCorrupt, "it has no pages")
	case count.PageCount > maxPages:
		return nil, nil, newError(name, ErrTooManyPages, "it has %d pages, over the limit of %d", count.PageCount, maxPages)
	}
	pages = make([]string, count.PageCount)
	var scanned []int
	for i := range pages {
		if err := stopped(); err != nil {
			return nil, nil, err
		}
		text, images, err := readPDFPage(inst, doc.Document, i)
		if err != nil {
			return nil, nil, newError(name, ErrCorrupt, "page %d cannot be read: %v", i+1, err)
		}
		pages[i] = cleanText(text)
		if strings.TrimSpace(pages[i]) == "" && images {
			scanned = append(scanned, i+1)
		}
	}
	if len(scanned) > 0 && 2*len(scanned) >= len(pages) {
		return nil, nil, &Error{Document: name, Kind: ErrNoText, Pages: scanned, Detail: fmt.Sprintf(
			"%d of its %d pages are images without text (a scan?): page %s; OCR is not done, so give the document with a text layer",
			len(scanned), len(pages), pageList(scanned))}
	}
	return pages, scanned, nil
}

// readPDFPage is a page's text and whether, when it has none, it shows an
// image (a scanned page) rather than nothing (a blank page).
func readPDFPage(inst pdfium.Pdfium, doc references.FPDF_DOCUMENT, index int) (string, bool, error) {
	page, err := inst.FPDF_LoadPage(&requests.FPDF_LoadPage{Document: doc, Index: index})
	if err != nil {
		return "", false, err
	}
	defer inst.FPDF_ClosePage(&requests.FPDF_ClosePage{Page: page.Page})
	ref := requests.Page{ByReference: &page.Page}
	tp, err := inst.FPDFText_LoadPage(&requests.FPDFText_LoadPage{Page: ref})
	if err != nil {
		return "", false, err
	}
	defer inst.FPDFText_ClosePage(&requests.FPDFText_ClosePage{TextPage: tp.TextPage})
	n, err := inst.FPDFText_CountChars(&requests.FPDFText_CountChars{TextPage: tp.TextPage})
	if err != nil {
		return "", false, err
	}
	text := ""
	if n.Count > 0 {
		t, err := inst.FPDFText_GetText(&requests.FPDFText_GetText{TextPage: tp.TextPage, StartIndex: 0, Count: n.Count})
		if err != nil {
			return "", false, err
		}
		text = t.Text
	}
	if strings.TrimSpace(text) != "" {
		return text, false, nil
	}
	images, err := hasImage(inst, ref)
	return text, images, err
}

func hasImage(inst pdfium.Pdfium, page requests.Page) (bool, error) {
	objs, err := inst.FPDFPage_CountObjects(&requests.FPDFPage_CountObjects{Page: page})
	if err != nil {
		return false, err
	}
	for i := range objs.Count {
		obj, err := inst.FPDFPage_GetObject(&requests.FPDFPage_GetObject{Page: page, Index: i})
		if err != nil {
			return false, err
		}
		typ, err := inst.FPDFPageObj_GetType(&requests.FPDFPageObj_GetType{PageObject: obj.PageObject})
		if err != nil {
			return false, err
		}
		if typ.Type == enums.FPDF_PAGEOBJ_IMAGE {
			return true, nil
		}
	}
	return false, nil
}

// openError says why PDFium could not open a document.
func openError(name string, err error) error {
	switch {
	case errors.Is(err, pdfiumerrors.ErrPassword):
		return newError(name, ErrEncrypted, "it is encrypted with a password; give it decrypted")
	case errors.Is(err, pdfiumerrors.ErrSecurity):
		return newError(name, ErrEncrypted, "it is encrypted with a scheme that is not supported; give it decrypted")
	case errors.Is(err, pdfiumerrors.ErrFormat), errors.Is(err, pdfiumerrors.ErrFile):
		return newError(name, ErrCorrupt, "it is not a well-formed PDF (%v)", err)
	}
	return newError(name, ErrCorrupt, "PDFium cannot open it: %v", err)
}
