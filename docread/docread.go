// Package docread turns a document as it arrives (bytes and a media type,
// given or sniffed) into its pages of text, the pages a reader sees: a PDF
// page is a document page (read by PDFium, built to WebAssembly and run on
// wazero, so no CGO and no system library); a DOCX is cut into pages at its
// explicit page breaks and the page breaks Word last rendered; plain text is
// cut at form feeds. Documents are untrusted: sizes, page counts and the
// uncompressed size of a DOCX are capped, and what cannot be read is an
// *Error that names the document, says what is wrong and, for a scanned PDF,
// the pages without text.
package docread

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Media types the reader knows.
const (
	Text = "text/plain"
	PDF  = "application/pdf"
	DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
)

// Defaults of Config.
const (
	DefaultMaxBytes      = 64 << 20
	DefaultMaxPages      = 2000
	DefaultMaxUnzipped   = 256 << 20
	DefaultPDFEngines    = 2
	defaultMaxZipEntries = 10000
	sniffTextBytes       = 512
)

// Config configures a Reader.
type Config struct {
	// MaxBytes caps a document's size as it arrives (default 64 MiB).
	MaxBytes int64
	// MaxPages caps a document's pages (default 2000).
	MaxPages int
	// MaxUnzipped caps the bytes a DOCX may expand to (default 256 MiB);
	// a DOCX whose parts would expand beyond it is refused as a zip bomb.
	MaxUnzipped int64
	// PDFEngines is how many PDFium instances read PDFs at once; more
	// PDFs wait for one (default 2).
	PDFEngines int
	// CacheDir keeps wazero's compiled PDFium between runs, so that a
	// process starts reading PDFs in well under a second instead of
	// compiling the module again; empty compiles in memory each start. A
	// directory that cannot be written fails the engine's start with an
	// error wrapping ErrCacheDir, unless CacheDirOptional.
	CacheDir string
	// CacheDirOptional: where CacheDir cannot be written, warn and compile
	// in memory at every start instead of failing. For a default no one
	// chose (DefaultCacheDir), which a read-only root filesystem must not
	// turn into a PDF engine that never starts. There is no fallback to a
	// directory under os.TempDir: one there, at a name known in advance,
	// could be planted with machine code by another user of the machine,
	// and the cache's code is run as it is found.
	CacheDirOptional bool
	Logger           *slog.Logger
}

// DefaultCacheDir is where a service keeps the compiled PDF engine unless
// told otherwise: rulevalidator/pdfium in the user's cache directory, or ""
// where there is none.
func DefaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "rulevalidator", "pdfium")
}

// ErrCacheDir is a compilation cache directory that cannot be made or
// written: the environment's fault, never a document's.
var ErrCacheDir = errors.New("the PDF engine's cache directory cannot be written")

// cacheProbe is the pattern of the file CheckCacheDir writes and removes.
const cacheProbe = ".write-check-*"

