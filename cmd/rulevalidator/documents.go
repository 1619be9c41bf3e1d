package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"rulevalidator/docread"
	"rulevalidator/engine"
	"rulevalidator/request"
	"rulevalidator/schemas"
)

// documentConfig is how a command reads documents given as files (PDF,
// DOCX, text): the settings of documentSettings, the same on serve,
// validate and eval.
type documentConfig struct {
	maxBytes   int
	maxPages   int
	pdfEngines int
	cacheDir   string
}

// pdfCacheOff turns the PDF engine's compilation cache off.
const pdfCacheOff = "none"

func (c *documentConfig) check() error {
	var errs []error
	if c.maxBytes < 1 {
		errs = append(errs, fmt.Errorf("--document-max-bytes: %d must be positive", c.maxBytes))
	}
	if c.maxPages < 1 {
		errs = append(errs, fmt.Errorf("--document-max-pages: %d must be positive", c.maxPages))
	}
	if c.pdfEngines < 1 {
		errs = append(errs, fmt.Errorf("--pdf-engines: %d must be at least 1", c.pdfEngines))
	}
	return errors.Join(errs...)
}

// cacheDirectory is where the PDF engine's compiled code is kept: the
// setting, else the user's cache directory; "" when it is off or there is
// no cache directory. optional is true for the default: where it cannot be
// written, the engine compiles in memory instead of failing to start.
func (c *documentConfig) cacheDirectory() (dir string, optional bool) {
	switch c.cacheDir {
	case pdfCacheOff:
		return "", false
	case "":
		return docread.DefaultCacheDir(), true
	}
	return c.cacheDir, false
}

// cacheDirFault says what to do about a cache directory the PDF engine
// cannot write (an error wrapping docread.ErrCacheDir): the environment's
// fault, not the input's.
func cacheDirFault(err error) string {
	return fmt.Sprintf("%v\nthe PDF engine's cache directory must be one this user can write: make it writable, or set --pdf-cache-dir (RULEVALIDATOR_PDF_CACHE_DIR) to a writable directory, or to %q to compile the engine at every start",
		err, pdfCacheOff)
}

// checkCacheDir checks that a cache directory set (not the default, which
// falls back to none) can be written, for a command that must say so before
// its documents are read: an error wrapping docread.ErrCacheDir.
func (c *documentConfig) checkCacheDir() error {
	dir, optional := c.cacheDirectory()
	if dir == "" || optional {
		return nil
	}
	return docread.CheckCacheDir(dir)
}

// documentFault says whether err, from readDocumentFiles, is the documents'
// fault (one that cannot be read, one by uri) rather than the reader's.
func documentFault(err error) bool {
	return errors.Is(err, docread.ErrUnreadable) || errors.Is(err, schemas.ErrUnresolvedURI)
}

// reader is the document reader of the settings; close it when done.
func (c *documentConfig) reader(logger *slog.Logger) (*docread.Reader, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	cacheDir, optional := c.cacheDirectory()
	return docread.New(docread.Config{
		MaxBytes:         int64(c.maxBytes),
		MaxPages:         c.maxPages,
		PDFEngines:       c.pdfEngines,
		CacheDir:         cacheDir,
		CacheDirOptional: optional,
		Logger:           logger,
	})
}

// readDocumentFiles reads the request's documents given as files into their
// pages with r, for the commands that judge without the service (validate,
// eval). A document by uri is left for the service, which reads object
// storage. mediaTypes, when not nil, receives each file's media type as
// read, by document name.
func readDocumentFiles(ctx context.Context, r *docread.Reader, req *schemas.Request, mediaTypes map[string]string) error {
	return req.ResolveDocuments(ctx, func(ctx context.Context, d schemas.Document) ([]string, error) {
		if d.Data == nil {
			return nil, fmt.Errorf("%w (documents by uri are read by the service from object storage; give the file here)", schemas.ErrUnresolvedURI)
		}
		ct := ""
		if d.ContentType != nil {
			ct = *d.ContentType
		}
		doc, err := r.Read(ctx, docread.Source{Name: d.Name, Data: d.Data, MediaType: ct})
		if err != nil {
			return nil, err
		}
		if mediaTypes != nil {
			mediaTypes[d.Name] = doc.MediaType
		}
		return doc.Pages, nil
	})
}

// readRequestFile reads a request in its JSON form (or, for validate, the inputs alone),
// from JSON or from YAML of the same structure, with the mapping the service applies
// (request.FromMap); documents that name a local file, and the --document files, are read
// into the request as the files themselves. path "" reads the --document files alone. It
// does not validate, as flags may still fill fields: the request comes back with what
// reading it found wrong, nil only when the file cannot be read as a request at all.
func readRequestFile(path string, documents []string, maxBytes int) (*schemas.Request, error) {
	m := map[string]any{}
	name, dir := "--document", "."
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if m, err = request.DecodeObject(data); err != nil {
			var ie *engine.InputError
			if errors.As(err, &ie) {
				return nil, fmt.Errorf("%s: not a request: %s", path, ie.Problem) // the file, not its inputs
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		name, dir = path, filepath.Dir(path)
	}
	if err := request.ReadFiles(m, dir, documents, int64(maxBytes)); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return request.FromMap(m)
}