// CheckCacheDir makes dir (and its parents) if need be and checks that a
// file can be written in it, as the compilation cache must: an error wraps
// ErrCacheDir and names dir. Permission bits alone would not say it (root
// ignores them; a read-only filesystem does not show in them).
func CheckCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("docread: %w: %s: %w", ErrCacheDir, dir, err)
	}
	f, err := os.CreateTemp(dir, cacheProbe)
	if err != nil {
		return fmt.Errorf("docread: %w: %s: %w", ErrCacheDir, dir, err)
	}
	f.Close()
	if err := os.Remove(f.Name()); err != nil {
		return fmt.Errorf("docread: %w: %s: %w", ErrCacheDir, dir, err)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxPages == 0 {
		c.MaxPages = DefaultMaxPages
	}
	if c.MaxUnzipped == 0 {
		c.MaxUnzipped = DefaultMaxUnzipped
	}
	if c.PDFEngines == 0 {
		c.PDFEngines = DefaultPDFEngines
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first setting out of range.
func (c *Config) Validate() error {
	switch {
	case c.MaxBytes < 0:
		return fmt.Errorf("docread: MaxBytes %d must not be negative", c.MaxBytes)
	case c.MaxPages < 0:
		return fmt.Errorf("docread: MaxPages %d must not be negative", c.MaxPages)
	case c.MaxUnzipped < 0:
		return fmt.Errorf("docread: MaxUnzipped %d must not be negative", c.MaxUnzipped)
	case c.PDFEngines < 0:
		return fmt.Errorf("docread: PDFEngines %d must not be negative", c.PDFEngines)
	}
	return nil
}

// ErrEngineStarting is a PDF read whose context ended while the PDF engine
// was still compiling: the environment is not ready yet, and the document
// says nothing wrong about itself. It wraps the context's error.
var ErrEngineStarting = errors.New("docread: the PDF engine is still starting")

// Reader reads documents. It is safe for concurrent use; Close releases the
// PDF engines.
type Reader struct {
	cfg Config
	// startEngines builds the PDF engines; a test replaces it.
	startEngines func(context.Context, Config) (*pdfEngines, error)

	mu     sync.Mutex
	start  *engineStart // the last start; nil before the first PDF (or Start)
	closed bool
}

// engineStart is one compile of the PDF engine. Readers wait on done, or
// give up when their context ends; the compile itself goes on, since
// wazero cannot stop it, and its result serves the next read.
type engineStart struct {
	done    chan struct{} // closed when engines and err are set
	engines *pdfEngines
	err     error
}

// New returns a Reader. The PDF engine is compiled on the first PDF, or by
// Start.
func New(cfg Config) (*Reader, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Reader{cfg: cfg, startEngines: startPDFEngines}, nil
}

// Start compiles the PDF engine now rather than on the first PDF (a service
// does it at start, so that the first request does not wait for it). It
// returns when the engine is ready, or ErrEngineStarting when ctx ends
// first.
func (r *Reader) Start(ctx context.Context) error {
	_, err := r.engines(ctx)
	return err
}

// engines returns the PDF engines, starting them on the first call and
// again after a start that failed.
func (r *Reader) engines(ctx context.Context) (*pdfEngines, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errors.New("docread: the reader is closed")
	}
	st := r.start
	if st == nil || st.failed() {
		st = &engineStart{done: make(chan struct{})}
		r.start = st
		go r.compile(st)
	}
	r.mu.Unlock()
	select {
	case <-st.done:
		return st.engines, st.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrEngineStarting, ctx.Err())
	}
}

// failed reports a start that ended in an error; the next read tries again.
func (st *engineStart) failed() bool {
	select {
	case <-st.done:
		return st.err != nil
	default:
		return false
	}
}

// compile runs one start. A reader closed meanwhile gets no engines: they
// are released here, as Close did not wait for them.
func (r *Reader) compile(st *engineStart) {
	e, err := r.startEngines(context.Background(), r.cfg)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil && r.closed {
		err = errors.Join(errors.New("docread: the reader is closed"), e.close())
		e = nil
	}
	st.engines, st.err = e, err
	close(st.done)
}

// Close releases the PDF engines; reads in progress fail. It does not wait
// for an engine still compiling (that can take minutes on a loaded machine,
// and a service stopping should not): the compile releases what it built
// when it ends.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.start == nil {
		return nil
	}
	select {
	case <-r.start.done:
		if r.start.engines != nil {
			return r.start.engines.close()
		}
	default:
	}
	return nil
}

// Source is a document as it arrives.
type Source struct {
	// Name names the document in errors (the request's document name).
	Name string
	Data []byte
	// MediaType is the given media type ("application/pdf", maybe with
	// parameters); empty: sniffed from Data.
	MediaType string
}

// Document is a document's text, page by page; Pages[N-1] is page N.
type Document struct {
	// MediaType is the media type it was read as, without parameters.
	MediaType string
	Pages     []string
	// ImageOnly are the pages (1-based) that show an image and no text,
	// fewer than half of a PDF's pages (more are refused): their text is
	// not read, as OCR is not done.
	ImageOnly []int
}

// Read reads src into its pages. A document that cannot be read is an
// *Error (errors.Is ErrUnreadable and the kind's sentinel); an error that
// is not is the reader's own (the context ended, the engine failed to
// start).
func (r *Reader) Read(ctx context.Context, src Source) (*Document, error) {
	if err := r.CheckSize(src.Name, int64(len(src.Data))); err != nil {
		return nil, err
	}
	mt, err := r.mediaType(src)
	if err != nil {
		return nil, err
	}
	var pages []string
	var imageOnly []int
	switch mt {
	case Text:
		if !utf8.Valid(src.Data) {
			return nil, newError(src.Name, ErrCorrupt, "it is given as text but is not UTF-8")
		}
		pages = strings.Split(string(src.Data), "\f")
		if len(pages) > r.cfg.MaxPages {
			return nil, newError(src.Name, ErrTooManyPages, "it has %d pages, over the limit of %d", len(pages), r.cfg.MaxPages)
		}
	case PDF:
		e, err := r.engines(ctx)
		if err != nil {
			return nil, err
		}
		if pages, imageOnly, err = e.read(ctx, src.Name, src.Data, r.cfg.MaxPages); err != nil {
			return nil, err
		}
	case DOCX:
		if pages, err = readDOCX(src.Name, src.Data, r.cfg); err != nil {
			return nil, err
		}
	}
	return &Document{MediaType: mt, Pages: pages, ImageOnly: imageOnly}, nil
}

// CheckSize returns the *Error (ErrTooLarge) Read gives a document named name of size
// bytes when that is over MaxBytes, else nil: a caller that knows the size before it has
// the bytes (a claim-checked file) refuses it without fetching it.
func (r *Reader) CheckSize(name string, size int64) error {
	if size > r.cfg.MaxBytes {
		return newError(name, ErrTooLarge, "it is %d bytes, over the limit of %d bytes", size, r.cfg.MaxBytes)
	}
	return nil
}

// mediaType is the media type src is read as: the one given, checked
// against what the bytes are, else the one sniffed. A generic binary type
// (application/octet-stream, what object stores default to) says nothing
// and is sniffed too.
func (r *Reader) mediaType(src Source) (string, error) {
	sniffed := Sniff(src.Data)
	given, _, _ := mime.ParseMediaType(src.MediaType)
	if strings.TrimSpace(src.MediaType) == "" || given == "application/octet-stream" || given == "binary/octet-stream" {
		if sniffed == "" && bytes.HasPrefix(src.Data, []byte("PK\x03\x04")) {
			return "", newError(src.Name, ErrNotDOCX, "it is a zip archive without a Word document part (word/document.xml), or a damaged one")
		}
		if sniffed == "" {
			return "", newError(src.Name, ErrUnsupported, "no media type is given and the bytes are none of PDF, DOCX or UTF-8 text")
		}
		return sniffed, nil
	}
	mt, _, err := mime.ParseMediaType(src.MediaType)
	if err != nil {
		return "", newError(src.Name, ErrUnsupported, "media type %q cannot be read: %v", src.MediaType, err)
	}
	switch {
	case mt == PDF:
		if sniffed != PDF {
			return "", newError(src.Name, ErrCorrupt, "it is given as a PDF but has no %%PDF- header")
		}
	case mt == DOCX:
		if !bytes.HasPrefix(src.Data, []byte("PK\x03\x04")) {
			return "", newError(src.Name, ErrNotDOCX, "it is given as a DOCX but is not a zip archive")
		}
	case strings.HasPrefix(mt, "text/"):
		// Any text is read as plain text, as before documents were read.
		mt = Text
	default:
		return "", newError(src.Name, ErrUnsupported, "media type %q is not read (PDF, DOCX and text are)", mt)
	}
	return mt, nil
}

// Sniff names the media type of data: PDF, DOCX or Text, or "" when it is
// none of them. A PDF's header may follow up to 1 KiB of junk, as readers
// allow; a zip is a DOCX when it holds word/document.xml.
func Sniff(data []byte) string {
	head := data[:min(len(data), 1024)]
	switch {
	case bytes.Contains(head, []byte("%PDF-")):
		return PDF
	case bytes.HasPrefix(data, []byte("PK\x03\x04")):
		if isDOCX(data) {
			return DOCX
		}
		return ""
	case utf8.Valid(data) && !bytes.ContainsRune(data[:min(len(data), sniffTextBytes)], 0):
		return Text
	}
	return ""
}

// cleanText makes an engine's page text plain: Windows line ends as \n, no
// form feeds (they separate pages) and no other control characters. PDFium
// writes U+FFFE for a hyphen it takes for a word broken at a line's end
// ("NON-" above "DISCLOSURE"); the page shows a hyphen, and so does the
// text.
func cleanText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r' || r == '\f' || r == '\v':
			return '\n'
		case r == '\ufffe':
			return '-'
		case unicode.IsControl(r), r == '\uffff', r == '\u00ad':
			return -1
		}
		return r
	}, s)
}
